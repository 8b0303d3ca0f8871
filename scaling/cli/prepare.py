"""`scaling prepare-text`: byte-level token files (train.bin, eval.bin, meta.json) from text, so
the tokens task can start from any plain text a user has."""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

from scaling import store
from scaling.cli.parser import UsageError
from scaling.tasks.tokens import BYTE_VOCAB, META, byte_tokens


def run(args: argparse.Namespace) -> int:
    sources = [Path(name) for name in args.files]
    for path in sources:
        if not path.is_file():
            raise UsageError(f"prepare-text: {str(path)!r} is not a file")
    texts = [path.read_bytes() for path in sources]
    tokens = byte_tokens(b"".join(texts))
    num_eval = int(len(tokens) * args.eval_fraction)
    if num_eval < 2 or len(tokens) - num_eval < 2:
        raise UsageError(f"prepare-text: {len(tokens)} bytes of text split at --eval-fraction "
                         f"{args.eval_fraction} leave {len(tokens) - num_eval} train and "
                         f"{num_eval} eval tokens; each side needs at least a window (give more "
                         "text or another fraction)")
    out = Path(args.out)
    store.atomic_write(out / "train.bin", tokens[:len(tokens) - num_eval].tobytes())
    store.atomic_write(out / "eval.bin", tokens[len(tokens) - num_eval:].tobytes())
    store.write_json(out / META, {
        "tokenizer": "bytes", "dtype": "uint16", "vocab": BYTE_VOCAB,
        "train_tokens": len(tokens) - num_eval, "eval_tokens": num_eval,
        "eval_fraction": args.eval_fraction,
        "sources": [{"path": str(path.resolve()), "bytes": len(text),
                     "sha256": hashlib.sha256(text).hexdigest()}
                    for path, text in zip(sources, texts)]})
    if not args.quiet:
        print(f"{out / 'train.bin'}: {len(tokens) - num_eval} tokens; {out / 'eval.bin'}: "
              f"{num_eval} tokens (bytes, vocab {BYTE_VOCAB}, uint16); train with task: "
              f"{{name: tokens, train: {out / 'train.bin'}, eval: {out / 'eval.bin'}}}")
    return 0
