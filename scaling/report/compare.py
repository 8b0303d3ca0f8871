"""`scaling compare`: several finished sweeps on one set of axes (SGD against Adam, one width
against another, this week's sweep against last week's).

Four overlaid figures (steps vs batch size with each fit, the steps/examples trade-off, the best
learning rate vs batch size, the noise scale vs the loss of each sweep's best runs) and
report.md with one table: per sweep and target, B_crit with its interval, S_min, E_min, B_simple
at the target and the learning-rate rules' finding. Sweeps are compared on targets they share;
sweeps whose targets differ need the one to use named.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scaling.analysis import contract, in_use
from scaling.analysis.contract import Analysis, Fit, Point, Target
from scaling.analysis.intervals import describe
from scaling.analysis.sections import LRRules
from scaling.errors import ConfigError
from scaling.formatting import estimate, markdown_table, number
from scaling.report.figures import best_runs
from scaling.report.noise_figure import loss_key, noise_series
from scaling.report.figure_data import b_crit_reading
from scaling.report.style import band, batch_axis, colour, figure, geom, legend, mark, save
from scaling.store import atomic_write, layout
from scaling.store.rows import positive


@dataclass
class Sweep:
    """One finished sweep: its label, folder, analysis.json (read through the contract, so
    every key its types name is there) and run records."""

    label: str
    folder: Path
    analysis: Analysis
    records: list[dict]

    def __post_init__(self) -> None:
        self.analysis = contract.filled(self.analysis)

    def target(self, name: str) -> Target:
        return next(t for t in self.analysis["targets"] if t["name"] == name)


def choose_targets(sweeps: list[Sweep], target: str | None) -> list[str]:
    """The targets to compare on: `target` if given (every sweep must have it), else the
    targets all sweeps share when their target lists are the same."""
    names = {s.label: [t["name"] for t in s.analysis["targets"]] for s in sweeps}
    if target is not None:
        for label, have in names.items():
            if target not in have:
                raise ConfigError(f"--target: sweep {label} has no target {target!r}; its "
                                  f"targets are {', '.join(have) or 'none'}")
        return [target]
    first = next(iter(names.values()))
    if any(set(have) != set(first) for have in names.values()):
        listed = "; ".join(f"{label}: {', '.join(have)}" for label, have in names.items())
        shared = [n for n in first if all(n in have for have in names.values())]
        hint = (f"they share {', '.join(shared)}" if shared else "they share none")
        raise ConfigError(f"--target: the sweeps have different targets ({listed}); name the "
                          f"one to put them on one axis with --target ({hint})")
    return first


def _points(sweep: Sweep, name: str) -> list[Point]:
    return sorted((p for p in sweep.target(name)["points"]
                   if positive(p["steps"])), key=lambda p: p["batch_size"])


def _fit(sweep: Sweep, name: str) -> Fit | None:
    fit = sweep.target(name)["fit"]
    return fit if fit and positive(fit["s_min"]) and positive(fit["e_min"]) else None


def _figure(title: str) -> tuple[Any, Any]:
    fig, ax = figure(7.8, 4.6)
    ax.set_title(title)
    ax.grid(True, which="major", alpha=0.3)
    return fig, ax


def _finish(fig: Any, ax: Any, path: Path) -> Path:
    legend(ax)
    return save(fig, path)


def _dots(ax: Any, xs: list[float], ys: list[float], pts: list[Point], c: Any, label: str,
          fmt: str = "o") -> None:
    """A sweep's points, those whose best rate is at an edge of the rates tried as such."""
    plain = [(x, y) for x, y, p in zip(xs, ys, pts) if not p["at_edge"]]
    edge = [(x, y) for x, y, p in zip(xs, ys, pts) if p["at_edge"]]
    ax.plot(*zip(*plain) if plain else ([], []), fmt, color=c, label=label, zorder=3, ms=5,
            lw=0.8)
    if edge:
        mark(ax, "edge", *zip(*edge), c, zorder=3)


def steps_vs_batch(sweeps: list[Sweep], name: str, path: Path) -> Path | None:
    drawn = [(i, s, _points(s, name)) for i, s in enumerate(sweeps)]
    sizes = [p["batch_size"] for _, _, pts in drawn for p in pts]
    if not sizes:
        return None
    fig, ax = _figure(f"Steps to {name} vs batch size")
    grid = geom(min(sizes) / 1.4, max(sizes) * 1.4)
    for i, s, pts in drawn:
        _dots(ax, [p["batch_size"] for p in pts], [p["steps"] for p in pts], pts, colour(i),
              s.label)
        fit = _fit(s, name)
        if not fit:
            continue
        curve = lambda b: fit["s_min"] + fit["e_min"] / b  # noqa: E731
        shown = estimate(fit["b_crit"], fit["b_crit_ci"], fit["identification"])
        ax.plot(grid, [curve(b) for b in grid], "-", color=colour(i), lw=1.4,
                label=f"{s.label} fit: $B_{{crit}}$ {shown}")
        if fit["band"]:
            band(ax, fit["band"]["batch_sizes"], fit["band"]["low"], fit["band"]["high"],
                 colour(i))
        kind, at = b_crit_reading(fit)
        if kind == "point":
            ax.plot([at], [curve(at)], "D", color=colour(i), mec="black", mew=0.8, ms=7,
                    zorder=5)
        elif kind:
            mark(ax, kind, [at], [curve(at)], colour(i), axis="x", zorder=5)
    ax.set(yscale="log", ylabel="steps to target")
    batch_axis(ax, sizes, "batch size")
    return _finish(fig, ax, path)


