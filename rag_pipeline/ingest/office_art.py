"""Pictures inside Office 97-2003 files (.doc, .ppt, .xls): the raster images their OfficeArt
blip records hold ([MS-ODRAW] 2.2.23-2.2.31: JPEG, PNG, DIB, TIFF), for ingest.pictures to OCR.

Where a picture sits (which paragraph, slide or cell) is in each format's own drawing records;
this reads the pictures, the picture store shapes name them by (:func:`store_pictures`) and an
.xls's pictures by sheet (:func:`xls_sheet_pictures`). The .ppt reader places each on its slide
(slides_binary.py), the .doc reader an inline one after its paragraph (word_binary.py, through the
character's picture location) and a floating one after the paragraph holding its anchor, the .xls
reader each after its sheet's rows; the rest go after the document's own text (the OOXML and
OpenDocument readers place every picture where it is). Metafiles (EMF, WMF, PICT) are not raster
images and are skipped, as they are there.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator

# recType -> the recInstance values that carry a second 16-byte UID before the picture
_BITMAP_BLIPS = {
    0xF01D: {0x46B, 0x6E3},  # JPEG (RGB, CMYK)
    0xF02A: {0x46B, 0x6E3},  # JPEG (CMYK)
    0xF01E: {0x6E1},  # PNG
    0xF01F: {0x7A9},  # DIB
    0xF029: {0x6E5},  # TIFF
}
_CANDIDATE = re.compile(rb"(?=[\x00-\xff]{2}[\x1d\x1e\x1f\x29\x2a]\xf0)", re.S)
_DIB = 0xF01F
_MSO_DRAWING_GROUP, _CONTINUE = 0x00EB, 0x003C  # BIFF8 records that hold an .xls's pictures
_BOF, _EOF, _BOUNDSHEET, _MSO_DRAWING = 0x0809, 0x000A, 0x0085, 0x00EC  # a substream's ends; a sheet's name; its shapes
_BSTORE, _FBSE, _FOPT = 0xF001, 0xF007, 0xF00B  # the picture store, one entry of it, a shape's properties
_PIB, _FILL_BLIP = 0x0104, 0x0186  # shape properties naming a store entry: the picture, a picture fill


def _as_bmp(dib: bytes) -> bytes:
    """A device-independent bitmap (a BMP without its file header) as a BMP file Pillow opens."""
    if len(dib) < 40:
        return dib
    size, _, _, _, bits, compression = struct.unpack_from("<IiiHHI", dib, 0)
    colours = struct.unpack_from("<I", dib, 32)[0] or (1 << bits if bits <= 8 else 0)
    masks = 12 if compression == 3 and size == 40 else 0
    offset = 14 + size + masks + 4 * colours
    return b"BM" + struct.pack("<IHHI", 14 + len(dib), 0, 0, offset) + dib


def blips(data: bytes) -> Iterator[bytes]:
    """The raster pictures of the blip records found in `data` (a stream, or an .xls's joined
    drawing group), in their order. A candidate record whose header does not hold up (version,
    instance, length) is passed over; one whose bytes are not an image is left to the reader."""
    position = 0
    for match in _CANDIDATE.finditer(data):
        start = match.start()
        if start < position or start + 8 > len(data):
            continue
        version_instance, kind, length = struct.unpack_from("<HHI", data, start)
        instance = version_instance >> 4
        end = start + 8 + length
        if version_instance & 0xF or end > len(data) or length < 40:
            continue
        two_uids = _BITMAP_BLIPS[kind]
        if instance not in two_uids and instance + 1 not in two_uids:  # neither of the type's two instances
            continue
        picture = data[start + 8 + (33 if instance in two_uids else 17) : end]
        position = end
        yield _as_bmp(picture) if kind == _DIB else picture


def xls_drawing_group(workbook: bytes) -> bytes:
    """An .xls Workbook stream's drawing group (where its pictures are), its records joined: a
    picture longer than one BIFF record continues in the records after it."""
    parts: list[bytes] = []
    position, inside = 0, False
    while position + 4 <= len(workbook):
        kind, length = struct.unpack_from("<HH", workbook, position)
        body = workbook[position + 4 : position + 4 + length]
        if kind == _MSO_DRAWING_GROUP or (inside and kind == _CONTINUE):
            parts.append(body)
            inside = True
        else:
            inside = False
        position += 4 + length
    return b"".join(parts)


def _biff_records(workbook: bytes) -> Iterator[tuple[int, int, bytes]]:
    """(offset, type, body) of a BIFF stream's records, in order."""
    position = 0
    while position + 4 <= len(workbook):
        kind, length = struct.unpack_from("<HH", workbook, position)
        yield position, kind, workbook[position + 4 : position + 4 + length]
        position += 4 + length


