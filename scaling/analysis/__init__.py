"""From run folders to the numbers: `table` (runs and learning-rate curves per target),
`curves` (noise scales near a step), `selection` (each batch size's learning rate),
`tradeoff` (the S(B) fit), `lr_rules` (rules against the optima), `definitions` (other
critical batch sizes), `schedules` (batch-size schedules against the fixed batch sizes),
`analyze` (analysis.json), `branching` (a `scaling branch` folder's local critical batch size)
and `nqm_reference` (the noisy quadratic model's exact answers). The fixed-budget view:
`parabola` (the optimum between grid points), `fixed_budget` and `budget_cell` (one cell's
optima and intervals), `budget_rules`, `budget_folder` (a folder's `fixed_budget` section),
`laws` (power laws across cells) and `cells` (a multi-cell folder)."""
