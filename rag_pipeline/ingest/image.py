"""Raster images (png, jpg, tiff incl. multi-page, HEIC/HEIF phone photos): OCR every frame with
tesseract."""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from PIL import Image, ImageSequence

from rag_pipeline.ingest import heartbeat
from rag_pipeline.ingest.blocks import BlockBuilder, make_document
from rag_pipeline.ingest.document import ParsedDocument, UnreadableDocument
from rag_pipeline.ingest.ink import UNREAD_NOTE_BELOW
from rag_pipeline.ingest.ocr import OcrTimeout, ocr_image

# Pillow's own bomb threshold (~89 Mpx) is the limit: an A0 scan at 300 dpi is ~140 Mpx
# and would need several GB in tesseract; such files are quarantined as too_large.
MAX_PIXELS = Image.MAX_IMAGE_PIXELS or 89_478_485
MAX_FRAMES = 500
# ISO base media file brands of HEIF stills and sequences (an iPhone photo is "heic"); AVIF's own
# brand is not here: the HEIF library shipped with pillow-heif has no AV1 decoder.
_HEIF_BRANDS = {b"heic", b"heix", b"heim", b"heis", b"hevc", b"hevx", b"mif1", b"msf1"}


def is_heif(head: bytes) -> bool:
    """A HEIF/HEIC file by its first bytes: an ``ftyp`` box naming a HEIF brand (whatever its name)."""
    return head[4:8] == b"ftyp" and head[8:12] in _HEIF_BRANDS


@lru_cache(maxsize=1)
def _read_heif() -> None:
    """Teach Pillow HEIF on the first HEIF file (pillow-heif bundles libheif and its HEVC decoder)."""
    import pillow_heif

    pillow_heif.register_heif_opener()


def open_image(path: Path) -> Image.Image:
    """Open an image lazily, turning decompression bombs into ``too_large``.

    PIL only reads the header here, so the pixel check happens before any decoding.
    """
    with open(path, "rb") as fh:
        if is_heif(fh.read(12)):
            _read_heif()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            img = Image.open(path)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise UnreadableDocument("too_large", f"image exceeds {MAX_PIXELS} pixels: {exc}") from exc
    if img.width * img.height > MAX_PIXELS:
        raise UnreadableDocument("too_large", f"image is {img.width}x{img.height} pixels (limit {MAX_PIXELS})")
    return img


def _checked(frame: Image.Image) -> Image.Image:
    """Later TIFF frames can be larger than the first; check each before decoding it."""
    if frame.width * frame.height > MAX_PIXELS:
        raise UnreadableDocument("too_large", f"frame is {frame.width}x{frame.height} pixels (limit {MAX_PIXELS})")
    return frame


def ocr_frames(
    frames: Iterable[tuple[int, Image.Image]], lang: str, builder: BlockBuilder, *, upscale: bool = True
) -> tuple[int, float, list[str], list[dict]]:
    """OCR ``(page_number, image)`` pairs into ``builder``, each turned right side up.

    Returns ``(word_count, confidence_sum, warnings, pages)`` so callers can aggregate a
    word-weighted document confidence; ``pages`` holds one ``{"page", "confidence",
    "words", "rotation", "ink_read"}`` entry per page read (``"vertical": True`` when read as vertical Chinese) (see ``ParsedDocument.ocr_pages``). Each
    block carries its own paragraph's mean confidence, for triage to drop what a page's average
    hides. A page that times out is skipped with a warning; a page read turned, or holding
    paragraphs read at another angle, says so in the warnings.
    """
    words, conf_sum, notes, pages = 0, 0.0, [], []
    for page_no, frame in frames:
        try:
            result = ocr_image(frame, lang, upscale=upscale)
        except OcrTimeout as exc:
            notes.append(f"page {page_no}: OCR timeout ({exc})")
            continue
        finally:
            heartbeat.beat()  # a page done: a long scan is progressing, not hung (pool.py)
        words += result.word_count
        conf_sum += result.confidence_sum
        pages.append(
            {"page": page_no, "confidence": round(result.confidence, 1), "words": result.word_count,
             "rotation": result.rotation, "ink_read": round(result.ink_read, 3)}
            | ({"vertical": True} if result.vertical else {})
        )
        if result.word_count and result.ink_read < UNREAD_NOTE_BELOW:
            notes.append(f"page {page_no}: the words read cover {result.ink_read:.0%} of the page's text ink "
                         f"(confidence {result.confidence:.1f} describes only those)")
        if result.rotation or result.vertical:
            how = "as vertical Chinese" if result.vertical else f"turned {result.rotation} degrees"
            notes.append(
                f"page {page_no}: read {how} (confidence by reading: "
                + ", ".join(f"{turn}: {conf:g}" for turn, conf in result.tried) + ")"
            )
        if result.added:
            notes.append(f"page {page_no}: paragraphs read at another angle added ("
                         + ", ".join(f"{count} turned {turn} degrees" for turn, count in result.added) + ")")
        for para in result.paragraphs:
            builder.add(para.text, "ocr_text", page=page_no, ocr_confidence=round(para.confidence, 1))
    return words, conf_sum, notes, pages


def parse_image(path: Path, *, ocr_lang: str = "eng+chi_sim") -> ParsedDocument:
    """OCR an image file; every frame of a multi-page TIFF is a page.

    Zero recognised words means ``no_text`` (a photo, a blank scan). Low confidence is
    not judged here: ``ocr_confidence`` is the word-weighted mean over all frames and
    ``ocr_pages`` has each frame's own confidence, for triage to drop bad pages.
    """
    img = open_image(path)
    with img:
        page_count = getattr(img, "n_frames", 1) or 1
        if page_count > MAX_FRAMES:
            raise UnreadableDocument("too_large", f"{page_count} frames (limit {MAX_FRAMES})")
        frames = ((i, _checked(frame).copy()) for i, frame in enumerate(ImageSequence.Iterator(img), start=1))
        builder = BlockBuilder()
        words, conf_sum, notes, pages = ocr_frames(frames, ocr_lang, builder)
    if words == 0:
        if notes:
            raise UnreadableDocument("timeout", "; ".join(notes))
        raise UnreadableDocument("no_text", "OCR found no words in the image")
    return make_document(
        builder,
        format="image",
        parser="tesseract",
        page_count=page_count,
        ocr_used=True,
        ocr_confidence=round(conf_sum / words, 1),
        warnings=notes,
        ocr_pages=pages,
    )
