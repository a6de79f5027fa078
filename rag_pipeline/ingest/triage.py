"""Decide, per raw file, between "parsed and trusted" and "quarantined with a reason".

Pure: parsing takes the parse function as an argument (tests inject faults), and the
decision takes the parse outcome (which may come from the parse cache).

An operator can release a file that would be quarantined for ``ocr_low_confidence`` or
``no_text`` with ``"quarantine_release": true`` in its sidecar (see ``release.py``): the
OCR text is indexed whatever its confidence (a textless file becomes a document with no
chunks), and the document's ``warnings`` say it was released and from what. Other reasons
(encrypted, corrupt, ...) leave nothing to index and cannot be released.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
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

RELEASABLE_REASONS: frozenset[str] = frozenset({"ocr_low_confidence", "no_text"})
RELEASE_NOTE = "released from quarantine by operator"  # prefix of the warning a released document carries
_RELEASE_HINT = "to index it anyway, release it: `rag quarantine release {source}` (sidecar \"quarantine_release\": true)"

_FORMAT_BY_EXTENSION = {".png": "image", ".jpg": "image", ".jpeg": "image", ".tif": "image", ".tiff": "image",
                        ".htm": "html", ".markdown": "md"}


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

    released = raw.metadata.quarantine_release is True  # a truthy string like "false" does not count

    def releasable(reason: QuarantineReason, detail: str, parsed: ParsedDocument | None, conf: float | None = None):
        if not released:
            return quarantined(reason, f"{detail}; {_RELEASE_HINT.format(source=raw.source)}", conf)
        note = f"{RELEASE_NOTE} (was {reason}: {detail})"
        if parsed is None or reason == "no_text":  # nothing to index: a document without chunks
            ext = raw.path.suffix.lower()
            return ParsedDocument(
                blocks=[],
                format=parsed.format if parsed else _FORMAT_BY_EXTENSION.get(ext, ext.lstrip(".") or "unknown"),
                parser=parsed.parser if parsed else "none",
                page_count=parsed.page_count if parsed else None,
                ocr_used=parsed.ocr_used if parsed else False,
                ocr_confidence=parsed.ocr_confidence if parsed else None,
                title=parsed.title if parsed else None,
                warnings=[*(parsed.warnings if parsed else []), note],
            )
        return replace(parsed, warnings=[*parsed.warnings, note])

    if raw.metadata_error:
        return quarantined("invalid_metadata", raw.metadata_error)
    if isinstance(outcome, UnreadableDocument):
        if outcome.reason == "no_text":
            return releasable("no_text", outcome.detail, None)
        extra = f" (quarantine_release does not apply to {outcome.reason})" if released else ""
        return quarantined(outcome.reason, outcome.detail + extra)
    parsed = outcome
    if not parsed.text.strip():
        return releasable("no_text", "the file parsed but contains no text", parsed)
    if parsed.ocr_used and (parsed.ocr_confidence or 0.0) < ocr_min_confidence:
        return releasable(
            "ocr_low_confidence",
            f"mean OCR word confidence {parsed.ocr_confidence or 0:.1f} < threshold {ocr_min_confidence:g}",
            parsed,
            parsed.ocr_confidence,
        )
    return parsed


def was_released(doc: ParsedDocument) -> bool:
    """Did triage accept this document only because its sidecar released it?"""
    return any(w.startswith(RELEASE_NOTE) for w in doc.warnings)
