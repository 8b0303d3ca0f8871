"""The critical batch size by other definitions, beside McCandlish et al.'s B_crit = E_min / S_min.

- Overhead over linear scaling (Zhang et al. 2024): the batch size at which the steps to a
  target exceed ideal linear scaling by a share h (20%). Ideal linear scaling runs from the
  smallest batch size B_0 that reached the target: S_lin(B) = S(B_0) B_0 / B.
  Measured: the first measured B whose overhead S(B) / S_lin(B) - 1 exceeds h, interpolated
  linearly in log B between it and the measured batch size before it (whose overhead is at
  most h); None when no measured batch size exceeds it.
  Fitted: on S(B) = S_min + E_min / B with the same B_0, S(B) / (S(B_0) B_0 / B) = 1 + h at
  B = (1 + h) B_0 + h E_min / S_min, that is (1 + h) B_0 + h B_crit.
- Across targets (Kaplan et al. 2020): B_crit(L) = B_* / L^(1 / alpha_B), fitted by least
  squares on log B_crit against log L over the loss targets (metric <= value) of one metric,
  each weighted by its bootstrap interval where every target has one; the interval of the
  exponent is a t interval from the residuals (wide with three targets).

References:
  McCandlish et al. 2018, "An Empirical Model of Large-Batch Training".
  Zhang et al. 2024, "How Does Critical Batch Size Scale in Pre-training?".
  Kaplan et al. 2020, "Scaling Laws for Neural Language Models", section 5.1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from scaling.analysis.intervals import info, t975
from scaling.store.rows import positive

OVERHEAD = 0.2
OVERHEAD_DEFINITION = (
    "the batch size at which steps to target exceed ideal linear scaling from the smallest batch "
    "size B_0 (S(B_0) B_0 / B) by {h:.0%}: measured, interpolated in log B between measured "
    "batch sizes; fitted, (1 + h) B_0 + h E_min / S_min on S(B) = S_min + E_min / B")
POWER_LAW_DEFINITION = ("B_crit(L) = B_* / L^(1/alpha_B) over the loss targets L of one metric, "
                        "least squares on log B_crit vs log L")


def overheads(batch_sizes: list[float], steps: list[float]) -> list[float]:
    """S(B) / (S(B_0) B_0 / B) - 1 at each batch size (sorted by B; B_0 the smallest)."""
    b0, s0 = batch_sizes[0], steps[0]
    return [s * b / (s0 * b0) - 1.0 for b, s in zip(batch_sizes, steps)]


def measured_overhead_b_crit(batch_sizes: list[float], steps: list[float],
                             overhead: float = OVERHEAD) -> float | None:
    """The measured batch size at which the overhead over linear scaling reaches `overhead`."""
    pairs = sorted(zip(batch_sizes, steps))
    if len(pairs) < 2:
        return None
    sizes = [b for b, _ in pairs]
    values = overheads(sizes, [s for _, s in pairs])
    for i in range(1, len(sizes)):
        if values[i] > overhead:
            lo, hi = max(values[i - 1], 0.0), values[i]
            frac = (overhead - lo) / (hi - lo) if hi > lo else 1.0
            return float(sizes[i - 1] * (sizes[i] / sizes[i - 1]) ** frac)
    return None


def fitted_overhead_b_crit(b0: float, s_min: float, e_min: float,
                           overhead: float = OVERHEAD) -> float:
    """(1 + h) B_0 + h E_min / S_min: where the fitted curve is `overhead` above linear scaling."""
    return (1.0 + overhead) * b0 + overhead * e_min / s_min


def overhead_entry(points: list[dict], fit: dict | None, overhead: float = OVERHEAD) -> dict:
    """analysis.json's `overhead_b_crit` of one target, from its points and fit."""
    timed = sorted((p for p in points if positive(p.get("steps"))), key=lambda p: p["batch_size"])
    sizes, steps = [p["batch_size"] for p in timed], [p["steps"] for p in timed]
    b0 = sizes[0] if sizes else None
    fitted = None
    if fit and b0 and positive(fit.get("s_min")) and positive(fit.get("e_min")):
        fitted = fitted_overhead_b_crit(b0, fit["s_min"], fit["e_min"], overhead)
    return {"overhead": overhead, "reference_batch_size": b0,
            "measured": measured_overhead_b_crit(sizes, steps, overhead), "fitted": fitted,
            "definition": OVERHEAD_DEFINITION.format(h=overhead)}


