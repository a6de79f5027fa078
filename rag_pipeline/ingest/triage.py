"""Decide, per raw file, between "parsed and trusted" and "quarantined with a reason".

Pure: parsing takes the parse function as an argument (tests inject faults), and the
decision takes the parse outcome (which may come from the parse cache).
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
Outcome = ParsedDocument | UnreadableDocument


def parse_outcome(path: Path, parse: ParseFn) -> Outcome:
    """Run a parser; every failure becomes an UnreadableDocument except a broken OCR install."""
    try:
        return parse(path)
    except UnreadableDocument as exc:
        return exc
    except OcrEngineError:
        raise  # a broken install (tesseract missing), not a bad document: fail the run loudly
    except Exception as exc:  # a parser bug must cost one file, never the run
        return UnreadableDocument("corrupt", f"{type(exc).__name__}: {exc}")


def triage(raw: RawFile, outcome: Outcome | None, ocr_min_confidence: float) -> ParsedDocument | QuarantineRecord:
    """Trusted parsed document, or quarantine with a reason. `outcome` may be None when the
    sidecar is invalid (no need to parse a file we will not index)."""

    def quarantined(reason: QuarantineReason, detail: str, conf: float | None = None) -> QuarantineRecord:
        return QuarantineRecord(raw.doc_id, raw.source, raw.sha256, raw.size, reason, detail, conf)

    if raw.metadata_error:
        return quarantined("invalid_metadata", raw.metadata_error)
    if isinstance(outcome, UnreadableDocument):
        return quarantined(outcome.reason, outcome.detail)
    parsed = outcome
    if not parsed.text.strip():
        return quarantined("no_text", "the file parsed but contains no text")
    if parsed.ocr_used and (parsed.ocr_confidence or 0.0) < ocr_min_confidence:
        return quarantined(
            "ocr_low_confidence",
            f"mean OCR word confidence {parsed.ocr_confidence or 0:.1f} < threshold {ocr_min_confidence:g}",
            parsed.ocr_confidence,
        )
    return parsed
