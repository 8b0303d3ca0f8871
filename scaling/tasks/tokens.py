"""Language modelling from flat token files, the convention of nanoGPT and most LM codebases.

A token file is one array of token ids in raw little-endian uint16 or uint32, nothing else.
Each training example is a window of `context` + 1 tokens at a uniformly random position
drawn from the run's data key, so a batch is counted in sequences and a budget in tokens. The
starts are drawn by the same function on the device or, with data.placement host, on the host's
CPU, where the windows are gathered from the memory-mapped file: the same windows either way,
for corpora larger than device and host memory. Evaluation uses the eval file's non-overlapping windows, in order.
`scaling prepare-text` writes such files, with a meta.json giving dtype and vocab, from text.
"""

from __future__ import annotations

import functools
import json
import mmap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from scaling.errors import ConfigError, need
from scaling.tasks.base import Batch
from scaling.tasks.models import LanguageModelTask
from scaling.tasks.storage import file_sha256, read_only

DTYPES = ("uint16", "uint32")
META = "meta.json"
SCAN_BYTES = 1 << 24  # read at a time when checking a file's ids, so any size fits in memory


BYTE_VOCAB = 256  # prepare-text's tokenizer: one token per byte


def byte_tokens(text: bytes) -> np.ndarray:
    """Byte-level tokens of `text` as stored in a token file (little-endian uint16 ids)."""
    return np.frombuffer(text, np.uint8).astype("<u2")


@dataclass
class TokensOptions:
    """train, eval: token files; dtype, vocab: their id type and vocabulary size (default:
    from the meta.json beside the training file, as prepare-text writes it); context: tokens
    predicted per sequence."""

    train: str = ""
    eval: str = ""
    dtype: str | None = None
    vocab: int | None = None
    context: int = 256


def meta(options: TokensOptions) -> dict[str, Any]:
    """The meta.json beside the training file, or {} where there is none."""
    path = Path(options.train).parent / META
    if not options.train or not path.is_file():
        return {}
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ConfigError(f"task.train: {str(path)!r} is not valid JSON ({err})") from None


def resolved(options: TokensOptions) -> tuple[str, int]:
    """(dtype, vocab) from the options, else from meta.json (ConfigError when neither has one)."""
    found = meta(options)
    dtype = options.dtype or found.get("dtype")
    vocab = options.vocab or found.get("vocab")
    need(dtype in DTYPES, "task.dtype", dtype,
         f"one of {', '.join(DTYPES)} (or a {META} beside the training file giving it)")
    need(isinstance(vocab, int) and 2 <= vocab <= np.iinfo(dtype).max + 1, "task.vocab", vocab,
         f"an integer from 2 to {np.iinfo(dtype).max + 1} for {dtype} ids (or a {META} beside "
         "the training file giving it)")
    return dtype, vocab


def num_tokens(path: str, key: str, dtype: str, context: int) -> int:
    """Tokens in a file, checked: it exists, holds whole ids and at least one window."""
    p = Path(path)
    need(bool(path) and p.is_file(), key, path, "the path of an existing token file")
    size, item = p.stat().st_size, np.dtype(dtype).itemsize
    need(size % item == 0, key, f"{path} of {size} bytes",
         f"a whole number of {item}-byte {dtype} ids (is task.dtype right?)")
    need(size // item >= context + 1, key, f"{path} of {size // item} tokens",
         f"at least one window of context + 1 = {context + 1} tokens")
    return size // item


def largest_id(path: str, dtype: np.dtype) -> int:
    """The file's largest id, read SCAN_BYTES at a time (not mapped: a mapped page that was
    read counts toward the process's resident memory)."""
    high = 0
    with open(path, "rb") as handle:
        while block := handle.read(SCAN_BYTES):
            high = max(high, int(np.frombuffer(block, dtype).max()))
    return high


def read(path: str, key: str, dtype: str, vocab: int) -> np.ndarray:
    """The file memory-mapped, after checking every id is below vocab (ConfigError)."""
    stored = np.dtype(dtype).newbyteorder("<")
    high = largest_id(path, stored)
    need(high < vocab, key, f"token id {high} in {path}", f"ids below task.vocab={vocab}")
    return np.memmap(path, dtype=stored, mode="r")


