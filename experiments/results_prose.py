"""The discussion sections of results/README.md, rendered from the committed study outputs.

Prose typed by hand goes stale the day a study is rerun or re-analysed: its numbers stay
while analysis.json moves. So each section here is a template with named fields, and every
number a field holds is computed by a small function from results/<study>/ (analysis.json,
study.json, or the report data a study's command writes). A template's literal text carries
no number of its own beyond years of citations and the method's fixed constants, which
tests/test_results.py checks; a section whose files are missing (a study still running, a
folder not yet analysed) is left out rather than failing the render.

experiments/summarize_studies.py calls `sections(results)` and writes them above the line
below which the hand-written part (figures, the record of earlier measurements) is kept.
"""

from __future__ import annotations

import json
import math
import statistics
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from scaling.analysis.intervals import describe
from scaling.config.load import load_folder
from scaling.sweep.segments import planned_segments
from search_cost import against_floor
from scaling.formatting import estimate, interval, number as num, short_number, span

# Published values the studies are read against (fixed by the papers, not by our runs).
PUBLISHED = {
    "steplaw_lr_n": -0.713, "steplaw_lr_n_range": (-0.824, -0.631),
    "steplaw_lr_d": 0.307, "steplaw_lr_d_range": (0.246, 0.361),
    "steplaw_b_d": 0.571, "steplaw_b_d_range": (0.518, 0.630),
    "steplaw_b_coefficient": 0.58,
}
STEPLAW_PREDICT_D = 1e11  # the budget at which the Step Law batch laws are compared


@dataclass(frozen=True)
class Section:
    """One discussion section: its heading, the files it reads (relative to results/), a
    function from the results folder to its named fields, and its str.format template."""
    title: str
    needs: tuple[str, ...]
    fields: Callable[[Path], dict]
    template: str


def _load(path: Path) -> dict | list:
    return json.loads(path.read_text())


def _x(value: float, digits: int = 2) -> str:
    """A ratio as prose writes it, '1.3'."""
    return f"{value:.{digits}g}"


def _pct(value: float) -> str:
    return f"{value:.0%}"


def _holds(ci, value: float) -> bool:
    return ci is not None and ci[0] <= value <= ci[1]


def _minutes(study: dict) -> str:
    return f"{study.get('runs_wall_s', study['wall_s']) / 60:.1f} min"


def _study(results: Path, name: str) -> dict:
    path = results / name / "study.json"
    return _load(path) if path.is_file() else {}


def _target(analysis: dict, name: str | None = None) -> dict:
    """A target by name, or the one the learning-rate rules were read at."""
    name = name or (analysis.get("lr_rules") or {}).get("target")
    return next((t for t in analysis["targets"] if t["name"] == name), analysis["targets"][0])


def _exp(law: dict, var: str) -> str:
    """'-0.622 [-1.02, -0.316]': a law's exponent with its interval."""
    return f"{law['exponents'][var]:.3f} {interval(law['exponents_ci'][var])}"


def _zero_clause(ci) -> str:
    """What an exponent's interval says about no dependence at all."""
    return "holds 0" if _holds(ci, 0.0) else "excludes 0"


def _seeds(sweep: dict) -> str:
    n = len(sweep.get("seeds") or [0])
    return "one seed" if n == 1 else f"{n} seeds"


# -- scale_charlm -------------------------------------------------------------------------------

def scale_charlm_fields(results: Path) -> dict:
    """The scale sweep's laws and how many cells' optima sit at the edge of the batch sizes."""
    a = _load(results / "scale_charlm" / "analysis.json")
    fb, cells = a["fixed_budget"], a["fixed_budget"]["cells"]
    laws = fb["laws"]
    lr, bs, data, budget = laws["learning_rate"], laws["batch_size"], laws["b_crit_data"], laws["b_crit"]
    batches = sorted({p["batch_size"] for c in cells for p in c["per_batch"]})
    lrs = max(p["num_lrs"] for c in cells for p in c["per_batch"])
    params = sorted({c["params"] for c in cells})
    at_edge = sum(1 for c in cells if c["optimum"].get("at_edge"))
    return dict(
        minutes=_minutes(_study(results, "scale_charlm")), cells=len(cells),
        host=_study(results, "scale_charlm").get("host", "-"),
        chars=num(a["manifest"]["tokens_per_example"]),
        params=", ".join(num(p, 2) for p in params),
        tokens=", ".join(num(t) for t in sorted({c["tokens"] for c in cells})),
        b_lo=num(batches[0]), b_hi=num(batches[-1]), lrs=lrs, seeds=_seeds(a["sweep"]),
        lr_n=_exp(lr, "params"), lr_d=_exp(lr, "tokens"), bs_n=_exp(bs, "params"),
        bs_d=_exp(bs, "tokens"), loss_n=_exp(laws["loss"], "params"),
        loss_d=_exp(laws["loss"], "tokens"),
        data_n=_exp(data, "params"), data_d=_exp(data, "tokens"),
        data_d_zero=_zero_clause(data["exponents_ci"]["tokens"]),
        data_n_zero=_zero_clause(data["exponents_ci"]["params"]),
        data_kept=data["num_cells"], data_left=data["left_out"].get("points", "none"),
        budget_n=_exp(budget, "params"), budget_d=_exp(budget, "tokens"),
        budget_n_zero=_zero_clause(budget["exponents_ci"]["params"]),
        budget_d_zero=_zero_clause(budget["exponents_ci"]["tokens"]),
        lr_argmin_n=f"{lr['argmin']['exponents']['params']:.3f}",
        sl_lr_n=PUBLISHED["steplaw_lr_n"], sl_lr_d=PUBLISHED["steplaw_lr_d"],
        sl_b_d=PUBLISHED["steplaw_b_d"],
        lr_d_vs_steplaw=("holds" if _holds(lr["exponents_ci"]["tokens"], PUBLISHED["steplaw_lr_d"])
                         else "excludes"),
        lr_n_vs_steplaw=("holds" if _holds(lr["exponents_ci"]["params"], PUBLISHED["steplaw_lr_n"])
                         else "excludes"),
        bs_d_zero=_zero_clause(bs["exponents_ci"]["tokens"]),
        at_edge=at_edge, bs_why=bs["identification"].get("why") or "identified",
    )


SCALE_CHARLM = """\
[scale_charlm/](scale_charlm/report.md) is a scale sweep of the character-level transformer
with Adam (`python experiments/run_study.py scale_charlm`, {minutes} of training on {host}): {cells} cells, N = {params} parameters x D = {tokens} tokens, each cell batch sizes
{b_lo} to {b_hi} sequences of {chars} characters x {lrs} learning rates centred on the sqrt rule,
{seeds}, every run trained to its budget and read both ways (the fixed-budget view and steps
to the loss targets). The laws across the cells (the table "Scaling laws at a fixed budget"
above, 95% intervals from resampling the cells and, within each, the spread of its
landscape):

| law | exponent of N | exponent of D | for comparison |
|---|---|---|---|
| eta* | {lr_n} | {lr_d} | Step Law: N^{sl_lr_n} D^{sl_lr_d} |
| B_opt | {bs_n} | {bs_d} | Step Law: D^{sl_b_d}; Power Lines: a power of D, not N |
| loss at the optimum | {loss_n} | {loss_d} | |
| B_crit against the data its target needs ({data_kept} points) | {data_n} | {data_d} | partly by construction (E_min on both sides) |
| B_crit of the primary target against the budget | {budget_n} | {budget_d} | Zhang et al. (2024): a power of D, not N |

- **B_crit against the examples a target needs is not pinned.** Read against E_min, B_crit =
  E_min / S_min has an E_min exponent of {data_d}, whose interval {data_d_zero}; E_min sits
  on both sides, so a slope below 1 would say only that S_min grows more slowly than E_min as
  targets get harder (McCandlish's "B_crit rises as the loss falls", restated), and errors in
  E_min pull the slope toward 1. Left out of this law: {data_left}. Its N exponent's
  interval {data_n_zero}.
- **Against the training budget**, the variable Zhang et al. (2024) use, the primary target's
  B_crit goes as N^{budget_n} (the interval {budget_n_zero}) and D^{budget_d} (the interval
  {budget_d_zero}). Every budget reaches that loss early, so the budget is not the data it
  needed, and this study does not test their finding; Zhang et al. also define B_crit by a
  20% overhead, smaller than E_min / S_min.
- **eta* and N:** N^{lr_n} (the cells' measured arg-min gives {lr_argmin_n}) against Step
  Law's {sl_lr_n}: the interval {lr_n_vs_steplaw} Step Law's value. Its D exponent, {lr_d},
  {lr_d_vs_steplaw} Step Law's {sl_lr_d}; the grid of {lrs} learning rates per batch size is
  coarse to read a slope in D from.
- **B_opt is weakly determined.** Its D exponent's interval {bs_d_zero}, and the fit flags
  it: {bs_why}. In {at_edge} of the {cells} cells the loss-optimal batch is the smallest tried
  ({b_lo} sequence), so B_opt there is an upper bound; a smaller sequence length, or larger
  budgets, would bracket it.
"""



# -- scale_gpt ----------------------------------------------------------------------------------

def _exp_ne(law: dict) -> str:
    """The N exponent of the same law with N counted without the embeddings."""
    ne = law.get("non_embedding") or {}
    value = (ne.get("exponents") or {}).get("params")
    return "-" if value is None else f"{value:.3f} {interval(ne['exponents_ci']['params'])}"


def _ne_shift(law: dict) -> str:
    """Whether counting N without the embeddings moves the N exponent by less than the width
    of its interval."""
    ne, ci = (law.get("non_embedding") or {}).get("exponents") or {}, law["exponents_ci"]["params"]
    if ne.get("params") is None or not ci:
        return "an amount without an interval against"
    shift = abs(ne["params"] - law["exponents"]["params"])
    return "less than" if shift < ci[1] - ci[0] else "more than"