@dataclass(frozen=True)
class Definition:
    """A definition of the critical batch size beside E_min / S_min: the per-target section
    of analysis.json it fills (`compute` from the target's points and fit), the columns the
    report and `scaling compare` show of it (header, reader of the section) and the sentence
    that introduces it. Adding a definition is adding one of these."""

    key: str
    compute: Callable[[list[dict], dict | None], dict[str, Any] | None]
    columns: tuple[tuple[str, Callable[[dict[str, Any]], Any]], ...]
    text: str


DEFINITIONS = (
    Definition("overhead_b_crit", overhead_entry, (
        (f"{OVERHEAD:.0%} overhead, fitted", lambda s: s["fitted"]),
        (f"{OVERHEAD:.0%} overhead, measured", lambda s: s["measured"]),
        ("from B_0", lambda s: s["reference_batch_size"])),
        f"the batch size at which steps exceed ideal linear scaling from the smallest batch "
        f"size B_0 by {OVERHEAD:.0%} (Zhang et al. 2024), on the fitted curve and on the "
        "measured points (- where the grid never exceeds it)"),
)


def power_law(values: list[float], b_crits: list[float],
              intervals: list[list[float] | None]) -> dict | None:
    """Fit B_crit = B_* L^k (k = -1/alpha_B) over three or more targets; None with fewer."""
    keep = [(v, b, ci) for v, b, ci in zip(values, b_crits, intervals)
            if positive(v) and positive(b)]
    if len(keep) < 3 or len({v for v, _, _ in keep}) < 3:
        return None
    x = np.log([v for v, _, _ in keep])
    y = np.log([b for _, b, _ in keep])
    sigmas = [(math.log(ci[1]) - math.log(ci[0])) / (2 * 1.96)
              if ci and positive(ci[0]) and positive(ci[1]) and ci[1] > ci[0] else None
              for _, _, ci in keep]
    w = np.ones(len(keep)) if None in sigmas else 1.0 / np.square(sigmas)
    xm, ym = np.sum(w * x) / np.sum(w), np.sum(w * y) / np.sum(w)
    sxx = np.sum(w * (x - xm) ** 2)
    k = float(np.sum(w * (x - xm) * (y - ym)) / sxx)
    log_b_star = float(ym - k * xm)
    dof = len(keep) - 2
    resid = y - (log_b_star + k * x)
    se = math.sqrt(float(np.sum(w * resid ** 2)) / dof / sxx) if dof > 0 else float("inf")
    t = t975(dof)
    k_ci = [k - t * se, k + t * se]
    alpha_ci = None
    if k_ci[1] < 0:  # B_crit grows as the loss falls throughout the interval
        alpha_ci = sorted([-1.0 / k_ci[0], -1.0 / k_ci[1]])
    return {"b_star": math.exp(log_b_star), "exponent": k, "exponent_ci": k_ci,
            "alpha_b": -1.0 / k if k < 0 else None, "alpha_b_ci": alpha_ci,
            "interval": info("targets", "Student's t on the fit's residuals", len(keep)),
            "num_targets": len(keep), "weighted": None not in sigmas,
            "definition": POWER_LAW_DEFINITION}


def _identified(target: dict) -> bool:
    """Whether a target's B_crit is pinned by the batch sizes fitted (not a bound)."""
    return bool(target.get("fit") and target["fit"]["identification"]["identified"])


def power_laws(targets: list[dict]) -> list[dict]:
    """One power-law fit per metric with three or more loss targets (metric <= value) whose
    B_crit is identified (a bound is not a value to fit)."""
    out = []
    for metric in dict.fromkeys(t["metric"] for t in targets if t.get("op") == "<="):
        mine = [t for t in targets
                if t["metric"] == metric and t.get("op") == "<=" and _identified(t)]
        fit = power_law([t["value"] for t in mine], [t.get("b_crit") for t in mine],
                        [t.get("b_crit_ci") for t in mine])
        if fit is not None:
            out.append({"metric": metric, **fit})
    return out