def mapped_windows(path: str, dtype: np.dtype, offsets: np.ndarray) -> np.ndarray:
    """The tokens at `offsets` as int32, from the file mapped for this call alone and read at
    random (no read-around): the pages read leave the process's resident memory when it is
    unmapped, so a long run over a file larger than memory stays within bounded memory."""
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        mapped.madvise(mmap.MADV_RANDOM)
        tokens = np.frombuffer(mapped, dtype)
        windows = tokens[offsets].astype(np.int32)
        del tokens  # the mapping closes only once no array views it
    return windows


@functools.lru_cache(maxsize=4)
def load(train: str, eval_: str, dtype: str, vocab: int, context: int
         ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """({"tokens"}, {"x", "y"}): the training stream memory-mapped, the eval windows as int32."""
    stream = read(train, "task.train", dtype, vocab)
    held = read(eval_, "task.eval", dtype, vocab)
    count = (len(held) - 1) // context
    starts = np.arange(count) * context
    windows = np.asarray(held[starts[:, None] + np.arange(context + 1)], np.int32)
    return (read_only({"tokens": stream}),
            read_only({"x": np.ascontiguousarray(windows[:, :-1]),
                       "y": np.ascontiguousarray(windows[:, 1:])}))


class Tokens(LanguageModelTask):
    """Next-token prediction on the user's token files with the Transformer (model.d_model
    etc.) or an outside flax module."""

    name: ClassVar[str] = "tokens"
    Options: ClassVar[type] = TokensOptions
    finite_data: ClassVar[bool] = False
    host_windows: ClassVar[bool] = True

    def __init__(self, options: TokensOptions, model: Any) -> None:
        super().__init__(options, model)
        self.dtype, self.vocab = resolved(options)
        self.seq_len = options.context
        self.train, self.eval = load(options.train, options.eval, self.dtype, self.vocab,
                                     options.context)
        self.net = self.network(self.vocab, options.context)

    @classmethod
    def validate(cls, cfg: Any) -> None:
        super().validate(cfg)
        o = cfg.task.options
        need(o.context >= 1, "task.context", o.context, "a positive integer")
        dtype, _ = resolved(o)
        num_tokens(o.train, "task.train", dtype, o.context)
        num_tokens(o.eval, "task.eval", dtype, o.context)

    @classmethod
    def tokens_per_example(cls, options: TokensOptions) -> int:
        return options.context

    def train_arrays(self) -> dict[str, np.ndarray]:
        return self.train

    def eval_arrays(self) -> dict[str, np.ndarray]:
        return self.eval

    def starts(self, key: jax.Array, batch_size: int) -> jax.Array:
        """Uniform random window starts in the training stream (on the device or the host)."""
        high = len(self.train["tokens"]) - self.seq_len
        return jax.random.randint(key, (batch_size,), 0, high)

    def sample(self, key: jax.Array, batch_size: int, data: Batch) -> Batch:
        """Windows of context + 1 tokens at uniform random starts in the training stream."""
        starts = self.starts(key, batch_size)
        windows = data["tokens"][starts[:, None] + jnp.arange(self.seq_len + 1)].astype(jnp.int32)
        return {"x": windows[:, :-1], "y": windows[:, 1:]}

    def host_batch(self, starts: np.ndarray) -> dict[str, np.ndarray]:
        """The windows at `starts` (any shape) gathered on the host from the mapped file."""
        offsets = starts[..., None] + np.arange(self.seq_len + 1)
        windows = mapped_windows(self.options.train, self.train["tokens"].dtype, offsets)
        return {"x": np.ascontiguousarray(windows[..., :-1]),
                "y": np.ascontiguousarray(windows[..., 1:])}

    def streamed_example(self) -> dict[str, np.ndarray]:
        return {k: np.zeros((1, self.seq_len), np.int32) for k in ("x", "y")}

    def describe(self) -> dict[str, Any]:
        o = self.options
        return {"task": self.name, "vocab_size": self.vocab, "dtype": self.dtype,
                "context": o.context, "train_tokens": len(self.train["tokens"]),
                "num_eval_sequences": len(self.eval["y"]),
                "files": {"train": str(Path(o.train).resolve()), "eval": str(Path(o.eval).resolve())},
                "files_sha256": {"train": file_sha256(o.train), "eval": file_sha256(o.eval)}}
