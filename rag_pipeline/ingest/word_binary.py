"""Word 97-2003 documents (.doc) read straight from the binary format ([MS-DOC]) with olefile.

The text of a .doc lies in its ``WordDocument`` stream as *pieces* (8-bit cp1252 or UTF-16,
the latter for any Chinese), listed in order by the piece table in the ``0Table``/``1Table``
stream. Paragraphs end in ``\\r``; a table cell ends in ``\\x07`` and so does a row, whose end
mark is told from an empty cell's by its paragraph properties (``sprmPFTtp`` in the PAPX
formatting pages). Fields keep their result, not their code (``{ PAGE }`` → ``3``); an inline
picture's OCR'd text follows its paragraph, a floating one's the paragraph it is anchored in (pictures
no shape or character places, after the text), comment anchors are
dropped, a footnote's or endnote's text is put in brackets where it is cited
(the .odt/.docx readers' rule), a text box's paragraphs follow the paragraph its shape is anchored
in. Headings are paragraphs in the built-in heading styles (or with an outline level of their own).
Text a tracked change deleted (``sprmCFRMarkDel`` on its characters) is left out of the main text,
inserted text read as the rest: the document as it reads with its changes accepted. Headers and
footers are not read.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import olefile

from rag_pipeline.ingest.blocks import BlockBuilder, make_document
from rag_pipeline.ingest.document import ParsedDocument, UnreadableDocument
from rag_pipeline.ingest.office_art import art_records, art_walk, blips, pictures_shown, store_pictures
from rag_pipeline.ingest.ole import ole_title
from rag_pipeline.ingest.pictures import PictureReader
from rag_pipeline.ingest.table_grid import RowLayout, grid_rows

_WORD_IDENT = 0xA5EC
_OLDER_WORD_IDENTS = {0xA5DC, 0xA5DB}  # Word 6.0/95, Word 2.0
_FC_STSHF, _FC_CLX, _FC_PLCF_BTE_CHPX, _FC_PLCF_BTE_PAPX = 1, 33, 12, 13  # indexes into FibRgFcLcb97
_FC_FOOTNOTE_REF, _FC_FOOTNOTE_TXT, _FC_ENDNOTE_REF, _FC_ENDNOTE_TXT = 2, 3, 46, 47
_FC_SHAPE_ANCHORS, _FC_TEXT_BOX_STORIES = 40, 56  # PlcSpaMom (FSPA: 26 bytes), PlcftxbxTxt (FTXBXS: 22 bytes)
_FC_DRAWINGS = 50  # OfficeArtContent: the picture store, then each drawing (a label byte before it)
_SHAPE, _SHAPE_ID = 0xF004, 0xF00A  # an OfficeArt shape's container; its FSP (the shape id first)
_SPRM_P_F_IN_TABLE, _SPRM_P_F_TTP, _SPRM_P_F_INNER_TTP, _SPRM_T_DEF_TABLE = 0x2416, 0x2417, 0x244C, 0xD608
_SPRM_P_OUT_LVL = 0x2640  # a paragraph's own outline level (0-8; 9 = body text)
_SPRM_P_ILFO = 0x460B  # the paragraph's list (0: none)
_SPRM_C_PIC_LOCATION = 0x6A03  # a picture character's PICF offset in the Data stream
_SPRM_C_F_RMARK_DEL = 0x0800  # the characters are a tracked deletion: not in the document as it reads
_PICTURE = "\x01"  # an inline picture's character (with sprmCFSpec and sprmCPicLocation)
_STI_TITLE = 62
_SPRM_P_HUGE_PAPX = (0x6646, 0x6645)  # the paragraph's properties are too large for its page: in the Data stream
_CELL, _PARAGRAPH = "\x07", "\r"
_SECTION = "\x0c"  # a page or section break: ends its paragraph too
# Characters that stand for something else: anchors of pictures, footnotes, comments (dropped),
# line and column breaks, the non-breaking and soft hyphens.
_TRANSLATE = str.maketrans({"\x01": None, "\x02": None, "\x05": None, "\x08": None, "\x0b": "\n", "\x0e": "\n",
                            "\x1e": "-", "\x1f": None, "\xa0": " "})


@dataclass(frozen=True)
class _Piece:
    cp_start: int
    cp_end: int
    fc: int  # byte offset of the piece's first character in the WordDocument stream
    compressed: bool  # one byte a character (cp1252) instead of two (UTF-16LE)

    def fc_of(self, cp: int) -> int:
        return self.fc + (cp - self.cp_start) * (1 if self.compressed else 2)


def _fib(word: bytes) -> tuple[int, bool, tuple[int, ...], list[tuple[int, int]]]:
    """(flags, table stream is 1Table, the story lengths [ccpText, ccpFtn, ccpHdd, ccpMcr, ccpAtn,
    ccpEdn, …], [(fc, lcb)…]) from the File Information Block."""
    ident, = struct.unpack_from("<H", word, 0)
    if ident in _OLDER_WORD_IDENTS:
        raise UnreadableDocument("unsupported_format", "a Word 6.0/95 document (before Word 97): save it as .docx")
    if ident != _WORD_IDENT:
        raise UnreadableDocument("corrupt", f"the WordDocument stream does not start with a Word file header (ident {ident:#06x})")
    flags, = struct.unpack_from("<H", word, 0x0A)
    pos = 0x20
    csw, = struct.unpack_from("<H", word, pos)
    pos += 2 + 2 * csw
    cslw, = struct.unpack_from("<H", word, pos)
    longs = struct.unpack_from(f"<{cslw}i", word, pos + 2)
    pos += 2 + 4 * cslw
    pairs, = struct.unpack_from("<H", word, pos)
    fc_lcb = [struct.unpack_from("<II", word, pos + 2 + 8 * i) for i in range(pairs)]
    return flags, bool(flags & 0x0200), longs[3:], fc_lcb


def _pieces(table: bytes, fc: int, lcb: int) -> list[_Piece]:
    """The piece table (PlcPcd) inside the Clx; leading Prc blocks (property modifiers) skipped."""
    pos, end = fc, fc + lcb
    while pos < end and table[pos] == 0x01:
        size, = struct.unpack_from("<h", table, pos + 1)
        if size < 0:
            raise UnreadableDocument("corrupt", "the document's piece table is damaged")
        pos += 3 + size
    if pos >= end or table[pos] != 0x02:
        raise UnreadableDocument("corrupt", "the document's piece table is missing or damaged")
    size, = struct.unpack_from("<I", table, pos + 1)
    count = (size - 4) // 12
    cps = struct.unpack_from(f"<{count + 1}I", table, pos + 5)
    pieces = []
    for i in range(count):
        raw_fc, = struct.unpack_from("<I", table, pos + 5 + 4 * (count + 1) + 8 * i + 2)
        compressed = bool(raw_fc & 0x40000000)
        offset = raw_fc & 0x3FFFFFFF
        pieces.append(_Piece(cps[i], cps[i + 1], offset // 2 if compressed else offset, compressed))
    return pieces


def _text(word: bytes, pieces: list[_Piece], cp_end: int, cp_start: int = 0) -> str:
    """The characters at CPs [cp_start, cp_end): the main text from 0, a subdocument after it."""
    out = []
    for p in pieces:
        if p.cp_start >= cp_end:
            break
        if p.cp_end <= cp_start:
            continue
        first, last = max(p.cp_start, cp_start), min(p.cp_end, cp_end)
        data = word[p.fc_of(first):p.fc_of(last)]
        out.append(data.decode("cp1252", "replace") if p.compressed else data.decode("utf-16-le", "replace"))
    return "".join(out)


def _notes(word: bytes, table: bytes, pieces: list[_Piece], refs: tuple[int, int], texts: tuple[int, int], start: int) -> dict[int, str]:
    """CP of a footnote's (or endnote's) reference mark in the main text -> the note's text: the
    PlcffndRef's CPs, paired in order with the PlcffndTxt's ranges in the notes' subdocument, which
    begins at CP `start`."""
    positions, _ = _plc(table, *refs, 2)
    (txt_fc, txt_lcb) = texts
    if not positions or txt_lcb < 4 * len(positions) or txt_fc + txt_lcb > len(table):
        return {}
    bounds = struct.unpack_from(f"<{len(positions)}I", table, txt_fc)  # a note i spans bounds[i]..bounds[i+1]
    return {cp: " ".join(_story_text(word, pieces, start + bounds[i], start + bounds[i + 1])) for i, cp in enumerate(positions[:-1])}


def _story_text(word: bytes, pieces: list[_Piece], start: int, end: int) -> list[str]:
    """A subdocument story's paragraphs as a reader sees them (field codes out, anchors dropped)."""
    fields = _Fields()
    raw = "".join(ch for ch in _text(word, pieces, end, start) if fields.visible(ch)).translate(_TRANSLATE)
    return [" ".join(p.split()) for p in raw.replace(_CELL, _PARAGRAPH).replace(_SECTION, _PARAGRAPH).split(_PARAGRAPH) if p.strip()]


