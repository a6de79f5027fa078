"""Word's automatic paragraph numbers: "第三条", "2.1", "(a)", which the paragraph's text does not hold.

A numbered paragraph names a list (``w:numPr``: its ``numId`` and level, on the paragraph or its
style); the numbering part gives each level its format (decimal, Chinese counting, roman,
letters…), its start and its text ("第%1条", "%1.%2"). Word counts as it lays the document out: a
level's counter goes up at each paragraph of that level and the levels below it start again.
Chinese regulations number their articles this way, and "第十二条规定了什么" needs the "第十二条"
the reader sees. Bullets and unnumbered levels give no label.
"""

from __future__ import annotations

import re

from docx.oxml.ns import qn
from lxml import etree

_PARSER = etree.XMLParser(resolve_entities=False, no_network=True)
_DIGITS = "零一二三四五六七八九"
_STEMS = "甲乙丙丁戊己庚辛壬癸"
_PLACEHOLDER = re.compile(r"%([1-9])")
LEVELS = 9


def _chinese(n: int) -> str:
    """1 -> 一, 10 -> 十, 12 -> 十二, 20 -> 二十, 105 -> 一百零五 (chineseCounting styles, to 9999)."""
    if n <= 0 or n > 9999:
        return str(n)
    out, zero = "", False
    for value, unit in ((1000, "千"), (100, "百"), (10, "十"), (1, "")):
        digit, n = divmod(n, value)
        if digit:
            out += ("零" if zero and out else "") + (_DIGITS[digit] if not (unit == "十" and digit == 1 and not out) else "") + unit
            zero = False
        elif out:
            zero = True
    return out


def _roman(n: int) -> str:
    if n <= 0 or n >= 4000:
        return str(n)
    out = ""
    for value, numeral in ((1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
                           (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")):
        count, n = divmod(n, value)
        out += numeral * count
    return out


def _letters(n: int) -> str:
    """1 -> A, 26 -> Z, 27 -> AA (Word repeats the letter)."""
    return chr(ord("A") + (n - 1) % 26) * ((n - 1) // 26 + 1) if n > 0 else str(n)


def format_number(n: int, fmt: str) -> str:
    """A counter in one of Word's number formats (ST_NumberFormat); unknown ones as decimal."""
    if fmt in ("chineseCounting", "chineseCountingThousand", "chineseLegalSimplified", "taiwaneseCounting",
               "taiwaneseCountingThousand", "japaneseCounting", "ideographDigital"):
        return _chinese(n)
    if fmt == "ideographTraditional":
        return _STEMS[(n - 1) % 10] if n > 0 else str(n)
    if fmt in ("upperRoman", "lowerRoman"):
        return _roman(n) if fmt == "upperRoman" else _roman(n).lower()
    if fmt in ("upperLetter", "lowerLetter"):
        return _letters(n) if fmt == "upperLetter" else _letters(n).lower()
    if fmt == "decimalZero":
        return f"{n:02d}"
    if fmt == "decimalEnclosedCircle" or fmt == "decimalEnclosedCircleChinese":
        return chr(0x2460 + n - 1) if 1 <= n <= 20 else str(n)
    if fmt == "decimalFullWidth":
        return str(n).translate({ord(d): 0xFF10 + int(d) for d in "0123456789"})
    return str(n)


class Numbering:
    """The numbering part read once; ``label`` then counts each list as Word lays it out."""

    def __init__(self, xml: bytes | None) -> None:
        self._levels: dict[str, dict[int, tuple[str, str, int]]] = {}  # abstractNumId -> level -> (format, text, start)
        self._nums: dict[str, tuple[str, dict[int, int]]] = {}  # numId -> (abstractNumId, level -> start override)
        self._counters: dict[str, list[int | None]] = {}
        if not xml:
            return
        try:
            root = etree.fromstring(xml, parser=_PARSER)
        except etree.XMLSyntaxError:  # a damaged numbering part: no numbers, the text read
            return
        for abstract in root.iter(qn("w:abstractNum")):
            levels = {}
            for lvl in abstract.iter(qn("w:lvl")):
                levels[_int(lvl.get(qn("w:ilvl")), 0)] = (
                    _val(lvl, "w:numFmt") or "decimal", _val(lvl, "w:lvlText") or "", _int(_val(lvl, "w:start"), 1))
            self._levels[abstract.get(qn("w:abstractNumId")) or ""] = levels
        for num in root.iter(qn("w:num")):
            overrides = {
                _int(o.get(qn("w:ilvl")), 0): _int(_val(o, "w:startOverride"), 1)
                for o in num.iter(qn("w:lvlOverride")) if o.find(qn("w:startOverride")) is not None
            }
            self._nums[num.get(qn("w:numId")) or ""] = (_val(num, "w:abstractNumId") or "", overrides)

    def label(self, num_id: str, level: int) -> str:
        """The number the next paragraph of list ``num_id`` at ``level`` shows ("" for a bullet,
        an unnumbered level or a list the part does not define), counted."""
        if num_id not in self._nums or not 0 <= level < LEVELS:
            return ""
        abstract, overrides = self._nums[num_id]
        levels = self._levels.get(abstract, {})
        if level not in levels:
            return ""
        fmt, text, start = levels[level]
        counters = self._counters.setdefault(num_id, [None] * LEVELS)
        first = overrides.get(level, start)
        counters[level] = first if counters[level] is None else counters[level] + 1  # type: ignore[operator]
        for deeper in range(level + 1, LEVELS):
            counters[deeper] = None
        if fmt in ("bullet", "none") or not text:
            return ""

        def shown(match: re.Match[str]) -> str:
            at = int(match.group(1)) - 1
            f, _, s = levels.get(at, ("decimal", "", 1))
            value = counters[at] if counters[at] is not None else overrides.get(at, s)
            return format_number(value, fmt if at == level else f)  # type: ignore[arg-type]

        return _PLACEHOLDER.sub(shown, text).strip()


def _val(el, tag: str) -> str | None:  # type: ignore[no-untyped-def]
    child = el.find(qn(tag))
    return child.get(qn("w:val")) if child is not None else None


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default
