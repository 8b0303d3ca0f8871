"""What a person reads: `markdown` (report.md), `figures` and `noise_figure` (the PNGs) and
`style` (their shared look)."""