def scale_gpt_fields(results: Path) -> dict:
    """The GPT scale sweep: its cells, N with and without the embeddings, the laws, and why
    the batch-size laws are bounds and B_crit has none."""
    a = _load(results / "scale_gpt" / "analysis.json")
    fb, cells = a["fixed_budget"], a["fixed_budget"]["cells"]
    laws, study = fb["laws"], _study(results, "scale_gpt")
    batches = sorted({p["batch_size"] for c in cells for p in c["per_batch"]})
    params = sorted({(c["params"], c["params_non_embedding"]) for c in cells})
    budget, data = laws["b_crit"], laws["b_crit_data"]
    return dict(
        minutes=_minutes(study), host=study.get("host", "-"), cells=len(cells),
        params=", ".join(num(n, 2) for n, _ in params),
        params_ne=", ".join(num(ne, 2) for _, ne in params),
        emb_share=span([1 - ne / n for n, ne in params], _pct),
        tokens=", ".join(num(t) for t in sorted({c["tokens"] for c in cells})),
        widths=len(params), budgets=len({c["tokens"] for c in cells}),
        chars=num(a["manifest"]["tokens_per_example"]), b_lo=num(batches[0]),
        b_hi=num(batches[-1]), lrs=max(p["num_lrs"] for c in cells for p in c["per_batch"]),
        seeds=_seeds(a["sweep"]),
        **{f"{k}_{v}": _exp(laws[law], var) for k, law in
           (("lr", "learning_rate"), ("bs", "batch_size"), ("loss", "loss"))
           for v, var in (("n", "params"), ("d", "tokens"))},
        lr_ne=_exp_ne(laws["learning_rate"]), bs_ne=_exp_ne(laws["batch_size"]),
        loss_ne=_exp_ne(laws["loss"]), loss_ne_shift=_ne_shift(laws["loss"]),
        loss_n_zero=_zero_clause(laws["loss"]["exponents_ci"]["params"]),
        loss_d_zero=_zero_clause(laws["loss"]["exponents_ci"]["tokens"]),
        lr_why=laws["learning_rate"]["identification"].get("why") or "identified",
        bs_why=laws["batch_size"]["identification"].get("why") or "identified",
        at_edge=sum(1 for c in cells if c["optimum"].get("at_edge")),
        budget_left=(budget or {}).get("left_out", {}).get("points", "no cell has a B_crit"),
        data_cells=(data or {}).get("num_cells", 0),
        data_why=((data or {}).get("interval") or {}).get("why") or "with an interval",
    )


SCALE_GPT = """\
[scale_gpt/](scale_gpt/report.md) runs the same protocol on the GPT family (`model.name: gpt`:
pre-norm blocks, rotary positions, no biases, tied embeddings; `python experiments/run_study.py
scale_gpt`, {minutes} of training on {host}): {cells} cells, N = {params} parameters ({params_ne}
without the embedding table, {emb_share} of N) x D = {tokens} tokens, batch sizes {b_lo} to
{b_hi} sequences of {chars} characters x {lrs} learning rates centred on the sqrt rule, {seeds}.
It is the smallest study that runs the laws in N with and without the embeddings through the
whole pipeline; its exponents rest on {widths} values of N and {budgets} of D, so it checks the
machinery and finds little:

| law | exponent of N | exponent of N without embeddings | exponent of D |
|---|---|---|---|
| eta* | {lr_n} | {lr_ne} | {lr_d} |
| B_opt | {bs_n} | {bs_ne} | {bs_d} |
| loss at the optimum | {loss_n} | {loss_ne} | {loss_d} |

- **The loss law is the one pinned:** its N exponent's interval {loss_n_zero} and its D
  exponent's {loss_d_zero}; counting N without the embeddings changes the N exponent by
  {loss_ne_shift} its interval's width.
- **eta* and B_opt are bounds here.** eta*: {lr_why}. B_opt: {bs_why}. In {at_edge} of the
  {cells} cells the loss-optimal batch is the smallest tried ({b_lo} sequence), so these
  budgets are too small to bracket B_opt; larger budgets, or a smaller batch unit, would.
- **B_crit has no usable law.** Against the budget: left out {budget_left}. Against E_min: {data_cells}
  points, no interval ({data_why}).
"""


# -- quickstart_neighbours ----------------------------------------------------------------------

def _bcrit(t: dict) -> str:
    return estimate(t["b_crit"], t.get("b_crit_ci"))


def _floor_sentence(results: Path, millions: Callable[[float], str]) -> str:
    """Both quickstarts against the floors no search goes below (experiments/search_cost.py,
    from their committed runs); empty where their run files are absent."""
    floors = {n: against_floor(results / n) for n in ("quickstart", "quickstart_neighbours")}
    if not all(f for _, f, _ in floors.values()):
        return ""
    over = {n: (f"{t / f:.2f}x its {millions(f)}", f"{t / b:.2f}x its {millions(b)}")
            for n, (t, f, b) in floors.items()}
    return (" Against the fewest runs a search from its own first grid could train (the first "
            "grid's rates that do not diverge and two more per batch size, each at every seed "
            "and trained only as far as its reading rule needs; `python experiments/"
            f"search_cost.py results/quickstart_neighbours`), neighbours trained "
            f"{over['quickstart_neighbours'][0]} and the whole first grid "
            f"{over['quickstart'][0]}; that floor grows with the first grid it is given. "
            "Against the brackets' floor, which does not (each target's best rate and the "
            "nearest rate tried on each side of it, at every seed, the rates any search that "
            "brackets every best must train), neighbours trained "
            f"{over['quickstart_neighbours'][1]} and the whole first grid "
            f"{over['quickstart'][1]}: the rounds' rates and the runs "
            "stopped as dominated, which go on until the best rate's slowest seed is read, hold "
            "the rest.")


def _log_width(point: dict) -> float | None:
    ci = point["optimum"]["steps_ci"] if point.get("optimum") else None
    return math.log(ci[1] / ci[0]) if ci and ci[0] > 0 else None


def _widest(grid: dict, ours: dict) -> str:
    """One target's point whose optimum interval widened most from neighbours against the
    whole grid (in log), with the rates each tried there."""
    widened = [(wq / wp, p, q) for p, q in zip(grid["points"], ours["points"])
               if (wp := _log_width(p)) and (wq := _log_width(q))]
    if not widened:
        return f"{grid['name']}: -"
    ratio, p, q = max(widened, key=lambda w: w[0])
    return (f"{grid['name']} at B = {num(p['batch_size'])}, {_x(ratio)}x as wide, from "
            f"{q['num_lrs']} rates against {p['num_lrs']}")


def default_cells(result: dict) -> list[dict]:
    """A coverage spectrum's cells of 3-seed groups read the default way (cross-fitted
    selection, jackknife intervals): the ones results/README.md quotes."""
    return [c for c in result["cells"] if c["group_size"] == 3 and c["selection"] == "crossfit"
            and c["method"] == "jackknife"]


def _shares(result: dict) -> str:
    """A coverage spectrum's default cells' shares, per target: '94%, 94%, 91%'."""
    return ", ".join(_pct(c["coverage"]) for c in default_cells(result))


def _coverage_sentence(results: Path) -> str:
    """The first grid from neighbours' interval coverage on the NQM beside the whole grid's, on
    the spectra both coverage studies ran, with what each trained."""
    ours = _load(results / "coverage_neighbours" / "coverage.json")
    whole = {r["spectrum"]: r for r in _load(results / "coverage" / "coverage.json")}
    groups = sorted({c["groups"] for r in ours for c in default_cells(r)})
    per = "; ".join(f"{r['spectrum']} {_shares(r)} for "
                    f"{_x(r['examples'] / whole[r['spectrum']]['examples'])}x the examples "
                    f"(whole grid {_shares(whole[r['spectrum']])})" for r in ours)
    return (f"`{ours[0]['command']}` cuts each spectrum's sweep into "
            f"{', '.join(map(str, groups))} groups of 3 seeds; their intervals (cross-fitted, "
            f"jackknife) held the closed form's B_crit at the three targets in {per}")


def _own_search_sentence(results: Path) -> str:
    """The neighbours mode's coverage where each 3-seed group ran a search of its own, beside
    the same spectra cut from one sweep."""
    own = _load(results / "coverage_neighbours_own" / "coverage.json")
    shared = {r["spectrum"]: r for r in _load(results / "coverage_neighbours" / "coverage.json")}
    ratios = lambda res: span([c["median_ratio"] for c in default_cells(res)],
                              lambda v: f"{v:.3f}")
    widths = lambda res: span([c["width_over_sd"] for c in default_cells(res)],
                              lambda v: f"{v:.2f}")
    per = "; ".join(f"{r['spectrum']} {_shares(r)} (median ratio to the truth {ratios(r)}, "
                    f"width {widths(r)}x the sd spread; cut from one sweep: "
                    f"{_shares(shared[r['spectrum']])}, width {widths(shared[r['spectrum']])}x)"
                    for r in own)
    groups = sorted({c["groups"] for r in own for c in default_cells(r)})
    spectrum, low = min(((r["spectrum"], c) for r in own for c in default_cells(r)),
                        key=lambda pair: pair[1]["coverage"])
    return (f"With each group of 3 seeds running a sweep and a search of its own instead, as a "
            f"user's 3-seed sweep does (`{own[0]['command']}`, {', '.join(map(str, groups))} "
            f"groups), the intervals held it in {per}. The lowest share, {_pct(low['coverage'])} "
            f"at {spectrum}'s {low['target']}, has Wilson's 95% interval "
            f"[{_pct(low['coverage_ci'][0])}, {_pct(low['coverage_ci'][1])}] over its groups")


