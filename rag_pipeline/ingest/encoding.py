"""Byte-to-text decoding for plain-text formats (txt, csv, md, html).

Company files arrive as UTF-8, UTF-16 (Excel "Unicode text" exports), GBK/GB18030
(older Chinese Windows tools) and Windows-1252 (older Western tools). The order below
trusts explicit evidence first (BOM, declared charset, strict UTF-8) and statistics last.
"""

from __future__ import annotations

import codecs

from charset_normalizer import from_bytes

from rag_pipeline.ingest.textutil import fix_mojibake

_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)

# GB2312 and GBK are subsets of GB18030; decoding with the superset never loses characters.
_GB_FAMILY = {"gb2312", "gbk", "cp936", "ms936", "hz", "gb18030", "euc_cn", "euccn"}
# Single-byte Latin code pages that charset-normalizer confuses with each other on short text;
# Windows-1252 is by far the most common in practice (and what browsers use for "latin-1").
_LATIN_SINGLE_BYTE = {
    "latin_1", "iso8859_1", "iso8859_2", "iso8859_3", "iso8859_4", "iso8859_9", "iso8859_10",
    "iso8859_13", "iso8859_14", "iso8859_15", "iso8859_16", "cp1250", "cp1252", "cp1254",
    "cp1257", "cp850", "cp437", "mac_roman", "mac_latin2", "ascii",
}


def _normalize(name: str) -> str | None:
    try:
        return codecs.lookup(name).name.replace("-", "_")
    except LookupError:
        return None


def _prefer(name: str, data: bytes) -> str:
    """Map an encoding name to the one we actually decode with."""
    norm = _normalize(name) or name
    if norm in _GB_FAMILY:
        return "gb18030"
    if norm in _LATIN_SINGLE_BYTE:
        try:
            data.decode("cp1252")
            return "cp1252"
        except UnicodeDecodeError:
            return norm
    return norm


def _looks_utf16(data: bytes) -> str | None:
    """UTF-16 without BOM: ASCII-range text has a NUL in every other byte."""
    sample = data[:4096]
    if len(sample) < 4:
        return None
    even_nul = sample[0::2].count(0) / max(1, len(sample[0::2]))
    odd_nul = sample[1::2].count(0) / max(1, len(sample[1::2]))
    if odd_nul > 0.4 and even_nul < 0.05:
        return "utf-16-le"
    if even_nul > 0.4 and odd_nul < 0.05:
        return "utf-16-be"
    return None


def decode_bytes(data: bytes, declared: str | None = None) -> tuple[str, str]:
    """Decode ``data`` and return ``(text, encoding_used)``.

    Order: BOM, ``declared`` (e.g. an HTML meta charset) if it decodes cleanly, UTF-16
    without BOM, strict UTF-8, charset-normalizer's guess (GB family widened to GB18030,
    Latin code pages narrowed to Windows-1252), and finally UTF-8 with replacement
    characters so that decoding itself never fails. Double-encoded UTF-8 is repaired.
    """
    for bom, enc in _BOMS:
        if data.startswith(bom):
            return data.decode(enc, errors="replace").lstrip("\ufeff"), enc

    candidates: list[str] = []
    if declared:
        norm = _normalize(declared)
        if norm:
            # Browsers read "gb2312" as GBK and "iso-8859-1"/"ascii" as Windows-1252; so do we.
            widen = norm in _GB_FAMILY or norm in {"latin_1", "iso8859_1", "ascii"}
            candidates.append(_prefer(norm, data) if widen else norm)
    utf16 = _looks_utf16(data)
    if utf16:
        candidates.append(utf16)
    candidates.append("utf-8")
    for enc in candidates:
        try:
            return fix_mojibake(data.decode(enc)), enc
        except (UnicodeDecodeError, LookupError):
            continue

    best = from_bytes(data[:200_000]).best()
    if best is not None and best.encoding:
        enc = _prefer(best.encoding, data)
        try:
            return data.decode(enc, errors="replace"), enc
        except LookupError:
            pass
    return data.decode("utf-8", errors="replace"), "utf-8?"


def encoding_notes(encoding: str) -> list[str]:
    """A warning line for anything but UTF-8, so unusual sources are visible in reports."""
    plain = encoding.replace("_", "-").lower() in ("utf-8", "utf8", "utf-8-sig", "ascii")
    return [] if plain else [f"decoded as {encoding}"]
