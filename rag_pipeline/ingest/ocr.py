"""Tesseract OCR of one page image, with per-word confidence kept.

Confidence is the quarantine signal for scans, so it is computed here from tesseract's
own word confidences instead of guessed from the text. The caller decides what counts
as too low.
"""

from __future__ import annotations

import csv
import io
import os
import subprocess
from dataclasses import dataclass, field

from PIL import Image, ImageOps

from rag_pipeline.ingest.textutil import has_words, join_lines, remove_cjk_spaces

OCR_TIMEOUT_S = 180
TESSERACT_CMD = "tesseract"
# Text smaller than ~20 px x-height is read badly by tesseract; small images are upscaled.
_MIN_LONG_SIDE = 1600
_MAX_UPSCALE = 4


class OcrEngineError(RuntimeError):
    """Tesseract is missing or misconfigured (e.g. a language pack is not installed).

    A deployment fault, not a property of the document, so it is not turned into a
    quarantine reason.
    """


class OcrTimeout(Exception):
    """Tesseract did not finish one page within the timeout."""


@dataclass
class OcrPage:
    """OCR result of one page image: paragraphs in reading order plus confidence stats."""

    paragraphs: list[str] = field(default_factory=list)
    word_count: int = 0  # words with a confidence >= 0 and non-blank text
    confidence_sum: float = 0.0

    @property
    def confidence(self) -> float:
        """Mean word confidence 0-100 (0 when tesseract found no words)."""
        return self.confidence_sum / self.word_count if self.word_count else 0.0


def prepare_image(img: Image.Image, *, upscale: bool = True) -> Image.Image:
    """Bring any PIL image into a mode tesseract reads reliably, right side up, large enough.

    Transparent images are flattened onto white (a transparent background reads as black),
    16-bit and CMYK images are converted, EXIF rotation is applied, and small images are
    upscaled so that text reaches a size tesseract's models were trained on.
    """
    try:
        img = ImageOps.exif_transpose(img)
    except Exception:  # broken EXIF must not stop OCR
        pass
    if img.mode in ("I;16", "I;16B", "I;16L", "I"):
        img = img.point(lambda v: v / 256).convert("L")
    elif img.mode == "F":
        img = img.convert("L")
    if img.mode in ("P", "PA"):
        img = img.convert("RGBA")
    if img.mode in ("RGBA", "LA", "La", "RGBa"):
        background = Image.new("RGB", img.size, "white")
        background.paste(img.convert("RGBA"), mask=img.convert("RGBA").getchannel("A"))
        img = background
    elif img.mode not in ("1", "L", "RGB"):
        img = img.convert("RGB")
    long_side = max(img.size)
    if upscale and 0 < long_side < _MIN_LONG_SIDE:
        factor = min(_MAX_UPSCALE, _MIN_LONG_SIDE / long_side)
        if img.mode == "1":
            img = img.convert("L")
        img = img.resize((round(img.width * factor), round(img.height * factor)), Image.Resampling.LANCZOS)
    return img


def ocr_image(
    img: Image.Image, lang: str = "eng+chi_sim", timeout: float = OCR_TIMEOUT_S, *, upscale: bool = True
) -> OcrPage:
    """OCR one page image with tesseract's automatic page segmentation.

    Words are grouped into lines and paragraphs by tesseract's block/par/line numbers;
    lines of a paragraph are unwrapped, and the spaces tesseract puts between Chinese
    characters are removed. Lines with no letter, digit or CJK character (specks read as
    "|", "~") are dropped from the text but still count toward the confidence.
    ``upscale=False`` for renders whose resolution the caller already chose.
    """
    img = prepare_image(img, upscale=upscale)
    rows = _run_tesseract_tsv(img, lang, timeout)

    page = OcrPage()
    paragraphs: dict[tuple[int, int], dict[int, list[str]]] = {}
    for row in rows:
        if row.get("level") != "5":
            continue
        word = (row.get("text") or "").strip()
        try:
            conf = float(row.get("conf") or -1)
        except ValueError:
            continue
        if not word or conf < 0:
            continue
        page.word_count += 1
        page.confidence_sum += conf
        key = (int(row["block_num"]), int(row["par_num"]))
        paragraphs.setdefault(key, {}).setdefault(int(row["line_num"]), []).append(word)

    for lines in paragraphs.values():
        kept = [remove_cjk_spaces(" ".join(words)) for _, words in sorted(lines.items())]
        kept = [line for line in kept if has_words(line)]
        if kept:
            page.paragraphs.append(join_lines("\n".join(kept)))
    return page


def _run_tesseract_tsv(img: Image.Image, lang: str, timeout: float) -> list[dict[str, str]]:
    """Run the tesseract CLI on ``img`` and return its TSV rows (what pytesseract's
    image_to_data returns, without its temp files).

    Called directly rather than through pytesseract to set ``OMP_THREAD_LIMIT=1`` for the
    child process only: tesseract's OpenMP threads fight each other and make a page about
    five times slower on a small machine, and setting the variable process-wide would
    also throttle torch in the same worker. Parallelism belongs across documents.
    """
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    env = dict(os.environ)
    env.setdefault("OMP_THREAD_LIMIT", "1")
    try:
        proc = subprocess.run(
            [TESSERACT_CMD, "stdin", "stdout", "-l", lang, "--psm", "3", "tsv"],
            input=buf.getvalue(),
            capture_output=True,
            timeout=timeout,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise OcrTimeout(f"tesseract exceeded {timeout:.0f}s") from exc
    except FileNotFoundError as exc:
        raise OcrEngineError(f"tesseract executable not found ({TESSERACT_CMD!r})") from exc
    stderr = proc.stderr.decode("utf-8", errors="replace")
    if proc.returncode != 0:
        if "Failed loading language" in stderr or "Error opening data file" in stderr:
            raise OcrEngineError(f"tesseract language data missing for {lang!r}: {stderr.strip()[:300]}")
        raise RuntimeError(f"tesseract exited {proc.returncode}: {stderr.strip()[:300]}")
    text = proc.stdout.decode("utf-8", errors="replace")
    return list(csv.DictReader(io.StringIO(text), delimiter="\t", quoting=csv.QUOTE_NONE))
