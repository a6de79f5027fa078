"""CSV/TSV: detected encoding and delimiter, header folded into every row."""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

from rag_pipeline.ingest.blocks import BlockBuilder, make_document
from rag_pipeline.ingest.document import ParsedDocument
from rag_pipeline.ingest.encoding import decode_bytes, encoding_notes

_DELIMITERS = ",;\t|"
csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # quoted multi-line cells can be long


def sniff_delimiter(text: str) -> str:
    """csv.Sniffer over the first lines, restricted to common delimiters; "," on doubt.

    The Sniffer fails on single-column files and on samples cut inside a quoted cell;
    counting candidates on the first line is the fallback before giving up on ",".
    """
    sample = text[:64_000]
    try:
        return csv.Sniffer().sniff(sample, delimiters=_DELIMITERS).delimiter
    except csv.Error:
        first = sample.split("\n", 1)[0]
        counts = {d: first.count(d) for d in _DELIMITERS}
        best = max(counts, key=lambda d: counts[d])
        return best if counts[best] else ","


def parse_csv(path: Path) -> ParsedDocument:
    """Parse a delimited text file into table_row blocks (ragged rows tolerated)."""
    text, encoding = decode_bytes(path.read_bytes())
    text = text.replace("\x00", "")
    delimiter = sniff_delimiter(text)
    rows = list(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter))
    builder = BlockBuilder()
    builder.add_table(rows)
    widths = {len(r) for r in rows if any(c.strip() for c in r)}
    notes = encoding_notes(encoding)
    if len(widths) > 1:
        notes.append(f"ragged rows: {sorted(widths)} fields")
    return make_document(builder, format=path.suffix.lower().lstrip(".") or "csv", parser="csv", warnings=notes)