def neighbours_fields(results: Path) -> dict:
    """The quickstart trained from the whole first grid and from neighbours: what each cost,
    whether the optima and B_crit agree."""
    grid, ours = (_load(results / n / "analysis.json") for n in ("quickstart",
                                                                 "quickstart_neighbours"))
    cost = lambda a: a["cost"]["examples_trained"]
    runs = lambda a: a["sweep"]["num_runs"]
    pairs = list(zip(grid["targets"], ours["targets"]))
    inside = [o["name"] for g, o in pairs if _holds(g.get("b_crit_ci"), o["b_crit"])]
    lrs = [(p["best_lr"], q["best_lr"]) for g, o in pairs for p, q in zip(g["points"], o["points"])]
    same = sum(1 for a, b in lrs if abs(math.log(a / b)) < 0.01)
    rows = "\n".join(f"| {g['name']} | {_bcrit(g)} | {_bcrit(o)} |" for g, o in pairs)
    moved = max(((g["name"], p, q) for g, o in pairs for p, q in zip(g["points"], o["points"])),
                key=lambda m: abs(math.log(m[2]["steps"] / m[1]["steps"])))
    millions = lambda n: f"{n / 1e6:.1f}M"
    spans = [math.log(o["b_crit_ci"][1] / o["b_crit_ci"][0])
             / math.log(g["b_crit_ci"][1] / g["b_crit_ci"][0])
             for g, o in pairs if g.get("b_crit_ci") and o.get("b_crit_ci")]
    return dict(runs_grid=num(runs(grid)), runs_ours=num(runs(ours)),
                widths=_x(statistics.median(spans)) if spans else "-",
                widest="; ".join(_widest(g, o) for g, o in pairs),
                coverage=_coverage_sentence(results), own=_own_search_sentence(results),
                floors=_floor_sentence(results, millions),
                examples_grid=millions(cost(grid)), examples_ours=millions(cost(ours)),
                moved_target=moved[0], moved_b=num(moved[1]["batch_size"]),
                moved_grid=num(moved[1]["steps"]), moved_ours=num(moved[2]["steps"]),
                moved_lr="the same best rate" if abs(math.log(
                    moved[1]["best_lr"] / moved[2]["best_lr"])) < 0.01 else "best rates "
                f"{num(moved[1]['best_lr'])} and {num(moved[2]['best_lr'])}",
                ratio=_x(cost(ours) / cost(grid)), rows=rows, inside=len(inside),
                targets=len(pairs), outside=", ".join(o["name"] for _, o in pairs
                                                      if o["name"] not in inside) or "none",
                same=same, points=len(lrs))


NEIGHBOURS = """\
[quickstart_neighbours/](quickstart_neighbours/report.md) is the quickstart with
`learning_rate.first_grid: neighbours` (`python experiments/run_study.py quickstart
learning_rate.first_grid=neighbours --out results/quickstart_neighbours --pack`): the middle
batch size trains the whole first grid, the others start, for each target, from three rates one
lattice step apart around the optimum the two nearest searched batch sizes predict for it, and
search on from there. It trained {runs_ours} runs and {examples_ours} examples where the whole
first grid took {runs_grid} and {examples_grid} ({ratio}x the examples). The best rate tried is
the same in {same} of the {points} (batch size, target) points.{floors}

| target | B_crit, whole first grid | B_crit, from neighbours |
|---|---|---|
{rows}

{inside} of the {targets} B_crit fall inside the whole grid's interval; outside: {outside}. The
steps that moved most are at {moved_target}, B = {moved_b}: {moved_grid} from the whole grid,
{moved_ours} from neighbours ({moved_lr}): the cross-fitted selection picks among the rates
around the best on held-out seeds, and those rates differ between the two sweeps. Where it is
weak: its B_crit intervals span {widths}x the whole grid's in log (median over targets). They
widen where a batch size's optimum is read from fewer rates: the optimum's parabola, refitted on
each leave-one-seed-out draw, moves more. The point whose optimum interval widened most, per
target: {widest}. Whether they hold their level, on the NQM's closed form: {coverage}. There
the rates were placed by every seed of one sweep, more than a 3-seed sweep's search would use,
and with so few groups one group moves a share by a few points. {own}. The batch sizes wait
on their neighbours, so groups are narrower and the sweep runs in one process (no shards); both
sweeps' wall times, side by side on one machine, are in [docs/benchmarks.md](../docs/benchmarks.md#the-first-grid-from-neighbours-wall-time).
"""


# -- adam_surge ---------------------------------------------------------------------------------

def _worst(rule_rows: list[dict]) -> tuple[float, int]:
    """The rule's ratio to the optimum farthest from 1 (in log), and its batch size."""
    rows = [r for r in rule_rows if r.get("ratio_to_optimum")]
    worst = max(rows, key=lambda r: abs(math.log(r["ratio_to_optimum"])))
    return worst["ratio_to_optimum"], worst["batch_size"]


def _surge_worst(optima: list[dict], fit: dict) -> tuple[float, int]:
    """The surge form's ratio to the measured optimum farthest from 1, and its batch size."""
    def surge(b):
        return 2 * fit["eta_max"] / (math.sqrt(fit["b_peak"] / b) + math.sqrt(b / fit["b_peak"]))
    rows = [{"ratio_to_optimum": surge(o["batch_size"]) / o["learning_rate"],
             "batch_size": o["batch_size"]} for o in optima]
    return _worst(rows)


def _peak(optima: list[dict]) -> int:
    """The batch size past which the optimum stays within 1.25x of its largest value."""
    top = max(o["learning_rate"] for o in optima)
    return next(o["batch_size"] for o in optima if o["learning_rate"] >= top / 1.25)


def adam_surge_fields(results: Path) -> dict:
    """Adam's optimum per batch size, the surge and noise-scale fits against it, B_crit."""
    a = _load(results / "adam_surge" / "analysis.json")
    study = _study(results, "adam_surge")
    t = _target(a)
    rules, optima = t["lr_rules"], t["lr_rules"]["optima"]
    peak = _peak(optima)
    first, later = optima[0], [o for o in optima if o["batch_size"] >= peak]
    surge_ratio, surge_b = _surge_worst(optima, rules["surge_fit"])
    noise_ratio, noise_b = _worst(rules["rules"]["noise_scale"])
    steps = [p["steps"] for p in t["points"] if p["batch_size"] >= peak and p["steps"]]
    easy = [u for u in a["targets"] if u is not t][0]
    easy_steps = [p["steps"] for p in easy["points"] if p["steps"]]
    lrs = sorted(a["sweep"]["learning_rates"])
    return dict(
        runs=a["sweep"]["num_runs"], minutes=_minutes(study),
        b_lo=num(first["batch_size"]), b_hi=num(optima[-1]["batch_size"]),
        target=t["name"], easy=easy["name"], seeds=_seeds(a["sweep"]),
        seeds_cap=_seeds(a["sweep"]).capitalize(),
        optima=", ".join(f"{o['learning_rate']:.2g} at B = {num(o['batch_size'])}" for o in optima),
        peak=num(peak), rise=_x(later[0]["learning_rate"] / first["learning_rate"]),
        sqrt_rise=_x(math.sqrt(peak / first["batch_size"])),
        flat=_x(max(o["learning_rate"] for o in later) / min(o["learning_rate"] for o in later)),
        falls=("falls by 1.25x or more past its peak" if rules.get("optimum_falls")
               else "does not fall by 1.25x or more past its peak"),
        b_peak=num(rules["surge_fit"]["b_peak"]), b_simple=num(rules["noise_scales"]["b_simple"]),
        b_simple_adam=num(rules["noise_scales"]["b_simple_precond"]),
        peak_over_simple=_x(rules["surge_fit"]["b_peak"] / rules["noise_scales"]["b_simple"]),
        surge_ratio=_x(surge_ratio), surge_b=num(surge_b),
        noise_ratio=_x(noise_ratio), noise_b=num(noise_b),
        steps=", ".join(num(s, 2) for s in steps), b_crit=num(t["b_crit"]),
        easy_steps=f"{num(min(easy_steps), 2)} to {num(max(easy_steps), 2)}",
        easy_b_crit=("a bound" if not (easy.get("fit") or {}).get("identification", {})
                     .get("identified", True) else num(easy["b_crit"])),
        lr_lo=f"{lrs[0]:.2g}", lr_hi=f"{lrs[-1]:.2g}",
    )


ADAM_SURGE = """\
[adam_surge/](adam_surge/report.md) (`python experiments/run_study.py adam_surge`; Adam on
charlm, batch sizes {b_lo} to {b_hi} sequences, a first grid of quarter decades, then the
learning-rate search; {runs} runs, {minutes} of training recorded in the run files) asks
whether Adam's optimal learning rate rises and then falls with the batch size, as Li et al.
(2024) find.

- **It rises, then levels off; it {falls}.** At {target} the optimum read between the rates
  (the parabola's minimum) is {optima}: a rise of {rise}x up to B = {peak} (sqrt(B) would give
  {sqrt_rise}x), then flat within {flat}x. The surge form fits it with B_peak {b_peak}
  sequences ({seeds}: no interval), {peak_over_simple}x the measured B_simple ({b_simple};
  {b_simple_adam} in Adam's metric), where Li et al. put B_peak near the noise scale. At worst
  it is {surge_ratio}x the optimum (B = {surge_b}); the noise-scale rule, which cannot fall, is
  at worst {noise_ratio}x (B = {noise_b}). So the data do not tell the two apart past B =
  {peak}.
- **Where it is weak.** {seeds_cap}. {easy} is too easy to time: every batch size reaches it in
  {easy_steps} steps, so steps do not fall with the batch size and its B_crit is
  {easy_b_crit}. At {target} the steps level off from B = {peak} ({steps} steps), so B_crit
  ({b_crit}, no interval with one seed) is pinned by the smaller batches alone. Read this study
  for the optimum's shape, not for B_crit.
"""


