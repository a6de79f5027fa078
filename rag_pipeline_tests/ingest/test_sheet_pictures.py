"""An in-cell picture (WPS's =DISPIMG formula, cached as its own text) is not indexed as text."""

from __future__ import annotations

import openpyxl

from rag_pipeline.ingest.sheets import parse_xlsx


def test_dispimg_picture_formula_is_not_text(tmp_path):
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Parts"
    ws.append(["Part", "Photo", "Stock"])
    ws.append(["Valve V-12", None, 40])
    ws.append(["Hose H-3", None, 7])
    for row, ident in ((2, "ID_8F3A"), (3, "ID_77B0")):
        cell = ws.cell(row, 2)
        cell.value = f'=DISPIMG("{ident}",1)'
        cell.data_type = "s"  # stored as text, the way WPS caches it
    path = tmp_path / "parts.xlsx"
    wb.save(path)
    assert openpyxl.load_workbook(path, data_only=True).active["B2"].value.startswith("=DISPIMG(")
    rows = [b.text for b in parse_xlsx(path).blocks if b.kind == "table_row"]
    assert rows == ["Part: Valve V-12; Stock: 40", "Part: Hose H-3; Stock: 7"]