def examples_vs_steps(sweeps: list[Sweep], name: str, path: Path) -> Path | None:
    drawn = [(i, s, _points(s, name)) for i, s in enumerate(sweeps)]
    if not any(pts for _, _, pts in drawn):
        return None
    fig, ax = _figure(f"Steps vs data to {name}")
    for i, s, pts in drawn:
        _dots(ax, [p["steps"] for p in pts], [p["examples"] for p in pts], pts, colour(i),
              s.label, "o-")
        fit = _fit(s, name)
        if fit and b_crit_reading(fit)[0] == "point":
            ax.plot([2 * fit["s_min"]], [2 * fit["e_min"]], "*", color=colour(i), ms=12,
                    mec="black", mew=0.6, label=f"{s.label}: $B_{{crit}}$ at (2 $S_{{min}}$, "
                                                 "2 $E_{min}$)")
    ax.set(xscale="log", yscale="log", xlabel="steps to target", ylabel="examples to target")
    return _finish(fig, ax, path)


def lr_vs_batch(sweeps: list[Sweep], name: str, path: Path) -> Path | None:
    drawn = [(i, s, [p for p in _points(s, name) if positive(p["best_lr"])])
             for i, s in enumerate(sweeps)]
    sizes = [p["batch_size"] for _, _, pts in drawn for p in pts]
    if not sizes:
        return None
    fig, ax = _figure(f"Best learning rate vs batch size ({name})")
    for i, s, pts in drawn:
        _dots(ax, [p["batch_size"] for p in pts], [p["best_lr"] for p in pts], pts, colour(i),
              s.label, "o-")
    ax.set(yscale="log", ylabel="best learning rate")
    batch_axis(ax, sizes, "batch size")
    return _finish(fig, ax, path)


def noise_vs_loss(sweeps: list[Sweep], path: Path) -> Path | None:
    """B_simple against the loss along each sweep's best-learning-rate runs."""
    fig, ax, any_drawn = None, None, False
    for i, s in enumerate(sweeps):
        loss, best = loss_key(s.records), best_runs(s.analysis)
        series = [x for x in noise_series(s.records, "b_simple", loss)
                  if best is None or x[0] in best]
        for j, (_, _, losses, values) in enumerate(series):
            if fig is None:
                fig, ax = _figure(f"Noise scale vs {loss} (best runs of each sweep)")
            ax.plot(losses, values, "-", color=colour(i), lw=1, alpha=0.8,
                    label=s.label if j == 0 else None)
            any_drawn = True
    if not any_drawn:
        return None
    ax.set(xscale="log", yscale="log", xlabel="loss", ylabel="$B_{simple}$")
    ax.invert_xaxis()
    return _finish(fig, ax, path)


def table(sweeps: list[Sweep], names: list[str]) -> list[str]:
    header = ["sweep", "target", "B_crit [95% CI]", "interval", "S_min", "E_min", "B_simple",
              "B_simple / B_crit"]
    rows = []
    for s in sweeps:
        for name in names:
            t = s.target(name)
            status = t["fit"] and t["fit"]["identification"]
            rows.append([s.label, name, estimate(t["b_crit"], t["b_crit_ci"], status),
                         describe(t["interval"]) if t["interval"] else "-",
                         number(t["s_min"]), number(t["e_min"]),
                         number(t["b_simple"]), number(t["b_simple_over_b_crit"])])
    return markdown_table(header, rows)


def _rules_summary(rules: LRRules | None) -> str:
    return (rules and rules["summary"]) or "not computed"


def write(sweeps: list[Sweep], names: list[str], out: Path) -> list[Path]:
    """The figures (on the first compared target) and report.md under `out`."""
    out = Path(out)
    name = names[0]
    figures = out / layout.FIGURES_DIR
    drawn = [steps_vs_batch(sweeps, name, figures / "steps_vs_batch.png"),
             examples_vs_steps(sweeps, name, figures / "examples_vs_steps.png"),
             lr_vs_batch(sweeps, name, figures / "lr_vs_batch.png"),
             noise_vs_loss(sweeps, figures / "noise_vs_loss.png")]
    drawn = [p for p in drawn if p is not None]
    lines = ["# Comparison: " + ", ".join(s.label for s in sweeps), ""]
    lines += [line for s in sweeps for line in in_use.note(s.analysis, s.label)]
    lines += ["| sweep | folder |", "|---|---|"]
    lines += [f"| {s.label} | `{s.folder}` |" for s in sweeps]
    lines += ["", "## Critical batch size per sweep and target", ""] + table(sweeps, names)
    lines += ["", "## Learning-rate rules", ""]
    lines += [f"- {s.label}: {_rules_summary(s.analysis['lr_rules'])}" for s in sweeps]
    lines += ["", f"## Figures ({name})", ""]
    lines += [f"![{p.stem}]({layout.FIGURES_DIR}/{p.name})\n" for p in drawn]
    report = out / layout.REPORT
    atomic_write(report, "\n".join(lines).rstrip() + "\n")
    return drawn + [report]