def _plc(table: bytes, fc: int, lcb: int, data_size: int) -> tuple[tuple[int, ...], list[bytes]]:
    """A PLC's CPs (one more than its entries) and its entries' bytes; empty when it is absent or
    does not fit the table stream (a damaged file)."""
    count = (lcb - 4) // (4 + data_size) if lcb >= 4 + 4 + data_size else 0
    if not count or fc + lcb > len(table):
        return (), []
    cps = struct.unpack_from(f"<{count + 1}I", table, fc)
    base = fc + 4 * (count + 1)
    return cps, [table[base + data_size * i:base + data_size * (i + 1)] for i in range(count)]


def _text_boxes(word: bytes, table: bytes, pieces: list[_Piece], fc_lcb: list[tuple[int, int]], start: int) -> dict[int, list[str]]:
    """CP of a shape's anchor in the main text -> the paragraphs of its text box: each story of
    the text-box subdocument (from CP `start`) names its shape (FTXBXS.lid), anchored at the CP
    PlcSpaMom gives that shape's id (FSPA.spid)."""
    anchors, shapes = _plc(table, *fc_lcb[_FC_SHAPE_ANCHORS], 26)
    stories, boxes = _plc(table, *fc_lcb[_FC_TEXT_BOX_STORIES], 22)
    anchor_of = {struct.unpack_from("<i", shape)[0]: cp for cp, shape in zip(anchors, shapes)}
    out: dict[int, list[str]] = {}
    for i, box in enumerate(boxes):
        reusable, = struct.unpack_from("<H", box, 8)
        lid, = struct.unpack_from("<i", box, 14)
        if not reusable and lid in anchor_of:
            out.setdefault(anchor_of[lid], []).extend(_story_text(word, pieces, start + stories[i], start + stories[i + 1]))
    return out


