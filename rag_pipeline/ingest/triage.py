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
from rag_pipeline.ingest.document import IMAGE_EXTENSIONS, ParsedDocument, QuarantineReason, UnreadableDocument
from rag_pipeline.ingest.scan import RawFile
from rag_pipeline.ingest.serialize import ParseHeader, plain_header_from_json


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
PAGES_DROPPED_NOTE = "OCR pages dropped"  # prefix of the warning listing pages whose OCR text was not indexed
PARAGRAPHS_DROPPED_NOTE = "OCR paragraphs dropped"  # prefix of the warning counting unreadable paragraphs of kept pages
RELEASE_NOTE = "released from quarantine by operator"  # prefix of the warning a released document carries
_RELEASE_HINT = "to index it anyway, release it: `rag quarantine release {source}` (sidecar \"quarantine_release\": true)"

_FORMAT_BY_EXTENSION = dict.fromkeys(IMAGE_EXTENSIONS, "image") | {".htm": "html", ".markdown": "md", ".mht": "mhtml", ".rest": "rst", ".ndjson": "jsonl"}


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
    if parsed.ocr_used and not released and (parsed.ocr_pages or any(b.ocr_confidence is not None for b in parsed.blocks)):
        return _drop_low_confidence_pages(parsed, ocr_min_confidence, releasable)
    if parsed.ocr_used and (parsed.ocr_confidence or 0.0) < ocr_min_confidence:
        return releasable(
            "ocr_low_confidence",
            f"mean OCR word confidence {parsed.ocr_confidence or 0:.1f} < threshold {ocr_min_confidence:g}",
            parsed,
            parsed.ocr_confidence,
        )
    return parsed


def kept_as_cached(raw: RawFile, cached: str | None) -> ParseHeader | None:
    """The header of a cached parse outcome (its JSON) that `triage` keeps exactly as it is — a
    parse without OCR that holds text, whatever the sidecar or threshold says — else None (decode
    it and triage it). Decoding every block of every cached parse only to keep it unchanged was
    most of a no-op run's parse step (bench/README.md)."""
    return None if raw.metadata_error or cached is None else plain_header_from_json(cached)


def _drop_low_confidence_pages(parsed: ParsedDocument, threshold: float, releasable) -> ParsedDocument | QuarantineRecord:
    """Judge OCR confidence page by page and then paragraph by paragraph, so an unreadable page
    (upside down, a smudge, a photo) or an unreadable part of a page (a slip pasted in upside
    down, a stamp) neither hides behind a good average nor costs the good text.

    The OCR text of pages below ``threshold`` is dropped and the pages are listed in the
    document's warnings (``PAGES_DROPPED_NOTE``); on the pages kept, paragraphs below it are
    dropped and counted (``PARAGRAPHS_DROPPED_NOTE``); text-layer pages are kept as they are.
    A document whose OCR'd text comes from embedded pictures (a .docx) has no pages to judge:
    only those paragraphs are.
    When nothing is left, the document is quarantined as ``ocr_low_confidence`` with the
    pages listed, and can be released like any low-confidence scan.
    """
    bad = [p for p in parsed.ocr_pages if p["confidence"] < threshold]
    bad_pages = {p["page"] for p in bad}
    low = [b for b in parsed.blocks
           if b.ocr_confidence is not None and b.page not in bad_pages and b.ocr_confidence < threshold]
    if not bad and not low:
        return parsed
    kept = [b for b in parsed.blocks
            if b.ocr_confidence is None or (b.page not in bad_pages and b.ocr_confidence >= threshold)]
    notes, why_empty = [], []
    if bad:
        listed = ", ".join(f"{p['page']} ({p['confidence']:.1f})" for p in bad)
        detail = f"OCR word confidence below threshold {threshold:g} on page(s) {listed}"
        notes.append(f"{PAGES_DROPPED_NOTE}: {detail}")
        why_empty.append(f"every OCR'd page is unreadable: {detail}" if not low else detail)
    if low:
        pages = sorted({b.page for b in low}, key=lambda n: (n is None, n))
        per_page = ", ".join(f"{n if n is not None else 'embedded pictures'} ({sum(b.page == n for b in low)})" for n in pages)
        notes.append(f"{PARAGRAPHS_DROPPED_NOTE}: {len(low)} below threshold {threshold:g} on page(s) {per_page}")
        why_empty.insert(0, f"no OCR paragraph reaches threshold {threshold:g}")
    if not any(b.text.strip() for b in kept):
        return releasable("ocr_low_confidence", "; ".join(why_empty), parsed, parsed.ocr_confidence)
    if not parsed.ocr_pages:  # pictures OCR'd inside a document: only their paragraphs are judged
        return replace(parsed, blocks=kept, warnings=[*parsed.warnings, *notes])
    good = [p for p in parsed.ocr_pages if p["confidence"] >= threshold]
    words = sum(p["words"] for p in good)
    confidence = round(sum(p["confidence"] * p["words"] for p in good) / words, 1) if words else None
    return replace(
        parsed,
        blocks=kept,
        ocr_used=bool(good),
        ocr_confidence=confidence,
        warnings=[*parsed.warnings, *notes],
    )


def dropped_pages(doc: ParsedDocument) -> str | None:
    """The pages triage dropped from this document and why, or None."""
    return next((w[len(PAGES_DROPPED_NOTE) + 2 :] for w in doc.warnings if w.startswith(PAGES_DROPPED_NOTE)), None)


def was_released(doc: ParsedDocument | ParseHeader) -> bool:
    """Did triage accept this document only because its sidecar released it? (A header stands
    for a parse kept as it is: never a release.)"""
    return isinstance(doc, ParsedDocument) and any(w.startswith(RELEASE_NOTE) for w in doc.warnings)
