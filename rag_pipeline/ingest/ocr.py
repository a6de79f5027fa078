"""Tesseract OCR of one page image, turned right side up, with per-word confidence kept.

Confidence is the quarantine signal for scans, so it is computed here from tesseract's
own word confidences instead of guessed from the text. The caller decides what counts
as too low.

Orientation: a page is first read as it is. A page read with a low mean confidence is
also read turned by 180, 90 and 270 degrees (tesseract's orientation-and-script detection,
``--psm 0``, decides which turn is tried first), and the most confident reading is kept.
Measured on real scans (bench/parse_fidelity.py): OSD alone was wrong on a rotated
journal page (orientation confidence 2.9, it proposed the opposite turn), so its answer
is only a hint that a reading must confirm; upright pages read well cost no extra call.
A page still doubtful after the turns is read as vertical Chinese when the vertical models
are installed (scripts/install.sh installs them).

Confidence is kept per paragraph too: one page can hold text at several angles (a table
turned sideways, a pasted-in upside-down slip). The kept reading gains the paragraphs another
turn read well, and each paragraph carries its own confidence, so triage can drop the
garbage a page's good average would hide.

Calls go through ``pytesseract``. Its child process inherits this process's environment,
and tesseract's OpenMP threads fight each other on a small machine (a page took 14 s
instead of 3.4 s on 2 cores), so the environment pytesseract hands its children carries
``OMP_THREAD_LIMIT=1`` unless the caller set one; this process's own environment (and so
torch, if it is loaded here) is left alone. Parallelism belongs across pages and files.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache

from PIL import Image, ImageOps

from rag_pipeline.config import child_process_env
from rag_pipeline.ingest.deadline import remaining
from rag_pipeline.ingest.ink import Box, glyph_mask, read_share, reduction
from rag_pipeline.ingest.textutil import has_words, join_lines, remove_cjk_spaces

OCR_TIMEOUT_S = 180
# Text smaller than ~20 px x-height is read badly by tesseract; small images are upscaled.
_MIN_LONG_SIDE = 1600
_MAX_UPSCALE = 4
# A page read upright with a mean word confidence below this is also read turned. Upright
# clean pages score 77-96 here, the same pages upside down 19-53.
ROTATION_RETRY_BELOW = 75.0
# A turned reading replaces the upright one only if it is this much more confident, finds
# this many words, and reads at least as much confident text (see _reads_better).
_ROTATION_MIN_GAIN = 15.0
_ROTATION_MIN_WORDS = 10
# A page whose mean is good is still read at the other turns when this share of its words sit in
# paragraphs read below _PARAGRAPH_UNREAD_BELOW (RAG_OCR_MIN_CONFIDENCE's default): part of it
# may stand at another angle.
_PARAGRAPH_UNREAD_BELOW = 60.0
_UNREAD_SHARE_RETRY = 0.2
_TURNS = {90: Image.Transpose.ROTATE_90, 180: Image.Transpose.ROTATE_180, 270: Image.Transpose.ROTATE_270}
# Vertical Chinese (columns top to bottom, right to left) is another model, not a turn: a page
# still doubtful after the turns is read once more with tesseract's vertical models, --psm 5
# (one block of vertical text). Traditional first: vertical print is mostly Traditional (a
# classical page: 69.4 this way, 63.7 Simplified first, 18.3 read horizontally).
_VERTICAL_MODELS = ("chi_tra_vert", "chi_sim_vert")
# A vertical reading must also reach this confidence: on horizontal pages that read badly
# (posters, blurred photos) the vertical models scored 21-38, on the vertical page 69.
_VERTICAL_MIN_CONFIDENCE = 50.0


class OcrEngineError(RuntimeError):
    """Tesseract is missing or misconfigured (e.g. a language pack is not installed).

    A deployment fault, not a property of the document, so it is not turned into a
    quarantine reason.
    """


class OcrTimeout(Exception):
    """Tesseract did not finish one page within the timeout."""


class _ChildEnvironment(Mapping[str, str]):
    """This process's environment as tesseract children should see it: one OpenMP thread unless set."""

    def _view(self) -> dict[str, str]:
        return child_process_env({"OMP_THREAD_LIMIT": "1"})

    def __getitem__(self, key: str) -> str:
        return self._view()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._view())

    def __len__(self) -> int:
        return len(self._view())

    def copy(self) -> dict[str, str]:
        return self._view()


