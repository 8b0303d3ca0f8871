"""The `scaling` command: `parser` (every subcommand's arguments), `main` (the entry point),
and one module per subcommand (`plan`, `train` for train and sweep, `analyze`, `gns`)."""
