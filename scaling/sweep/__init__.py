"""From a config to finished run folders: `prepare` (every check before compute), `grid` (runs,
groups, shards), `search` and `stopping` (the learning-rate search's rounds and the runs it
stops), `session` and `runner` (train the groups), `writer` (their run files), `progress`
(the tables printed as it goes), `launch` and `watch` (SLURM job arrays), `segments` and
`schedule` (batch-size schedules), `branch_plan` and `branch` (`scaling branch`)."""
