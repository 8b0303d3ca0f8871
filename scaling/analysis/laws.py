"""Power laws across cells: the fixed-budget optima (eta*, B_opt and the metric there) and,
where targets were given, B_crit, each as y = coefficient x params^a x tokens^b.

- Fitted by least squares on log y against log params and log tokens (the budget D; examples
  where the cells have no token count).
- A variable that spans less than MIN_RANGE across the cells, or is not known for every cell,
  is left out (its exponent null) and the reason given: over a narrow range its exponent is
  not identifiable and a fit would return noise.
- Intervals (2.5 and 97.5 percentiles): each draw resamples the cells with replacement and
  takes, for each cell drawn, that cell's own bootstrap draw of its optimum (seeds resampled,
  or noise added, within the cell: scaling.analysis.fixed_budget). Draws whose cells leave a
  variable with a single value are dropped (counted in `bootstrap`). B_crit has no
  within-cell draws to hand: each cell's is drawn log-normal with the spread of its 95%
  interval.
- B_crit two ways: `b_crit`, each cell's primary target's against the cell's N and budget D;
  `b_crit_data`, every (N, target) against N and the data the target needs, E_min (its
  fewest examples, in tokens where counted), as McCandlish et al. 2018 and Power Lines
  (Bergsma et al. 2025) read B_crit against D (target_points). The bootstrap of
  `b_crit_data` resamples the points, though one N's targets share its runs: its interval is
  the narrower for it. Either leaves out a B_crit whose value or interval lies beyond
  EXTRAPOLATION x the largest batch size its cell tried (`left_out.points` counts them).
- A cell whose B_crit is not identified (beyond its batch sizes: a bound) is left out of the
  B_crit laws; a law of eta* or B_opt where some cells' optimum sits at the edge of the values
  the cell tried is flagged (`identification`): its exponent is then a bound, not a finding.
- Beside each law: the law in each variable alone (`alone`; Step Law and Power Lines fit the
  batch size against D only) and the same fits of the measured arg-min of each cell
  (`argmin`), which show what reading the optimum between grid points changes.
"""

from __future__ import annotations

import math

import numpy as np

from scaling.analysis import intervals
from scaling.analysis.fixed_budget import interval95
from scaling.store.rows import positive

MIN_RANGE = 2.0
EXTRAPOLATION = 8.0  # a B_crit beyond this x the largest batch size tried is left out
VARIABLES = ("params", "tokens")
# Each law's quantity: its key in a cell's optimum and its row in the cell's draws.
QUANTITIES = {"learning_rate": ("learning_rate", 1), "batch_size": ("batch_size", 0),
              "loss": ("value", 2)}


def _value(cell: dict, name: str) -> float | None:
    """A cell's N, or its D: tokens, else examples where the cell counts no tokens."""
    if name == "tokens" and not positive(cell.get("tokens")):
        return cell.get("examples")
    return cell.get(name)


def variables(cells: list[dict]) -> tuple[list[str], dict[str, str]]:
    """The variables to fit (in VARIABLES order) and why each other one is left out."""
    kept, left_out = [], {}
    for name in VARIABLES:
        values = [_value(c, name) for c in cells]
        if len(cells) < 2:
            left_out[name] = "fewer than two cells: no law"
        elif not all(positive(v) for v in values):
            left_out[name] = "not known for every cell"
        elif max(values) / min(values) < MIN_RANGE:
            left_out[name] = (f"spans {max(values) / min(values):.3g}x across the cells (less than "
                              f"{MIN_RANGE:g}x): too narrow to fit")
        else:
            kept.append(name)
    return kept, left_out


def _solve(x: np.ndarray, y: np.ndarray) -> np.ndarray | None:
    """Least-squares coefficients, None when the design is rank-deficient."""
    if len(y) < x.shape[1] or np.linalg.matrix_rank(x) < x.shape[1]:
        return None
    return np.linalg.lstsq(x, y, rcond=None)[0]


def _design(cells: list[dict], kept: list[str]) -> np.ndarray:
    return np.column_stack([np.ones(len(cells))] + [np.log([_value(c, k) for c in cells])
                                                    for k in kept])


def _empty(quantity: str, left_out: dict[str, str], num_cells: int) -> dict:
    return {"quantity": quantity, "formula": f"{quantity} = coefficient x params^a x tokens^b",
            "coefficient": None, "coefficient_ci": None,
            "exponents": {k: None for k in VARIABLES}, "exponents_ci": {k: None for k in VARIABLES},
            "left_out": left_out, "num_cells": num_cells, "bootstrap": 0,
            "interval": intervals.none("no law"), "identification": _status(None),
            "rms_log_residual": None, "alone": {k: None for k in VARIABLES},
            "argmin": None, "non_embedding": None}


def _status(why: str | None) -> dict:
    """A law's identification: pinned, unless `why` says its cells' optima are bounds."""
    return {"identified": why is None, "bound": None, "at": None, "why": why, "range": [],
            "ci_open": [False, False], "ci_zero_width": False}


