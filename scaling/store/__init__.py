"""The results on disk, owned in one place: every file and folder name of a results folder
(`layout`), atomic files (`files`), the run folders and their records (`runs`, `records`),
reading a run's metric rows (`rows`), the run files packed as runs.tar.xz (`archive`), one
writer per group (`claims`), what a sweep's runs trained (`cost`) and one clean pass of rows
after two writers (`repair`). The names below are the public surface (`store.load(out)` gives
every run's config, summary and metrics). A multi-cell folder's manifest is `cells`; `scaling
import` reads other code's records through `sources`, `imports` and `import_runs` and writes
them with `import_write`."""

from scaling.store.files import atomic_write, dumps, write_json
from scaling.store.layout import ARITHMETIC, ROUNDS, checkpoint_dir, run_dir
from scaling.store.rows import Row, examples_at, finite, undefined_noise_points, value_at
from scaling.store.runs import (add_round, append_metrics, finish_run, frame, is_done, load,
                                mean_throughput, read_arithmetic, read_metrics, read_rounds,
                                read_summary, resume_run, rows_until, start_run,
                                training_seconds)

__all__ = [
    "ARITHMETIC", "ROUNDS", "Row", "add_round", "append_metrics",
    "atomic_write", "checkpoint_dir", "dumps", "examples_at", "finish_run", "finite", "frame",
    "is_done", "load", "mean_throughput", "read_arithmetic", "read_metrics",
    "read_rounds", "read_summary", "resume_run", "rows_until", "run_dir", "start_run",
    "training_seconds", "undefined_noise_points", "value_at", "write_json",
]
