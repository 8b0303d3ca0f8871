"""index.html's Markdown subset: what report.md writes comes out as plain HTML, escaped."""

from __future__ import annotations

from scaling.report.sheet import markdown_to_html


def test_headings_paragraphs_lists_tables_and_images():
    text = "\n".join([
        "# Scaling report: a<b", "", "Some `code` and **bold** and [a link](docs/x.md),",
        "continued.", "", "- one", "- two & three", "", "| batch | B_crit |", "|---|---|",
        "| 64 | **128** |", "", "![steps](figures/steps.png)", ""])
    assert markdown_to_html(text).splitlines() == [
        "<h1>Scaling report: a&lt;b</h1>",
        '<p>Some <code>code</code> and <b>bold</b> and <a href="docs/x.md">a link</a>, '
        "continued.</p>",
        "<ul>", "<li>one</li>", "<li>two &amp; three</li>", "</ul>",
        "<table>", "<tr><th>batch</th><th>B_crit</th></tr>",
        "<tr><td>64</td><td><b>128</b></td></tr>", "</table>",
        '<p><img src="figures/steps.png" alt="steps"></p>']
