"""The noisy quadratic model's exact expected loss under heavy-ball or Nesterov momentum and the
iterates' moving average, at any per-step learning rate and batch size (G. Zhang et al. 2019).

Per coordinate (curvature h, noise variance c, in the coordinates the task trains, so the
preconditioner h^-p is folded in: scaling.tasks.nqm.trained_spectra), one step of optax's
momentum with learning rate lr, momentum m and batch B, gradient g = h x + xi, xi ~ N(0, c/B):

    heavy ball:  v' = m v + g,  x' = x - lr v'            = (1 - lr h) x - lr m v - lr xi
    Nesterov:    v' = m v + g,  x' = x - lr (g + m v')    = (1 - lr h (1+m)) x - lr m^2 v - lr (1+m) xi
    average:     a' = d a + (1 - d) x'   (eval.ema_decay d, read as a / (1 - d^t))

So the state s = (x, v[, a]) moves as s' = A s + b xi, linear with noise independent of s, and
its raw second moments P = E[s s^T] (means and variances together) follow exactly:
P' = A P A^T + (c / B) b b^T from P_0 = s_0 s_0^T. E[L] = 1/2 sum h P_xx (or P_aa / (1 - d^t)^2).
Momentum 0 is SGD: v never feeds back into x.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from scaling.config.targets import first_crossing
from scaling.tasks.nqm import NQMOptions, trained_spectra


def stable_lr(options: NQMOptions, momentum: float = 0.0, nesterov: bool = False) -> float:
    """The largest stable constant learning rate: lr h_max < 2 (1 + m), or 2 (1 + m) / (1 + 2m)
    with Nesterov (where the transition's eigenvalue reaches -1)."""
    h_max = float(np.max(trained_spectra(options)[0]))
    return 2.0 * (1.0 + momentum) / ((1.0 + 2.0 * momentum if nesterov else 1.0) * h_max)


def transition(h: np.ndarray, lr: np.ndarray, momentum: float, nesterov: bool,
               ema_decay: float | None) -> tuple[np.ndarray, np.ndarray]:
    """(A, b) of s' = A s + b xi for each learning rate (rows of `lr`, shape (L,)) and
    coordinate: shapes (L, D, k, k) and (L, D, k), k = 2, or 3 with the moving average."""
    eta = np.asarray(lr, np.float64)[:, None]
    lead, carry = (1.0 + momentum, momentum**2) if nesterov else (1.0, momentum)
    k = 2 if ema_decay is None else 3
    a = np.zeros(eta.shape[:1] + h.shape + (k, k))
    b = np.zeros(eta.shape[:1] + h.shape + (k,))
    a[..., 0, 0] = 1.0 - eta * h * lead
    a[..., 0, 1] = -eta * carry
    b[..., 0] = -eta * lead
    a[..., 1, 0], a[..., 1, 1], b[..., 1] = h, momentum, 1.0
    if ema_decay is not None:
        d = ema_decay
        a[..., 2, :2] = (1.0 - d) * a[..., 0, :2]
        a[..., 2, 2] = d
        b[..., 2] = (1.0 - d) * b[..., 0]
    return a, b


def losses(options: NQMOptions, lrs: np.ndarray, batch_sizes: np.ndarray, momentum: float = 0.0,
           nesterov: bool = False, ema_decay: float | None = None) -> Iterator[np.ndarray]:
    """E[L] of each row of `lrs` (shape (L, T), one learning rate per step) after 0, 1, ..., T
    steps, one (L,) array per step, with batch_sizes[t] at step t. The transition is rebuilt
    only where the step's rates or batch differ from the last, so a constant rate costs one."""
    h, c, start = trained_spectra(options)
    k = 2 if ema_decay is None else 3
    moments = np.zeros((lrs.shape[0],) + h.shape + (k, k))
    moments[..., 0, 0] = start**2
    yield 0.5 * np.sum(h * moments[..., 0, 0], axis=1)
    last = None
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(lrs.shape[1]):
            now = (lrs[:, t], batch_sizes[t])
            if last is None or now[1] != last[1] or not np.array_equal(now[0], last[0]):
                a, b = transition(h, now[0], momentum, nesterov, ema_decay)
                noise = (c / now[1])[..., None, None] * b[..., :, None] * b[..., None, :]
                last = now
            moments = a @ moments @ np.swapaxes(a, -1, -2) + noise
            if ema_decay is None:
                yield 0.5 * np.sum(h * moments[..., 0, 0], axis=1)
            else:
                bias = (1.0 - ema_decay ** (t + 1)) ** 2
                yield 0.5 * np.sum(h * moments[..., 2, 2], axis=1) / bias


def _per_step(values: np.ndarray | float, steps: int) -> np.ndarray:
    return np.broadcast_to(np.asarray(values, np.float64), (steps,))


def momentum_expected_loss(options: NQMOptions, lrs: np.ndarray, batch_size: int | np.ndarray,
                           momentum: float = 0.0, nesterov: bool = False,
                           ema_decay: float | None = None) -> np.ndarray:
    """Exact E[L] after 0, 1, ..., T steps with the per-step learning rates `lrs` (shape (T,),
    or (L, T) for L sequences at once: then the result is (L, T + 1)) at `batch_size` (one, or
    one per step); with `ema_decay`, E[L] of the bias-corrected moving average of the iterates."""
    rows = np.atleast_2d(np.asarray(lrs, np.float64))
    batches = _per_step(batch_size, rows.shape[1])
    out = np.stack(list(losses(options, rows, batches, momentum, nesterov, ema_decay)), axis=1)
    return out if np.ndim(lrs) == 2 else out[0]


def constant_lr_momentum_loss(options: NQMOptions, lrs: np.ndarray, batch_size: int, steps: int,
                              momentum: float = 0.0, nesterov: bool = False,
                              ema_decay: float | None = None) -> np.ndarray:
    """`momentum_expected_loss` at each constant rate of `lrs`: shape (len(lrs), steps + 1)."""
    rows = np.broadcast_to(np.asarray(lrs, np.float64)[:, None], (len(lrs), steps))
    return momentum_expected_loss(options, rows, batch_size, momentum, nesterov, ema_decay)


def fewest_steps(options: NQMOptions, lrs: np.ndarray, batch_size: int, target: float,
                 steps: int, momentum: float = 0.0, nesterov: bool = False,
                 ema_decay: float | None = None) -> float | None:
    """The fewest expected steps to E[L] <= target over the constant `lrs`, interpolated between
    steps as the rule `first` reads a run evaluated at every step; None within `steps`.

    All rates step together and the recursion stops at the first step where any of them meets
    the target: every crossing of a rate that meets it later lies beyond that step."""
    rows = np.broadcast_to(np.asarray(lrs, np.float64)[:, None], (len(lrs), steps))
    previous = None
    for t, loss in enumerate(losses(options, rows, _per_step(batch_size, steps), momentum,
                                    nesterov, ema_decay)):
        hit = np.nonzero(loss <= target)[0]
        if hit.size and previous is None:
            return 0.0
        if hit.size:
            return min(first_crossing(np.array([t - 1, t]), np.array([previous[i], loss[i]]),
                                      "<=", target) for i in hit)
        previous = loss
    return None
