"""The `scaling` command: `parser` (every subcommand's arguments), `main` (the entry point),
`__main__` (`python -m scaling.cli`), and one module per subcommand: `plan`, `scale_plan` and `memory_plan`
(`scaling plan`, the last two loading jax), `train` (train and sweep: prepare the sweep once, hand it to a launcher of
the `launchers` subpackage), `analyze`, `gns`, `branch`, `compare`, `imports`
(`scaling import`), `prepare` (`scaling prepare-text`), `repair` and `bench`."""