def _at_edge(cell: dict, quantity: str) -> bool:
    """Whether a cell's optimum of `quantity` sits at the edge of the values the cell tried:
    B_opt at its smallest or largest batch size, eta* at the edge of the rates tried at the
    batch size nearest B_opt."""
    optimum = cell.get("optimum") or {}
    if quantity == "batch_size":
        return optimum.get("at_edge") is not None
    if quantity != "learning_rate" or not cell.get("per_batch") or not optimum.get("batch_size"):
        return False
    nearest = min(cell["per_batch"],
                  key=lambda p: abs(math.log(p["batch_size"] / optimum["batch_size"])))
    return nearest.get("at_edge") is not None


def _with_draws(x: np.ndarray, values: np.ndarray, draws: np.ndarray,
                rng: np.random.Generator) -> tuple[np.ndarray | None, np.ndarray]:
    """The fit and its bootstrap refits (draws x coefficients): cells resampled, each drawn
    cell at its own draw; none where the cells are too few to resample (`too_few`)."""
    coef = _solve(x, np.log(values))
    samples = []
    for k in range(draws.shape[1] if coef is not None and not too_few(x) else 0):
        pick = rng.integers(0, len(values), len(values))
        drawn = np.log(draws[pick, k])
        fitted = _solve(x[pick], drawn) if np.all(np.isfinite(drawn)) else None
        if fitted is not None:
            samples.append(fitted)
    return coef, np.array(samples).reshape(len(samples), x.shape[1])


def too_few(x: np.ndarray) -> bool:
    """Whether a law's design (cells x coefficients) is too small for an interval: fewer than
    intervals.MIN_POINTS cells, or no more cells than coefficients (the fit passes through
    every cell, so each resample that is not singular returns it again: a zero-width
    interval)."""
    return x.shape[0] < max(intervals.MIN_POINTS, x.shape[1] + 1)


def _alone(cells: list[dict], name: str, values: np.ndarray, draws: np.ndarray,
           rng: np.random.Generator) -> dict:
    """The law in one variable alone, as papers that fit B against D only do."""
    coef, boot = _with_draws(_design(cells, [name]), values, draws, rng)
    return {"coefficient": math.exp(coef[0]), "exponent": float(coef[1]),
            "exponent_ci": interval95(boot[:, 1]) if len(boot) else None}


def _argmin(cells: list[dict], kept: list[str], best: np.ndarray) -> dict:
    """The same fits on the measured arg-min of each cell (no interval), for comparison."""
    coef = _solve(_design(cells, kept), np.log(best))
    alone = {k: float(_solve(_design(cells, [k]), np.log(best))[1]) for k in kept}
    return {"coefficient": math.exp(coef[0]),
            "exponents": {k: float(coef[1 + kept.index(k)]) if k in kept else None
                          for k in VARIABLES},
            "alone": {k: alone.get(k) for k in VARIABLES}}


def _non_embedding(quantity: str, cells: list[dict], values: np.ndarray, draws: np.ndarray,
                   rng: np.random.Generator) -> dict | None:
    """The law with N counted without the embeddings (as Kaplan et al. 2020 count it), where
    every cell knows that count and some cell's differs from its N; else None."""
    counts = [c.get("params_non_embedding") for c in cells]
    if not all(positive(n) for n in counts) or all(n == c.get("params")
                                                      for n, c in zip(counts, cells)):
        return None
    law = fit_law(quantity, [{**c, "params": n} for c, n in zip(cells, counts)], values,
                  draws, rng, non_embedding=False)
    return {k: law[k] for k in ("coefficient", "coefficient_ci", "exponents", "exponents_ci")}


def fit_law(quantity: str, cells: list[dict], values: np.ndarray, draws: np.ndarray,
            rng: np.random.Generator, best: np.ndarray | None = None,
            non_embedding: bool = True) -> dict:
    """The law of `values` (one per cell) with `draws` (cells x draws) for its interval; the
    law in each variable alone; with `best` (the measured arg-min), the same fits of it; and
    (`non_embedding`) the law in N without the embeddings."""
    kept, left_out = variables(cells)
    out = _empty(quantity, left_out, len(cells))
    x = _design(cells, kept)
    coef, boot = _with_draws(x, values, draws, rng) if kept else (None, None)
    if coef is None:
        out["left_out"] = left_out or {k: "too few cells for the fit" for k in VARIABLES}
        return out
    residual = np.log(values) - x @ coef
    edges = sum(_at_edge(c, quantity) for c in cells)
    spread = ("cells and seeds" if np.any(np.ptp(draws, axis=1) > 0) else "cells")
    out.update(coefficient=math.exp(coef[0]),
               coefficient_ci=interval95(np.exp(boot[:, 0])) if len(boot) else None,
               bootstrap=len(boot), rms_log_residual=float(np.sqrt(np.mean(residual ** 2)))
               if x.shape[0] > x.shape[1] else None,  # through every cell: none
               interval=intervals.info(spread, "percentile", len(boot)) if len(boot)
               else intervals.none(intervals.FEW_CELLS if too_few(x)
                                   else intervals.NO_REPLICATES),
               identification=_status(f"{edges} of {len(cells)} cells' optima at the edge of the "
                                      "values tried: the exponents are bounds" if edges else None))
    for i, name in enumerate(kept, start=1):
        out["exponents"][name] = float(coef[i])
        out["exponents_ci"][name] = interval95(boot[:, i]) if len(boot) else None
        out["alone"][name] = _alone(cells, name, values, draws, rng)
    if best is not None:
        out["argmin"] = _argmin(cells, kept, best)
    if non_embedding and "params" in kept:
        out["non_embedding"] = _non_embedding(quantity, cells, values, draws, rng)
    return out


