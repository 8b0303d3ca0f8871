"""Progress that suits where it goes: a live bar on a terminal, plain lines (at most one a
minute per group, no carriage returns) in files and cluster logs, nothing with --quiet."""

from __future__ import annotations

import io

from scaling.cli.main import main
from scaling.sweep import progress
from tests.helpers import write_config


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_auto_is_a_bar_on_a_terminal_and_lines_elsewhere():
    assert progress.resolve("auto", _Terminal()) == "bar"
    assert progress.resolve("auto", io.StringIO()) == "lines"
    assert progress.resolve("none", _Terminal()) == "none"


def test_lines_mode_writes_at_most_one_line_a_minute(scaling_log):
    clock = _Clock()
    p = progress.GroupProgress("lines", "batch 64: 4 runs", 1000, 64, 4, clock=clock)
    for second, step in ((10, 100), (59, 200), (61, 300), (100, 400), (125, 500)):
        clock.now = second
        p.step(step)
        if step == 200:
            p.running(3)
    clock.now = 130
    p.close()
    lines = [r.getMessage() for r in scaling_log.records]
    # started; at 61 s (300 steps in 61 s, 3 runs of 64: 944 examples/s, 700 steps left at
    # 4.92 steps/s: about 2m22s); at 125 s; done.
    assert lines == ["batch 64: 4 runs: started, 1,000 steps",
                     "batch 64: 4 runs: step 300/1,000, 3 of 4 runs training, 944 examples/s, "
                     "about 2m22s left",
                     "batch 64: 4 runs: step 500/1,000, 3 of 4 runs training, 768 examples/s, "
                     "about 2m05s left",
                     "batch 64: 4 runs: done in 2m10s"]


def test_a_resumed_group_counts_its_rate_from_where_it_resumed(scaling_log):
    clock = _Clock()
    p = progress.GroupProgress("lines", "g", 1000, 10, 1, first_step=600, clock=clock)
    clock.now = 100
    p.step(800)
    assert scaling_log.records[0].getMessage() == "g: started from step 600, 1,000 steps"
    assert p.line() == "g: step 800/1,000, 1 of 1 runs training, 20 examples/s, about 1m40s left"


def _sweep(tmp_path, *flags: str) -> str:
    path = write_config(tmp_path, "batch.sizes=[8]", "seeds=[0]")
    out = tmp_path / ("o" + "".join(flags).replace("-", ""))
    assert main(["sweep", path, "--out", str(out), "--no-analyze", *flags]) == 0
    return out


def test_the_cli_writes_plain_lines_off_a_terminal(tmp_path, capsys):
    _sweep(tmp_path, "--progress", "lines")
    captured = capsys.readouterr()
    assert "\r" not in captured.err and "\r" not in captured.out
    assert "batch 8: 2 runs: started, 100 steps" in captured.err
    assert "batch 8: 2 runs: done in" in captured.err and "groups: 1 done, 0 left" in captured.err
    assert "results in" in captured.out  # the end table


def test_the_cli_draws_a_bar_when_asked(tmp_path, capsys):
    _sweep(tmp_path, "--progress", "bar")
    err = capsys.readouterr().err
    assert "\r" in err and "step/s" in err and "started" not in err


def test_quiet_shows_no_progress_and_no_tables(tmp_path, capsys):
    _sweep(tmp_path, "--quiet")
    captured = capsys.readouterr()
    assert captured.err == "" and "results in" in captured.out