# -- adam_beta2 ---------------------------------------------------------------------------------

def _spread(point: dict) -> float:
    """How far apart the steps of the values tried at one batch size are: max / min - 1."""
    steps = [s for s in point["steps"] if s]
    return max(steps) / min(steps) - 1


def adam_beta2_fields(results: Path) -> dict:
    """The best beta2 per batch size and how little the steps differ across beta2."""
    a = _load(results / "adam_beta2" / "analysis.json")
    study = _study(results, "adam_beta2")
    hard = min(a["targets"], key=lambda t: t["value"])
    easy = max(a["targets"], key=lambda t: t["value"])
    rule = hard["hyper_rules"]["scalars"]["b2"]
    pts = rule["points"]
    spreads = [_spread(p) for p in pts for t in (hard, easy)
               for p in t["hyper_rules"]["scalars"]["b2"]["points"]]
    values = pts[0]["values"]
    easy_best = {p["best"] for p in easy["hyper_rules"]["scalars"]["b2"]["points"]}
    edges = [f"B = {num(p['batch_size'])}" for p in pts if p["at_edge"]]
    optima = hard["lr_rules"]["optima"]
    lrs = sorted(a["sweep"]["learning_rates"])
    return dict(
        batches=", ".join(num(p["batch_size"]) for p in pts), values=", ".join(f"{v:.4g}" for v in values),
        n_lrs=len({round(x, 6) for x in lrs}), runs=a["sweep"]["num_runs"], minutes=_minutes(study),
        seeds=_seeds(a["sweep"]), hard=hard["name"], easy=easy["name"],
        spread=f"{_pct(min(spreads))}-{_pct(max(spreads))}",
        verdict=("beta2 does not matter measurably here" if max(spreads) < 0.1
                 else "beta2 moves the steps by up to " + _pct(max(spreads))),
        best=", ".join(f"{p['best']:.4g} at B = {num(p['batch_size'])}"
                       + (f" ({p['at_edge']} edge)" if p["at_edge"] else "") for p in pts),
        exponent=f"{rule['exponent']:.2f}", edges=", ".join(edges) or "none",
        easy_best=(f"the same value, {min(easy_best):.4g}, is best at every batch size"
                   if len(easy_best) == 1 else "the best value varies"),
        steps=", ".join(f"B = {num(p['batch_size'])}: {num(min(p['steps']), 3)}-{num(max(p['steps']), 3)}"
                        for p in pts),
        lr_lo=f"{optima[0]['learning_rate']:.2g}", lr_hi=f"{optima[-1]['learning_rate']:.2g}",
        grid_lo=f"{lrs[0]:.2g}", grid_hi=f"{lrs[-1]:.2g}",
        b_lo=num(optima[0]["batch_size"]), b_hi=num(optima[-1]["batch_size"]),
        lr_edges=_lr_edges(optima, lrs),
    )


def _lr_edges(optima: list[dict], lrs: list[float]) -> str:
    """Whether the first and last optima sit at the ends of the learning rates tried."""
    ends = [o["learning_rate"] for o in (optima[0], optima[-1])]
    at = [math.isclose(ends[0], lrs[0], rel_tol=1e-3), math.isclose(ends[1], lrs[-1], rel_tol=1e-3)]
    return (" (both ends of the optima sit at the grid's edges, so they are bounds)" if all(at)
            else " (an end of the optima sits at the grid's edge, a bound)" if any(at) else "")


ADAM_BETA2 = """\
[adam_beta2/](adam_beta2/report.md) (`python experiments/run_study.py adam_beta2`; Adam on
charlm at batch sizes {batches} sequences, beta2 in {values} x {n_lrs} learning rates,
{seeds}, {runs} runs, {minutes} of training) asks whether each batch size's best beta2 keeps
its half-life in examples, as Marek et al. (2025) set it (beta2(B) = beta2_ref^(B / B_ref)).

- **{verdict}.** Across the beta2 values the steps differ by {spread} at each batch size and
  target (at {hard}: {steps} steps), about what one seed's noise moves them. The best of the
  values at {hard} is {best}; read as a trend this is a half-life growing as B^{exponent} (0
  under the rule, 1 for a fixed beta2), but picks among values this close are not evidence of
  a direction, and values at the edge of those tried ({edges}) are bounds. At {easy}
  {easy_best}. A sharper answer needs several seeds, values below the lowest tried at large
  batches and longer runs (the high values' half-lives are long against these runs, so they
  differ mostly through Adam's bias correction).
- Learning rates: the optimum at {hard} goes from {lr_lo} at B = {b_lo} to {lr_hi} at B =
  {b_hi}, with the grid spanning {grid_lo} to {grid_hi}{lr_edges}; this study shows no fall of
  the optimum either.
"""


# -- digits_arrays ------------------------------------------------------------------------------

def digits_fields(results: Path) -> dict:
    """The digits sweep through task `arrays`: B_crit with its interval, S_min, first crossing."""
    a = _load(results / "digits_arrays" / "analysis.json")
    study = _study(results, "digits_arrays")
    ts = a["targets"]
    steps = [p for p in ts[0]["points"] if p["steps"]]
    return dict(
        batches=f"{num(a['sweep']['batch_sizes'][0])} to {num(a['sweep']['batch_sizes'][-1])}",
        n_batches=len(a["sweep"]["batch_sizes"]), seeds=_seeds(a["sweep"]),
        minutes=_minutes(study), runs=a["sweep"]["num_runs"], host=study.get("host", "-"),
        steps_lo=num(steps[0]["steps"], 3), b_lo=num(steps[0]["batch_size"]),
        steps_hi=num(steps[-1]["steps"], 2), b_hi=num(steps[-1]["batch_size"]),
        s_min=num(ts[0]["s_min"], 2),
        b_crit="; ".join(f"{estimate(t['b_crit'], t['b_crit_ci'])} examples for {t['name']}"
                         for t in ts),
        ratio=span([t["b_simple_over_b_crit"] for t in ts], lambda v: f"{v:.2f}"),
        first=", ".join(num(t["first_crossing"]["b_crit"], 2) for t in ts),
        first_inside=("inside" if all(_holds(t["b_crit_ci"], t["first_crossing"]["b_crit"])
                                      for t in ts) else "not all inside"),
    )


DIGITS = """\
`python experiments/write_digits_arrays.py && python experiments/run_study.py digits_arrays`
writes scikit-learn's digits as two .npz files of 8x8x1 images (the built-in digits task's own
split) and sweeps them through task `arrays`, the path a researcher's own data take:
{n_batches} batch sizes from {batches}, a centred learning-rate grid with the search,
{seeds}, {runs} runs, {minutes} of training ({host}). Steps fall from {steps_lo} at B =
{b_lo} to {steps_hi} at B = {b_hi} (S_min {s_min}). B_crit is {b_crit}, with B_simple at
{ratio} of it; read at the first crossing, {first}, {first_inside} the intervals. A test
(`tests/test_workloads.py`) checks that this path trains exactly as the built-in task on the
same examples, so the numbers are the digits task's too. Weak points: the training set is
small, so batches above a few hundred are a large share of an epoch.
"""


# -- cooldowns ----------------------------------------------------------------------------------

def cooldowns_fields(results: Path) -> dict:
    """The cooldown protocol against separate runs: examples trained, and whether they agree."""
    comp = _load(results / "cooldowns_charlm" / "comparison.json")
    a = _load(results / "cooldowns_charlm" / "analysis.json")
    cool, sep = _study(results, "cooldowns_charlm"), _study(results, "cooldowns_charlm_separate")
    cells = a["fixed_budget"]["cells"]
    laws = a["fixed_budget"]["laws"]
    agree = sum(1 for c in comp["cells"] if all(
        c[k]["cooldowns"] == c[k]["separate"] for k in ("learning_rate", "batch_size", "value")))
    at_edge = sum(1 for c in cells if c["optimum"].get("at_edge"))
    batches = sorted({p["batch_size"] for c in cells for p in c["per_batch"]})
    tokens = sorted(c["tokens"] for c in cells)
    extra = {k: v for k, v in comp.items() if k != "cells" and not isinstance(v, (list, dict))}
    return dict(
        cells=len(cells), d_lo=num(tokens[0]), d_hi=num(tokens[-1]),
        agree=agree, cool_min=_minutes(cool) if cool else "-", sep_min=_minutes(sep) if sep else "-",
        lr_d=_exp(laws["learning_rate"], "tokens"), loss_d=_exp(laws["loss"], "tokens"),
        at_edge=at_edge, b_lo=num(batches[0]), extra=extra,
    )


COOLDOWNS = """\
`python experiments/cooldowns.py` (trains configs/cooldowns_charlm.yaml both ways, then
compares; results/cooldowns_charlm/comparison.md) reads the character-level transformer
(Adam, a WSD schedule with a linear decay) at {cells} budgets from {d_lo} to {d_hi} tokens,
once from one stable run per setting with each smaller budget's decay branched from its saved
state (Hägele et al. 2024), once as separate runs per budget ({cool_min} of training against
{sep_min}). The optimum's learning rate, batch size and loss agree between the two ways in
{agree} of {cells} budgets, so every fixed-budget optimum, interval and law in D is the same:
eta* goes as D^{lr_d} and the loss at the optimum as D^{loss_d}. The equality is the claim the
protocol rests on (a wsd run's stable phase does not depend on its length once the warm-up is
given in steps). Weak: one small model; the loss-optimal batch size sits at the smallest batch
tried ({b_lo} sequence) at {at_edge} of {cells} budgets, so B_opt's law is a bound, not a
measurement; the laws span one decade of D.
"""


def _cooldowns_fields(results: Path) -> dict:
    fields = cooldowns_fields(results)
    fields.pop("extra")
    return fields


