"""Measured optimal learning rates against the scaling rules: linear, square root, noise scale
and surge.

Each rule's prediction at a batch size is read off that batch size's measured steps-vs-LR curve,
so its cost is in steps to target relative to the best learning rate (docs/arithmetic.md). The
noise-scale rule (McCandlish et al. 2018) and the surge rule (Li et al. 2024, for adaptive
optimizers: the fall of Adam's optimum at large batches) are fitted to the optima, with
intervals over seeds from refits on each replicate's optima (scaling.analysis.optima,
scaling.analysis.intervals), and each fitted batch size (B_noise, B_peak) flagged where the
batch sizes measured do not pin it.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from scaling.analysis import intervals
from scaling.analysis.optima import optimum, replicate_optima
from scaling.analysis.table import LRCurve
from scaling.analysis.tradeoff import fit_tradeoffs
from scaling.config.learning_rates import scaled_lr
from scaling.formatting import estimate

LINEAR_BREAK_RATIO = 2.0  # linear rule "breaks" above this ratio to the optimum ...
LINEAR_BREAK_COST = 1.5  # ... or above this relative cost in steps
SURGE_PEAK_RANGE = 100.0  # B_peak is searched up to this factor beyond the measured batch sizes
FALL_RATIO = 1.25  # the optimum "falls" when the largest batch's is this far below the highest
RULES = ("linear", "sqrt", "noise_scale", "surge")
NOISE_SCALES = (("b_simple", "B_simple"), ("b_noise", "B_noise"),
                ("b_simple_precond", "B_simple in Adam's metric"))


def steps_at_lr(grid: LRCurve, lr: float) -> tuple[float | None, str | None]:
    """Steps to target at any `lr`, linear in log lr between neighbouring reached grid LRs;
    (None, why) where that cannot be read off the grid."""
    x, means, log_lr = np.log(grid.lrs), grid.means(), math.log(lr)
    diverged = [v for v, d in zip(grid.lrs, grid.diverged) if d]
    if diverged and log_lr >= math.log(min(diverged)) - 1e-9:
        return None, "diverges"
    if log_lr < x[0] - 1e-9 or log_lr > x[-1] + 1e-9:
        return None, "outside the grid"
    i = int(np.searchsorted(x, log_lr - 1e-9))  # the first grid LR at or above lr
    pair = [i] if abs(x[i] - log_lr) <= 1e-9 else [i - 1, i]
    if not np.all(np.isfinite(means[pair])):
        return None, "target not reached there"
    return float(np.interp(log_lr, x[pair], means[pair])), None


def bound_at_lr(grid: LRCurve, lr: float) -> float | None:
    """Where `steps_at_lr` finds a neighbouring cell stopped as dominated (censored), a lower
    bound of the steps there: the same interpolation with its censored seeds at their bound;
    None where that cannot be read either."""
    x, log_lr = np.log(grid.lrs), math.log(lr)
    known = np.where(np.isfinite(grid.means()), grid.means(), grid.bounds())
    i = int(np.searchsorted(x, log_lr - 1e-9))
    if i >= len(x) or (i == 0 and abs(x[0] - log_lr) > 1e-9):
        return None
    pair = [i] if abs(x[i] - log_lr) <= 1e-9 else [i - 1, i]
    if not np.all(np.isfinite(known[pair])) or not np.any(np.isfinite(grid.bounds()[pair])):
        return None
    return float(np.interp(log_lr, x[pair], known[pair]))


def _padded(draws: list[list[dict]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each draw's batch sizes and optima as rows (draws x their most points), NaN past a
    draw's own points, and whether each row spans 3 or more batch sizes (the rules' fits
    need them)."""
    width = max((len(d) for d in draws), default=1)
    sizes, lrs = np.full((len(draws), width), np.nan), np.full((len(draws), width), np.nan)
    for row, draw in enumerate(draws):
        sizes[row, :len(draw)] = [o["batch_size"] for o in draw]
        lrs[row, :len(draw)] = [o["learning_rate"] for o in draw]
    distinct = 1 + np.sum(np.diff(np.sort(sizes, axis=1), axis=1) > 0, axis=1)
    return sizes, lrs, distinct >= 3