def _sprms(grpprl: bytes) -> dict[int, bytes]:
    """A PAPX's property modifiers: opcode → operand."""
    found, pos = {}, 0
    while pos + 2 <= len(grpprl):
        op, = struct.unpack_from("<H", grpprl, pos)
        pos += 2
        spra = op >> 13
        if spra == 6:  # variable length: a size byte (two for sprmTDefTable)
            if op == 0xD608 and pos + 2 <= len(grpprl):
                size = struct.unpack_from("<H", grpprl, pos)[0] - 1
                pos += 2
            elif pos < len(grpprl):
                size = grpprl[pos]
                pos += 1
            else:
                break
        else:
            size = {0: 1, 1: 1, 2: 2, 3: 4, 4: 2, 5: 2, 7: 3}[spra]
        found[op] = grpprl[pos:pos + size]
        pos += size
    return found


def _flag(sprms: dict[int, bytes], *ops: int) -> bool:
    return any(sprms.get(op, b"\x00")[:1] == b"\x01" for op in ops)


def _row_layout(operand: bytes) -> RowLayout | None:
    """sprmTDefTable's operand: the cell count, the cells' edges, then a TC80 (20 bytes) a cell."""
    if not operand:
        return None
    n = operand[0]
    if len(operand) < 1 + 2 * (n + 1):
        return None
    edges = struct.unpack_from(f"<{n + 1}h", operand, 1)
    flags = [struct.unpack_from("<H", operand, 1 + 2 * (n + 1) + 20 * i)[0] if 1 + 2 * (n + 1) + 20 * i + 2 <= len(operand) else 0
             for i in range(n)]
    return RowLayout(tuple(edges), tuple((f >> 5) & 3 == 1 for f in flags), tuple(f & 3 == 2 for f in flags))


