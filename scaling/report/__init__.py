"""What a person reads: `markdown` (report.md), `figures` and the modules it draws with (the
PNGs), `sheet` (figures.pdf and index.html: every figure in one file, the report as a page),
`style` (their shared look) and `text_check` (no text over text in any of them)."""