# -- seesaw -------------------------------------------------------------------------------------

SEESAW_KEEP, SEESAW_CUT = "keep the rate (SGD's equivalence)", "Seesaw, rate / sqrt(2)"
SEESAW_TOL = 0.05  # "matches the decay": within this fraction of its loss at every phase end


def seesaw_fields(results: Path) -> dict:
    """Batch ramps against a step decay in closed form: how often each trade matches."""
    rows = _load(results / "seesaw_nqm" / "table.json")

    def within(key, tol=SEESAW_TOL):
        return [r for r in rows if all(abs(v - 1) <= tol for v in r[key])]
    keep, cut = within(SEESAW_KEEP), within(SEESAW_CUT)
    lrs = sorted({r["lr"] for r in rows})
    by_lr = ", ".join(f"{sum(1 for r in keep if r['lr'] == lr)} of "
                      f"{sum(1 for r in rows if r['lr'] == lr)} at lr {lr:g}" for lr in lrs)
    cut_all = [v for r in rows for v in r[SEESAW_CUT]]
    keep_all = [v for r in rows for v in r[SEESAW_KEEP]]
    return dict(cases=len(rows), keep=len(keep), by_lr=by_lr, cut=len(cut), tol=_pct(SEESAW_TOL),
                keep_span=f"{min(keep_all):.2f}x to {max(keep_all):.2f}x",
                cut_span=f"{min(cut_all):.2f}x to {max(cut_all):.2f}x")


SEESAW = """\
`python experiments/seesaw_nqm.py` (seconds, no training; results/seesaw_nqm/README.md)
sets a step decay (the rate halving every E examples, SGD on the NQM) against a ramp that
doubles the batch at the same examples instead, in exact expected loss at equal examples.
Keeping the rate while the batch doubles matches the decay within {tol} at every phase end in
{keep} of {cases} cases ({by_lr}); its loss is {keep_span} the decay's over all cases.
Seesaw's trade (the rate cut by sqrt(2) where it would halve) is within {tol} in {cut}: its loss
is {cut_span} the decay's. So under plain SGD the equivalence is a halved rate for a doubled
batch at the same rate, as Smith et al. (2018) found; the sqrt(2) cut is Meterez et al.'s
(2025) for normalized SGD, an Adam proxy, which this closed form does not model. The engine's
`seesaw` schedule takes either rule (docs/schedules.md). Weak: one spectrum, a step decay
only, no Adam; the ramps trained on mnist1d are in the section above.
"""


# -- schedules ----------------------------------------------------------------------------------

def _against(t: dict, what: str) -> dict:
    return next(c for c in t["comparisons"] if c["against"] == what)


def _ratio_ci(c: dict, key: str) -> str:
    return f"{num(c[key])}x {interval(c[key + '_ci'])}"


def _hardest_loss(targets) -> str | None:
    """The hardest eval-loss target among these names (the lowest threshold); None without one."""
    return min((t for t in targets if t.startswith("eval_loss")),
               key=lambda t: float(t.split("<=")[1]), default=None)


def _schedule_sentence(analysis: dict) -> str:
    """Per schedule, its steps and examples against the batch it starts from at the hardest
    target each reaches, with the seeds' intervals."""
    out = []
    for s in analysis["schedules"]:
        reached = [t for t in s["targets"] if t["reached"]]
        if not reached:
            out.append(f"{s['name']} reaches no target")
            continue
        by_name = {t["target"]: t for t in reached}
        hard = by_name.get(_hardest_loss(by_name), reached[-1])
        start = _against(hard, "start")
        out.append(f"{s['name']} ({s['kind'].replace('_', '-')} from {num(s['first_batch'])}) reaches "
                   f"{hard['target']} in {_ratio_ci(start, 'steps_ratio')} the steps of batch "
                   f"{num(start['batch_size'])} at {_ratio_ci(start, 'examples_ratio')} its "
                   "examples")
    return "; ".join(out)


def schedules_fields(results: Path) -> dict:
    """Schedules against the batch they start from and against the fixed batches' curve."""
    out = {}
    for name in ("schedules_mnist1d", "schedules_charlm"):
        a = _load(results / name / "analysis.json")
        out[name] = _schedule_sentence(a)
        out[name + "_fit"] = _fit_span(a)
        out[name + "_where"] = _where_on_fit(a)
        out[name + "_below"] = any(r < NEAR_FIT[0] for r in _fit_ratios(a))
        out[name + "_min"] = _minutes(_study(results, name))
        out["seeds"] = _seeds(a["sweep"])
    return {"mnist": out["schedules_mnist1d"], "charlm": out["schedules_charlm"],
            "mnist_fit": out["schedules_mnist1d_fit"], "charlm_fit": out["schedules_charlm_fit"],
            "mnist_where": out["schedules_mnist1d_where"],
            "charlm_where": out["schedules_charlm_where"],
            "gain": ("no clear gain beyond the frontier" if not (
                out["schedules_mnist1d_below"] or out["schedules_charlm_below"]) else
                "below the frontier at some targets, by a margin the fit cannot resolve"),
            "mnist_min": out["schedules_mnist1d_min"], "charlm_min": out["schedules_charlm_min"],
            "seeds": out["seeds"]}


def _vs_fit_ratio(t: dict) -> float | None:
    """A schedule's examples over the fixed batches' fit at its steps (the table's 'vs fit')."""
    fit = t.get("vs_fit") or {}
    return fit.get("examples_ratio")


def _fit_ratios(a: dict) -> list[float]:
    """Every schedule's examples over the fixed batches' fit, at each target it reaches."""
    return [r for s in a["schedules"] for t in s["targets"] if t["reached"]
            for r in [_vs_fit_ratio(t)] if r is not None]


def _fit_span(a: dict) -> str:
    """The span of _fit_ratios ('-' without one)."""
    return span(_fit_ratios(a), lambda v: f"{v:.2f}")


NEAR_FIT = (0.9, 1.1)  # examples over the fit's taken as on the curve (the fit has no interval)


def _where_on_fit(a: dict) -> str:
    """Where a study's schedules land against the fixed batches' fitted curve, in words."""
    fits = _fit_ratios(a)
    if not fits:
        return "have no point on it"
    lo, hi = min(fits), max(fits)
    if lo >= NEAR_FIT[0] and hi <= NEAR_FIT[1]:
        return "land near the curve the fixed batch sizes trace"
    if lo >= NEAR_FIT[0]:
        return f"land on the curve or above it, needing up to {hi:.2f}x the examples"
    if hi <= NEAR_FIT[1]:
        return f"land on the curve or below it, needing as little as {lo:.2f}x the examples"
    return f"land on both sides of the curve ({lo:.2f}x to {hi:.2f}x)"


SCHEDULES = """\
`python experiments/run_study.py schedules_mnist1d` ({mnist_min} of training) and
`python experiments/run_study.py schedules_charlm` ({charlm_min}): a doubling schedule and a
noise-scale schedule, each trained at every learning rate of the sweep's grid (taken at its
start batch) x {seeds}, beside the fixed batch sizes of the same sweep
([docs/schedules.md](../docs/schedules.md); table above, 95% intervals over seeds).

**Against the batch a schedule starts from, large savings in steps** at the hardest loss
target. mnist1d MLP (momentum, linear rule): {mnist}. charlm (Adam, the learning rate held
constant, so a larger batch lowers the gradient noise as a decaying rate would: Smith et al.'s
setting): {charlm}. This is the direction of Smith et al. (2018: the same curve in fewer
steps) and of Merrill et al.'s batch-size warm-up.

**Against every fixed batch size, {gain}.** Placed on the fixed batch sizes' fitted
trade-off, the schedules need {mnist_fit}x the examples the fit needs at their steps on mnist1d
and {charlm_fit}x on charlm: on mnist1d they {mnist_where}; on charlm they {charlm_where}.
These ratios have no interval (the fit is one curve through the fixed batches' means), so a
difference of a few per cent from 1 is not resolved. On these two small problems
a schedule picks a point on the steps-for-data frontier; a researcher who already knows the
right fixed batch gains little.

Where these are weak: {seeds}; the learning rate is chosen once per schedule at its start
batch and then follows a rule, while each fixed batch size gets its own best rate, which
favours the fixed batches; the fitted curve is itself an interpolation through the fixed
batch sizes; and each schedule's step counts include the smoothed reading's window across its
changes.
"""


# -- batch ramps --------------------------------------------------------------------------------

def _catch_up_sentence(s: dict) -> str:
    """A ramp's catch-up after its last switch: the mean with its interval, or why there is
    none."""
    c = s["catch_up"]
    if not c:
        return f"{s['name']}: no switch"
    head = s["name"] if c["switch_examples"] is None else \
        f"{s['name']} (its last switch at {num(c['switch_examples'])} examples)"
    if c["examples"] is None:
        return f"{head}: {c['interval']['why']}"
    return (f"{head}: {num(c['examples'])} {interval(c['examples_ci'])} examples later "
            f"({describe(c['interval'])})")


def _hardest_common(a: dict, names: tuple[str, str]) -> dict[str, dict] | None:
    """The hardest loss target two schedules both reach, each's entry there."""
    by = {s["name"]: {t["target"]: t for t in s["targets"] if t["reached"]}
          for s in a["schedules"] if s["name"] in names}
    hard = _hardest_loss(t for t in by.get(names[0], {}) if t in by.get(names[1], {}))
    if len(by) < 2 or hard is None:
        return None
    return {n: by[n][hard] for n in names}


