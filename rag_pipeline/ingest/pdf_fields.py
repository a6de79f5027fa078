"""What a PDF page shows outside its content stream: filled form fields and typed-on text.

A filled form's values ("First Name: Alice", a ticked box, the chosen item of a list) live in
the page's widget annotations, and text typed onto a page with a viewer's typewriter tool in a
FreeText annotation; both are drawn from the annotation's own appearance, which text extraction
(pdfminer's layout of the content stream) never reads. Without this, an application form indexes
as its blank labels. Sticky-note comments and other markup (highlights, stamps) are not read:
they are remarks about the page, hidden until clicked, not what the page shows.

Each value comes out as one line, "field name: value" (the field's user-facing name, /TU, else its
own name /T; machine names such as ``f1_01[0]`` are left out), once per field however many widgets
show it, in the page's reading order top to bottom. A damaged annotation is skipped, never the page.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from pdfminer.pdfpage import PDFPage
from pdfminer.pdftypes import resolve1
from pdfminer.psparser import PSLiteral
from pdfminer.utils import decode_text

_HIDDEN, _NO_VIEW = 1 << 1, 1 << 5  # annotation flags (PDF 32000-1, 12.5.3)
_MAX_PARENTS = 32  # a field tree deeper than this is a loop in a damaged file
_OFF = {"off", ""}
# XFA paths ("topmostSubform[0].Page1[0].f1_01[0]"), "f1_01", and the names a form editor gives
# by default ("Text3", "Check Box12"): no words a question could ask for
_MACHINE_NAME = re.compile(
    r"[\[\]]|^[A-Za-z]{0,3}\d+(_\d+)*$|^(text|check ?box|radio ?button|combo ?box|list ?box|drop ?down|button|field|group)\s*\d+$",
    re.IGNORECASE,
)


def _text(value: object) -> str:
    value = resolve1(value)
    if isinstance(value, bytes):
        return decode_text(value).replace("\x00", "").strip()
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, PSLiteral):
        name = value.name
        return (name.decode("latin-1") if isinstance(name, bytes) else str(name)).strip()
    return ""


def _lineage(node: dict) -> Iterator[dict]:
    """A field-tree node, then its parents up the tree (at most _MAX_PARENTS: a damaged file's loop)."""
    for _ in range(_MAX_PARENTS):
        yield node
        parent = resolve1(node.get("Parent"))
        if not isinstance(parent, dict):
            return
        node = parent


def _inherited(field: dict, key: str) -> object:
    """A field attribute, looked up the field tree (values and types are inherited, 12.7.3.1)."""
    return next((node[key] for node in _lineage(field) if key in node), None)


def _field(widget: dict) -> dict:
    """The field a widget shows: the widget itself when it holds the value, else the nearest
    ancestor that does (a radio button's kids share their group's value)."""
    return next((node for node in _lineage(widget) if "T" in node or "V" in node), widget)


def _label(field: dict) -> str:
    for key in ("TU", "T"):
        name = _text(_inherited(field, key)).rstrip(".:：。 ")  # a tooltip "Enter name of agency."
        if name and not _MACHINE_NAME.search(name):
            return name
    return ""


def _choice(value: object, options: object) -> str:
    """A choice field's value as its display text (/Opt pairs are [export value, display text])."""
    shown = {}
    for option in resolve1(options) or []:
        option = resolve1(option)
        if isinstance(option, list) and len(option) == 2:
            shown[_text(option[0])] = _text(option[1])
    picked = [_text(v) for v in resolve1(value)] if isinstance(resolve1(value), list) else [_text(value)]
    return "; ".join(shown.get(p, p) for p in picked if p)


def _field_value(field: dict) -> str:
    kind = _text(_inherited(field, "FT"))
    value = _inherited(field, "V")
    if kind == "Sig" or value is None:
        return ""
    if kind == "Ch":
        return _choice(value, _inherited(field, "Opt"))
    text = _text(value)
    if kind == "Btn" and (text.lower() in _OFF or text.isdigit()):  # a radio button's "1", "2": its label is page text
        return ""
    return text


def _top(annotation: dict) -> tuple[float, float]:
    rect = resolve1(annotation.get("Rect"))
    try:
        x0, y0, x1, y1 = (float(resolve1(v)) for v in rect)
        return -max(y0, y1), min(x0, x1)
    except (TypeError, ValueError):
        return 0.0, 0.0


def page_field_lines(page: PDFPage) -> list[str]:
    """The page's filled form values and FreeText annotations, one line each, top to bottom."""
    lines: list[tuple[tuple[float, float], str]] = []
    seen: set[int] = set()
    try:
        annotations = resolve1(page.annots) or []
    except Exception:  # a damaged /Annots entry: the page's text is still read
        return []
    for ref in annotations if isinstance(annotations, list) else []:
        try:
            annotation = resolve1(ref)
            if not isinstance(annotation, dict) or int(resolve1(annotation.get("F", 0)) or 0) & (_HIDDEN | _NO_VIEW):
                continue
            subtype = _text(annotation.get("Subtype"))
            if subtype == "FreeText":
                text = _text(annotation.get("Contents"))
            elif subtype == "Widget":
                field = _field(annotation)
                if id(field) in seen:
                    continue
                seen.add(id(field))
                value = _field_value(field)
                label = _label(field)
                text = f"{label}: {value}" if value and label and label != value else value
            else:
                continue
        except Exception:  # one damaged annotation must not lose the others
            continue
        if text:
            lines.append((_top(annotation), " ".join(text.split())))
    return [text for _, text in sorted(lines, key=lambda item: item[0])]
