"""What OLE2 compound files (the Office 97-2003 formats) share: their summary's title."""

from __future__ import annotations

from pathlib import Path

import olefile


def ole_title(path: Path) -> str | None:
    """The title an OLE2 Office file keeps in its SummaryInformation stream (bytes in the
    stream's code page), if any."""
    try:
        with olefile.OleFileIO(str(path)) as ole:
            meta = ole.get_metadata()
    except Exception:  # no or damaged summary stream: the title is optional
        return None
    raw = meta.title
    if isinstance(raw, bytes):
        codepage = (meta.codepage or 1252) & 0xFFFF
        try:
            raw = raw.decode({65001: "utf-8", 1200: "utf-16-le"}.get(codepage, f"cp{codepage}"))
        except (LookupError, UnicodeDecodeError):
            raw = raw.decode("latin-1")
    return (raw or "").strip("\x00 ") or None