@dataclass(frozen=True)
class _Paragraph:
    """What the formatting pages say of a paragraph: in a table, the row's layout if it is a
    row's end mark, its style (istd), its own outline level (None: the style's), in a list."""

    in_table: bool = False
    row: RowLayout | None = None
    istd: int = 0
    outline: int | None = None
    listed: bool = False


def heading_styles(table: bytes, fc: int, lcb: int) -> dict[int, int]:
    """Style index → heading level for the built-in "heading 1"-"heading 9" styles (sti 1-9,
    whatever the style is called in the document's language; 0 for "Title"), read from the
    stylesheet."""
    if lcb < 6:
        return {}
    header_size, count = struct.unpack_from("<HH", table, fc)
    pos, end, levels = fc + 2 + header_size, fc + lcb, {}
    for istd in range(count):
        if pos + 2 > end:
            break
        size, = struct.unpack_from("<H", table, pos)
        if size >= 2:
            sti = struct.unpack_from("<H", table, pos + 2)[0] & 0x0FFF
            if 1 <= sti <= 9 or sti == _STI_TITLE:
                levels[istd] = 0 if sti == _STI_TITLE else sti
        pos += 2 + size
    return levels


def _formatting_runs(word: bytes, table: bytes, fc: int, lcb: int, entry: int) -> Iterator[tuple[int, int, bytes, int]]:
    """(start, end, page, offset) of every run on the formatting pages (FKPs) a bin table lists:
    the run's offsets in the WordDocument stream, its 512-byte page and where on the page its
    properties start (0: none). `entry` is the size of a run's entry after the offsets: 13 for
    paragraphs (PAPX), 1 for characters (CHPX)."""
    count = (lcb - 4) // 8
    if count <= 0 or fc + 8 * count + 4 > len(table):
        return
    for pn in struct.unpack_from(f"<{count}I", table, fc + 4 * (count + 1)):
        page = word[(pn & 0x3FFFFF) * 512:(pn & 0x3FFFFF) * 512 + 512]
        if len(page) < 512:
            continue
        crun = page[511]
        if 4 * (crun + 1) + entry * crun > 511:
            continue
        fcs = struct.unpack_from(f"<{crun + 1}I", page, 0)
        for i in range(crun):
            yield fcs[i], fcs[i + 1], page, page[4 * (crun + 1) + entry * i] * 2


def _paragraph_runs(word: bytes, table: bytes, data: bytes, fc: int, lcb: int) -> tuple[list[int], list[_Paragraph]]:
    """Paragraph runs from the PAPX formatting pages: sorted end offsets (exclusive) in the
    WordDocument stream and what they say of the paragraph ending there."""
    runs: list[tuple[int, _Paragraph]] = []
    for _, end, page, offset in _formatting_runs(word, table, fc, lcb, 13):
        sprms: dict[int, bytes] = {}
        istd = 0
        if offset:
            cb = page[offset]
            start, size = (offset + 2, 2 * page[offset + 1]) if cb == 0 else (offset + 1, 2 * cb - 1)
            istd, = struct.unpack_from("<H", page, start)
            sprms = _sprms(page[start + 2:start + size])
            for op in _SPRM_P_HUGE_PAPX:  # a wide table row's definition does not fit in 512 bytes
                if op in sprms and len(sprms[op]) == 4:
                    at, = struct.unpack("<I", sprms[op])
                    if at + 2 <= len(data):
                        sprms |= _sprms(data[at + 2:at + 2 + struct.unpack_from("<H", data, at)[0]])
        row = None
        if _flag(sprms, _SPRM_P_F_TTP, _SPRM_P_F_INNER_TTP):
            row = _row_layout(sprms.get(_SPRM_T_DEF_TABLE, b"")) or RowLayout((), (), ())
        level = sprms.get(_SPRM_P_OUT_LVL, b"")[:1]
        listed = sprms.get(_SPRM_P_ILFO, b"\x00\x00") != b"\x00\x00"
        runs.append((end, _Paragraph(_flag(sprms, _SPRM_P_F_IN_TABLE), row, istd, level[0] if level else None, listed)))
    runs.sort(key=lambda run: run[0])
    return [end for end, _ in runs], [paragraph for _, paragraph in runs]