def art_records(data: bytes, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """(type, instance, body start, body end) of the records in [start, end), in order: OfficeArt
    records, and a .ppt's own, which share their 8-byte header (one level: a container's children
    are :func:`art_walk`'s)."""
    position = start
    while position + 8 <= end:
        version_instance, kind, size = struct.unpack_from("<HHI", data, position)
        body = position + 8
        if body + size > end:
            return
        yield kind, version_instance >> 4, body, body + size
        position = body + size


def is_container(data: bytes, body: int) -> bool:
    """Whether the record whose body starts at `body` is a container (version nibble 0xF)."""
    return data[body - 8] & 0x0F == 0x0F


def art_walk(data: bytes, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """Every OfficeArt record under [start, end), depth first, in file order."""
    for kind, instance, body, stop in art_records(data, start, end):
        yield kind, instance, body, stop
        if is_container(data, body):
            yield from art_walk(data, body, stop)


def store_pictures(data: bytes, start: int, end: int, delayed: bytes = b"") -> list[bytes | None]:
    """The raster picture each entry of the first picture store (BStore) under [start, end) holds,
    in store order (a shape names one by its place, from 1): the blip after the entry's 36-byte
    header and name (.xls), else the one at its foDelay offset of `delayed` (a .doc's WordDocument
    stream, a .ppt's Pictures stream); None for an entry holding none (a metafile, an empty slot)."""
    for kind, _, body, stop in art_walk(data, start, end):
        if kind == _BSTORE:
            entries: list[bytes | None] = []
            for sub, _, sub_body, sub_stop in art_records(data, body, stop):
                if sub != _FBSE or sub_stop - sub_body < 36:  # still an entry: later ones keep their places
                    entries.append(None)
                    continue
                picture = next(blips(data[sub_body + 36 + data[sub_body + 33] : sub_stop]), None)
                offset, = struct.unpack_from("<I", data, sub_body + 28)
                if picture is None and offset + 8 <= len(delayed):
                    length, = struct.unpack_from("<I", delayed, offset + 4)
                    picture = next(blips(delayed[offset : offset + 8 + length]), None)
                entries.append(picture)
            return entries
    return []


def pictures_shown(data: bytes, start: int, end: int) -> list[int]:
    """The picture store entries (from 1) the shapes under [start, end) show, as a picture or as
    a picture fill (a scanned page laid over a whole slide), in drawing order."""
    shown: list[int] = []
    for kind, count, body, stop in art_walk(data, start, end):
        if kind != _FOPT:
            continue
        for at in range(body, min(stop, body + 6 * count) - 5, 6):
            prop, value = struct.unpack_from("<HI", data, at)
            if prop & 0x3FFF in (_PIB, _FILL_BLIP) and prop & 0x4000 and value not in shown:  # 0x4000: a store index
                shown.append(value)
    return shown


def _sheet_name(body: bytes) -> str:
    """A BOUNDSHEET8 record's sheet name (a ShortXLUnicodeString after 6 bytes)."""
    if len(body) < 8:
        return ""
    count, wide = body[6], body[7] & 1
    raw = body[8 : 8 + count * (2 if wide else 1)]
    return raw.decode("utf-16-le" if wide else "latin-1", errors="replace")


def xls_sheet_pictures(workbook: bytes) -> tuple[dict[str, list[bytes]], list[bytes]]:
    """An .xls Workbook stream's raster pictures by the sheet (name) whose shapes show them, in
    drawing order, and the pictures no sheet shows (a chart's, or drawing records this does not
    follow), in store order: read after the last sheet, so nothing is lost. Damaged drawing
    records lose where the pictures sit, not the pictures: all of them are then "no sheet's"."""
    drawing_group = xls_drawing_group(workbook)
    try:
        return _by_sheet(workbook, drawing_group)
    except (struct.error, IndexError, RecursionError):
        return {}, list(blips(drawing_group))


def _by_sheet(workbook: bytes, drawing_group: bytes) -> tuple[dict[str, list[bytes]], list[bytes]]:
    store = store_pictures(drawing_group, 0, len(drawing_group))
    sheets: dict[int, str] = {}  # the offset of a sheet's BOF -> its name
    drawings: dict[str, list[bytes]] = {}
    open_streams: list[str | None] = []  # substreams nest: an embedded chart's inside its sheet's
    drawing_goes_on = False  # a drawing record longer than one BIFF record continues in CONTINUEs
    for offset, kind, body in _biff_records(workbook):
        owner = open_streams[-1] if open_streams else None
        if kind == _BOUNDSHEET and len(body) >= 4:
            sheets[struct.unpack_from("<I", body, 0)[0]] = _sheet_name(body)
        elif kind == _BOF:
            open_streams.append(sheets.get(offset))
        elif kind == _EOF and open_streams:
            open_streams.pop()
        elif owner is not None and (kind == _MSO_DRAWING or (drawing_goes_on and kind == _CONTINUE)):
            drawings.setdefault(owner, []).append(body)
        drawing_goes_on = kind == _MSO_DRAWING or (drawing_goes_on and kind == _CONTINUE)
    by_sheet: dict[str, list[bytes]] = {}
    placed: set[int] = set()
    for name, parts in drawings.items():
        drawing = b"".join(parts)
        for entry in pictures_shown(drawing, 0, len(drawing)):
            if 1 <= entry <= len(store) and store[entry - 1] is not None and entry not in placed:
                by_sheet.setdefault(name, []).append(store[entry - 1])  # type: ignore[arg-type]
                placed.add(entry)
    if not store:  # no picture store found: every blip of the drawing group, as before
        return {}, list(blips(drawing_group))
    rest = [picture for n, picture in enumerate(store, start=1) if picture is not None and n not in placed]
    return by_sheet, rest