@lru_cache(maxsize=1)
def pytesseract_module():
    """pytesseract, imported on first OCR: it imports pandas when installed (~1.5 s on 2 cores),
    which a process that only loads the definitions (a code server, a `dagster` CLI command)
    never needs. Every child's environment is built from its module global (subprocess_args)."""
    import pytesseract

    pytesseract.pytesseract.environ = _ChildEnvironment()  # type: ignore[attr-defined]
    return pytesseract


@dataclass(frozen=True)
class OcrParagraph:
    """One paragraph's text and its words' mean confidence (speck lines count, see ocr_image)."""

    text: str
    confidence: float
    words: int
    boxes: tuple[Box, ...] = ()  # its words' boxes in the frame of the reading that made it
    turn: int | None = None  # set when taken from a reading at another turn (see ocr_image)


@dataclass
class OcrPage:
    """OCR result of one page image: paragraphs in reading order plus confidence stats."""

    paragraphs: list[OcrParagraph] = field(default_factory=list)
    word_count: int = 0  # words with a confidence >= 0 and non-blank text
    confidence_sum: float = 0.0
    rotation: int = 0  # degrees the page was turned counter-clockwise before this reading
    vertical: bool = False  # read as vertical Chinese columns
    tried: tuple[tuple[int | str, float], ...] = ()  # (rotation or "vertical", confidence) of every reading made
    added: tuple[tuple[int, int], ...] = ()  # (turn, paragraphs) taken from other turns' readings
    boxes: list[Box] = field(default_factory=list)  # every word's box, in this reading's frame
    ink_read: float = 1.0  # share of the page's glyph ink inside a word box (ingest/ink.py)

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
    img: Image.Image,
    lang: str = "eng+chi_sim",
    timeout: float = OCR_TIMEOUT_S,
    *,
    upscale: bool = True,
    orient: bool = True,
) -> OcrPage:
    """OCR one page image with tesseract's automatic page segmentation, right side up.

    Words are grouped into lines and paragraphs by tesseract's block/par/line numbers;
    lines of a paragraph are unwrapped, and the spaces tesseract puts between Chinese
    characters are removed. Lines with no letter, digit or CJK character (specks read as
    "|", "~") are dropped from the text but still count toward the confidence.
    ``upscale=False`` for renders whose resolution the caller already chose;
    ``orient=False`` reads the page only as it is.
    """
    img = prepare_image(img, upscale=upscale)
    best = read_page(img, lang, timeout)
    readings = [best]
    tried = [(0, round(best.confidence, 1))]
    if orient and best.word_count and _doubtful(best):
        for turn in _turns_to_try(img, timeout):
            candidate = read_page(img.transpose(_TURNS[turn]), lang, timeout)
            candidate.rotation = turn
            readings.append(candidate)
            tried.append((turn, round(candidate.confidence, 1)))
            if _reads_better(candidate, best):
                best = candidate
            if not _doubtful(best):
                break
    vertical = vertical_language(lang) if orient and best.confidence < ROTATION_RETRY_BELOW else None
    if vertical:
        candidate = read_page(img, vertical, timeout, psm=5)
        candidate.vertical = True
        tried.append(("vertical", round(candidate.confidence, 1)))
        if candidate.confidence >= _VERTICAL_MIN_CONFIDENCE and _reads_better(candidate, best):
            best = candidate
    _add_paragraphs_read_well(best, [r for r in readings if r is not best])
    best.tried = tuple(tried)
    extra = [(p.turn, p.boxes) for p in best.paragraphs if p.turn is not None]
    factor = reduction(img)
    best.ink_read = read_share(glyph_mask(img, factor), [(best.rotation, best.boxes), *extra], factor)
    return best


