"""PDF tables keep their words apart and their symbols, with each value under its header.

The generated PDF sets its cells the way TeX does: every word drawn on its own with a thin
gap and no space glyph, which pdfplumber's fixed 3 pt tolerance glued into "GeForceGTX680".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_pipeline.ingest.pdf import parse_pdf

fpdf = pytest.importorskip("fpdf", reason="fpdf2 (a dev dependency) builds the test PDF")

FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf")
CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
ROWS = [
    ["Method", "GPU", "Window size for cost aggregation", "Error (%)"],
    ["Ours", "GeForce GTX 680", "9 × 9", "4.21 ± 0.12"],
    ["Baseline", "Tesla K40", "11 × 11", "5.87 ± 0.30"],
    ["Fast variant", "GeForce GTX 1080 Ti", "5 × 5", "6.02 ± 0.41"],
]


def tex_like_table_pdf(path: Path, gap_em: float = 0.18) -> Path:
    pdf = fpdf.FPDF(unit="pt", format="A4")
    pdf.add_page()
    pdf.add_font("serif", "", str(FONT))
    pdf.set_font("serif", size=9)
    pdf.set_xy(72, 60)
    pdf.cell(0, 12, "Table 2: Runtime of stereo matching on two GPUs.")
    widths = [90, 110, 170, 90]
    y = 90
    for row in ROWS:
        x = 72
        for text, width in zip(row, widths):
            pdf.rect(x, y, width, 18)
            cx = x + 4
            for word in text.split(" "):
                pdf.text(cx, y + 12, word)
                cx += pdf.get_string_width(word) + gap_em * 9
            x += width
        y += 18
    pdf.output(str(path))
    return path


@pytest.mark.skipif(not FONT.is_file(), reason="DejaVu Serif font not installed")
def test_tex_set_table_cells_keep_spaces_symbols_and_headers(tmp_path):
    doc = parse_pdf(tex_like_table_pdf(tmp_path / "table.pdf"))
    rows = [b.text for b in doc.blocks if b.kind == "table_row"]
    assert rows == [
        "Method: Ours; GPU: GeForce GTX 680; Window size for cost aggregation: 9 × 9; Error (%): 4.21 ± 0.12",
        "Method: Baseline; GPU: Tesla K40; Window size for cost aggregation: 11 × 11; Error (%): 5.87 ± 0.30",
        "Method: Fast variant; GPU: GeForce GTX 1080 Ti; Window size for cost aggregation: 5 × 5; Error (%): 6.02 ± 0.41",
    ]
    assert all(b.page == 1 for b in doc.blocks)
    assert "Table 2: Runtime of stereo matching" in doc.text


@pytest.mark.skipif(not (CORPUS / "pdf" / "demo3.pdf").is_file(), reason="shared corpus not found")
def test_real_latex_paper_table_cells_keep_word_spaces():
    doc = parse_pdf(CORPUS / "pdf" / "demo3.pdf")
    rows = [b.text for b in doc.blocks if b.kind == "table_row"]
    assert "Title: Screwed Up; Length: 5:02" in rows
    assert "Nation: Great Britain; Gold: 2; Silver: 1; Bronze: 2" in rows
