"""How much of a page's printed text an OCR reading accounts for.

Tesseract's word confidences only describe the words it found: a strip read 81 % at confidence
88 looks as good as one read whole. The share of the page's glyph ink that lies inside the
reading's word boxes says what the confidence cannot: how much text was not read at all.

Ink is what Otsu's threshold separates from the background; glyphs are its connected components
of a text-like size (specks, rules, borders and photos are left out by their size against the
median component). Measured on the upright pages of ../shared/corpus (bench/README.md, "Pages at
two angles" and "How much of a page was read"): pages read whole cover 0.88-1.00 of their
glyph ink; a stylised poster read in part 0.32.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
from PIL import Image

Box = tuple[int, int, int, int]  # left, top, width, height in the reading's own frame

# A page whose reading covers less than this share of its glyph ink says so in the document's
# warnings (reported, not judged: the pages read whole here cover 0.88 and more).
UNREAD_NOTE_BELOW = 0.8
_MIN_GLYPH_PIXELS = 4  # specks
_MAX_GLYPH_HEIGHTS = 4  # taller than this many median glyph heights: a rule, a border, a photo
_MAX_GLYPH_WIDTHS = 8  # wider than this many median glyph heights: a rule, an underline


_MAX_PIXELS = 4_000_000  # larger pages are measured at a reduced size (a 17 Mpx page: 1.4 s -> 0.06 s)


def reduction(img: Image.Image) -> int:
    """The whole factor that brings the page under _MAX_PIXELS (1: measured as it is)."""
    return max(1, math.ceil(math.sqrt(img.width * img.height / _MAX_PIXELS)))


def glyph_mask(img: Image.Image, factor: int = 1) -> np.ndarray:
    """Boolean mask of the pixels that belong to text-sized ink components, at 1/`factor` size."""
    gray = img.convert("L")
    gray = np.asarray(gray.reduce(factor) if factor > 1 else gray, dtype=np.uint8)
    ink = gray <= _otsu(gray)
    if ink.mean() > 0.5:  # light text on a dark ground
        ink = ~ink
    from scipy import ndimage  # here, not at module level: loading the definitions need not import it (~0.5 s)

    labels, count = ndimage.label(ink)
    if not count:
        return ink
    spans = ndimage.find_objects(labels)
    heights = np.array([s[0].stop - s[0].start for s in spans])
    widths = np.array([s[1].stop - s[1].start for s in spans])
    sizes = ndimage.sum_labels(ink, labels, index=np.arange(1, count + 1))
    glyph = sizes >= _MIN_GLYPH_PIXELS
    if not glyph.any():
        return np.zeros_like(ink)
    median = float(np.median(heights[glyph]))
    glyph &= (heights <= _MAX_GLYPH_HEIGHTS * median) & (widths <= _MAX_GLYPH_WIDTHS * median)
    keep = np.zeros(count + 1, dtype=bool)
    keep[1:] = glyph
    return keep[labels]


def read_share(glyphs: np.ndarray, boxes_by_turn: Iterable[tuple[int, Iterable[Box]]], factor: int = 1) -> float:
    """Share of the glyph pixels inside a word box (padded by a quarter of its height). Boxes of a
    reading made turned by `turn` degrees counter-clockwise are mapped back to the page's frame;
    `factor` is the mask's reduction (glyph_mask). A page without glyphs counts as read whole."""
    total = int(glyphs.sum())
    if not total:
        return 1.0
    covered = np.zeros_like(glyphs)
    for turn, boxes in boxes_by_turn:
        k = (turn // 90) % 4
        frame = np.zeros(np.rot90(glyphs, k).shape, dtype=bool)
        for box in boxes:
            left, top, width, height = (v // factor for v in box)
            pad = max(2, height // 4)
            frame[max(0, top - pad) : top + height + pad, max(0, left - pad) : left + width + pad] = True
        covered |= np.rot90(frame, -k)
    return float((glyphs & covered).sum()) / total


def _otsu(gray: np.ndarray) -> int:
    """The grey level that best splits the histogram in two (Otsu 1979)."""
    hist = np.bincount(gray.ravel(), minlength=256).astype(float)
    weight = np.cumsum(hist) / hist.sum()
    mean = np.cumsum(hist * np.arange(256)) / hist.sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        between = (mean[-1] * weight - mean) ** 2 / (weight * (1 - weight))
    if np.isnan(between).all():  # one grey level: no ink at all
        return -1
    return int(np.nanargmax(between))