def noise_scale_fits(draws: list[list[dict]]) -> list[dict | None]:
    """eps_max, B_noise of lr = eps_max / (1 + B_noise / B) for each draw of the optima at
    once, least squares on log lr; None for a draw with fewer than 3 batch sizes.

    1/lr = 1/eps_max + (B_noise/eps_max) / B has the form of S(B), so fit_tradeoffs solves it.
    """
    sizes, lrs, fitted = _padded(draws)
    fits = np.full((len(draws), 2), np.nan)
    fits[fitted] = fit_tradeoffs(sizes[fitted], 1.0 / lrs[fitted])
    return [{"eps_max": 1.0 / inv_eps, "b_noise": slope / inv_eps} if ok else None
            for (inv_eps, slope), ok in zip(fits.tolist(), fitted)]


def noise_scale_fit(optima: list[dict]) -> dict | None:
    """The noise-scale rule fitted to one set of optima (noise_scale_fits' one draw)."""
    return noise_scale_fits([optima])[0]


def _log_cosh(x: np.ndarray) -> np.ndarray:
    x = np.abs(x)
    return x + np.log1p(np.exp(-2.0 * x)) - math.log(2.0)


def _surge_cost(log_peaks: np.ndarray, log_b: np.ndarray, log_lr: np.ndarray,
                used: np.ndarray) -> np.ndarray:
    """Squared residuals of log lr at each draw's candidate log B_peak (draws x candidates),
    log eta_max at its best; a draw's unused points (used 0) count for nothing."""
    z = log_lr[:, None, :] + _log_cosh((log_b[:, None, :] - log_peaks[:, :, None]) / 2.0)
    mean = np.sum(z * used[:, None, :], axis=2, keepdims=True) / used.sum(axis=1)[:, None, None]
    return np.sum((z - mean) ** 2 * used[:, None, :], axis=2)


def _golden_section(cost: Callable[[np.ndarray], np.ndarray], lo: np.ndarray, hi: np.ndarray,
                    iterations: int = 45) -> np.ndarray:
    """The minimum of each draw's one-dimensional `cost` within its [lo, hi], unimodal there;
    all draws searched at once."""
    g = (math.sqrt(5.0) - 1.0) / 2.0
    c, d = hi - g * (hi - lo), lo + g * (hi - lo)
    fc, fd = cost(c), cost(d)
    for _ in range(iterations):
        left = fc < fd  # the minimum lies in [lo, d]: d becomes the upper end
        lo, hi = np.where(left, lo, c), np.where(left, d, hi)
        c, d = np.where(left, hi - g * (hi - lo), d), np.where(left, c, lo + g * (hi - lo))
        new = cost(np.where(left, c, d))
        fc, fd = np.where(left, new, fd), np.where(left, fc, new)
    return (lo + hi) / 2.0


def surge_fits(draws: list[list[dict]]) -> list[dict | None]:
    """eta_max, B_peak of lr = 2 eta_max / (sqrt(B_peak / B) + sqrt(B / B_peak)) (Li et al.
    2024) for each draw of the optima at once, least squares on log lr; None for a draw with
    fewer than 3 batch sizes.

    In u = log B that is log lr = log eta_max - log cosh((u - log B_peak) / 2), so for each
    B_peak the best log eta_max is a mean and one dimension is searched: a grid over the
    measured batch sizes widened SURGE_PEAK_RANGE-fold each way, then a golden section around
    its best point. An optimum that only rises (or falls) puts B_peak at the range's edge.
    """
    sizes, lrs, fitted = _padded(draws)
    if not fitted.any():
        return [None] * len(draws)
    used = np.isfinite(sizes[fitted]).astype(float)
    log_b, log_lr = (np.log(np.where(used > 0, x[fitted], 1.0)) for x in (sizes, lrs))
    edge = math.log(SURGE_PEAK_RANGE)
    grid = np.linspace(np.nanmin(np.log(sizes[fitted]), axis=1) - edge,
                       np.nanmax(np.log(sizes[fitted]), axis=1) + edge, 401, axis=1)
    k = np.argmin(_surge_cost(grid, log_b, log_lr, used), axis=1)
    rows = np.arange(len(grid))
    at = lambda c: _surge_cost(c[:, None], log_b, log_lr, used)[:, 0]
    peak = _golden_section(at, grid[rows, np.maximum(k - 1, 0)],
                           grid[rows, np.minimum(k + 1, grid.shape[1] - 1)])
    log_eta = np.sum((log_lr + _log_cosh((log_b - peak[:, None]) / 2.0)) * used, axis=1)
    fits = iter(zip(np.exp(log_eta / used.sum(axis=1)).tolist(), np.exp(peak).tolist(),
                    np.sqrt(at(peak) / used.sum(axis=1)).tolist()))
    return [dict(zip(("eta_max", "b_peak", "rms_log_residual"), next(fits))) if ok else None
            for ok in fitted]


