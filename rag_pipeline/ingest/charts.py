"""A chart's data as a table: the figures a slide or page plots, which its text never states.

A chart in a .pptx or .docx keeps the values it was last drawn with in its own part (DrawingML
charts, ``c:chartSpace``): each series' name, its category labels and its values, cached beside
the embedded workbook they came from. Read as a table — one row a category, one column a series,
the category axis's title (if any) heading the first column — a bar chart of quarterly revenue
indexes as "Q3; 营收: 132; 成本: 97", answerable like any table. Values are shown as the chart
shows them: shortest exact form, a percentage format's as percentages, a date format's (a date
axis's categories are day numbers) as dates. A chart in an .xlsx is
not read this way: its figures are the sheet's cells, read already.
"""

from __future__ import annotations

import datetime as dt
import re

from lxml import etree

from rag_pipeline.ingest.sheets import FORMAT_LITERALS

_C = "{http://schemas.openxmlformats.org/drawingml/2006/chart}"
_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_PARSER = etree.XMLParser(resolve_entities=False, no_network=True)
MAX_CHART_POINTS = 2000  # values read per chart: a chart of a whole log is no table to index


def _title(el) -> str:  # type: ignore[no-untyped-def]
    if el is None:
        return ""
    return " ".join("".join(t.text or "" for t in el.iter(f"{_A}t")).split())


def _number(value: str, code: str) -> str:
    try:
        x = float(value)
    except ValueError:
        return value.strip()
    bare = FORMAT_LITERALS.sub("", code)
    if "%" in bare:
        return f"{x * 100:.12g}%"
    if _DATE_CODE.search(bare) and bare.lower() not in ("general", "standard") and not re.search(r"[0#?]", bare) \
            and 0 < x < 2958466:  # a date axis: Excel day serials
        day = _EXCEL_EPOCH + dt.timedelta(days=x)
        return day.date().isoformat() if x == int(x) else day.isoformat(sep=" ", timespec="minutes")
    return f"{x:.12g}"


_DATE_CODE = re.compile(r"[ydm]", re.IGNORECASE)
_EXCEL_EPOCH = dt.datetime(1899, 12, 30)  # day 0 of Excel's 1900 date system (its leap-year bug included)


def _points(el) -> dict[int, str]:  # type: ignore[no-untyped-def]
    """idx -> label or value of a series' categories or values, from the cache the chart keeps."""
    if el is None:
        return {}
    levels = el.find(f".//{_C}multiLvlStrCache")
    if levels is not None:  # categories in levels ("2025" over "Q1".."Q4"): the innermost first
        labels: dict[int, list[str]] = {}
        for level in levels.iter(f"{_C}lvl"):
            for pt in level.iter(f"{_C}pt"):
                labels.setdefault(int(pt.get("idx", "0")), []).append((pt.findtext(f"{_C}v") or "").strip())
        return {i: " ".join(reversed([p for p in parts if p])) for i, parts in labels.items()}
    cache = el.find(f".//{_C}strCache")
    code = ""
    if cache is None:
        cache = el.find(f".//{_C}numCache")
        code = (cache.findtext(f"{_C}formatCode") or "") if cache is not None else ""
    if cache is None:
        return {}
    return {int(pt.get("idx", "0")): _number(pt.findtext(f"{_C}v") or "", pt.get("formatCode") or code) for pt in cache.iter(f"{_C}pt")}


def chart_table(xml: bytes) -> tuple[str, list[list[str]]]:
    """(title, rows) of a chart part: rows[0] the header (the category axis's title, then each
    series' name), then one row per category; no rows for a chart without cached data. Raises on a
    part that is not XML (the caller counts it as not read)."""
    root = etree.fromstring(xml, parser=_PARSER)
    chart = root.find(f"{_C}chart")
    if chart is None:
        return "", []
    title = _title(chart.find(f"{_C}title"))
    plot = chart.find(f"{_C}plotArea")
    if plot is None:
        return title, []
    names, columns, categories = [], [], {}
    read = 0
    for ser in plot.iter(f"{_C}ser"):
        values = _points(ser.find(f"{_C}val") if ser.find(f"{_C}val") is not None else ser.find(f"{_C}yVal"))
        labels = _points(ser.find(f"{_C}cat") if ser.find(f"{_C}cat") is not None else ser.find(f"{_C}xVal"))
        read += len(values)
        if read > MAX_CHART_POINTS:
            break
        tx = ser.find(f"{_C}tx")
        names.append(" ".join(((tx.findtext(f".//{_C}v") or _title(tx)) if tx is not None else "").split()))
        columns.append(values)
        for i, label in labels.items():
            categories.setdefault(i, label)
    if not columns:
        return title, []
    axis = plot.find(f"{_C}catAx")
    axis = axis if axis is not None else plot.find(f"{_C}dateAx")
    header = [_title(axis.find(f"{_C}title")) if axis is not None else "", *names]
    indexes = sorted(set(categories) | {i for column in columns for i in column})
    rows = [[categories.get(i, str(i + 1)), *(column.get(i, "") for column in columns)] for i in indexes]
    return title, [header, *rows]


def add_chart(builder, xml: bytes, *, page: int | None = None) -> None:  # type: ignore[no-untyped-def]
    """A chart's title as a paragraph, then its data as table rows."""
    title, rows = chart_table(xml)
    builder.add(title, page=page)
    if rows:
        builder.add_table(rows[1:], header=rows[0], page=page)