def _ramps(results: Path, name: str) -> tuple[dict, dict]:
    """A ramps study's analysis and the fields both ramps sections share: the ramps against
    the batch they start from and against the fixed batches' fit, the catch-up, the gaps."""
    a = _load(results / name / "analysis.json")
    unreached = {t["name"]: t["unreached_batch_sizes"] for t in a["targets"]
                 if t["unreached_batch_sizes"]}
    fewest = min(((s["name"], _against(t, "start")["steps_ratio"]) for s in a["schedules"]
                  for t in s["targets"] if t["reached"]), key=lambda p: p[1], default=("-", 0))
    return a, dict(min=_minutes(_study(results, name)), seeds=_seeds(a["sweep"]),
                   fewest=fewest[0], first=num(a["schedules"][0]["first_batch"]),
                   tol=next((_pct(s["catch_up"]["tolerance"]) for s in a["schedules"]
                             if s["catch_up"]), "-"),
                   sizes=", ".join(num(b) for b in a["sweep"]["batch_sizes"]),
                   lines=_schedule_sentence(a),
                   fit=_fit_span(a),
                   catch="; ".join(_catch_up_sentence(s) for s in a["schedules"]),
                   unreached="; ".join(f"{k} by batch {', '.join(num(b) for b in v)}"
                                       for k, v in unreached.items()) or "none")


def ramps_mnist1d_fields(results: Path) -> dict:
    """The batch ramps on mnist1d under a cosine against the fixed batches, with the two
    Seesaw rate rules set against each other."""
    a, out = _ramps(results, "ramps_mnist1d")
    first = a["schedules"][0]["first_batch"]
    seesaws = sorted(s["name"] for s in a["schedules"] if s["kind"] == "seesaw")
    rules = {s["name"]: s["lr_rule"] for s in a["schedules"]}
    pair = _hardest_common(a, tuple(seesaws[:2])) if len(seesaws) >= 2 else None
    verdict = "the study does not tell the rules apart"
    if pair:
        apart = [n for n, t in pair.items()
                 if not _holds(_against(t, "start")["examples_ratio_ci"], 1.0)]
        verdict = (f"{', '.join(apart)} is told apart from batch {num(first)}'s examples"
                   if apart else "neither rule's examples ratio is told apart from 1 at the "
                   "seeds trained, so the study does not settle which rule SGD needs here")
        rule_text = "; ".join(
            f"{n} ({rules[n]} rule) reaches {t['target']} at "
            f"{_ratio_ci(_against(t, 'start'), 'examples_ratio')} the examples of batch "
            f"{num(first)} and {_ratio_ci(_against(t, 'start'), 'steps_ratio')} its steps"
            for n, t in pair.items())
    else:
        rule_text = "the two Seesaw rules reach no common loss target"
    return {**out, "verdict": verdict, "rules": rule_text}


def _first_changes(folder: Path) -> dict[str, int]:
    """Each fixed batch-size schedule's first change, in examples, as the study planned it
    (scaling.sweep.segments, from the folder's sweep.yaml)."""
    cfg = load_folder(folder / "sweep.yaml")
    changes = {}
    for sched in cfg.batch.schedules:
        if sched.kind != "noise_scale":
            segs = planned_segments(cfg, sched)
            if len(segs) > 1:
                changes[sched.label] = segs[1].examples_before
    return changes


def ramps_charlm_fields(results: Path) -> dict:
    """The batch ramps on charlm with Adam under a cosine against the fixed batches, with where
    in the budget each ramp reaches its hardest target, before or after its first change."""
    a, out = _ramps(results, "ramps_charlm")
    budget = _load(results / "ramps_charlm" / "arithmetic.json")[0]["examples"]
    changes = _first_changes(results / "ramps_charlm")
    where = []
    for s in a["schedules"]:
        reached = [t for t in s["targets"] if t["reached"]]
        if reached:
            last = max(reached, key=lambda t: t["examples"])
            change = changes.get(s["name"])
            at = "" if change is None else (
                f", {'after' if last['examples'] > change else 'before'} its first change at "
                f"{num(change)}")
            where.append(f"{s['name']} at {num(last['examples'])} examples "
                         f"({_pct(last['examples'] / budget)} of the budget{at})")
    return {**out, "budget": num(budget), "where": "; ".join(where)}


RAMPS = """\
`python experiments/run_study.py ramps_mnist1d` ({min} of training): four batch ramps on the
mnist1d MLP with momentum SGD (Seesaw with its sqrt(2) cut, the same ramp keeping the rate, a
late switch, a ramp linear in examples; results/ramps_mnist1d), each trained at every
learning rate of batch {first}'s first grid x {seeds}, beside fixed batch sizes {sizes} that
each decay their rate by a cosine to 0 over the same budget. Batch {first} under its cosine is
the schedule the ramps stand in for. Intervals are 95% over seeds, each seed's ramp run and
fixed run left out together (the jackknife; [docs/schedules.md](../docs/schedules.md)); a ramp
is read along its examples, so its reading
window spans the data a fixed batch size's does.

**Against batch {first} under its cosine**, at the hardest loss target each ramp reaches:
{lines}. The fewest steps against batch {first} at any target: {fewest}. Seesaw and the switch
change the batch only in the second half of the budget, so they match batch {first} at the
early targets and differ only at the late ones.

**Seesaw's rate rule on SGD:** {rules}. The closed form above (SGD on the NQM) predicts that
keeping the rate is plain SGD's equivalence and the sqrt(2) cut is not; on this MLP {verdict}.

**Against every fixed batch size:** placed on the fixed batches' fitted trade-off, the ramps
need {fit}x the examples the fit needs at their steps (the fit has no interval, so a few per
cent from 1 is not resolved).

**The catch-up** (examples after the last switch until the eval loss is within {tol} of the fixed
run at the final batch size): {catch}.

Where this is weak: {seeds}; each ramp's learning rate is chosen once at its start batch and
then follows its rule, while each fixed batch size gets its own best rate; targets unreached
by every seed of some batch size: {unreached}; a reading window that straddles a switch,
where the loss jumps, mixes batch sizes and can read late (the switch at its hardest target
above); the catch-up's jackknife interval over so few seeds is wide, and where it would run
below zero it is cut at 0 (a catch-up is never negative).
"""


RAMPS_CHARLM = """\
`python experiments/run_study.py ramps_charlm` ({min} of training): three batch ramps on the
character-level transformer with Adam (Seesaw with Adam's sqrt(2) cut, a late switch and a ramp
linear in examples, the last two keeping the rate; results/ramps_charlm), each trained at every
learning rate of batch {first}'s first grid x {seeds}, beside fixed batch sizes {sizes} (in
sequences) that each decay their rate by a cosine to 0 over the same budget. Batch {first}
under its cosine is the schedule the ramps stand in for; intervals as in the mnist1d section.

**Against batch {first} under its cosine**, at the hardest loss target each ramp reaches:
{lines}. The fewest steps against batch {first} at any target: {fewest}.

**Where in the budget ({budget} sequences) each ramp reaches its hardest target:** {where}.
Under a cosine to 0 without warm-up, Seesaw's first doubling comes half-way, where the rate has
fallen to half its peak; a target reached before a ramp's first change is read on what is still
batch {first}'s run, so there the study compares batch {first} with itself and says nothing of
the ramp.

**Against every fixed batch size:** placed on the fixed batches' fitted trade-off, the ramps
need {fit}x the examples the fit needs at their steps (the fit has no interval).

**The catch-up** (examples after the last switch until the eval loss is within {tol} of the fixed
run at the final batch size): {catch}.

Where this is weak: {seeds}; Seesaw's equivalence is proved for SGD, and its Adam rule is the
paper's, not measured against the alternative here; the switch and the linear ramp keep the rate
that batch {first} chose, which suits Adam here (its optimum moves far less than the batch:
results/charlm) but is not chosen per batch; targets unreached by every seed of some batch size:
{unreached}; a reading window that straddles a switch mixes batch sizes; the catch-up's
jackknife interval over so few seeds is wide, cut at 0 where it would run below.
"""


# -- branched runs ------------------------------------------------------------------------------

def _local(pt: dict) -> str:
    """'>= 128' at a lower bound, else the value with its interval over seeds."""
    if pt["at_edge"]:
        return f">= {num(pt['local_b_crit'])}"
    ci = pt["local_b_crit_ci"]
    if not ci:
        return num(pt["local_b_crit"])
    agree = "every factor decided" if ci[0] == ci[1] else interval(ci)
    return f"{num(pt['local_b_crit'])} ({agree})"


def _overlap(a, b) -> bool:
    return bool(a and b) and a[0] <= b[1] and b[0] <= a[1]


def _branch(pt: dict, factor: int) -> dict | None:
    return next((b for b in pt["branches"] if b["factor"] == factor), None)


def _branch_seeds(analysis: dict) -> str:
    """'3 seeds': the base runs' seeds of a branch study."""
    seeds = (analysis.get("sweep") or {}).get("seeds") or (analysis["branching"].get("base") or {}).get("seeds")
    n = len(seeds) if isinstance(seeds, list) else seeds
    return "one seed" if n == 1 else f"{n} seeds"


