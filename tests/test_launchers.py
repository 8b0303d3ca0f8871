"""The launcher seam (scaling.cli.launchers): the registry is the one place launchers are
named, and `scaling sweep` prepares its sweep once and hands it, once, to the launcher chosen."""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from pathlib import Path

import pytest

from scaling.cli import launchers
from scaling.cli.launchers.work import GridWork
from scaling.cli.main import main
from scaling.cli.parser import build_parser
from scaling.sweep import prepare as prepare_mod, runner
from scaling.sweep.prepare import Prepared
from tests.helpers import write_config

PACKAGE = Path(__file__).resolve().parents[1] / "scaling"
TINY = ("batch.sizes=[8, 16]", "learning_rate.values=[0.1, 0.5]", "seeds=[0]",
        "train.max_group_size=null")


def _launcher_action(parser: argparse.ArgumentParser) -> argparse.Action:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return next(a for a in sub.choices["sweep"]._actions if a.dest == "launcher")


def test_the_launchers_accepted_are_the_registrys():
    action = _launcher_action(build_parser())
    assert tuple(action.choices) == tuple(launchers.LAUNCHERS)
    assert action.default == launchers.DEFAULT in launchers.LAUNCHERS
    assert set(launchers.OPTIONS) <= set(launchers.LAUNCHERS)
    for name in launchers.LAUNCHERS:
        launcher = launchers.get(name)
        assert isinstance(launcher.splits, bool) and isinstance(launcher.trains_here, bool)


def test_no_code_outside_the_registry_asks_which_launcher_it_is():
    """A comparison with `.launcher` anywhere in the package would name a launcher outside the
    registry; launchers say what they do (`splits`, `trains_here`) instead."""
    found = [f"{p.relative_to(PACKAGE.parent)}:{n.lineno}"
             for p in sorted(PACKAGE.rglob("*.py")) for n in ast.walk(ast.parse(p.read_text()))
             if isinstance(n, ast.Compare) and any(
                 isinstance(side, ast.Attribute) and side.attr == "launcher"
                 for side in [n.left, *n.comparators])]
    assert not found, ", ".join(found)


class _Fake:
    """A launcher that records what it is handed."""

    splits = False
    trains_here = False

    def __init__(self, seen: list) -> None:
        self.seen = seen

    def check(self, args: argparse.Namespace) -> None:
        launchers.refuse_others_options("fake", args)

    def launch(self, work, args: argparse.Namespace) -> int:
        self.seen.append(work)
        return 0


@pytest.fixture
def prepares(monkeypatch) -> list:
    """Every call of scaling.sweep.prepare.prepare, from the CLI and from the runner."""
    calls = []

    def counted(*a, **k):
        calls.append(a)
        return real(*a, **k)

    real = prepare_mod.prepare
    monkeypatch.setattr(prepare_mod, "prepare", counted)
    monkeypatch.setattr(runner, "prepare", counted)
    return calls


def test_a_registered_launcher_receives_the_prepared_sweep_once(tmp_path, monkeypatch, prepares):
    seen: list = []
    monkeypatch.setitem(launchers.LAUNCHERS, "fake", lambda: _Fake(seen))
    out = tmp_path / "o"
    assert main(["sweep", write_config(tmp_path, *TINY), "--out", str(out),
                 "--launcher", "fake"]) == 0
    assert len(seen) == 1 and len(prepares) == 1
    work = seen[0]
    assert isinstance(work, GridWork) and isinstance(work.prepared, Prepared)
    assert work.out == str(out) and work.prepared.out == out
    assert work.groups == 2 and not out.exists()  # nothing trained, nothing written


def test_a_registered_launcher_refuses_another_launchers_options(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(launchers.LAUNCHERS, "fake", lambda: _Fake([]))
    assert main(["sweep", write_config(tmp_path, *TINY), "--out", str(tmp_path / "o"),
                 "--launcher", "fake", "--jobs", "2"]) == 2
    assert capsys.readouterr().err == ("error: --jobs: an option of --launcher slurm; add "
                                       "--launcher slurm or leave it out\n")


def test_the_local_launcher_prepares_the_sweep_once(tmp_path, prepares, capsys):
    out = tmp_path / "o"
    assert main(["sweep", write_config(tmp_path, *TINY), "--out", str(out), "--no-analyze",
                 "--quiet"]) == 0
    assert len(prepares) == 1
    assert "finished" in capsys.readouterr().out  # the end table


def test_the_parser_loads_no_launcher():
    """The registry names launchers by import path, so `scaling --help` stays quick."""
    code = ("import sys; from scaling.cli.parser import build_parser; build_parser(); "
            "print(sorted(m for m in sys.modules if m.startswith('scaling.cli.launchers.') "
            "or m == 'jax'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=PACKAGE.parent)
    assert done.stdout.strip() == "[]"