def surge_fit(optima: list[dict]) -> dict | None:
    """The surge rule fitted to one set of optima (surge_fits' one draw)."""
    return surge_fits([optima])[0]


def _with_intervals(fit: dict | None, samples: list[dict | None], keys: tuple[str, ...],
                    spread: tuple[str, int, str | None], sizes: list[int],
                    searched: tuple[float, float] | None = None) -> dict | None:
    """The fit with an interval over seeds on each of `keys` (key_ci) from the replicates'
    refits, its `interval` record, and the identification of its batch size (the last of
    `keys`) against the batch sizes measured and, where it was searched in a range, that
    range's ends. `spread`: (method, seeds, why there are no replicates)."""
    if fit is None:
        return None
    method, seeds, why = spread
    cis = {f"{k}_ci": None for k in keys}
    if why is None:
        cis = {f"{k}_ci": intervals.from_replicates(
            fit[k], [f[k] if f else math.nan for f in samples], method, seeds) for k in keys}
        why = None if cis[f"{keys[-1]}_ci"] else intervals.NO_REPLICATES
    record = (intervals.info("seeds", method, sum(f is not None for f in samples)) if why is None
              else intervals.none(why))
    size = keys[-1]
    status = intervals.identify(fit[size], cis[f"{size}_ci"], min(sizes), max(sizes),
                                "the batch sizes measured")
    if searched is not None:
        intervals.at_search_bound(status, fit[size], *searched)
    identification = {size: status}
    if not status["identified"]:  # the amplitude is read off the curve the batch size bends
        identification[keys[0]] = {**status, "bound": None, "at": None,
                                   "why": f"{size} is not identified, and {keys[0]} follows it"}
    return {**fit, **cis, "interval": record, "identification": identification}


def _replicates(points: list[dict], grid_by_size: dict[int, LRCurve], bootstrap: int,
                rng: np.random.Generator, method: str) -> tuple[list[list[dict]], int, str | None]:
    """(each replicate's optima, the seeds, why there are none) for the rules' intervals."""
    seeds = {grid_by_size[p["batch_size"]].stack("steps").shape[1] for p in points}
    k = seeds.pop() if len(seeds) == 1 else 0
    why = (intervals.ONE_SEED if k == 1 else "batch sizes hold different seeds" if k == 0
           else "not asked for (bootstrap 0)" if bootstrap <= 0
           else intervals.FEW_POINTS if len(points) < intervals.MIN_POINTS else None)
    if why is not None:
        return [], k, why
    return replicate_optima(points, grid_by_size, intervals.seed_draws(k, method, bootstrap, rng)), \
        k, None


def optimum_falls(optima: list[dict]) -> dict | None:
    """Where the measured optimum falls with the batch size: the highest optimum lies below the
    largest batch size, and the largest batch size's optimum is FALL_RATIO or more below it."""
    peak, last = max(optima, key=lambda o: o["learning_rate"]), optima[-1]
    if peak is last or peak["learning_rate"] < FALL_RATIO * last["learning_rate"]:
        return None
    return {"peak_batch_size": peak["batch_size"], "peak_learning_rate": peak["learning_rate"],
            "largest_batch_size": last["batch_size"], "learning_rate": last["learning_rate"],
            "ratio": peak["learning_rate"] / last["learning_rate"]}


