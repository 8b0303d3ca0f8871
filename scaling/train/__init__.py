"""Compiled training: a group of runs that share a program, stepped in scan chunks, vmapped
over runs and sharded over devices. `spec` (jax-free) says what a group is built from,
`program` compiles it, `loop` drives it from the host; `gradients`, `measure` (noise scale),
`reach` (targets), `optimizers`, `schedules`, `repack`, `memory` and `mesh` are its parts."""
