"""Character-level language modelling on Python standard-library source, a corpus on every machine.

The corpus is a fixed tuple of stdlib module files, read as bytes, concatenated in sorted order
and truncated to `corpus_chars` bytes. Their contents differ between Python versions, so
describe() records the sha256 of the exact bytes and the files used. Bytes map to 128 ids:
ASCII keeps its code, every non-ASCII byte becomes 127 (DEL, which source text never contains).
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from scaling.errors import need
from scaling.tasks.models import LanguageModelTask
from scaling.tasks.storage import read_only

VOCAB_SIZE = 128
STDLIB_DIR = os.path.dirname(os.__file__)
# Present in CPython 3.10-3.13; about 850 kB in 3.11, so the default 400 kB is a truncation.
CORPUS_FILES = tuple(sorted((
    "argparse.py", "ast.py", "bisect.py", "calendar.py", "collections/__init__.py",
    "contextlib.py", "copy.py", "csv.py", "dataclasses.py", "enum.py", "fractions.py",
    "functools.py", "heapq.py", "inspect.py", "json/decoder.py", "json/encoder.py", "random.py",
    "textwrap.py", "typing.py", "unittest/case.py",
)))


@dataclass
class CharLMOptions:
    """corpus_chars: corpus bytes used; seq_len: tokens predicted per sequence;
    eval_fraction: share of sequences (the last ones) held out for evaluation."""

    corpus_chars: int = 400_000
    seq_len: int = 64
    eval_fraction: float = 0.1


def corpus_paths() -> list[str]:
    """Absolute paths of the corpus files, failing with the name of any this Python lacks."""
    paths = [os.path.join(STDLIB_DIR, name) for name in CORPUS_FILES]
    missing = [name for name, path in zip(CORPUS_FILES, paths) if not os.path.isfile(path)]
    if missing:
        raise FileNotFoundError(
            f"charlm corpus: standard-library file(s) {', '.join(missing)} not found under "
            f"{STDLIB_DIR} (Python {platform.python_version()})")
    return paths


def available_chars() -> int:
    """Bytes the whole corpus holds on this Python, from file sizes (no reading)."""
    return sum(os.path.getsize(path) for path in corpus_paths())


def split_sizes(options: CharLMOptions) -> tuple[int, int]:
    """(train, eval) sequence counts: non-overlapping windows of seq_len + 1 bytes."""
    num_seq = min(options.corpus_chars, available_chars()) // (options.seq_len + 1)
    num_eval = int(num_seq * options.eval_fraction)
    return num_seq - num_eval, num_eval


def files_used(corpus_chars: int) -> list[str]:
    """Corpus files that contribute bytes to the first corpus_chars (the last may be partial)."""
    starts = np.cumsum([0] + [os.path.getsize(path) for path in corpus_paths()])[:-1]
    return [name for name, start in zip(CORPUS_FILES, starts) if start < corpus_chars]


@functools.lru_cache(maxsize=4)
def read_corpus(corpus_chars: int) -> bytes:
    """The first corpus_chars bytes of the sorted files, concatenated."""
    return b"".join(Path(path).read_bytes() for path in corpus_paths())[:corpus_chars]


@functools.lru_cache(maxsize=4)
def load(corpus_chars: int, seq_len: int,
         eval_fraction: float) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(train, eval) dicts: x = window[:-1], y = window[1:], both (N, seq_len) int32."""
    options = CharLMOptions(corpus_chars, seq_len, eval_fraction)
    num_train, num_eval = split_sizes(options)
    ids = np.minimum(np.frombuffer(read_corpus(corpus_chars), np.uint8), VOCAB_SIZE - 1)
    windows = ids[:(num_train + num_eval) * (seq_len + 1)].astype(np.int32)
    windows = windows.reshape(num_train + num_eval, seq_len + 1)

    def pairs(w: np.ndarray) -> dict[str, np.ndarray]:
        return read_only({"x": np.ascontiguousarray(w[:, :-1]),
                          "y": np.ascontiguousarray(w[:, 1:])})

    return pairs(windows[:num_train]), pairs(windows[num_train:])


class CharLM(LanguageModelTask):
    """Next-byte prediction with a small decoder-only Transformer (model.d_model etc.)."""

    name: ClassVar[str] = "charlm"
    Options: ClassVar[type] = CharLMOptions
    finite_data: ClassVar[bool] = True

    def __init__(self, options: CharLMOptions, model: Any) -> None:
        super().__init__(options, model)
        self.train, self.eval = load(int(options.corpus_chars), int(options.seq_len),
                                     float(options.eval_fraction))
        self.seq_len = options.seq_len
        self.net = self.network(VOCAB_SIZE, options.seq_len)

    @classmethod
    def validate(cls, cfg: Any) -> None:
        super().validate(cfg)
        o = cfg.task.options
        need(o.seq_len >= 1, "task.seq_len", o.seq_len, "a positive integer")
        need(0 < o.eval_fraction < 1, "task.eval_fraction", o.eval_fraction, "a number in (0, 1)")
        available = available_chars()
        need(0 < o.corpus_chars <= available, "task.corpus_chars", o.corpus_chars,
             f"a positive integer <= {available} (the corpus size on this Python)")
        need(min(split_sizes(o)) >= 1, "task.corpus_chars", o.corpus_chars,
             f"enough for one train and one eval sequence of seq_len + 1 = {o.seq_len + 1} "
             f"bytes at eval_fraction={o.eval_fraction}")

    @classmethod
    def tokens_per_example(cls, options: CharLMOptions) -> int:
        return options.seq_len

    @classmethod
    def num_train_examples(cls, options: CharLMOptions) -> int:
        return split_sizes(options)[0]

    def train_arrays(self) -> dict[str, np.ndarray]:
        return self.train

    def eval_arrays(self) -> dict[str, np.ndarray]:
        return self.eval

    def describe(self) -> dict[str, Any]:
        corpus = read_corpus(int(self.options.corpus_chars))
        return {"task": self.name, "corpus_chars": len(corpus),
                "corpus_sha256": hashlib.sha256(corpus).hexdigest(),
                "files": files_used(len(corpus)), "python": platform.python_version(),
                "vocab_size": VOCAB_SIZE, "seq_len": self.options.seq_len,
                "num_train_sequences": len(self.train["y"]),
                "num_eval_sequences": len(self.eval["y"])}
