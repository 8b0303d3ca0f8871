"""index.html's Markdown subset: what report.md writes comes out as plain HTML, escaped; and
figures.pdf: every figure's own pixels, a page each."""

from __future__ import annotations

import io
import re
import struct
import time
import zlib

import numpy as np
import pytest
from PIL import Image

from scaling.report.sheet import markdown_to_html, write_pdf


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


def _pdf_images(pdf: bytes) -> list[np.ndarray]:
    """The RGB image XObjects of a PDF matplotlib wrote: each stream is PNG IDAT data (Flate
    with PNG predictors), so it decodes as a PNG around it."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    out = []
    for m in re.finditer(rb"<<([^<>]*?/Subtype /Image[^<>]*?)>>\s*stream\r?\n", pdf):
        size = [int(re.search(rb"/%s (\d+)" % k, m.group(1)).group(1)) for k in (b"Width", b"Height")]
        stream = pdf[m.end():pdf.index(b"endstream", m.end())].rstrip(b"\r\n")
        png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", *size, 8, 2, 0, 0, 0))
               + chunk(b"IDAT", stream) + chunk(b"IEND", b""))
        out.append(np.asarray(Image.open(io.BytesIO(png))))
    return out


def test_the_pdf_holds_each_figure_s_own_pixels_on_a_page_of_its_size(tmp_path):
    rng = np.random.default_rng(0)
    pngs = []
    for i, (h, w) in enumerate([(40, 60), (75, 30)]):
        pixels = np.dstack([rng.integers(0, 256, (h, w, 3)), np.full((h, w), 255)]).astype(np.uint8)
        Image.fromarray(pixels).save(tmp_path / f"{i}.png")
        pngs.append(tmp_path / f"{i}.png")
    pdf = write_pdf(pngs, tmp_path / "figures.pdf").read_bytes()
    boxes = [float(v) for b in re.findall(rb"/MediaBox \[([^\]]*)\]", pdf) for v in b.split()]
    assert boxes == pytest.approx([0, 0, 60 * 0.72, 40 * 0.72, 0, 0, 30 * 0.72, 75 * 0.72])  # 100 dpi
    for png, image in zip(pngs, _pdf_images(pdf)):
        assert np.array_equal(image, np.asarray(Image.open(png))[..., :3])  # rows top first


def test_the_same_figures_give_the_same_pdf(tmp_path):
    """No creation date in the file: a re-analysed folder under git changes only where its
    figures did."""
    Image.fromarray(np.full((20, 30, 4), 200, np.uint8)).save(tmp_path / "a.png")
    first = write_pdf([tmp_path / "a.png"], tmp_path / "1.pdf").read_bytes()
    time.sleep(1.1)  # the date has a resolution of one second
    assert write_pdf([tmp_path / "a.png"], tmp_path / "2.pdf").read_bytes() == first
    assert b"/CreationDate" not in first
