"""Coverage of the B_crit intervals against the noisy quadratic model's closed form.

An interval is a claim about repeated experiments: rerun the sweep with new seeds and the truth
falls inside at the nominal level. On the NQM the truth is known (the closed form's B_crit at
each batch size's optimal constant learning rate, scaling.analysis.nqm_reference), so the claim
is tested directly. Per spectrum one sweep as a user runs it (batch sizes 2..512, a coarse
first grid of five rates half a decade apart, the learning-rate search and the stopping of
dominated runs, the default reading) trains SEEDS seeds; the seeds are then cut into disjoint
groups of 3 (and of 1), and each group is analysed as its own folder would be, by every
interval method and learning-rate selection. Per spectrum, target, group size, method and
selection: the share of nominal-95% intervals that hold the truth, their median width against
the replicates' own 95% spread, and the point estimate's median ratio to the truth. One
partition of the seeds into groups is one draw of that spread; the default reading is also
measured over SUBSETS random 3-seed subsets of the same seeds, which average over partitions.

    python experiments/coverage.py                  # about 15 min on 2 cores
    python experiments/coverage.py --spectra noise  # one spectrum
    python experiments/coverage.py --seeds 12       # a quick look (4 groups of 3)
    python experiments/coverage.py --render         # report.md again from coverage.json
    python experiments/coverage.py --first-grid neighbours --out results/coverage_neighbours
                                                    # the first grid from neighbours
    python experiments/coverage.py --first-grid neighbours --own-search \
        --out results/coverage_neighbours_own       # each 3-seed group searching on its own

Writes results/coverage/{coverage.json, report.md}; the run files stay under
results/coverage/<spectrum>/runs (not committed; a rerun resumes them and only analyses).
The search of one sweep sees all its seeds, so the rates each group chooses among were placed
by more seeds than a 3-seed sweep's own search would use: the groups share one set of rates.
With --own-search each group of 3 seeds runs a sweep of its own instead (out/<spectrum>/group-<g>),
as a user's 3-seed sweep would: 32 sweeps per spectrum.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from pathlib import Path

import jax
import numpy as np
import yaml

from scaling import config as config_mod, store
from scaling.analysis import intervals
from scaling.analysis.analyze import clipped_reading, sweep_reading
from scaling.analysis.fit import fit_with_interval
from scaling.analysis.nqm_reference import closed_form_b_crit, steps_to_target
from scaling.analysis.points import best_point
from scaling.analysis.table import LRCurve, lr_curves, run_table
from scaling.config.names import FIRST_GRIDS, LR_SELECTIONS
from scaling.config.schema import AnalysisConfig
from scaling.formatting import span
from scaling.sweep import runner
from scaling.tasks.nqm import spectra, trained_spectra

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "coverage"
SIZES = [2, 4, 8, 16, 32, 64, 128, 256, 512]
FIRST_GRID = [0.01, 0.0316228, 0.1, 0.316228, 1.0]
MAX_STEPS = 3000
EVAL_EVERY = 10  # plus 20 points per decade: the reading's resolution at a tenth of the rows
SEEDS = 96
GROUP_SIZES = (3, 1)
SEED_BLOCKS = 8  # the subsets' interval: a jackknife leaving out a block of seeds at a time
SUBSET_STREAM = 7  # the random subsets' own generator, apart from the groups' draws
OWN_GROUP = 3  # --own-search: the seeds of each group's own sweep
BOOTSTRAP = 400  # percentile draws per group
SUBSETS = 960  # random 3-seed subsets per spectrum, the default reading only
SPREAD_DRAWS = 2000  # bootstrap draws of the groups for the width ratio's interval
DEFAULT_SELECTION = AnalysisConfig.lr_selection
# Curvature h_i = i^-h_power, per-example noise variance c_i = c_scale i^-c_power; targets as
# fractions of the starting loss.
SPECTRA = {
    "noise": ({"dim": 100, "h_power": 1.0, "c_power": 1.0}, (0.2, 0.1, 0.05),
              "h = c = 1/i: the noise sits in the first coordinates"),
    "peaked": ({"dim": 100, "h_power": 1.0, "c_power": 2.0}, (0.2, 0.1, 0.05),
               "h = 1/i, c = 1/i^2: nearly all the noise in the first coordinate"),
    "spread": ({"dim": 200, "h_power": 0.8, "c_power": 0.0, "c_scale": 0.03}, (0.1, 0.05, 0.02),
               "h = i^-0.8, c = 0.03: the noise spread over every coordinate"),
    "precond": ({"dim": 100, "h_power": 1.0, "c_power": 1.0, "precondition_power": 0.5},
                (0.2, 0.1, 0.05), "h = c = 1/i trained preconditioned by h^-1/2"),
}


def sweep_config(name: str, seeds: int, first_grid: str = "grid",
                 first_seed: int = 0) -> config_mod.Config:
    """The sweep as a user runs it on one spectrum, on `seeds` seeds from `first_seed`: the
    defaults but for the grid and budget (and `first_grid`, learning_rate.first_grid)."""
    task, _, _ = SPECTRA[name]
    return config_mod.from_dict({
        "name": f"coverage-{name}", "task": {"name": "nqm", "draw": "means", **task},
        "optimizer": {"name": "sgd"}, "schedule": {"name": "constant"},
        "batch": {"sizes": SIZES}, "budget": {"max_steps": MAX_STEPS},
        "learning_rate": {"values": FIRST_GRID, "first_grid": first_grid},
        "targets": target_names(name),
        "eval": {"every": EVAL_EVERY, "points_per_decade": 20}, "train": {"chunk_steps": 500},
        "parallel": {"data": 1, "runs": jax.device_count()}, "gns": {"enabled": False},
        "seeds": list(range(first_seed, first_seed + seeds))})


def _targets(name: str) -> list[float]:
    """A spectrum's target losses: fractions of E[L_0] = 1/2 sum h_i (init_scale 1)."""
    task, fractions, _ = SPECTRA[name]
    h, _ = spectra(config_mod.from_dict({"task": {"name": "nqm", **task}, "budget": {
        "max_steps": 1}, "learning_rate": {"values": [0.1]}}).task.options)
    return [f * 0.5 * float(np.sum(h)) for f in fractions]


