"""Every committed report and analysis.json under results/ prints only numbers the data pin:
no value at a bound printed bare, no interval end past 10x the range tried, no zero-width
interval, no exponent-form number of a runaway fit, and every interval says what it resamples.

A folder analysed before intervals carried their record (no `interval` record anywhere in its
analysis.json) is stale: its checks are skipped, each saying so, until it is analysed again.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any, Iterator

import pytest

from scaling.formatting import bound, number

RESULTS = Path(__file__).resolve().parents[1] / "results"
RUNAWAY = re.compile(r"\b\d(?:\.\d+)?e[+-](\d+)\b")  # Python's exponent form (3.45e-16), not
# the deliberate style of FLOP counts and folder names (4.02e19, D5e10)
INTERVAL = re.compile(r"\d \[([^\[\],]+), ([^\[\],]+)\]")  # after a number: an estimate's
SETTINGS = ("- task:", "- model:", "- optimizer:", "- schedule:", "- learning rates:")


def _analyses() -> list[tuple[Path, dict]]:
    return [(p.parent, json.loads(p.read_text())) for p in sorted(RESULTS.rglob("analysis.json"))]


def _records(value: Any) -> bool:
    """Whether an analysis holds any `interval` record (those written since they exist)."""
    if isinstance(value, dict):
        record = value.get("interval")
        return (isinstance(record, dict) and "resamples" in record) or any(
            map(_records, value.values()))
    return isinstance(value, list) and any(map(_records, value))


def _fresh(folder: Path, analysis: dict) -> None:
    """Skip a stale folder's check, naming it."""
    if not _records(analysis):
        pytest.skip(f"{folder.relative_to(RESULTS)}: analysed before intervals carried their "
                    "record; analyse it again")


def _report(folder: Path) -> str:
    """The report's text, less the lines that quote the sweep's own settings (eps 1e-08)."""
    path = folder / "report.md"
    lines = path.read_text().splitlines() if path.is_file() else []
    return "\n".join(line for line in lines if not line.startswith(SETTINGS))


def _walk(value: Any, inherited: bool = False) -> Iterator[tuple[str, bool]]:
    """(key, whether an `interval` record covers it) for every non-null *_ci key."""
    if isinstance(value, dict):
        covered = inherited or "interval" in value
        for key, item in value.items():
            if key.endswith("_ci") and item is not None:
                yield key, covered
            yield from _walk(item, covered)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item, inherited)


@pytest.mark.parametrize("folder,analysis", _analyses(), ids=lambda v: getattr(v, "name", ""))
def test_every_interval_says_what_it_resamples(folder, analysis):
    _fresh(folder, analysis)
    bare = sorted({key for key, covered in _walk(analysis) if not covered})
    assert not bare, f"{folder}: intervals {bare} with no interval record above them"


@pytest.mark.parametrize("folder,analysis", _analyses(), ids=lambda v: getattr(v, "name", ""))
def test_no_runaway_or_zero_width_numbers_in_reports(folder, analysis):
    _fresh(folder, analysis)
    text = _report(folder)
    runaway = [m.group(0) for m in RUNAWAY.finditer(text) if int(m.group(1)) >= 6]
    assert not runaway, f"{folder}/report.md prints {runaway[:5]}"
    flat = [m.group(0) for m in INTERVAL.finditer(text) if m.group(1).strip() == m.group(2).strip()
            and any(c.isdigit() for c in m.group(1))]
    assert not flat, f"{folder}/report.md prints zero-width intervals {flat[:5]}"


def _answer_rows(text: str) -> dict[str, list[str]]:
    """The first screen's table: its cells by target."""
    if "## Answer" not in text:
        return {}
    block = text.split("## Answer", 1)[1].split("\n\n")[1]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in block.splitlines()]
    return {cells[0]: cells for cells in rows[2:]}


