"""Cheap script-based language tagging for a zh/en corpus.

A full language identifier is overkill here: the corpus is Chinese, English or a mix,
and the only decisions downstream (tokenizer choice, search analyzer) hinge on whether
the text is written in Han characters or in Latin letters. Counting scripts is fast,
deterministic and needs no model.
"""

from __future__ import annotations

import re

# (start, end) inclusive code point ranges of Han ideographs.
_HAN_RANGES = (
    (0x3400, 0x4DBF),  # CJK Unified Ideographs Extension A
    (0x4E00, 0x9FFF),  # CJK Unified Ideographs
    (0xF900, 0xFAFF),  # CJK Compatibility Ideographs
    (0x20000, 0x2FA1F),  # Extensions B-F and Compatibility Supplement
    (0x30000, 0x323AF),  # Extensions G-H
)

# Other East Asian scripts and the punctuation/fullwidth forms used with them.
_OTHER_CJK_RANGES = (
    (0x2E80, 0x2FDF),  # CJK radicals, Kangxi radicals
    (0x3000, 0x303F),  # CJK symbols and punctuation (、。「」…)
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3100, 0x312F),  # Bopomofo
    (0x3130, 0x318F),  # Hangul compatibility jamo
    (0x31A0, 0x31FF),  # Bopomofo extended, CJK strokes, Katakana ext.
    (0x3200, 0x33FF),  # Enclosed CJK letters, CJK compatibility
    (0xAC00, 0xD7AF),  # Hangul syllables
    (0xFE30, 0xFE4F),  # CJK compatibility forms
    (0xFF00, 0xFFEF),  # Halfwidth and fullwidth forms (，：！（） ...)
)

_LATIN_WORD = re.compile(r"[A-Za-z\u00C0-\u024F]+")


def _char_class(ranges: tuple[tuple[int, int], ...]) -> str:
    return "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in ranges)


HAN_CLASS = _char_class(_HAN_RANGES)
"""Regex character-class body (without brackets) matching Han ideographs."""
CJK_CLASS = _char_class(_HAN_RANGES + _OTHER_CJK_RANGES)
"""Regex character-class body (without brackets) matching everything :func:`is_cjk` accepts."""
_HAN = re.compile(f"[{HAN_CLASS}]")


def _in(cp: int, ranges: tuple[tuple[int, int], ...]) -> bool:
    return any(lo <= cp <= hi for lo, hi in ranges)


def is_han(ch: str) -> bool:
    """True for a Han ideograph (Chinese character), the unit jieba segments."""
    return _in(ord(ch), _HAN_RANGES)


def is_cjk(ch: str) -> bool:
    """True for any East Asian script character or CJK/fullwidth punctuation.

    Wider than :func:`is_han` on purpose: text between two such characters is written
    without spaces, so this is the test for "a space here is spurious" and for
    "segment this run with a CJK tokenizer".
    """
    cp = ord(ch)
    return _in(cp, _HAN_RANGES) or _in(cp, _OTHER_CJK_RANGES)


def detect_language(text: str) -> str:
    """Return "zh", "en", "mixed" or "und" from the balance of Han characters to Latin words.

    One Han character carries roughly the content of one English word, so the share is
    han_chars / (han_chars + latin_words): >= 0.75 is "zh" (Chinese prose with English
    terms still counts as Chinese), <= 0.10 is "en", in between is "mixed". Text with
    neither (digits, punctuation, other scripts) is "und".
    """
    han = len(_HAN.findall(text))
    latin = len(_LATIN_WORD.findall(text))
    total = han + latin
    if total == 0:
        return "und"
    share = han / total
    if share >= 0.75:
        return "zh"
    if share <= 0.10:
        return "en"
    return "mixed"