def target_names(name: str) -> list[str]:
    return [f"eval_loss<={v:.6g}" for v in _targets(name)]


def truths(name: str) -> list[float | None]:
    """The closed form's B_crit per target at each batch size's optimal constant rate."""
    options = sweep_config(name, 1).task.options
    return [closed_form_b_crit(options, SIZES, v, MAX_STEPS)["b_crit"] for v in _targets(name)]


def exact_on_rates(name: str, table: list[dict], value: float) -> float | None:
    """B_crit read as the analysis reads it (the best rate and the parabola through its
    neighbours, then the fit) from the closed form's expected steps at the rates the sweep
    tried: what the grid and search leave of the truth before any noise."""
    options, points, stable = sweep_config(name, 1).task.options, [], 2.0 / _max_curvature(name)
    for size in SIZES:
        lrs = sorted({r["learning_rate"] for r in table if r["batch_size"] == size})
        steps = [np.array([math.nan if lr >= stable else
                           _none_nan(steps_to_target(options, lr, size, value, MAX_STEPS))])
                 for lr in lrs]
        nan = [np.full(1, math.nan) for _ in lrs]
        curve = LRCurve(lrs=lrs, steps=steps, examples=steps, b_simple=nan, b_noise=nan,
                        b_simple_precond=nan, diverged=[lr >= stable for lr in lrs])
        if (point := best_point(size, [curve])) is not None and point["steps"] > 0:
            points.append(point)
    fit = fit_with_interval({}, points, 0, np.random.default_rng(0))
    return fit and fit["b_crit"]


def _max_curvature(name: str) -> float:
    h, _, _ = trained_spectra(sweep_config(name, 1).task.options)
    return float(h.max())


def _none_nan(value: float | None) -> float:
    return math.nan if value is None else value


