"""Language modelling from flat token files, the convention of nanoGPT and most LM codebases.

A token file is one array of token ids in raw little-endian uint16 or uint32, nothing else.
Each training example is a window of `context` + 1 tokens at a uniformly random position
(drawn on the device from the run's data key), so a batch is counted in sequences and a
budget in tokens. Evaluation uses the eval file's non-overlapping windows, in order.
`scaling prepare-text` writes such files, with a meta.json giving dtype and vocab, from text.
"""

from __future__ import annotations

import functools
import json
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


def read(path: str, key: str, dtype: str, vocab: int) -> np.ndarray:
    """The file memory-mapped, after checking every id is below vocab (ConfigError)."""
    tokens = np.memmap(path, dtype=np.dtype(dtype).newbyteorder("<"), mode="r")
    high = int(tokens.max())
    need(high < vocab, key, f"token id {high} in {path}", f"ids below task.vocab={vocab}")
    return tokens


@functools.lru_cache(maxsize=4)
def load(train: str, eval_: str, dtype: str, vocab: int, context: int
         ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """({"tokens"}, {"x", "y"}): the training stream as stored, the eval windows as int32."""
    stream = np.asarray(read(train, "task.train", dtype, vocab)).astype(dtype)
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

    def sample(self, key: jax.Array, batch_size: int, data: Batch) -> Batch:
        """Windows of context + 1 tokens at uniform random starts in the training stream."""
        stream = data["tokens"]
        starts = jax.random.randint(key, (batch_size,), 0, stream.shape[0] - self.seq_len)
        windows = stream[starts[:, None] + jnp.arange(self.seq_len + 1)].astype(jnp.int32)
        return {"x": windows[:, :-1], "y": windows[:, 1:]}

    def describe(self) -> dict[str, Any]:
        o = self.options
        return {"task": self.name, "vocab_size": self.vocab, "dtype": self.dtype,
                "context": o.context, "train_tokens": len(self.train["tokens"]),
                "num_eval_sequences": len(self.eval["y"]),
                "files": {"train": str(Path(o.train).resolve()), "eval": str(Path(o.eval).resolve())},
                "files_sha256": {"train": file_sha256(o.train), "eval": file_sha256(o.eval)}}
