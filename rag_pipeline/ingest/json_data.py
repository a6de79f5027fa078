"""JSON and JSON Lines (.json, .jsonl, .ndjson): exports of FAQ pairs, product catalogues, CMS
articles and tickets kept as records.

A list of objects is a table: one ``table_row`` per record, each value under its key ("question:
…; answer: …"), so a record stands alone when chunked, as a spreadsheet row does. An object's
scalar members are "key: value" paragraphs and its nested objects and record lists sections
headed by their key; a list of strings is a list. Nested objects inside a record are flattened to
dotted keys (``address.city``), lists of scalars joined; anything deeper stays compact JSON.
A JSON Lines file is the list of its lines; a line that is not JSON is counted and skipped.
"""

from __future__ import annotations

import json
from pathlib import Path

from rag_pipeline.ingest.blocks import BlockBuilder, make_document
from rag_pipeline.ingest.document import ParsedDocument, UnreadableDocument
from rag_pipeline.ingest.encoding import decode_bytes, encoding_notes

MAX_DEPTH = 20  # sections nest no deeper; below it a value is kept as compact JSON
_HEADING_LEVELS = 6


def _scalar(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


def _flat(record: dict, prefix: str = "") -> dict[str, str]:
    """A record's cells: nested objects as dotted keys, a list of scalars joined, deeper as JSON."""
    cells: dict[str, str] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value and prefix.count(".") < 2:
            cells.update(_flat(value, f"{name}."))
        elif isinstance(value, list) and all(not isinstance(v, (dict, list)) for v in value):
            cells[name] = ", ".join(_scalar(v) for v in value if v is not None)
        else:
            cells[name] = _scalar(value)
    return cells


def _records(builder: BlockBuilder, records: list[dict]) -> None:
    rows = [_flat(r) for r in records]
    keys = list(dict.fromkeys(k for row in rows for k in row))
    builder.add_table([[row.get(k, "") for k in keys] for row in rows], header=keys)


def _walk(builder: BlockBuilder, value: object, depth: int) -> None:
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        _records(builder, value)
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, (dict, list)) and depth < MAX_DEPTH:
                _walk(builder, item, depth + 1)
            else:
                builder.add(_scalar(item), "list_item")
    elif isinstance(value, dict):
        for key, member in value.items():
            if isinstance(member, (dict, list)) and member and depth < MAX_DEPTH:
                builder.heading(str(key), min(depth + 1, _HEADING_LEVELS))
                _walk(builder, member, depth + 1)
            elif _scalar(member):
                builder.add(f"{key}: {_scalar(member)}")
    else:
        builder.add(_scalar(value))


def _json_lines(text: str) -> tuple[list[object], int]:
    values, bad = [], 0
    for line in text.splitlines():
        if line.strip():
            try:
                values.append(json.loads(line))
            except ValueError:
                bad += 1
    return values, bad


def _title(value: object) -> str | None:
    if isinstance(value, dict):
        title = value.get("title") or value.get("name")
        return title if isinstance(title, str) else None
    return None


def parse_json(path: Path) -> ParsedDocument:
    """Parse a JSON or JSON Lines file into blocks (see the module docstring). A file that is
    neither is ``corrupt``; the title is a top-level object's "title" or "name"."""
    text, encoding = decode_bytes(path.read_bytes())
    notes = encoding_notes(encoding)
    lines = path.suffix.lower() in {".jsonl", ".ndjson"}
    if lines:
        value, bad = _json_lines(text)
        if bad and not value:
            raise UnreadableDocument("corrupt", f"none of its {bad} line(s) is JSON")
        if bad:
            notes.append(f"{bad} line(s) that are not JSON skipped")
    else:
        try:
            value = json.loads(text)
        except ValueError as exc:  # JSON Lines saved as .json is common: one value per line
            value, bad = _json_lines(text)
            if bad or len(value) < 2:
                raise UnreadableDocument("corrupt", f"not JSON: {exc}") from exc
            notes.append("JSON Lines (one value per line) in a .json file")
    builder = BlockBuilder()
    _walk(builder, value, 0)
    fmt = "jsonl" if lines else "json"
    return make_document(builder, format=fmt, parser="json", title=_title(value), warnings=notes)