def branch_charlm_fields(results: Path) -> dict:
    """The local critical batch size of charlm along training: its rise, and how firm it is."""
    a = _load(results / "branch_charlm" / "analysis.json")
    b = a["branching"]
    pts = b["points"]
    tol = f"{b['tolerance']:g}"
    loose = sorted({p["local_b_crit_by_tolerance"].get("0.1") for p in pts} - {None})
    edge = next((p for p in pts if p["at_edge"]), None)
    late = [x["ratio"] for x in pts[-1]["branches"] if x.get("ratio") and x["ratio"] < 1]
    simple_over_local = [1 / p["local_over_b_simple"] for p in pts[:2]]
    return dict(
        unit=b.get("unit", "examples"), base=num(b["base"]["batch_size"]), tol=tol,
        seeds=_branch_seeds(a),
        window=num(b["window"]), first=num(pts[0]["examples"]), second=num(pts[1]["examples"]),
        first_local=_local(pts[0]), second_local=_local(pts[1]),
        edge=(f"from {num(edge['examples'])} on every factor up to the largest "
              f"({num(edge['local_b_crit'])}) keeps within {tol}, so it is at least that"
              if edge else "no point reaches the largest factor"),
        overlap=("overlap" if _overlap(pts[0]["local_b_crit_ci"], pts[1]["local_b_crit_ci"])
                 else "do not overlap"),
        loose=", ".join(num(v) for v in loose),
        window_ratio=_x(b["window"] / pts[0]["examples"]),
        window_end=num(pts[0]["examples"] + b["window"]),
        simple_first=f"{num(pts[0]['b_simple'])} and {num(pts[1]['b_simple'])}",
        simple_ratio=span(simple_over_local, lambda v: f"{v:.2f}"),
        agree=("there the noise scale and the branches agree within 1.25x"
               if all(0.8 <= r <= 1.25 for r in simple_over_local)
               else "the noise scale and the branches differ there"),
        simple_last=num(pts[-1]["b_simple"]), last=num(pts[-1]["examples"]),
        late=(f"at {span(late, lambda v: f'{v:.2f}')} of its loss" if late
              else "none below the base's loss"),
    )


BRANCH_CHARLM = """\
**charlm (Adam, learning rate kept constant across batch sizes, base batch {base}
{unit}).** The local critical batch size is {first_local} at {first} {unit} into training
and {second_local} at {second}; {edge}. That reads as small at the start and rising, as
Merrill et al. report for OLMo, but weakly: the first two points' intervals {overlap}; at a
10% tolerance the value is {loose} at every point, so the rise appears only at {tol}; and the
window ({window} {unit}) is {window_ratio}x the first point, which therefore averages over
{first}-{window_end} {unit}. B_simple of the base is {simple_first} {unit} at the first two
points ({simple_ratio}x the local value: {agree}),
then rises only to {simple_last} by {last} while the local value passes the largest factor.
Late in training the branches do better than the base ({late}): at a constant learning rate a
larger batch simply carries less gradient noise, so "keeping up" there says the base's noise,
not its step count, limits it.
"""


def branch_mnist1d_fields(results: Path) -> dict:
    """The local critical batch size of mnist1d along training: flat, and its noise scale."""
    a = _load(results / "branch_mnist1d" / "analysis.json")
    b = a["branching"]
    pts = b["points"]
    base = b["base"]["batch_size"]
    values = sorted({p["local_b_crit"] for p in pts})
    at_base = [p for p in pts if p["local_b_crit"] == base]
    k2 = [_branch(p, 2)["ratio"] for p in at_base if _branch(p, 2)]
    k4 = [_branch(p, 4)["ratio"] for p in at_base if _branch(p, 4) and _branch(p, 4)["ratio"]]
    diverged = [f for f in sorted({x["factor"] for p in pts for x in p["branches"]})
                if all((_branch(p, f) or {}).get("ratio") is None for p in pts)]
    loose = sorted({p["local_b_crit_by_tolerance"].get("0.1") for p in pts} - {None})
    agreement = b.get("noise_scale_agreement") or {}
    return dict(
        base=num(base), values=" and ".join(num(v) for v in values), n_points=len(pts),
        seeds=_branch_seeds(a),
        wide=sum(1 for p in pts if p["local_b_crit_ci"]
                 and p["local_b_crit_ci"][1] >= 4 * p["local_b_crit_ci"][0]),
        at_base=", ".join(num(p["examples"]) for p in at_base) or "no point",
        k2=span(k2, lambda v: f"{v:.3f}"),
        k4=span(k4, lambda v: f"{v:.3f}"), tol=f"{b['tolerance']:g}",
        loose=", ".join(num(v) for v in loose),
        simple=f"{num(pts[0]['b_simple'])} to {num(pts[-1]['b_simple'])}",
        simple_rise=_x(pts[-1]["b_simple"] / pts[0]["b_simple"]),
        ratio=f"{agreement.get('ratio_max', 0):.2f} to {agreement.get('ratio_min', 0):.3f}",
        diverged=(f"k = {', '.join(map(str, diverged))} diverged at the rule's learning rate at "
                  "every point" if diverged else "no factor diverged at every point"),
        window=num(b["window"]), first=num(pts[0]["examples"]),
        window_ratio=_x(b["window"] / pts[0]["examples"]),
    )


BRANCH_MNIST1D = """\
**mnist1d MLP (momentum SGD, linear rule, base batch {base}).** No rise: over the
{n_points} points the local critical batch size takes only the values {values}, and equals
the base itself at {at_base} examples, where k = 2 ends at {k2} of the reference, just past
the tolerance of {tol} (k = 4 there: {k4}): one factor's noise past the tolerance is enough for
the "every smaller factor" rule to read a step. Read at a 10% tolerance it takes the values {loose}. B_simple rises {simple_rise}x
along training ({simple}), so local / B_simple falls from {ratio}; since the local value takes
so few values, no correlation with B_simple is worth quoting, but B_simple's rise is not
matched by the branches: here the noise scale does not predict the branched critical batch
size, as Merrill et al. found. The sweep's B_crit on the same task (results/mnist1d_mlp,
across targets, E_min / S_min) is well above the branched values; the definitions differ (a
loss penalty over one window against doubled steps to a target).

Where these are weak: {seeds}, so each factor's paired test (a branch against its own seed's
base) has few degrees of freedom and the intervals are wide (here {wide} of the {n_points}
points' intervals span 4x or more). They hold their level where a factor sits near the
tolerance, where the percentile bootstrap they replaced fell short (docs/analysis.md gives the
coverage of both, measured in tests/test_branch_intervals.py). One fixed window per study is long
against the earliest points ({window} examples for mnist1d, {window_ratio}x the {first} seen
at the first) and short against the last; {diverged}. With a
learning-rate grid instead of the rule's rate alone (`python experiments/run_study.py
branch_mnist1d "branch.lr_grid=[0.25,0.5,1.0]" --out /tmp/branch_grid`) every factor takes the
grid's smallest factor later in training: a window rewards the lower rate, which anneals the
loss at once, so the reading becomes one about annealing (the report flags it); the committed
study asks the plainer question, the rule's rate only.
"""

BRANCH_INTRO = """\
`python experiments/run_study.py branch_mnist1d` and `python experiments/run_study.py
branch_charlm`: a base run per seed ({seeds}), saved at points along training; from each point
branches at k x B0 train one window of examples at the rule's learning rate, and the local
critical batch size is the largest k x B0 whose every smaller factor ends the window within
the tolerance of the k = 1 reference ([docs/branching.md](../docs/branching.md)). Table above
(wall times there); the reports have each factor's loss ratio at every point.
"""


# -- Step Law -----------------------------------------------------------------------------------

def _inside(value: float, span) -> str:
    return "inside" if span[0] <= value <= span[1] else "outside"


def _log_corr(xs, ys) -> float:
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    sxy = sum((a - mx) * (b - my) for a, b in zip(lx, ly))
    return sxy / math.sqrt(sum((a - mx) ** 2 for a in lx) * sum((b - my) ** 2 for b in ly))


def steplaw_fields(results: Path) -> dict:
    """The imported Step Law runs: exponents against the paper's, and why the batch exponent
    depends on reading between grid points."""
    a = _load(results / "steplaw" / "analysis.json")
    fb, cells = a["fixed_budget"], a["fixed_budget"]["cells"]
    lr, bs = fb["laws"]["learning_rate"], fb["laws"]["batch_size"]
    alone = bs["alone"]["tokens"]
    per_example = a["manifest"]["tokens_per_example"]
    batches = sorted({p["batch_size"] for c in cells for p in c["per_batch"]})
    d_lo = min(c["tokens"] for c in cells)
    small = sorted(cells, key=lambda c: c["tokens"])[:4]
    large = sorted(cells, key=lambda c: c["tokens"])[-3:]
    sigma = [c["interval"]["sigma_log"] for c in cells]
    p = PUBLISHED
    ours = {"lr_n": lr["exponents"]["params"], "lr_d": lr["exponents"]["tokens"],
            "b_d": alone["exponent"]}
    predict = alone["coefficient"] * STEPLAW_PREDICT_D ** alone["exponent"]
    paper = p["steplaw_b_coefficient"] * STEPLAW_PREDICT_D ** p["steplaw_b_d"] / per_example
    return dict(
        cells=len(cells), runs=num(a["sweep"]["num_runs"]),
        n_lo=short_number(min(c["params"] for c in cells), 2),
        n_hi=short_number(max(c["params"] for c in cells), 2),
        d_lo=short_number(d_lo, 2), d_hi=short_number(max(c["tokens"] for c in cells), 2),
        per_example=num(per_example),
        sl_lr_n=p["steplaw_lr_n"], sl_lr_n_range=interval(p["steplaw_lr_n_range"]),
        sl_lr_d=p["steplaw_lr_d"], sl_lr_d_range=interval(p["steplaw_lr_d_range"]),
        sl_b_d=p["steplaw_b_d"], sl_b_d_range=interval(p["steplaw_b_d_range"]),
        sl_b_c=p["steplaw_b_coefficient"],
        lr_n=_exp(lr, "params"), lr_d=_exp(lr, "tokens"),
        b_d=f"{alone['exponent']:.3f} {interval(alone['exponent_ci'])}",
        b_d_value=f"{alone['exponent']:.3f}", n_sizes=len({c["params"] for c in cells}),
        am_lr_n=f"{lr['argmin']['exponents']['params']:.3f}",
        am_lr_d=f"{lr['argmin']['exponents']['tokens']:.3f}",
        am_b_d=f"{bs['argmin']['alone']['tokens']:.3f}",
        am_b_joint=f"{bs['argmin']['exponents']['tokens']:.3f}",
        b_joint=f"{bs['exponents']['tokens']:.3f}",
        medians_inside=sum(_holds(ci, p[k]) for k, ci in (
            ("steplaw_lr_n", lr["exponents_ci"]["params"]),
            ("steplaw_lr_d", lr["exponents_ci"]["tokens"]),
            ("steplaw_b_d", alone["exponent_ci"]))),
        lr_n_in=_inside(ours["lr_n"], p["steplaw_lr_n_range"]),
        lr_d_in=_inside(ours["lr_d"], p["steplaw_lr_d_range"]),
        b_d_in=_inside(ours["b_d"], p["steplaw_b_d_range"]),
        b_joint_in=_inside(bs["exponents"]["tokens"], p["steplaw_b_d_range"]),
        am_b_d_in=_inside(bs["argmin"]["alone"]["tokens"], p["steplaw_b_d_range"]),
        am_b_joint_in=_inside(bs["argmin"]["exponents"]["tokens"], p["steplaw_b_d_range"]),
        batches=", ".join(num(b) for b in batches),
        small_opt=span([c["optimum"]["batch_size"] for c in small]),
        small_best=", ".join(num(c["best"]["batch_size"]) for c in small),
        large_best=", ".join(num(c["best"]["batch_size"]) for c in large),
        large_opt=", ".join(num(c["optimum"]["batch_size"]) for c in large),
        coef_tokens=num(alone["coefficient"] * per_example, 2),
        predict_d=short_number(STEPLAW_PREDICT_D), predict=num(predict), paper_predict=num(paper),
        lr_n_alone=f"{lr['alone']['params']['exponent']:.3f}",
        corr=f"{_log_corr([c['params'] for c in cells], [c['tokens'] for c in cells]):.2f}",
        rms=f"{lr['rms_log_residual']:.2f}",
        bs_n=_exp(bs, "params"), bs_n_zero=_zero_clause(bs["exponents_ci"]["params"]),
        bootstrap=num(lr["bootstrap"]),
        sigma=f"{min(sigma):.2%} to {max(sigma):.2%}",
    )


