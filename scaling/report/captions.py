"""The captions report.md prints under a sweep's figures (scaling.report.markdown), one per
figure, saying what each draws; kept beside the figures' code so the two change together."""

from __future__ import annotations

CAPTIONS = {
    "steps_vs_batch": "Steps to each target against the batch size: at the best learning rate "
                      "of each batch size (dots; hollow where that rate is at an edge of the "
                      "rates tried) and at the optimum between rates the fit uses (bars); the "
                      "fitted S(B) = S_min + E_min/B, shaded where it has an interval (the "
                      "legend says what it resamples), with B_crit on it at S = 2 S_min (a "
                      "triangle at the edge of the batch sizes fitted where B_crit lies beyond "
                      "them); perfect scaling (slope -1) from the smallest batch size; batch "
                      "sizes that never reached a target along the top.",
    "examples_vs_steps": "Examples vs steps to target: the trade-off "
                         "(S/S_min - 1)(E/E_min - 1) = 1, shaded where the fit has an interval; "
                         "the star is B_crit at (2 S_min, 2 E_min), left out where the batch "
                         "sizes fitted do not identify it; points labelled by batch size where "
                         "a label fits; batch-size schedules, where the sweep has them, as their "
                         "own markers.",
    "lr_vs_batch": "Optimal learning rate vs batch size: the best rate tried (hollow at an edge "
                   "of the rates tried) and the optimum between rates, every rate tried marked "
                   "by how it read the target (reached, stopped as dominated, not reached, "
                   "diverged); the linear and square-root rules from the smallest batch size "
                   "and the fitted noise-scale (and, where fitted, surge) curves, shaded over "
                   "the corners of their parameters' intervals.",
    "noise_vs_loss": "Gradient noise scale along training, one line per run (B_simple solid; "
                     "B_noise dashed, best-LR runs only); each target on the loss axis has its "
                     "B_crit drawn at (target loss, B_crit), its interval as a bar, a triangle "
                     "where it is a bound.",
    "bcrit_vs_target": "Critical batch size per target (its interval as a bar; a triangle "
                       "where the batch sizes fitted only bound it), beside B_simple and the "
                       "20%-overhead B_crit; one panel per metric with two or more targets, "
                       "else the targets side by side.",
    "heatmap": "Steps to target (mean over seeds where the sweep has several) against the "
               "learning rate, a line per batch size, each batch size's best rate starred: the "
               "primary target, or the LR-rules target when no run reached the primary one; "
               "runs stopped as dominated drawn at their lower bound, runs that diverged or "
               "never reached in the shaded band at the top. In the fixed-budget view of one "
               "cell, the final metric instead.",
}