def _rule_entry(point: dict, optimum: float, predicted: float, grid: LRCurve) -> dict:
    """A rule at one batch size; where its steps fall on runs stopped as dominated, they are
    censored: `steps_censored` and `relative_cost_censored` are lower bounds, never steps."""
    steps, note = steps_at_lr(grid, predicted)
    bound = bound_at_lr(grid, predicted) if note == "target not reached there" else None
    if bound is not None:
        note = "stopped as dominated there"
    ratio = lambda value: value / point["steps"] if value and point["steps"] else None
    return {"batch_size": point["batch_size"], "learning_rate": predicted,
            "ratio_to_optimum": predicted / optimum, "steps": steps,
            "relative_cost": ratio(steps), "steps_censored": bound,
            "relative_cost_censored": ratio(bound), "note": note}


def _breaks(entry: dict) -> bool:
    """A rule breaks at a batch size where its rate is far from the optimum, diverges, does not
    reach the target, or costs far more steps."""
    cost = entry["relative_cost"]
    return (entry["ratio_to_optimum"] > LINEAR_BREAK_RATIO
            or entry["note"] in ("diverges", "target not reached there")
            or (cost is not None and cost > LINEAR_BREAK_COST))


def _worst(entries: list[dict]) -> str:
    worst = max(entries, key=lambda e: abs(math.log(e["ratio_to_optimum"])))
    return f"{worst['ratio_to_optimum']:.2g}x the optimum at B = {worst['batch_size']}"


def _linear_sentence(entry: dict) -> str:
    breaks_at, first = entry["linear_breaks_at"], entry["optima"][0]
    if breaks_at is None:
        return (f"Linear scaling from B = {first['batch_size']} stays within "
                f"{LINEAR_BREAK_RATIO:g}x of the optimum and {LINEAR_BREAK_COST:g}x its steps "
                "over the grid. ")
    rule = next(e for e in entry["rules"]["linear"] if e["batch_size"] == breaks_at)
    verb = "over-shoots" if rule["ratio_to_optimum"] > 1 else "under-shoots"
    cost = (rule["note"] or "beyond the grid") if rule["relative_cost"] is None \
        else f"{rule['relative_cost']:.2g}x the best steps"
    return (f"Linear scaling {verb} the measured optimum from B = {breaks_at} "
            f"({rule['ratio_to_optimum']:.2g}x the optimum there; {cost}). ")


def _fitted(fit: dict, key: str) -> str:
    """A fitted parameter with its interval, or the bound it is (scaling.formatting.estimate)."""
    return estimate(fit[key], fit.get(f"{key}_ci"), (fit.get("identification") or {}).get(key))


def _falls_sentence(entry: dict) -> str:
    """Whether the measured optimum falls at large batches, beside the measured noise scales."""
    falls = entry["optimum_falls"]
    if falls is None:
        text = f"The measured optimum does not fall by {FALL_RATIO:g}x or more at large batches"
    else:
        text = (f"The measured optimum falls with the batch size: from "
                f"{falls['peak_learning_rate']:.3g} at B = {falls['peak_batch_size']} to "
                f"{falls['learning_rate']:.3g} at B = {falls['largest_batch_size']} "
                f"({falls['ratio']:.2g}x lower)")
    scales = [f"{label} {value:.3g}" for key, label in NOISE_SCALES
              if (value := entry["noise_scales"].get(key)) is not None]
    fit = entry["surge_fit"]
    if scales and fit is not None:
        text += f"; B_peak {_fitted(fit, 'b_peak')} beside the measured {', '.join(scales)}"
    return text + "."


def _surge_sentence(entry: dict) -> str:
    """The surge fit where it was fitted (adaptive optimizers, or asked for)."""
    fit = entry["surge_fit"]
    if fit is None:
        return ""
    return (f"The surge rule fitted to the optima (eta_max = {_fitted(fit, 'eta_max')}, B_peak = "
            f"{_fitted(fit, 'b_peak')}) is at worst {_worst(entry['rules']['surge'])}. ")