def _doubtful(page: OcrPage) -> bool:
    """Worth reading at other turns: a low mean, or a good mean over a large unreadable part
    (upright pages here hold at most 4 % of their words in paragraphs below
    ``_PARAGRAPH_UNREAD_BELOW``; a page with its lower half upside down about half)."""
    if page.confidence < ROTATION_RETRY_BELOW:
        return True
    unread = sum(p.words for p in page.paragraphs if p.confidence < _PARAGRAPH_UNREAD_BELOW)
    return unread >= _UNREAD_SHARE_RETRY * page.word_count


def _add_paragraphs_read_well(page: OcrPage, others: list[OcrPage]) -> None:
    """Append to `page` the paragraphs other turns read at least as well as a clean upright page
    (``ROTATION_RETRY_BELOW``): the parts of a page that stand at another angle. Text the page
    already holds is not added twice (tesseract reads some lines at right angles by itself, so
    two turns can both read the same lines); the page's word statistics include what was added."""
    seen = set().union(*(_shingles(p.text) for p in page.paragraphs))
    added = []
    for other in others:
        count = 0
        for para in other.paragraphs:
            shingles = _shingles(para.text)
            if para.confidence < ROTATION_RETRY_BELOW or len(shingles & seen) * 2 >= len(shingles):
                continue
            seen |= shingles
            page.paragraphs.append(replace(para, turn=other.rotation))
            page.word_count += para.words
            page.confidence_sum += para.confidence * para.words
            count += 1
        if count:
            added.append((other.rotation, count))
    page.added = tuple(added)


def _shingles(text: str, n: int = 5) -> set[str]:
    """Character n-grams of the text without spaces or case: long enough that two different
    paragraphs share few, so half of them already seen means the paragraph is already read."""
    flat = "".join(text.split()).casefold()
    return {flat[i : i + n] for i in range(max(1, len(flat) - n + 1))}


def vertical_language(lang: str) -> str | None:
    """Tesseract's vertical Chinese models, when `lang` reads Chinese and they are installed."""
    if not any(code.startswith("chi_") for code in lang.split("+")):
        return None
    return "+".join(m for m in _VERTICAL_MODELS if m in installed_languages()) or None


@lru_cache(maxsize=1)
def installed_languages() -> frozenset[str]:
    pytesseract = pytesseract_module()
    try:
        return frozenset(pytesseract.get_languages(config=""))
    except (pytesseract.TesseractNotFoundError, pytesseract.TesseractError):
        return frozenset()


def _reads_better(candidate: OcrPage, current: OcrPage) -> bool:
    """Is a turned reading the page right side up, rather than a few confident specks?

    It must be clearly more confident per word, find a page's worth of words, and read at
    least as much confident text (sum of word confidences). Upside-down and sideways pages
    read right gained 35-57 points with 70-550 words here; false turns were small: a street
    photo turned sideways gave 6 "words" at 62 (upright: 4 at 42), a degraded upright scan
    (DIBCO) 63 against 53 with the same text, so neither is taken.
    """
    return (
        candidate.confidence >= current.confidence + _ROTATION_MIN_GAIN
        and candidate.word_count >= _ROTATION_MIN_WORDS
        and candidate.confidence_sum >= current.confidence_sum
    )


