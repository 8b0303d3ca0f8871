"""One place to look: figures.pdf (every figure, a page each) and index.html (report.md's text,
tables and figures as a plain page: no JavaScript, no files fetched from elsewhere), beside
report.md, so a person can look at a sweep rather than read it."""

from __future__ import annotations

import html
import io
import re
from pathlib import Path

import numpy as np

from scaling.report.style import pyplot
from scaling.store import atomic_write

STYLE = ("body{font-family:sans-serif;max-width:60em;margin:2em auto;padding:0 1em;"
         "line-height:1.45}table{border-collapse:collapse;margin:1em 0}"
         "td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}"
         "th{background:#f4f4f4}img{max-width:100%}code{background:#f4f4f4}")


def write_pdf(figures: list[Path], path: Path) -> Path | None:
    """The PNGs as one PDF, a page each at their own size; None when there are none. No
    creation date: the same figures give the same bytes, so a re-analysed folder under git
    changes only where its figures did."""
    if not figures:
        return None
    from matplotlib.backends.backend_pdf import PdfPages  # deferred, as style.pyplot is
    from PIL import Image

    plt = pyplot()
    buffer = io.BytesIO()
    with PdfPages(buffer, metadata={"CreationDate": None}) as pdf:
        for png in figures:
            image = np.asarray(Image.open(png).convert("RGBA"))  # 8-bit, not floats to convert back
            dpi = 100
            fig = plt.figure(figsize=(image.shape[1] / dpi, image.shape[0] / dpi), dpi=dpi)
            # interpolation "none" puts the PNG's own pixels into the page (rows top first, as
            # figimage did) without resampling them at the page's size: half the PDF's time
            axes = fig.add_axes((0, 0, 1, 1), frameon=False)
            axes.imshow(image[::-1], origin="lower", interpolation="none")
            axes.set_axis_off()
            pdf.savefig(fig, dpi=dpi)
            plt.close(fig)
    atomic_write(path, buffer.getvalue())
    return path


def _inline(text: str) -> str:
    """Escaped text with report.md's inline marks: `code`, **bold**, [links](target)."""
    text = html.escape(text, quote=False)
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
    text = re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", text)
    return re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)", r'<a href="\2">\1</a>', text)


def _table(lines: list[str]) -> list[str]:
    cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines]
    head, body = cells[0], cells[2:]  # the second line is the |---| separator
    out = ["<table>", "<tr>" + "".join(f"<th>{_inline(c)}</th>" for c in head) + "</tr>"]
    out += ["<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>" for row in body]
    return out + ["</table>"]


def markdown_to_html(text: str) -> str:
    """The Markdown report.md uses (headings, paragraphs, bullets, pipe tables, images)."""
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
        elif m := re.match(r"(#{1,6}) (.*)", line):
            level = len(m.group(1))
            out.append(f"<h{level}>{_inline(m.group(2))}</h{level}>")
            i += 1
        elif m := re.match(r"!\[([^\]]*)\]\(([^)\s]+)\)\s*$", line):
            out.append(f'<p><img src="{html.escape(m.group(2))}" alt="{html.escape(m.group(1))}">'
                       "</p>")
            i += 1
        elif line.startswith("|"):
            block = []
            while i < len(lines) and lines[i].startswith("|"):
                block.append(lines[i])
                i += 1
            out += _table(block)
        elif line.startswith("- "):
            out.append("<ul>")
            while i < len(lines) and lines[i].startswith("- "):
                out.append(f"<li>{_inline(lines[i][2:])}</li>")
                i += 1
            out.append("</ul>")
        else:
            block = []
            while i < len(lines) and lines[i].strip() and not re.match(r"[#|!]|- ", lines[i]):
                block.append(lines[i])
                i += 1
            out.append(f"<p>{_inline(' '.join(block))}</p>")
    return "\n".join(out)


def write_html(report: Path, path: Path) -> Path:
    """index.html beside report.md: its content as HTML, the figures shown where it puts them."""
    text = Path(report).read_text()
    title = text.splitlines()[0].lstrip("# ") if text else "report"
    page = (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>\n"
            f"{markdown_to_html(text)}\n</body></html>\n")
    atomic_write(path, page)
    return path