def _character_runs(word: bytes, table: bytes, fc: int, lcb: int) -> tuple[list[tuple[int, int, int]], list[tuple[int, int]]]:
    """From the CHPX formatting pages, in one walk and sorted: (start, end, Data stream offset) of
    the character runs that carry a picture location (an inline picture's ``\\x01`` lies in one),
    and (start, end) of the runs a tracked change deleted (``sprmCFRMarkDel``)."""
    pictures, deleted = [], []
    for start, end, page, offset in _formatting_runs(word, table, fc, lcb, 1):
        if offset:
            sprms = _sprms(page[offset + 1:offset + 1 + page[offset]])
            location = sprms.get(_SPRM_C_PIC_LOCATION, b"")
            if len(location) == 4:
                pictures.append((start, end, struct.unpack("<I", location)[0]))
            if sprms.get(_SPRM_C_F_RMARK_DEL, b"")[:1] in (b"\x01", b"\x81"):  # on, or the opposite of a style's off
                deleted.append((start, end))
    return sorted(pictures), sorted(deleted)


def _floating_pictures(word: bytes, table: bytes, fc_lcb: list[tuple[int, int]]) -> dict[int, list[bytes]]:
    """CP of a floating shape's anchor in the main text -> the raster pictures it shows: PlcSpaMom
    gives each anchor's shape id (FSPA.spid); that shape's properties in the drawings name a
    picture store entry (pib), whose blip lies in the WordDocument stream (foDelay)."""
    anchors, shapes = _plc(table, *fc_lcb[_FC_SHAPE_ANCHORS], 26)
    fc, lcb = fc_lcb[_FC_DRAWINGS]
    if not shapes or not lcb or fc + lcb > len(table):
        return {}
    art = table[fc:fc + lcb]
    group = next(art_records(art, 0, len(art)), None)
    if group is None:
        return {}
    store = store_pictures(art, group[2], group[3], word)
    shown: dict[int, list[int]] = {}  # shape id -> the store entries it shows
    position = group[3]
    while position + 9 <= len(art):  # each drawing: a label byte, then its container
        drawing = next(art_records(art, position + 1, len(art)), None)
        if drawing is None:
            break
        for kind, _, body, stop in art_walk(art, drawing[2], drawing[3]):
            shape_id = next((struct.unpack_from("<i", art, b)[0] for k, _, b, e in art_records(art, body, stop)
                             if k == _SHAPE_ID and e - b >= 4), None) if kind == _SHAPE else None
            if shape_id is not None:
                shown[shape_id] = pictures_shown(art, body, stop)
        position = drawing[3]
    out: dict[int, list[bytes]] = {}
    for cp, shape in zip(anchors, shapes):
        for entry in shown.get(struct.unpack_from("<i", shape)[0], ()):
            if 1 <= entry <= len(store) and (picture := store[entry - 1]) is not None:
                out.setdefault(cp, []).append(picture)
    return out


def _picture_at(data: bytes, offset: int) -> bytes | None:
    """The raster picture in the PICF (and the OfficeArt data after it) at `offset` of the Data
    stream; its first four bytes are the whole record's length."""
    if offset + 4 > len(data):
        return None
    length, = struct.unpack_from("<I", data, offset)
    return next(blips(data[offset:offset + length]), None)


