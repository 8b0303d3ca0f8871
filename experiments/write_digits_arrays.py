"""Write scikit-learn's digits as a user's own data set: data/digits/{train,eval}.npz.

The files hold x (N, 8, 8, 1) float32 images in [0, 1] and y int64 labels, split exactly as
the built-in digits task splits them (test_fraction 0.2, the same permutation), so the arrays
study (configs/digits_arrays.yaml) trains on the same examples in the same order as a digits
sweep would, through the path a researcher's own files take.

    python experiments/write_digits_arrays.py                 # then:
    python experiments/run_study.py digits_arrays
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from scaling.tasks.digits import load


def write(folder: Path) -> tuple[Path, Path]:
    """train.npz and eval.npz in `folder`, from the digits task's own split."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for part, arrays in zip(("train", "eval"), load(0.2)):
        path = folder / f"{part}.npz"
        np.savez(path, x=arrays["x"].reshape(-1, 8, 8, 1), y=arrays["y"].astype(np.int64))
        paths.append(path)
    return paths[0], paths[1]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="data/digits", help="folder (default data/digits)")
    for path in write(Path(parser.parse_args().out)):
        print(f"wrote {path}")
