"""Where the test suite's compile time goes: a pytest plugin that files each XLA compile under
the test that triggered it, and a summary of what it filed.

    PYTHONPATH=experiments JAX_LOG_COMPILES=1 COMPILE_CENSUS=/tmp/census \\
        XLA_FLAGS=--xla_force_host_platform_device_count=8 \\
        python -m pytest -q -n 2 --dist loadfile -p compile_census --durations=0 > /tmp/suite.log
    python experiments/compile_census.py /tmp/census

Each test worker appends `test<TAB>program<TAB>seconds` lines (a persistent-cache load counts
as a compile of its own short time, and is also filed as a `hit`) to COMPILE_CENSUS/<pid>.tsv.
Compiles in the tests' subprocesses (the CLI's, a killed sweep's) are not seen.
"""

from __future__ import annotations

import collections
import logging
import os
import re
import sys
from pathlib import Path

_COMPILED = re.compile(r"Finished XLA compilation of (\S+) in ([\d.e-]+) sec")
_HIT = re.compile(r"Persistent compilation cache hit for '(\S+)'")
_current = ["(collection)"]


class _Filer(logging.Handler):
    def __init__(self, path: Path) -> None:
        super().__init__(logging.DEBUG)
        self.out = path.open("a", buffering=1)

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if found := _COMPILED.search(message):
            self.out.write(f"{_current[0]}\t{found[1]}\t{found[2]}\n")
        elif found := _HIT.search(message):
            self.out.write(f"{_current[0]}\thit {found[1]}\t0\n")


def pytest_configure(config) -> None:
    folder = Path(os.environ.get("COMPILE_CENSUS", "compile_census"))
    folder.mkdir(parents=True, exist_ok=True)
    filer = _Filer(folder / f"{os.getpid()}.tsv")
    for name in ("jax._src.dispatch", "jax._src.compiler"):
        logging.getLogger(name).addHandler(filer)
    logging.getLogger("jax._src.compiler").setLevel(logging.DEBUG)  # its cache-hit lines


def pytest_runtest_setup(item) -> None:
    _current[0] = item.nodeid


def summary(folder: Path, top: int = 15) -> str:
    """Compiles and their seconds per program and per test file, largest first."""
    seconds, count, hits = collections.Counter(), collections.Counter(), collections.Counter()
    by_file = collections.Counter()
    for path in sorted(folder.glob("*.tsv")):
        for line in path.read_text().splitlines():
            test, program, took = line.split("\t")
            if program.startswith("hit "):
                hits[program[4:]] += 1
                continue
            seconds[program] += float(took)
            count[program] += 1
            by_file[test.split("::")[0]] += float(took)
    lines = [f"{sum(count.values())} compiles, {sum(seconds.values()):.0f} s; "
             f"{sum(hits.values())} loaded from the persistent cache", "", "program: compiles, s"]
    lines += [f"  {p}: {count[p]}, {s:.1f}" for p, s in seconds.most_common(top)]
    lines += ["", "test file: s"] + [f"  {f}: {s:.1f}" for f, s in by_file.most_common(top)]
    lines += ["", "cache hits: " + ", ".join(f"{p} {n}" for p, n in hits.most_common(top))]
    return "\n".join(lines)


if __name__ == "__main__":
    print(summary(Path(sys.argv[1])))