_GENERATED_FIELDS = {"TOC", "INDEX", "TOA"}  # tables of contents, indexes: generated from the text itself


class _Fields:
    """Which characters a reader sees where fields (``\\x13 code \\x14 result \\x15``, nested,
    possibly across paragraphs) stand: a field's result but not its code, and not the result of
    a table of contents or an index."""

    def __init__(self) -> None:
        self._stack: list[list] = []  # [code characters, showing the result?]

    def visible(self, ch: str) -> bool:
        """Feed one character; True if a reader sees it (field marks themselves never)."""
        if ch == "\x13":
            self._stack.append([[], False])
            return False
        if ch == "\x14" and self._stack:
            code = "".join(self._stack[-1][0]).split()
            self._stack[-1][1] = not (code and code[0].upper() in _GENERATED_FIELDS)
            return False
        if ch == "\x15" and self._stack:
            self._stack.pop()
            return False
        if self._stack and not self._stack[-1][1]:
            self._stack[-1][0].append(ch)
        return all(showing for _, showing in self._stack)


def parse_doc(path: Path, *, ocr_lang: str = "eng+chi_sim") -> ParsedDocument:
    """Parse a Word 97-2003 .doc into paragraph and table_row blocks (a table's first row its header);
    an inline picture's OCR'd text follows its paragraph (its table, in a cell), a floating one's
    the paragraph it is anchored in, the other pictures are OCR'd after the text
    (ingest.office_art, ingest.pictures)."""
    with olefile.OleFileIO(str(path)) as ole:
        if not ole.exists("WordDocument"):
            raise UnreadableDocument("unsupported_format", "an OLE file without a WordDocument stream (not a Word document)")
        word = ole.openstream("WordDocument").read()
        flags, one_table, ccps, fc_lcb = _fib(word)
        if flags & 0x0100:
            raise UnreadableDocument("encrypted", "password-protected Word 97-2003 document")
        table_name = "1Table" if one_table else "0Table"
        if not ole.exists(table_name):
            raise UnreadableDocument("corrupt", f"the document's {table_name} stream is missing")
        table = ole.openstream(table_name).read()
        data = ole.openstream("Data").read() if ole.exists("Data") else b""
    pictures = PictureReader(ocr_lang)
    pieces = _pieces(table, *fc_lcb[_FC_CLX])
    ccp_text = ccps[0]
    notes = {
        **_notes(word, table, pieces, fc_lcb[_FC_FOOTNOTE_REF], fc_lcb[_FC_FOOTNOTE_TXT], ccp_text),
        **_notes(word, table, pieces, fc_lcb[_FC_ENDNOTE_REF], fc_lcb[_FC_ENDNOTE_TXT], sum(ccps[:5])),
    } if len(fc_lcb) > _FC_ENDNOTE_TXT and len(ccps) > 5 else {}
    boxes = _text_boxes(word, table, pieces, fc_lcb, sum(ccps[:6])) if len(fc_lcb) > _FC_TEXT_BOX_STORIES and len(ccps) > 6 else {}
    try:
        floating = _floating_pictures(word, table, fc_lcb) if len(fc_lcb) > _FC_DRAWINGS else {}
    except (struct.error, IndexError, RecursionError):  # damaged drawings: those pictures follow the text, as before
        floating = {}
    anchored: list[str] = []  # text boxes anchored in the paragraph being read: added after it
    ends, paragraphs = _paragraph_runs(word, table, data, *fc_lcb[_FC_PLCF_BTE_PAPX])
    picture_runs, deleted = _character_runs(word, table, *fc_lcb[_FC_PLCF_BTE_CHPX])
    picture_runs = picture_runs if data else []
    deleted_starts = [start for start, _ in deleted]
    inline: list[bytes] = []  # pictures of the paragraph being read: OCR'd after it
    in_table: list[bytes] = []  # pictures of the table being read: OCR'd after it
    levels = heading_styles(table, *fc_lcb[_FC_STSHF])
    piece_starts = [p.cp_start for p in pieces]

    def paragraph_at(cp: int) -> _Paragraph:
        """The paragraph that the mark at ``cp`` ends."""
        piece = pieces[bisect.bisect_right(piece_starts, cp) - 1]
        i = bisect.bisect_right(ends, piece.fc_of(cp))
        return paragraphs[i] if i < len(paragraphs) else _Paragraph()

    def picture_of(cp: int) -> bytes | None:
        """The inline picture whose character is at ``cp``, if its location is recorded."""
        fc = pieces[bisect.bisect_right(piece_starts, cp) - 1].fc_of(cp)
        i = bisect.bisect_right(picture_runs, (fc, float("inf"), 0)) - 1
        return _picture_at(data, picture_runs[i][2]) if i >= 0 and picture_runs[i][0] <= fc < picture_runs[i][1] else None

    def is_deleted(cp: int) -> bool:
        """The character at ``cp`` is a tracked deletion (its paragraph and cell marks are kept:
        the table's structure stands, merged paragraphs are read as two)."""
        fc = pieces[bisect.bisect_right(piece_starts, cp) - 1].fc_of(cp)
        i = bisect.bisect_right(deleted_starts, fc) - 1
        return i >= 0 and deleted[i][0] <= fc < deleted[i][1]

    builder = BlockBuilder()
    rows: list[tuple[list[str], RowLayout]] = []
    cell: list[str] = []  # paragraphs of the cell being read
    cells: list[str] = []  # cells of the row being read
    current: list[str] = []  # characters since the last paragraph or cell end
    fields = _Fields()
    for cp, ch in enumerate(_text(word, pieces, ccp_text)):
        if deleted and ch not in (_CELL, _PARAGRAPH, _SECTION) and is_deleted(cp):
            continue
        if not fields.visible(ch):
            continue
        if ch not in (_CELL, _PARAGRAPH, _SECTION):
            if ch == _PICTURE and picture_runs and (blob := picture_of(cp)):
                inline.append(blob)
            current.append(ch)
            if notes.get(cp):  # the note's reference mark (\x02, or the author's own mark)
                current.append(f" ({notes[cp]})")
            anchored.extend(boxes.get(cp, ()))
            inline.extend(floating.get(cp, ()))  # a floating picture: after the paragraph it is anchored in
            continue
        text = "".join(current).translate(_TRANSLATE).strip()
        current = []
        paragraph = paragraph_at(cp)
        if ch == _CELL and paragraph.row is not None:
            rows.append((cells, paragraph.row))
            cells = []
        elif ch == _CELL or paragraph.in_table:
            cell.extend([text, *anchored])
            anchored = []
            in_table.extend(inline)
            inline = []
            if ch == _CELL:
                cells.append("\n".join(t for t in cell if t))
                cell = []
        else:
            if rows:
                builder.add_table(grid_rows(rows))
                rows = []
                for blob in in_table:
                    pictures.add_text(builder, blob)
                in_table = []
            level = paragraph.outline + 1 if paragraph.outline is not None and paragraph.outline < 9 else None
            if level is None and paragraph.outline is None:
                level = levels.get(paragraph.istd)
            if level:
                builder.heading(text, level)
            else:
                builder.add(text, "title" if level == 0 else "list_item" if paragraph.listed else "paragraph")
            for box in anchored:  # after the paragraph it is anchored in, as the .docx/.odt readers put them
                builder.add(box)
            anchored = []
            for blob in inline:
                pictures.add_text(builder, blob)
            inline = []
    if rows:
        builder.add_table(grid_rows(rows))
    for blob in [*in_table, *inline]:
        pictures.add_text(builder, blob)
    builder.reset_headings()
    for blob in [*blips(data), *blips(word)]:  # the rest (floating ones, inline ones not placed); each read once
        pictures.add_text(builder, blob)
    return make_document(builder, format="doc", parser="olefile", title=ole_title(path), **pictures.metadata())