@pytest.mark.parametrize("folder,analysis", _analyses(), ids=lambda v: getattr(v, "name", ""))
def test_bounds_and_open_interval_ends_never_print_as_numbers(folder, analysis):
    """The answer prints a B_crit the runs do not place as its bound, never in bold anywhere,
    and an open interval end as its limit."""
    _fresh(folder, analysis)
    text = _report(folder)
    rows = _answer_rows(text)
    for target in analysis.get("targets") or []:
        fit = target.get("fit")
        if not fit or target.get("b_crit") is None:
            continue
        status, cell = fit["identification"], rows[target["name"]][1]
        if not status["identified"]:
            assert cell == bound(status), (folder, target["name"], cell)
            assert f"**{number(fit['b_crit'])}**" not in text, (folder, target["name"])
        for end, opened in zip(fit["b_crit_ci"] or [], status["ci_open"]):
            if opened:
                assert number(end) not in cell, (folder, target["name"], end)


def test_results_readme_is_the_render_of_the_committed_studies():
    """results/README.md's tables are experiments/summarize_studies.py's render of the
    committed analysis.json files: a study re-analysed without re-rendering fails here."""
    spec = importlib.util.spec_from_file_location(
        "summarize_studies", RESULTS.parent / "experiments" / "summarize_studies.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    committed = (RESULTS / "README.md").read_text()
    assert module.render(committed) == committed, \
        "results/README.md is stale: run python experiments/summarize_studies.py"


def _prose_module():
    """experiments/results_prose.py, the templates of results/README.md's discussion."""
    import sys
    sys.path.insert(0, str(RESULTS.parent / "experiments"))
    import results_prose
    return results_prose


# Numbers a template may write itself: method constants (a slope of 0 or 1, the factors k = 2
# and 4, the tolerance 10% read in the branch table, Zhang et al.'s 20% overhead, the 95% level),
# a command's own arguments and a paper's arXiv number. Anything else must be a field.
_LITERAL_NUMBERS = {"0", "1", "1.", "2", "4", "10%", "20%", "95%", "0.25", "0.5", "1.0",
                    "2503.04715"}


def test_results_prose_templates_write_no_number_of_their_own():
    """Every number in the discussion of a study's current result comes from a field computed
    from results/: a number typed into a template would go stale when the study is rerun."""
    import re
    import string
    prose = _prose_module()
    for section in prose.SECTIONS:
        literal = "".join(text for text, _, _, _ in string.Formatter().parse(section.template))
        for token in re.findall(r"[\w.\-/^%]*\d[\w.\-/^%]*", literal):
            if re.search(r"[A-Za-z]", token) or re.fullmatch(r"(19|20)\d\d", token):
                continue  # a name (beta2, mnist1d, 8x8x1) or a citation's year
            assert token in _LITERAL_NUMBERS, (section.title, token)


def _perturbed(value):
    """Every float moved by 37%, integers (batch sizes, factors, counts) kept."""
    if isinstance(value, dict):
        return {k: _perturbed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_perturbed(v) for v in value]
    return value * 1.37 if isinstance(value, float) else value


def test_results_prose_follows_the_studies_files(tmp_path):
    """A study re-analysed changes its section: each section rendered from results/ with every
    float in the files it reads moved differs from the committed render; and a section whose
    study has no analysis.json yet (a study still running) is left out, not an error."""
    import json
    import shutil
    prose = _prose_module()
    for section in prose.SECTIONS:
        if not all((RESULTS / need).is_file() for need in section.needs):
            continue
        original = prose.render_section(section, RESULTS)
        root = tmp_path / section.title.replace(" ", "_").replace("/", "_")
        for need in section.needs:
            folder = (root / need).parent
            folder.mkdir(parents=True, exist_ok=True)
            for extra in ("study.json", "sweep.yaml"):
                if (RESULTS / need).parent.joinpath(extra).is_file():
                    shutil.copy((RESULTS / need).parent / extra, folder / extra)
            (root / need).write_text(json.dumps(_perturbed(json.loads((RESULTS / need).read_text()))))
        assert prose.render_section(section, root) != original, section.title
        (root / section.needs[0]).unlink()
        assert prose.render_section(section, root) == [], section.title
