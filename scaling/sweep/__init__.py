"""From a config to finished run folders: `prepare` (every check before compute), `grid` (runs,
groups, shards), `search` and `stopping` (the learning-rate search's rounds and the runs it
stops), `neighbours` (a first grid predicted from trained neighbours), `memory_plan` (the settings that fit a device, before any
compute), `runner` (a sweep's groups in turn), `session` (its devices, data and programs),
`batches` (a batch size's runs in groups), `fixed` (a fixed batch size's group), `group` (the
one lifecycle of a group's run folders), `writer` (their run files), `trackers` (TensorBoard
and W&B), `claiming` (one process per group), `progress` (the tables printed as it goes),
`launch` and `watch` (SLURM job arrays, for scaling.cli.launchers' slurm launcher), `segments` and `schedule` (batch-size schedules),
`scale` (scale sweeps), `cooldown` and `cooldown_start` (many budgets from one
run per setting), `branch_plan` and `branch` (`scaling branch`), `bench` (`scaling
bench`)."""