def detect_rotation(img: Image.Image, timeout: float = OCR_TIMEOUT_S) -> int | None:
    """Tesseract's orientation detection (``--psm 0``): the counter-clockwise turn, in
    degrees, that puts the page upright, or None when it cannot tell (too little text)."""
    pytesseract = pytesseract_module()
    timeout = remaining(timeout)
    if not timeout:
        return None
    try:
        osd = pytesseract.image_to_osd(
            img, lang="osd", config="--psm 0", timeout=timeout, output_type=pytesseract.Output.DICT
        )
    except pytesseract.TesseractError:
        return None  # "Too few characters", an empty page
    except RuntimeError as exc:
        if "timeout" in str(exc).lower():
            return None
        raise
    except pytesseract.TesseractNotFoundError as exc:
        raise OcrEngineError("tesseract executable not found") from exc
    # OSD's "rotate" is the clockwise turn that corrects the page.
    return (360 - int(osd.get("rotate", 0))) % 360


def _turns_to_try(img: Image.Image, timeout: float) -> list[int]:
    """The turns to read a doubtful page at: OSD's proposal first, then 180, 90, 270."""
    hint = detect_rotation(img, timeout)
    order = [180, 90, 270]
    if hint in order:
        order.remove(hint)
        order.insert(0, hint)
    return order


def read_page(img: Image.Image, lang: str, timeout: float = OCR_TIMEOUT_S, psm: int = 3) -> OcrPage:
    """One tesseract reading of an already prepared image, as it is (page segmentation `psm`)."""
    data = _image_to_data(img, lang, timeout, psm)
    page = OcrPage()
    paragraphs: dict[tuple[int, int], dict[int, list[str]]] = {}
    confidences: dict[tuple[int, int], list[float]] = {}
    boxes: dict[tuple[int, int], list[Box]] = {}
    for i, level in enumerate(data.get("level", [])):
        if int(level) != 5:
            continue
        word = str(data["text"][i] or "").strip()
        try:
            conf = float(data["conf"][i])
        except (TypeError, ValueError):
            continue
        if not word or conf < 0:
            continue
        page.word_count += 1
        page.confidence_sum += conf
        key = (int(data["block_num"][i]), int(data["par_num"][i]))
        paragraphs.setdefault(key, {}).setdefault(int(data["line_num"][i]), []).append(word)
        confidences.setdefault(key, []).append(conf)
        box = (int(data["left"][i]), int(data["top"][i]), int(data["width"][i]), int(data["height"][i]))
        boxes.setdefault(key, []).append(box)
        page.boxes.append(box)

    for key, lines in paragraphs.items():
        kept = [remove_cjk_spaces(" ".join(words)) for _, words in sorted(lines.items())]
        kept = [line for line in kept if has_words(line)]
        if kept:
            confs = confidences[key]
            page.paragraphs.append(
                OcrParagraph(join_lines("\n".join(kept)), sum(confs) / len(confs), len(confs), tuple(boxes[key]))
            )
    return page


def _image_to_data(img: Image.Image, lang: str, timeout: float, psm: int = 3) -> dict[str, list]:
    """pytesseract's image_to_data, with its failures sorted into engine faults and timeouts."""
    pytesseract = pytesseract_module()
    timeout = remaining(timeout)
    if not timeout:
        raise OcrTimeout("the time limit for this part of the file had passed")
    try:
        return pytesseract.image_to_data(
            img, lang=lang, config=f"--psm {psm}", timeout=timeout, output_type=pytesseract.Output.DICT
        )
    except pytesseract.TesseractNotFoundError as exc:
        raise OcrEngineError("tesseract executable not found") from exc
    except pytesseract.TesseractError as exc:
        message = str(exc)
        if "Failed loading language" in message or "Error opening data file" in message:
            raise OcrEngineError(f"tesseract language data missing for {lang!r}: {message[:300]}") from exc
        raise RuntimeError(f"tesseract failed: {message[:300]}") from exc
    except RuntimeError as exc:  # pytesseract's own timeout (it kills the child)
        if "timeout" in str(exc).lower():
            raise OcrTimeout(f"tesseract exceeded {timeout:.0f}s") from exc
        raise
