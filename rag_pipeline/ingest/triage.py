"""Decide, per raw file, between "parsed and trusted" and "quarantined with a reason".

Pure: it takes the parse function as an argument, so tests can inject faults and the
Dagster asset stays a thin loop around it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rag_pipeline.ingest.ocr import OcrEngineError
from rag_pipeline.ingest.document import ParsedDocument, QuarantineReason, UnreadableDocument
from rag_pipeline.ingest.scan import RawFile


@dataclass(frozen=True)
class QuarantineRecord:
    doc_id: str
    source: str
    sha256: str
    size: int
    reason: QuarantineReason
    detail: str
    ocr_confidence: float | None = None


ParseFn = Callable[[Path], ParsedDocument]


def triage(raw: RawFile, parse: ParseFn, ocr_min_confidence: float) -> ParsedDocument | QuarantineRecord:
    def quarantined(reason: QuarantineReason, detail: str, conf: float | None = None) -> QuarantineRecord:
        return QuarantineRecord(raw.doc_id, raw.source, raw.sha256, raw.size, reason, detail, conf)

    if raw.metadata_error:
        return quarantined("invalid_metadata", raw.metadata_error)
    try:
        parsed = parse(raw.path)
    except UnreadableDocument as exc:
        return quarantined(exc.reason, exc.detail)
    except OcrEngineError:
        raise  # a broken install (tesseract missing), not a bad document: fail the run loudly
    except Exception as exc:  # a parser bug must cost one file, never the run
        return quarantined("corrupt", f"{type(exc).__name__}: {exc}")
    if not parsed.text.strip():
        return quarantined("no_text", "the file parsed but contains no text")
    if parsed.ocr_used and (parsed.ocr_confidence or 0.0) < ocr_min_confidence:
        return quarantined(
            "ocr_low_confidence",
            f"mean OCR word confidence {parsed.ocr_confidence or 0:.1f} < threshold {ocr_min_confidence:g}",
            parsed.ocr_confidence,
        )
    return parsed