def measure(table: list[dict], target: str, seeds: list[int], how: str, method: str,
            rng: np.random.Generator, bootstrap: int = BOOTSTRAP) -> dict:
    """One group analysed as its own folder: B_crit, its interval and its identification."""
    group = set(seeds)
    by_size = lr_curves([r for r in table if r["seed"] in group], target)
    points = [p for b, g in by_size.items()
              if (p := best_point(b, g, how, bootstrap, rng, True, method)) is not None]
    fit = fit_with_interval(by_size, [p for p in points if p["steps"] > 0], bootstrap, rng,
                            how, method)
    if fit is None:
        return {"b_crit": None, "ci": None, "identified": False, "why": "not fitted"}
    return {"b_crit": _round(fit["b_crit"]), "ci": fit["b_crit_ci"] and
            [_round(v) for v in fit["b_crit_ci"]], "identified": fit["identification"]["identified"],
            "why": fit["interval"]["why"]}


def _round(value: float) -> float:
    return float(f"{value:.5g}")


def plans(name: str, seeds: int, out: Path, first_grid: str, own: bool
          ) -> list[tuple[Path, config_mod.Config]]:
    """The sweeps of one spectrum as (folder, config): one of every seed in `out`, or with `own`
    one per group of OWN_GROUP seeds (out/group-<g>), each placing its rates by its own search
    as a user's sweep of that many seeds does."""
    if not own:
        return [(out, sweep_config(name, seeds, first_grid))]
    return [(out / f"group-{g}", sweep_config(name, OWN_GROUP, first_grid, g * OWN_GROUP))
            for g in range(seeds // OWN_GROUP)]


def trained(name: str, seeds: int, out: Path, first_grid: str, own: bool
            ) -> tuple[list[dict], list[dict]]:
    """(records, run table) of one spectrum, its sweeps (`plans`) trained or resumed."""
    records, table, sweeps = [], [], plans(name, seeds, out, first_grid, own)
    for i, (folder, cfg) in enumerate(sweeps):
        runner.run(cfg, folder, quiet=True)
        mine = store.load(folder)
        records += mine
        config = yaml.safe_load((folder / "sweep.yaml").read_text())
        table += run_table(mine, target_names(name), sweep_reading(folder),
                           clip=clipped_reading(config, mine))
        if own:
            print(f"{name}: group {i + 1} of {len(sweeps)} trained", file=sys.stderr, flush=True)
    return records, table


def study(name: str, seeds: int, root: Path | None = None, first_grid: str = "grid",
          own: bool = False) -> dict:
    """Train (or resume) one spectrum's sweep, or with `own` each group's (`trained`), under
    `root` (default OUT) and analyse every group of its seeds. With `own` the rates differ
    between groups, so no reading of every seed at once is made."""
    records, table = trained(name, seeds, (root or OUT) / name, first_grid, own)
    rows, rng = [], np.random.default_rng(0)
    for size in GROUP_SIZES:
        methods = intervals.METHODS if size > 1 else (intervals.DEFAULT_METHOD,)
        for g, (ti, target), how, method in itertools.product(
                range(seeds // size), enumerate(target_names(name)), LR_SELECTIONS, methods):
            if size == 1 and how != "min":
                continue  # with one seed crossfit is min
            rows.append({"group_size": size, "group": g, "target": ti, "selection": how,
                         "method": method, **measure(table, target, list(range(g * size,
                                                                            (g + 1) * size)),
                                                      how, method, rng)})
    every = list(range(seeds))
    return {"spectrum": name, "about": SPECTRA[name][2], "targets": target_names(name),
            "first_grid": first_grid, "own_search": own,
            "truth": truths(name), "runs": len(records), "seeds": seeds,
            "exact_on_rates": [exact_on_rates(name, table, v) for v in _targets(name)],
            "all_seeds": [None if own else measure(table, t, every, "min",
                                                   intervals.DEFAULT_METHOD, rng, 0)["b_crit"]
                          for t in target_names(name)],
            "train_s": round(store.training_seconds(records), 1),
            "examples": int(sum(r["summary"]["examples"] for r in records)), "rows": rows,
            "subsets": [] if own else subset_rows(table, name, seeds, SUBSETS)}


def subset_rows(table: list[dict], name: str, seeds: int, num: int) -> list[dict]:
    """The default reading of `num` random 3-seed subsets of the sweep's seeds (seeded), one row
    per subset and target. 32 disjoint groups give one partition of the seeds, and their spread
    moves with it (a partition whose groups happen to agree reads the spread low); the subsets,
    each a 3-seed experiment of its own, average over the partitions. They overlap, so their
    shares carry no binomial interval."""
    rng = np.random.default_rng(SUBSET_STREAM)
    rows = []
    for i in range(num):
        chosen = sorted(int(v) for v in rng.choice(seeds, GROUP_SIZES[0], replace=False))
        for ti, target in enumerate(target_names(name)):
            rows.append({"subset": i, "seeds": chosen, "target": ti,
                         **measure(table, target, chosen, DEFAULT_SELECTION,
                                   intervals.DEFAULT_METHOD, rng)})
    return rows


def seed_blocks_interval(rows: list[dict], statistic, seeds: int, blocks: int = SEED_BLOCKS
                         ) -> list[float] | None:
    """A 95% interval of `statistic` over the subsets `rows`, from the seeds: the grouped
    jackknife that leaves out, in turn, each of `blocks` blocks of consecutive seeds (and every
    subset holding one of them), +- t(blocks - 1) se. The subsets' figures rest on one draw of
    `seeds` seeds; this is how far another draw would move them."""
    size = seeds // blocks
    values = []
    for b in range(blocks):
        left = set(range(b * size, (b + 1) * size))
        value = statistic([r for r in rows if not left & set(r["seeds"])])
        if value is None:
            return None
        values.append(value)
    values = np.array(values)
    se = math.sqrt((blocks - 1) / blocks * float(np.sum((values - values.mean()) ** 2)))
    centre = statistic(rows)
    return [centre - intervals.t975(blocks - 1) * se, centre + intervals.t975(blocks - 1) * se]


def subset_cells(result: dict) -> list[dict]:
    """Per target over the random subsets: coverage, the median width over their sd spread, the
    median ratio to the truth, and the sd of log B_crit over the subsets beside the disjoint
    groups' (the default cell's)."""
    out = []
    for ti, target in enumerate(result["targets"]):
        rows, truth = [r for r in result.get("subsets", []) if r["target"] == ti], \
            result["truth"][ti]
        groups = [r for r in result["rows"] if r["target"] == ti and r["group_size"] == 3
                  and r["selection"] == DEFAULT_SELECTION
                  and r["method"] == intervals.DEFAULT_METHOD]
        if not rows or not truth:
            continue
        sd = lambda rs: float(np.std(np.log([r["b_crit"] for r in rs if r["b_crit"]]), ddof=1))
        ratio = lambda rs: width_over_sd(rs, draws=0)["width_over_sd"]
        held = lambda rs: _share(_holds([r["ci"] for r in rs if r["ci"]], truth))
        out.append({"target": target, "subsets": len(rows), "width_over_sd": ratio(rows),
                    "width_over_sd_ci": seed_blocks_interval(rows, ratio, result["seeds"]),
                    "coverage": held(rows),
                    "coverage_ci": seed_blocks_interval(rows, held, result["seeds"]),
                    "median_ratio": float(np.median([r["b_crit"] / truth for r in rows
                                                     if r["b_crit"]])),
                    "sd_log": sd(rows), "sd_log_groups": sd(groups) if groups else None})
    return out


def summary(rows: list[dict], truth: float) -> dict:
    """Coverage, widths and bias of one cell's groups (rows: one per group)."""
    values = np.array([r["b_crit"] or math.nan for r in rows])
    ratios = values / truth
    cis = [r["ci"] for r in rows if r["ci"]]
    spread = np.percentile(values[np.isfinite(values)], [2.5, 97.5]) \
        if np.isfinite(values).sum() > 1 else [math.nan, math.nan]
    widths = [hi - lo for lo, hi in cis]
    return {"groups": len(rows), "fitted": int(np.isfinite(values).sum()),
            "with_interval": len(cis), "width_dof": width_dof(cis),
            "coverage": _share(_holds(cis, truth)),
            "coverage_ci": wilson(_holds(cis, truth)) if cis else None,
            "median_width_over_spread": (float(np.median(widths) / (spread[1] - spread[0]))
                                         if cis and spread[1] > spread[0] else None),
            **width_over_sd(rows),
            "median_ratio": float(np.nanmedian(ratios)) if np.isfinite(ratios).any() else None,
            "ratio_10_90": ([float(v) for v in np.nanpercentile(ratios, [10, 90])]
                            if np.isfinite(ratios).any() else None),
            "identified": int(sum(r["identified"] for r in rows))}


def _holds(cis: list[list[float]], truth: float) -> list[bool]:
    """Whether each interval holds the truth."""
    return [lo <= truth <= hi for lo, hi in cis]


def _share(held: list[bool]) -> float | None:
    """The share of intervals that held the truth (None without any)."""
    return float(np.mean(held)) if held else None


def wilson(held: list[bool]) -> list[float]:
    """Wilson's 95% interval of the share of groups whose interval held the truth: with 32
    groups a share of 94% is known to about [80%, 98%]."""
    n, share, z = len(held), float(np.mean(held)), 1.96
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n))
    return [max(0.0, centre - half), min(1.0, centre + half)]


def _over_sd(log_values: np.ndarray, log_widths: np.ndarray) -> float:
    """Median log width over 2 x 1.96 x the sd of log B_crit across the groups."""
    sd = float(np.std(log_values, ddof=1))
    return float(np.median(log_widths) / (2 * 1.96 * sd)) if sd > 0 else math.nan


def width_over_sd(rows: list[dict], draws: int = SPREAD_DRAWS) -> dict:
    """The median width against the groups' spread read from their sd (log scale), unbiased
    for normal values where the 2.5-97.5% percentiles of 32 groups read about 0.89x the
    population's spread (`percentile_spread_bias`); with its 95% interval over the groups
    resampled (`draws` bootstrap draws, seeded): the groups are few, so the ratio is uncertain
    too. Groups fitted without an interval count in neither."""
    keep = [(r["b_crit"], r["ci"]) for r in rows if r["b_crit"] and r["ci"]
            and r["ci"][0] > 0 and r["ci"][1] > r["ci"][0]]
    if len(keep) < 3:
        return {"width_over_sd": None, "width_over_sd_ci": None}
    logs = np.log([v for v, _ in keep])
    widths = np.log([hi / lo for _, (lo, hi) in keep])
    picks = np.random.default_rng(0).integers(0, len(keep), (draws, len(keep)))
    boot = np.array([_over_sd(logs[i], widths[i]) for i in picks]).reshape(-1)
    boot = boot[np.isfinite(boot)]
    est = _over_sd(logs, widths)
    return {"width_over_sd": est if math.isfinite(est) else None,
            "width_over_sd_ci": ([float(v) for v in np.percentile(boot, [2.5, 97.5])]
                                 if boot.size else None)}


def percentile_spread_bias(groups: int, draws: int = 20000) -> float:
    """The mean, over normal samples of `groups` values (seeded), of their 2.5-97.5% percentile
    spread over the population's (2 x 1.96 sd): how low that spread reads with few groups."""
    x = np.random.default_rng(0).standard_normal((draws, groups))
    lo, hi = np.percentile(x, [2.5, 97.5], axis=1)
    return float(np.mean(hi - lo) / (2 * 1.96))


def width_dof(cis: list[list[float]]) -> float | None:
    """How many degrees of freedom the intervals' variance estimate carries, measured across the
    groups: 2 / CV^2 of the squared half-widths on the log scale (a variance estimate with nu
    degrees of freedom, scaled chi-square, has CV^2 = 2 / nu). A method that counts more
    degrees of freedom than this takes too small a t quantile and under-covers."""
    half = np.array([math.log(hi / lo) / 2 for lo, hi in cis if lo > 0 and hi > lo]) ** 2
    if len(half) < 3 or half.var() == 0:
        return None
    return float(2 * half.mean() ** 2 / half.var())


def cells(result: dict) -> list[dict]:
    """Per target, group size, selection and method: summary() of its groups."""
    out = []
    keys = sorted({(r["target"], r["group_size"], r["selection"], r["method"])
                   for r in result["rows"]}, key=lambda k: (k[0], -k[1], k[2], k[3]))
    for ti, size, how, method in keys:
        rows = [r for r in result["rows"] if (r["target"], r["group_size"], r["selection"],
                                              r["method"]) == (ti, size, how, method)]
        truth = result["truth"][ti]
        if truth:
            out.append({"target": result["targets"][ti], "truth": truth, "group_size": size,
                        "selection": how, "method": method, **summary(rows, truth)})
    return out


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _covered(cell: dict) -> str:
    """A cell's coverage with its 95% interval, within 0-100%: '94% [80%, 98%]'."""
    ci = cell.get("coverage_ci")
    return (f"{_pct(cell['coverage'])} [{max(0.0, ci[0]):.0%}, {min(1.0, ci[1]):.0%}]"
            if ci and cell["coverage"] is not None else _pct(cell["coverage"]))


def _over(cell: dict) -> str:
    """A cell's width over its sd spread with its interval: '2.02 [1.61, 2.55]'."""
    ci = cell.get("width_over_sd_ci")
    value = _num(cell.get("width_over_sd"))
    return f"{value} [{_num(ci[0])}, {_num(ci[1])}]" if ci and value != "-" else value


def _num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


DEFAULT_COMMAND = "python experiments/coverage.py"
FIRST_GRID_TEXT = {
    "grid": "every batch size's (learning_rate.first_grid: grid)",
    "neighbours": "the middle batch size's only; the others start from 3 rates around the "
                  "optima their searched neighbours predict (learning_rate.first_grid: "
                  "neighbours), placed by every seed of the sweep, as the rounds are"}

OWN_TEXT = (f"; here every group of {OWN_GROUP} seeds ran a sweep of its own, so its rates are "
            "those its own search placed (--own-search); a 1-seed group is one seed of those "
            "sweeps")


def markdown(results: list[dict]) -> str:
    """The report, from each spectrum's result with its `cells` filled in."""
    command = results[0].get("command", DEFAULT_COMMAND) if results else DEFAULT_COMMAND
    lines = ["# Coverage of the B_crit intervals against the closed form", "",
             f"Generated by `{command}`. Per spectrum one NQM sweep with SGD "
             f"as a user runs it: batch sizes {SIZES[0]}..{SIZES[-1]}, a first grid of "
             f"{len(FIRST_GRID)} rates {FIRST_GRID[0]:g}..{FIRST_GRID[-1]:g}, the learning-rate "
             f"search and the stopping of dominated runs on, at most {MAX_STEPS:,} steps, the "
             "default reading; its seeds cut into disjoint groups, each analysed as a folder of "
             "its own. Truth: the closed form's B_crit at each batch size's optimal constant "
             "learning rate. Coverage: the share of nominal-95% intervals that hold the truth "
             "[Wilson's 95% interval over the groups]; width / spread: the median interval width "
             "over the groups' own 2.5-97.5% spread of B_crit; width / sd spread: the median "
             "width over 2 x 1.96 x the groups' sd, both on the log scale [95% over the groups "
             "resampled]; "
             "ratio: the median B_crit over the truth [10th, 90th percentile]; width dof: the "
             "degrees of freedom the intervals' variance carries, measured across the groups "
             "(2 / CV^2 of the squared half-widths, log scale).", ""] + width_lines(results)
    for res in results:
        lines += [f"## {res['spectrum']}: {res['about']}", "",
                  f"{res['seeds']} seeds, {res['runs']:,} runs, {res['examples']:,} examples, "
                  f"training {res['train_s'] / 60:.1f} min; first grid: "
                  f"{FIRST_GRID_TEXT[res.get('first_grid', 'grid')]}"
                  f"{OWN_TEXT if res.get('own_search') else ''}.", ""] + bias_lines(res) + [
                  "",
                  "| target | truth | seeds per group | selection | interval | groups | "
                  "coverage | width / spread | width / sd spread | width dof | ratio to truth | "
                  "identified |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for c in res["cells"]:
            ratio = (f"{_num(c['median_ratio'], 3)} [{_num(c['ratio_10_90'][0])}, "
                     f"{_num(c['ratio_10_90'][1])}]" if c["ratio_10_90"] else "-")
            method = c["method"] if c["with_interval"] else "none"
            lines.append(f"| {c['target']} | {c['truth']:.4g} | {c['group_size']} | "
                         f"{c['selection']} | {method} | {c['groups']} | {_covered(c)} | "
                         f"{_num(c['median_width_over_spread'])} | {_over(c)} | "
                         f"{_num(c['width_dof'], 1)} | "
                         f"{ratio} | "
                         f"{c['identified']} of {c['groups']} |")
        lines += [""] + subset_lines(res)
    return "\n".join(lines)


def subset_lines(res: dict) -> list[str]:
    """The default reading over random 3-seed subsets (`subset_cells`), where there are any."""
    found = res.get("subset_cells") or []
    if not found:
        return []
    lines = [f"Over {found[0]['subsets']} random 3-seed subsets of the {res['seeds']} seeds "
             f"({DEFAULT_SELECTION} selection, {intervals.DEFAULT_METHOD} intervals; the "
             "subsets overlap, so their shares carry no binomial interval; the 95% intervals "
             f"leave out each of {SEED_BLOCKS} blocks of seeds in turn, a grouped "
             "jackknife):", "",
             "| target | coverage | width / sd spread | ratio to truth (median) | "
             "sd of log B_crit: subsets | disjoint groups |", "|---|---|---|---|---|---|"]
    for c in found:
        lines.append(f"| {c['target']} | {_covered(c)} | {_over(c)} | "
                     f"{_num(c['median_ratio'], 3)} | {_num(c['sd_log'], 3)} | "
                     f"{_num(c['sd_log_groups'], 3)} |")
    return lines + [""]


def subsets_sentence(results: list[dict]) -> str:
    """The default reading's width and coverage over the random subsets, every spectrum and
    target, where measured."""
    found = [c for res in results for c in res.get("subset_cells") or []
             if c["width_over_sd"] is not None]
    if not found:
        return ""
    ends = lambda key, fmt: span([c[key] for c in found], lambda v: format(v, fmt))
    return (f"One partition into groups is one draw of the spread; over "
            f"{found[0]['subsets']} random 3-seed subsets of the same seeds, which average over "
            f"the partitions, its width is {ends('width_over_sd', '.2f')}x the sd spread "
            f"(the largest upper end of their intervals "
            f"{max(c['width_over_sd_ci'][1] for c in found if c['width_over_sd_ci']):.2f}x) "
            f"and its coverage {ends('coverage', '.0%')}. ")


def width_lines(results: list[dict], seeds: int = 3) -> list[str]:
    """Why the median width cannot come under about 2x the spread with `seeds` seeds, from the
    widths' measured degrees of freedom: each method's range over every spectrum and target
    (the default selection), against the floor of a valid interval on that many seeds."""
    def over(method: str, key: str, fmt: str) -> str:
        return span([c[key] for res in results for c in res["cells"]
                     if c["group_size"] == seeds and c["method"] == method
                     and c["selection"] == DEFAULT_SELECTION and c[key] is not None],
                    lambda v: format(v, fmt))
    jack, pooled = intervals.DEFAULT_METHOD, "pooled"
    groups, bias = results[0]["seeds"] // seeds, results[0]["percentile_spread_bias"]
    floor = intervals.width_floor(seeds)
    return [f"Width with {seeds} seeds: an interval whose variance rests on {seeds} seeds alone "
            f"has {seeds - 1} degrees of freedom, so it takes t({seeds - 1}) = "
            f"{intervals.t975(seeds - 1):.2f} standard errors each side, and with the standard "
            f"error estimated without bias its median width is "
            f"{floor:.2f}x the replicates' 95% spread. Read against the "
            f"2.5-97.5% percentiles of {groups} groups, which average "
            f"{bias:.2f}x the population's spread for normal values, "
            f"that floor reads {floor / bias:.2f}x; against the "
            f"groups' sd, {floor:.2f}x. The {jack} is "
            f"such an interval: its width's measured degrees of freedom "
            f"{over(jack, 'width_dof', '.1f')}, width "
            f"{over(jack, 'median_width_over_spread', '.2f')}x the percentile spread and "
            f"{over(jack, 'width_over_sd', '.2f')}x the sd spread, coverage "
            f"{over(jack, 'coverage', '.0%')} ({DEFAULT_SELECTION} selection, every spectrum and "
            f"target). {subsets_sentence(results)}Only an interval that borrows degrees of "
            f"freedom across batch sizes can be narrower: the {pooled} one counts each batch "
            f"size's seeds as independent (Satterthwaite), but the seeds are shared by every "
            f"batch size, so its variance carries {over(pooled, 'width_dof', '.1f')} degrees of "
            f"freedom across the groups, not the count it assumes, and it holds "
            f"{over(pooled, 'coverage', '.0%')} at width "
            f"{over(pooled, 'median_width_over_spread', '.2f')}x the percentile spread.", ""]


def _median(values: list[float | None]) -> float | None:
    """The median of the values fitted (None where none was)."""
    kept = [v for v in values if v]
    return float(np.median(kept)) if kept else None


def bias_lines(res: dict) -> list[str]:
    """Where a bias comes from, per target: the grid and search (the closed form read at the
    rates tried, as the analysis reads them), the reading (every seed at once against that),
    and the selection over few seeds (the 3-seed and 1-seed groups' medians against every
    seed's)."""
    lines = ["Where the point estimate's bias comes from (ratios of B_crit):", "",
             "| target | truth | rates tried / truth | all seeds / rates tried | "
             "3-seed groups (median) / all seeds | 1-seed groups (median) / all seeds |",
             "|---|---|---|---|---|---|"]
    for ti, name in enumerate(res["targets"]):
        truth, grid, every = res["truth"][ti], res["exact_on_rates"][ti], res["all_seeds"][ti]
        median = lambda size: _median([r["b_crit"] for r in res["rows"] if r["target"] == ti
                                       and r["group_size"] == size and r["selection"] == "min"
                                       and r["method"] == intervals.DEFAULT_METHOD])
        ratio = lambda a, b: f"{a / b:.3f}" if a and b else "-"
        lines.append(f"| {name} | {truth:.4g} | {ratio(grid, truth)} | {ratio(every, grid)} | "
                     f"{ratio(median(3), every)} | {ratio(median(1), every)} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--spectra", nargs="+", choices=list(SPECTRA), default=list(SPECTRA))
    parser.add_argument("--seeds", type=int, default=SEEDS)
    parser.add_argument("--first-grid", choices=FIRST_GRIDS, default="grid",
                        help="learning_rate.first_grid of the sweeps (default grid)")
    parser.add_argument("--out", type=Path, default=None,
                        help="the folder of coverage.json, report.md and the run files "
                             "(default results/coverage)")
    parser.add_argument("--own-search", action="store_true",
                        help=f"one sweep per group of {OWN_GROUP} seeds, each searching for its "
                             "own rates as a user's sweep does (default: one sweep of every seed, "
                             "cut into groups)")
    parser.add_argument("--render", action="store_true",
                        help="write report.md again from the committed coverage.json, no training")
    args = parser.parse_args(argv)
    args.out = args.out or OUT
    if args.render:
        results = json.loads((args.out / "coverage.json").read_text())
    else:
        results = [study(name, args.seeds, args.out, args.first_grid, args.own_search)
                   for name in args.spectra]
        command = " ".join([DEFAULT_COMMAND, *(argv if argv is not None else sys.argv[1:])])
        results = [{**res, "command": command} for res in results]
    for res in results:
        res["cells"], res["subset_cells"] = cells(res), subset_cells(res)
        res["percentile_spread_bias"] = percentile_spread_bias(res["seeds"] // GROUP_SIZES[0])
    store.atomic_write(args.out / "coverage.json", store.dumps(results) + "\n")
    text = markdown(results)
    store.atomic_write(args.out / "report.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
