"""What a person reads: `markdown` (report.md), `figures` and `noise_figure` (the PNGs),
`sheet` (figures.pdf and index.html: every figure in one file, the report as a page) and
`style` (their shared look)."""
