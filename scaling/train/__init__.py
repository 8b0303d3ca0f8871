"""Compiled training: a group of runs that share a program, stepped in scan chunks, vmapped
over runs and sharded over devices. `spec` (jax-free) says what a group is built from,
`program` compiles it (its chunks through `compiles`, kept across invocations by
`compile_cache`), `start` begins it, `loop` drives it from the host and hands each chunk's rows
to its `sinks`; `step` (a run's pure pieces), `gradients`, `measure` (noise scale), `reach`
(targets), `optimizers`, `schedules`, `precision`, `repack`, `memory`, `mesh`, `fsdp` (parameters
and optimizer state split over devices), `stream` (host-streamed batches), `checkpoint`,
`throughput` and `peaks` (the devices' peak FLOP/s) are its parts, and `tutorial` the plain loop
`scaling bench` times it against."""