def _lognormal(value: float, ci: list[float] | None, num: int,
               rng: np.random.Generator) -> np.ndarray:
    """Draws of a positive value whose 95% interval is `ci` (the value itself without one)."""
    if not ci or not positive(ci[0]) or not positive(ci[1]):
        return np.full(num, value)
    sigma = math.log(ci[1] / ci[0]) / (2 * 1.96)
    return value * np.exp(sigma * rng.standard_normal(num))


def largest_batch(cell: dict) -> float | None:
    """The largest batch size a cell tried (None where its entry does not say)."""
    sizes = [p["batch_size"] for p in cell.get("per_batch") or []]
    return max(sizes) if sizes else None


def extrapolated(b_crit: dict, largest: float | None) -> bool:
    """Whether a B_crit, or its interval, lies beyond EXTRAPOLATION x the largest batch size
    tried: there the trade-off fit extrapolates, and an interval that runs off to 1e16 (no
    finite B_crit in some draws) says only that B_crit is large."""
    top = max([b_crit["value"], *(b_crit.get("ci") or [])])
    return largest is not None and top > EXTRAPOLATION * largest


def _b_crit_law(cells: list[dict], num: int, rng: np.random.Generator,
                quantity: str = "b_crit") -> dict | None:
    found = [c for c in cells if positive((c.get("b_crit") or {}).get("value"))]
    timed = [c for c in found if c["b_crit"].get("identified", True) and not extrapolated(
        c["b_crit"], c.get("largest_batch", largest_batch(c)))]
    if len(timed) < 2:
        return None
    values = np.array([c["b_crit"]["value"] for c in timed])
    draws = np.array([_lognormal(c["b_crit"]["value"], c["b_crit"].get("ci"), num, rng)
                      for c in timed])
    law = fit_law(quantity, timed, values, draws, rng)
    if len(timed) < len(found):
        law["left_out"]["points"] = (
            f"{len(found) - len(timed)} of {len(found)}: B_crit not identified (beyond the "
            f"batch sizes fitted), or its interval beyond {EXTRAPOLATION:g}x the largest batch "
            "size tried (extrapolated)")
    return law


def target_points(cells: list[dict]) -> list[dict]:
    """One point per (N, target with a B_crit): N, and as D the target's E_min (in tokens where
    the cell counts them: E_min x the cell's tokens per example), with its B_crit. Where cells
    of one N at several budgets all reach a target, the largest budget's reading is kept:
    under a constant schedule the smaller budgets' runs are the same runs cut short, and under
    a decaying one the largest budget's is the least truncated."""
    points: dict[tuple, dict] = {}
    for c in sorted(cells, key=lambda c: _value(c, "tokens") or 0):
        per = c["tokens"] / c["examples"] if positive(c.get("tokens")) and \
            positive(c.get("examples")) else None
        for t in c.get("b_crit_targets") or []:
            if positive(t.get("e_min")):
                points[c.get("params"), t["target"]] = {
                    "name": f"{c.get('name')} {t['target']}", "cell": c.get("name"),
                    "target": t["target"], "params": c.get("params"),
                    "params_non_embedding": c.get("params_non_embedding"), "examples": t["e_min"],
                    "tokens": per and t["e_min"] * per, "largest_batch": largest_batch(c),
                    "b_crit": {"value": t["value"], "ci": t.get("ci"),
                               "identified": t.get("identified", True)}}
    return list(points.values())


def fit_laws(cells: list[dict], draws: list[np.ndarray | None], num: int,
             rng: np.random.Generator) -> dict:
    """fixed_budget.laws: learning_rate, batch_size, loss, b_crit and b_crit_data (the last
    two null without targets), from each cell's optimum and its draws (3 x draws: B_opt,
    eta*, the metric; None where the cell has no interval: its optimum enters every draw as
    it is)."""
    have = [(c, d) for c, d in zip(cells, draws) if all(
        positive((c.get("optimum") or {}).get(key)) for key, _ in QUANTITIES.values())]
    kept = [c for c, _ in have]
    out = {}
    for quantity, (key, row) in QUANTITIES.items():
        values = np.array([c["optimum"][key] for c in kept], float)
        best = np.array([c["best"][key] for c in kept], float)
        samples = [np.full(num, v) if d is None else d[row] for v, (_, d) in zip(values, have)]
        out[quantity] = fit_law(quantity, kept, values,
                                np.array(samples).reshape(len(kept), num), rng, best)
    out["b_crit"] = _b_crit_law(cells, num, rng)
    out["b_crit_data"] = _b_crit_law(target_points(cells), num, rng, "b_crit_data")
    return out
