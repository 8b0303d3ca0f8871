"""`scaling prepare-text`: byte-level token files (train.bin, eval.bin, meta.json) from text, so
the tokens task can start from any plain text a user has. The text is read and written in
chunks of CHUNK_BYTES, so a corpus larger than host memory is prepared in bounded memory."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import BinaryIO

from scaling import store
from scaling.cli.parser import UsageError
from scaling.tasks.storage import file_sha256, write_atomically
from scaling.tasks.tokens import BYTE_VOCAB, META, byte_tokens

CHUNK_BYTES = 1 << 24  # text held at once (its tokens take twice as much)


def copy_tokens(sources: list[Path], start: int, stop: int, handle: BinaryIO,
                chunk: int = CHUNK_BYTES) -> None:
    """Write the tokens of bytes [start, stop) of the sources joined end to end, a chunk at a
    time."""
    offset = 0
    for path in sources:
        size = path.stat().st_size
        low, high = max(start - offset, 0), min(stop - offset, size)
        if low < high:
            with open(path, "rb") as source:
                source.seek(low)
                for first in range(low, high, chunk):
                    handle.write(byte_tokens(source.read(min(chunk, high - first))).tobytes())
        offset += size


def run(args: argparse.Namespace) -> int:
    sources = [Path(name) for name in args.files]
    for path in sources:
        if not path.is_file():
            raise UsageError(f"prepare-text: {str(path)!r} is not a file")
    total = sum(path.stat().st_size for path in sources)
    num_eval = int(total * args.eval_fraction)
    if num_eval < 2 or total - num_eval < 2:
        raise UsageError(f"prepare-text: {total} bytes of text split at --eval-fraction "
                         f"{args.eval_fraction} leave {total - num_eval} train and "
                         f"{num_eval} eval tokens; each side needs at least a window (give more "
                         "text or another fraction)")
    out, num_train = Path(args.out), total - num_eval
    write_atomically(out / "train.bin", lambda h: copy_tokens(sources, 0, num_train, h))
    write_atomically(out / "eval.bin", lambda h: copy_tokens(sources, num_train, total, h))
    store.write_json(out / META, {
        "tokenizer": "bytes", "dtype": "uint16", "vocab": BYTE_VOCAB,
        "train_tokens": num_train, "eval_tokens": num_eval,
        "eval_fraction": args.eval_fraction,
        "sources": [{"path": str(path.resolve()), "bytes": path.stat().st_size,
                     "sha256": file_sha256(path)} for path in sources]})
    if not args.quiet:
        print(f"{out / 'train.bin'}: {num_train} tokens; {out / 'eval.bin'}: "
              f"{num_eval} tokens (bytes, vocab {BYTE_VOCAB}, uint16); train with task: "
              f"{{name: tokens, train: {out / 'train.bin'}, eval: {out / 'eval.bin'}}}")
    return 0