STEPLAW = """\
[steplaw/](steplaw/report.md) holds {runs} runs of dense language models that Li et al.
(2025, "Predictable Scale: Part I", arXiv 2503.04715) released: the final smoothed training
loss over learning rate x batch size in {cells} cells (N {n_lo} to {n_hi} parameters, D {d_lo}
to {d_hi} tokens; the data and their source in [steplaw/data/README.md](steplaw/data/README.md)).
Imported as a table (batch sizes in sequences of {per_example} tokens) and analysed with the
fixed-budget view (the commands above). The exponents beside the paper's:

| exponent | paper: median [bootstrap range] | measured arg-min | optimum read between grid points [95% interval] |
|---|---|---|---|
| eta* on N | {sl_lr_n} {sl_lr_n_range} | {am_lr_n} | {lr_n} |
| eta* on D | {sl_lr_d} {sl_lr_d_range} | {am_lr_d} | {lr_d} |
| B* on D (D alone) | {sl_b_d} {sl_b_d_range} | {am_b_d} | {b_d} |

The paper's medians lie inside this project's own 95% intervals for {medians_inside} of the three
exponents. Against the paper's bootstrap ranges, read between grid points: eta* on N is
{lr_n_in}, eta* on D {lr_d_in}; B* on D depends on the reading: the D-alone parabola fit is
{b_d_in}, the joint parabola fit ({b_joint}) {b_joint_in}, the D-alone arg-min ({am_b_d})
{am_b_d_in} and the joint arg-min ({am_b_joint}) {am_b_joint_in}. The parabola is preferred
for the grid's rounding at both ends (next point), an argument made after seeing the arg-min.

- **The batch exponent is where reading between grid points matters.** The batch sizes tried
  differ per cell and are coarse at their ends (over all cells: {batches}). The four
  smallest-budget cells have their optima at {small_opt} sequences, and the arg-min answers
  {small_best}; the three largest budgets, in order of D, answer {large_best} where the
  optima lie at {large_opt}. Rounding onto the grid moves each end by up to a grid step,
  enough to move the arg-min's slope ({am_b_d}) away from the parabola's ({b_d_value}). In
  tokens the D-alone law is B_opt = {coef_tokens} D^{b_d_value}, against the paper's {sl_b_c} D^{sl_b_d}: at D = {predict_d}
  they predict {predict} and {paper_predict} sequences.
- **The learning-rate exponents barely move** between the arg-min and the parabola: the
  learning rates tried are evenly spaced in log in every cell, so the arg-min's rounding does
  not grow or shrink with N or D. The N exponent's distance from the paper's median is
  therefore not the grid: one least-squares fit over the cells (rms {rms} in log eta* about
  it) gives {lr_n}; fitting eta* on N alone gives {lr_n_alone}; N and D are correlated across
  the cells ({corr} in logs), so how a fit splits the trend between them moves this exponent,
  and the data do not pin it closer than the interval says.
- **B_opt and N.** Fitted on both variables, B_opt goes with N at fixed D as N^{bs_n} (the
  interval {bs_n_zero}); the paper and Power Lines (Bergsma et al. 2025) write B* as a
  function of D alone. With {n_sizes} model sizes and intervals this wide, we read it as a hint,
  not a finding.
- **Intervals.** The data hold one run per point, so there are no seeds to resample. Each
  bootstrap draw ({bootstrap}) resamples the cells with replacement and, within each drawn
  cell, adds log-normal noise to every point with the spread its own landscape shows: the rms
  residual of log loss about a quadratic in log lr through each batch size's best five points,
  {sigma} of the loss across the cells (misfit of the quadratic counts as noise, so this errs
  wide).
"""


def _prefixed(template: str, prefix: str) -> str:
    """A template whose fields are renamed with a prefix, so two studies' templates with the
    same field names (seeds, base, tol) share one section."""
    return template.replace("{", "{" + prefix)


# -- the registry -------------------------------------------------------------------------------

SECTIONS = (
    Section("Our own scaling laws: charlm with Adam over widths and budgets",
            ("scale_charlm/analysis.json",), scale_charlm_fields, SCALE_CHARLM),
    Section("The GPT family over widths and budgets: scale_gpt", ("scale_gpt/analysis.json",),
            scale_gpt_fields, SCALE_GPT),
    Section("The first grid from neighbours: the quickstart both ways",
            ("quickstart/analysis.json", "quickstart_neighbours/analysis.json",
             "coverage/coverage.json", "coverage_neighbours/coverage.json",
             "coverage_neighbours_own/coverage.json"),
            neighbours_fields, NEIGHBOURS),
    Section("Adam's optimum over batch size: adam_surge", ("adam_surge/analysis.json",),
            adam_surge_fields, ADAM_SURGE),
    Section("Adam's beta2 over batch size: adam_beta2", ("adam_beta2/analysis.json",),
            adam_beta2_fields, ADAM_BETA2),
    Section("What the branched runs show, against Merrill et al. (2025)",
            ("branch_charlm/analysis.json", "branch_mnist1d/analysis.json"),
            lambda r: {**branch_charlm_fields(r), **{f"m_{k}": v for k, v in
                                                     branch_mnist1d_fields(r).items()}},
            BRANCH_INTRO + "\n" + BRANCH_CHARLM + "\n" + _prefixed(BRANCH_MNIST1D, "m_")),
    Section("What the schedules show, against Smith et al. (2018) and Merrill et al. (2025)",
            ("schedules_mnist1d/analysis.json", "schedules_charlm/analysis.json"),
            schedules_fields, SCHEDULES),
    Section("Batch ramps under a cosine decay, against the fixed batch sizes: mnist1d",
            ("ramps_mnist1d/analysis.json",), ramps_mnist1d_fields, RAMPS),
    Section("Batch ramps under a cosine decay, against the fixed batch sizes: charlm",
            ("ramps_charlm/analysis.json", "ramps_charlm/arithmetic.json"), ramps_charlm_fields,
            RAMPS_CHARLM),
    Section("Batch ramps against a learning-rate decay: the NQM in closed form",
            ("seesaw_nqm/table.json",), seesaw_fields, SEESAW),
    Section("Many budgets from one run: cooldown branches on charlm",
            ("cooldowns_charlm/comparison.json", "cooldowns_charlm/analysis.json"),
            _cooldowns_fields, COOLDOWNS),
    Section("Your own files: digits through task `arrays`", ("digits_arrays/analysis.json",),
            digits_fields, DIGITS),
    Section("The Step Law runs at a fixed budget, against Li et al. (2025)",
            ("steplaw/analysis.json",), steplaw_fields, STEPLAW),
)


WIDTH = 96


def _wrap(text: str) -> list[str]:
    """Re-fill the text once its fields are in (a field's length is not known to the
    template): paragraphs and bullet items to WIDTH columns, tables and blank lines kept."""
    lines, block = [], []

    def flush():
        if block:
            bullet = block[0].startswith("- ")
            lines.extend(textwrap.wrap(" ".join(part.strip() for part in block), WIDTH,
                                       subsequent_indent="  " if bullet else "",
                                       break_long_words=False, break_on_hyphens=False))
            block.clear()
    for line in text.split("\n"):
        if not line.strip() or line.startswith("|") or line.startswith("- "):
            flush()
            if not line.startswith("- "):
                lines.append(line)
                continue
        block.append(line)
    flush()
    return lines


def render_section(section: Section, results: Path) -> list[str]:
    """A section's heading and text, or nothing when a file it reads is missing."""
    if not all((results / need).is_file() for need in section.needs):
        return []
    text = section.template.format(**section.fields(results)).rstrip("\n")
    return ["", f"## {section.title}", "", *_wrap(text)]


def sections(results: Path) -> list[str]:
    """Every discussion section whose files are present, in SECTIONS order."""
    return [line for s in SECTIONS for line in render_section(s, results)]
