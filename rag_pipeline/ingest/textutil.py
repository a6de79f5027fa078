"""Text clean-up shared by every parser: whitespace, line joining, CJK spacing, mojibake."""

from __future__ import annotations

import os
import re
import unicodedata

from rag_pipeline.ingest.language import CJK_CLASS

# Characters that carry no text but break tokenizers and exact matching.
_INVISIBLE = re.compile("[\u0000\u00ad\u200b\u200c\u200d\u2060\ufeff]")
_HSPACE = re.compile(r"[ \t\u00a0\u2000-\u200a\u202f\u205f\u3000\f\v]+")
_CJK_GAP = re.compile(f"(?<=[{CJK_CLASS}]) +(?=[{CJK_CLASS}])")
_CJK_LINEBREAK = re.compile(f"(?<=[{CJK_CLASS}])[ \t]*\n[ \t]*(?=[{CJK_CLASS}])")
# A run of latin-1 characters that is really UTF-8 decoded as latin-1 (e.g. "â\x80\x93" for "–").
# Requiring a C1 control (U+0080-U+009F, never legitimate text) keeps false positives out.
_MOJIBAKE = re.compile("[\u00c2-\u00f4][\u0080-\u00bf]{1,3}")
_HYPHEN_BREAK = re.compile(r"(?<=[a-z])-\n(?=[a-z])")
# Latin ligatures (ﬁ, ﬂ) and Kangxi/CJK radicals (⽤ for 用) that PDF fonts emit instead of
# the ordinary letters; they defeat search. Full NFKC is not applied on purpose: it would
# also turn Chinese fullwidth punctuation (，：) into ASCII.
_COMPAT = re.compile("[\ufb00-\ufb06\u2e80-\u2eff\u2f00-\u2fdf]")


def clean_text(text: str) -> str:
    """Normalise line endings and horizontal whitespace, drop invisible characters.

    Line breaks are kept (callers decide what they mean); runs of spaces, tabs, NBSP and
    ideographic spaces become one space; each line is stripped; ligatures and Kangxi
    radicals become the ordinary characters.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\u2028", "\n").replace("\u2029", "\n\n")
    text = _INVISIBLE.sub("", text)
    text = _COMPAT.sub(lambda m: unicodedata.normalize("NFKC", m.group(0)), text)
    text = _HSPACE.sub(" ", text)
    return "\n".join(line.strip() for line in text.split("\n")).strip()


def squash(text: str) -> str:
    """One-line form of ``text``: line breaks between CJK characters vanish, others become spaces."""
    if text.isascii() and text.isprintable():  # most table cells: no clean-up applies but spacing (5x faster)
        return " ".join(text.split())
    text = _CJK_LINEBREAK.sub("", clean_text(text))
    return re.sub(r"\s+", " ", text).strip()


def join_lines(text: str) -> str:
    """Unwrap hard-wrapped lines of one paragraph into a single line.

    Layout engines (PDF, OCR) break lines where the page ran out of width, not where the
    author did. Chinese lines join without a space, English lines with one, and a word
    hyphenated across the break ("exam-\\nple") is rejoined.
    """
    text = clean_text(text)
    text = _HYPHEN_BREAK.sub("", text)
    text = _CJK_LINEBREAK.sub("", text)
    return re.sub(r"\s*\n\s*", " ", text).strip()


def remove_cjk_spaces(text: str) -> str:
    """Drop spaces between two CJK characters (OCR engines emit one between every glyph)."""
    return _CJK_GAP.sub("", text)


def fix_mojibake(text: str) -> str:
    """Repair UTF-8 text that was once decoded as latin-1 ("â\\x80\\x93" -> "–").

    Only runs containing C1 control characters are touched, so genuine accented text
    ("café", "Ärger") is never altered.
    """

    def repair(m: re.Match[str]) -> str:
        s = m.group(0)
        if not any("\u0080" <= c <= "\u009f" for c in s):
            return s
        try:
            return s.encode("latin-1").decode("utf-8")
        except UnicodeError:
            return s

    return _MOJIBAKE.sub(repair, text) if "\u0080" <= max(text, default="\0") else text


def has_words(text: str) -> bool:
    """True if ``text`` contains at least one letter, digit or CJK character."""
    return any(ch.isalnum() for ch in text)


def split_paragraphs(text: str) -> list[str]:
    """Split on blank lines; stripped, non-empty pieces."""
    return [p.strip() for p in re.split(r"\n[ \t]*\n", text) if p.strip()]


def display_name(name: str) -> str:
    """A file name as valid UTF-8 text: name bytes that are not UTF-8 (which Python keeps as
    lone surrogates, and Arrow and hashing refuse) become ``\\xNN`` escapes."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")
