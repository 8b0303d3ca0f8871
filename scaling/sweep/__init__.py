"""From a config to finished run folders: `plan` (run arithmetic and warnings), `grid` (runs,
groups, shards, centred-grid extensions), `runner` (trains the groups), `writer` (their run
files), `progress` (the tables printed as it goes), `launch` (SLURM job arrays), `segments`
and `schedule` (batch-size schedules), `branch_plan` and `branch` (`scaling branch`)."""
