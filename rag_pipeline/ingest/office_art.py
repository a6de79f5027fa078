"""Pictures inside Office 97-2003 files (.doc, .ppt, .xls): the raster images their OfficeArt
blip records hold ([MS-ODRAW] 2.2.23-2.2.31: JPEG, PNG, DIB, TIFF), for ingest.pictures to OCR.

Where a picture sits (which paragraph, slide or cell) is in each format's own drawing records;
this reads only the pictures. The .ppt reader places each on its slide (slides_binary.py, through
the picture store), the .doc reader an inline one after its paragraph (word_binary.py, through
the character's picture location); the rest go after the document's own text (the OOXML and
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
