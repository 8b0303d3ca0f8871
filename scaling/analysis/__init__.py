"""From run folders to the numbers. `analyze` (analysis.json: the one entry point) reads a
folder once and lets each view add its sections: `view` (the interface a view meets) and
`views` (name -> View, read from the views' registry, scaling.config.names.VIEW_TABLE). The
steps view: `steps_view` (its sections and `VIEW`), `table` (runs and learning-rate curves per
target), `curves` (noise scales near a step), `selection` (each batch size's learning rate),
`optimum` (steps at the optimum between the rates tried), `points` (each batch size's point at
a target), `optima` (each batch size's optimal learning rate), `tradeoff` and `fit` (the S(B)
fit and its interval), `crossing` (curves that cross: the trade-off's order broken, the
smallest and the example-optimal batch size), `intervals` (what an interval resamples; bounds
and "not identified"), `lr_rules` (rules against the optima), `hyper_rules` (searched beta2 and
weight decay against their rules), `definitions` (other critical batch sizes), `schedules`
(batch-size schedules against the fixed batch sizes), `catch_up` (the catch-up after a switch).
`contract` and `sections` (analysis.json's sections as typed dicts), `in_use` (folders still
being written), `branching` (a `scaling branch` folder's local critical batch size),
`nqm_reference` and `nqm_momentum` (the noisy quadratic model's exact answers). The
fixed-budget view: `budget_folder` (its `fixed_budget` section of a folder and `VIEW`),
`fixed_budget` and `budget_cell` (one cell's optima and intervals), `budget_rules`, `laws`
(power laws across cells) and `cells` (a multi-cell folder)."""
