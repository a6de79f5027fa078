"""Text inside pictures embedded in a document: a scanned page or a photographed form pasted into
Word, a screenshot of a table. OCR'd as a scan is, each paragraph kept with its confidence, so
triage drops what is unreadable paragraph by paragraph and never the document's own text.

Pictures too small to hold a line of text (icons, bullets, rules) are not read, nor vector
formats (EMF, WMF, SVG: Pillow cannot draw them), nor more than MAX_PICTURES per document (a photo
report of hundreds of pictures would cost many minutes for pictures that are mostly photos, logos
and labels); what is skipped is counted in the warnings. The limit is a count, not seconds (before
session 51: 45 s of OCR), so what is read does not depend on how busy the machine was when the
document was first parsed: the outcome is cached by content.
"""

from __future__ import annotations

import hashlib
import io
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

from PIL import Image

from rag_pipeline.ingest import heartbeat
from rag_pipeline.ingest.blocks import BlockBuilder
from rag_pipeline.ingest.image import MAX_PIXELS
from rag_pipeline.ingest.ocr import OcrParagraph, OcrTimeout, ocr_image

MAX_PICTURES = 40  # OCR'd per document; ~1 s each on this machine (bench/README.md)
# One picture's OCR, under the parse pool's stall limit (120 s by default): a picture past it is
# skipped, never the document's own text lost with it. The only limit that depends on the
# machine's speed, and only for a picture that takes a minute.
PICTURE_TIMEOUT_S = 60.0
MIN_SIDE = 24  # pixels: below it a picture cannot hold a readable line


@dataclass
class PictureReader:
    """OCR of a document's pictures, one at a time in document order; the tally for its metadata."""

    lang: str
    read: int = 0
    words: int = 0  # of the paragraphs returned
    confidence_sum: float = 0.0
    skipped: dict[str, int] = field(default_factory=dict)
    seen: set[str] = field(default_factory=set)

    def paragraphs(self, blob: bytes) -> list[OcrParagraph]:
        """The text paragraphs OCR finds in one picture's bytes: none for a picture not read, or
        one met before (a logo in every section is read, and its text indexed, once)."""
        digest = hashlib.sha256(blob).hexdigest()
        if digest in self.seen:
            return []
        self.seen.add(digest)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", Image.DecompressionBombWarning)
                img = Image.open(io.BytesIO(blob))  # the header only
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            return self._skip("too large")
        except Exception:  # SVG, or damaged: not a picture Pillow can read
            return self._skip("not a raster image")
        if img.width * img.height > MAX_PIXELS:
            return self._skip("too large")
        if min(img.width, img.height) < MIN_SIDE:
            return self._skip("too small to hold text")
        if self.read >= MAX_PICTURES:
            return self._skip(f"over the {MAX_PICTURES}-picture limit")
        try:
            img.load()
        except Exception:  # EMF/WMF: Pillow reads their header but cannot draw them here
            return self._skip("not a raster image")
        self.read += 1
        try:
            page = ocr_image(img, self.lang, timeout=PICTURE_TIMEOUT_S)  # flattens transparency onto white
        except OcrTimeout:
            return self._skip("OCR timeout")
        finally:
            heartbeat.beat()  # a picture done: progress for the parse pool's stall limit
        found = [p for p in page.paragraphs if p.text.strip()]
        self.words += sum(p.words for p in found)
        self.confidence_sum += sum(p.confidence * p.words for p in found)
        return found

    def add_text(self, builder: BlockBuilder, blob: bytes, *, page: int | None = None, sheet: str | None = None) -> None:
        """Append a picture's text where it sits: one ``ocr_text`` block per paragraph, each with
        its own confidence for triage."""
        for para in self.paragraphs(blob):
            builder.add(para.text, "ocr_text", page=page, sheet=sheet, ocr_confidence=round(para.confidence, 1))

    def _skip(self, why: str) -> list[OcrParagraph]:
        self.skipped[why] = self.skipped.get(why, 0) + 1
        return []

    def metadata(self, notes: Sequence[str] = ()) -> dict:
        """ParsedDocument fields: OCR used (text came from a picture) and the word-weighted
        confidence of that text; the reader's own ``notes`` then what was read and skipped."""
        notes = list(notes) + ([f"{self.read} embedded picture(s) OCR'd"] if self.read else [])
        notes += [f"{n} embedded picture(s) not OCR'd: {why}" for why, n in self.skipped.items()]
        confidence = round(self.confidence_sum / self.words, 1) if self.words else None
        return {"ocr_used": bool(self.words), "ocr_confidence": confidence, "warnings": notes}
