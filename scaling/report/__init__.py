"""What a person reads: `markdown` (report.md), its sections `answer` (the first screen),
`tables`, `lr_rules`, `hyper_rules`, `crossing`, `schedules_report`, `budget_report`
and `captions`; `views` (each analysis view's report sections, notes, figures and captions, read
from the views' registry) with `steps_report` (the steps view's `REPORT`) and `budget_report`
(the fixed-budget view's); `figures` and the modules
it draws with (`figure_data`, `target_figures`, `lr_figures`, `noise_figure`,
`budget_figures`, `law_figures`: the PNGs); `branch_report` and `cells_report` (a branch
folder's and a multi-cell folder's reports), `compare` (`scaling compare`), `sheet`
(figures.pdf and index.html: every figure in one file, the report as a page), `style` (their
shared look) and `text_check` (no text over text in any of them)."""
