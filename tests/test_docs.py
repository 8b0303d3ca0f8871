"""The docs stay true: README's commands table lists exactly the flags the CLI takes, and
every relative link in README.md and docs/ points at a file that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from scaling.cli.parser import build_parser

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def parser_flags() -> dict[str, set[str]]:
    """Per subcommand, its long options (--help aside)."""
    (sub,) = [a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction"]
    return {name: {o for a in p._actions for o in a.option_strings
                   if o.startswith("--") and o != "--help"} for name, p in sub.choices.items()}


def readme_flags(text: str) -> dict[str, set[str]]:
    """Per subcommand, the long options its rows of README's commands table show."""
    flags: dict[str, set[str]] = {}
    for line in text.splitlines():
        match = re.match(r"\| `scaling ([\w-]+)([^`]*)`", line)
        if match:
            flags.setdefault(match.group(1), set()).update(re.findall(r"--[a-z][a-z-]*",
                                                                      match.group(2)))
    return flags


def test_readme_commands_table_matches_the_parser():
    documented = readme_flags((ROOT / "README.md").read_text())
    actual = parser_flags()
    assert set(documented) == set(actual), "README's table and the CLI list other subcommands"
    for name, flags in actual.items():
        assert documented[name] == flags, (
            f"scaling {name}: missing from README {sorted(flags - documented[name])}, "
            f"not an option {sorted(documented[name] - flags)}")


def test_the_table_check_sees_a_missing_flag():
    text = "| `scaling analyze DIR [--json]` | ... |"
    assert readme_flags(text) == {"analyze": {"--json"}} != {"analyze": parser_flags()["analyze"]}


@pytest.mark.parametrize("doc", [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))],
                         ids=lambda p: p.name)
def test_every_relative_link_resolves(doc):
    links = [m for m in LINK.findall(doc.read_text()) if not re.match(r"[a-z]+:", m)]
    missing = [link for link in links if not (doc.parent / link).exists()]
    assert not missing, f"{doc.name}: broken links {missing}"