def _rules_summary(entry: dict) -> str:
    optima = entry["optima"]
    first, last = optima[0], optima[-1]
    text = (f"At {entry['target']} the measured optimal learning rate goes from "
            f"{first['learning_rate']:.3g} at B = {first['batch_size']} to "
            f"{last['learning_rate']:.3g} at B = {last['batch_size']} "
            f"({last['learning_rate'] / first['learning_rate']:.2g}x for a "
            f"{last['batch_size'] / first['batch_size']:.3g}x larger batch). ")
    text += _linear_sentence(entry) + f"Square-root scaling is at worst {_worst(entry['rules']['sqrt'])}. "
    fit = entry["noise_scale_fit"]
    if fit is None:
        return text + "The fitted rules need optima at 3 or more batch sizes; not fitted."
    text += (f"The noise-scale rule fitted to the optima (eps_max = {_fitted(fit, 'eps_max')}, "
             f"B_noise = {_fitted(fit, 'b_noise')}) is at worst "
             f"{_worst(entry['rules']['noise_scale'])}. ")
    return text + _surge_sentence(entry) + _falls_sentence(entry)


def _predictions(ref: dict, noise: dict | None, surge: dict | None) -> dict:
    """Each rule's learning rate as a function of the batch size (the fitted ones if fitted)."""
    predict = {"linear": lambda b: scaled_lr("linear", b, ref["batch_size"], ref["learning_rate"]),
               "sqrt": lambda b: scaled_lr("sqrt", b, ref["batch_size"], ref["learning_rate"])}
    if noise is not None:
        predict["noise_scale"] = lambda b: scaled_lr("noise_scale", b, None, None,
                                                     noise["eps_max"], noise["b_noise"])
    if surge is not None:
        predict["surge"] = lambda b: scaled_lr("surge", b, None, None, eta_max=surge["eta_max"],
                                               b_peak=surge["b_peak"])
    return predict


def lr_rules(target: str, points: list[dict], grid_by_size: dict[int, LRCurve],
             bootstrap: int = 0, rng: np.random.Generator | None = None,
             noise_scales: dict | None = None, method: str = intervals.DEFAULT_METHOD,
             surge: bool = True) -> dict | None:
    """Linear, square-root, noise-scale and (`surge`) surge rules against the measured optima
    at one target; the fits' intervals over seeds by `method` (`bootstrap` draws for
    percentile, none when 0). `noise_scales`: the measured B_simple, B_noise (and
    b_simple_precond) at this target, set beside B_peak."""
    if not points:
        return None
    optima = [{"batch_size": p["batch_size"], "learning_rate": optimum(p)} for p in points]
    draws, seeds, why = _replicates(points, grid_by_size, bootstrap,
                                    rng or np.random.default_rng(0), method)
    sizes, spread = [o["batch_size"] for o in optima], (method, seeds, why)
    noise = _with_intervals(noise_scale_fit(optima), noise_scale_fits(draws) if draws else [],
                            ("eps_max", "b_noise"), spread, sizes)
    peak_range = (min(sizes) / SURGE_PEAK_RANGE, max(sizes) * SURGE_PEAK_RANGE)
    surge = _with_intervals(surge_fit(optima), surge_fits(draws) if draws else [],
                            ("eta_max", "b_peak"), spread, sizes, peak_range) if surge else None
    rules = {name: [] for name in RULES}
    for name, rule in _predictions(optima[0], noise, surge).items():
        rules[name] = [_rule_entry(p, o["learning_rate"], rule(p["batch_size"]),
                                   grid_by_size[p["batch_size"]]) for p, o in zip(points, optima)]
    entry = {"target": target, "reference": dict(optima[0]), "optima": optima,
             "noise_scale_fit": noise, "surge_fit": surge, "optimum_falls": optimum_falls(optima),
             "noise_scales": {k: (noise_scales or {}).get(k) for k, _ in NOISE_SCALES},
             "rules": rules,
             "linear_breaks_at": next((e["batch_size"] for e in rules["linear"] if _breaks(e)), None)}
    return {**entry, "summary": _rules_summary(entry)}
