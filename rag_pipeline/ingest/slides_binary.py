"""PowerPoint 97-2003 presentations (.ppt) read straight from the binary format ([MS-PPT]).

The "PowerPoint Document" stream is a tree of records. The current state of the file is found
through the "Current User" stream's last edit and its persist directory (older edits a fast
save left behind are never read); the document's slide list gives the slides in order with
their placeholders' text (title, body), and each slide's drawing holds the text of its other
text boxes and its tables (a group of one text box a cell, read back onto rows and columns by
where the boxes lie); a slide's notes page holds its speaker notes.
Text is UTF-16 (``TextCharsAtom``) or 8-bit Latin-1 (``TextBytesAtom``); ``\\r`` ends a
paragraph, ``\\x0b`` breaks a line.
"""

from __future__ import annotations

import struct
from pathlib import Path

import olefile

from rag_pipeline.ingest.blocks import BlockBuilder, make_document
from rag_pipeline.ingest.document import ParsedDocument, UnreadableDocument
from rag_pipeline.ingest.office_art import art_records, art_walk, blips, is_container, pictures_shown, store_pictures
from rag_pipeline.ingest.ole import ole_title
from rag_pipeline.ingest.pictures import PictureReader

_DOCUMENT, _SLIDE, _SLIDE_ATOM, _NOTES = 0x03E8, 0x03EE, 0x03EF, 0x03F0
_SLIDE_PERSIST, _SLIDE_LIST = 0x03F3, 0x0FF0
_TEXT_HEADER, _TEXT_CHARS, _TEXT_BYTES = 0x0F9F, 0x0FA0, 0x0FA8
_USER_EDIT, _PERSIST_DIRECTORY = 0x0FF5, 0x1772
_TITLES = {0, 6}  # TextHeaderAtom types: title, centre title
_BULLETED = {1, 7, 8}  # body, half body, quarter body: bulleted by the master
_NOTES_TEXT = 2
_TABLE = -1  # not a text type: a table's rows
_GROUP, _SHAPE, _CHILD_ANCHOR, _CLIENT_TEXTBOX = 0xF003, 0xF004, 0xF00F, 0xF00D  # OfficeArt drawing records


def _texts(data: bytes, start: int, end: int) -> list[tuple[int, str]]:
    """(text type, text) of every text atom under [start, end), typed by the header before it."""
    out, text_type = [], 4  # 4: "other"
    for kind, _, body, stop in art_walk(data, start, end):
        if kind == _TEXT_HEADER and stop - body >= 4:
            text_type, = struct.unpack_from("<I", data, body)
        elif kind == _TEXT_CHARS:
            out.append((text_type, data[body:stop].decode("utf-16-le", "replace")))
        elif kind == _TEXT_BYTES:
            out.append((text_type, data[body:stop].decode("latin-1")))
    return out


def _grid(data: bytes, start: int, end: int) -> list[list[str]] | None:
    """A group of shapes that is a table: its cells' text on the rows and columns their anchors
    line up on, or None. A .ppt keeps a table as a group of one text box a cell (and the
    borders as lines); the group says nothing more a reader could rely on."""
    cells = {}
    for kind, _, body, stop in art_records(data, start, end):
        if kind != _SHAPE:
            continue
        anchor = text = None
        for sub, _, sub_body, sub_stop in art_records(data, body, stop):
            if sub == _CHILD_ANCHOR and sub_stop - sub_body >= 16:
                anchor = struct.unpack_from("<4i", data, sub_body)
            elif sub == _CLIENT_TEXTBOX:
                text = " ".join(t.replace("\x0b", " ").replace("\r", " ").strip() for _, t in _texts(data, sub_body, sub_stop))
        if anchor and text is not None and anchor[2] > anchor[0] and anchor[3] > anchor[1]:
            if (anchor[1], anchor[0]) in cells:
                return None  # two boxes at one place: not a table
            cells[(anchor[1], anchor[0])] = (anchor[3], text)
    tops, lefts = sorted({top for top, _ in cells}), sorted({left for _, left in cells})
    if len(cells) < 4 or len(tops) < 2 or len(lefts) < 2 or len(cells) < len(tops) * len(lefts) / 2:
        return None
    rows = [[""] * len(lefts) for _ in tops]
    for (top, left), (bottom, text) in cells.items():
        for row in (i for i, t in enumerate(tops) if top <= t < bottom):  # a cell merged down fills its rows
            rows[row][lefts.index(left)] = text
    return rows


def _shapes(data: bytes, start: int, end: int) -> list[tuple[int, str | list[list[str]]]]:
    """What a slide's drawing holds, in order: (text type, text), or (_TABLE, rows) for a group
    of shapes laid out as a table."""
    out: list = []
    for kind, _, body, stop in art_records(data, start, end):
        if kind == _GROUP and (rows := _grid(data, body, stop)) is not None:
            out.append((_TABLE, rows))
        elif kind == _CLIENT_TEXTBOX:  # a text box: its header types the text atoms after it
            out.extend(_texts(data, body, stop))
        elif is_container(data, body):
            out.extend(_shapes(data, body, stop))
    return out


def _persist_offsets(doc: bytes, edit: int) -> tuple[dict[int, int], int]:
    """Persist id → record offset, newest edit first, and the document's persist id."""
    offsets: dict[int, int] = {}
    document_ref, seen = None, set()
    while edit and edit not in seen and edit + 8 + 28 <= len(doc):
        seen.add(edit)
        if struct.unpack_from("<H", doc, edit + 2)[0] != _USER_EDIT:
            raise UnreadableDocument("corrupt", "the presentation's edit chain points at no edit record")
        last_edit, directory, doc_ref = struct.unpack_from("<III", doc, edit + 8 + 8)
        document_ref = doc_ref if document_ref is None else document_ref
        dir_kind, = struct.unpack_from("<H", doc, directory + 2)
        size, = struct.unpack_from("<I", doc, directory + 4)
        if dir_kind != _PERSIST_DIRECTORY:
            raise UnreadableDocument("corrupt", "the presentation's persist directory is missing")
        pos, stop = directory + 8, directory + 8 + size
        while pos + 4 <= stop:
            entry, = struct.unpack_from("<I", doc, pos)
            first, count = entry & 0xFFFFF, entry >> 20
            for i in range(count):
                offsets.setdefault(first + i, struct.unpack_from("<I", doc, pos + 4 + 4 * i)[0])
            pos += 4 + 4 * count
        edit = last_edit
    if document_ref is None or document_ref not in offsets:
        raise UnreadableDocument("corrupt", "the presentation names no document record")
    return offsets, document_ref


def _body(doc: bytes, offset: int, kind: int) -> tuple[int, int] | None:
    if offset + 8 > len(doc) or struct.unpack_from("<H", doc, offset + 2)[0] != kind:
        return None
    return offset + 8, offset + 8 + struct.unpack_from("<I", doc, offset + 4)[0]


def _add_text(builder: BlockBuilder, text: str, page: int, kind: str) -> None:
    for paragraph in text.replace("\x0b", "\n").split("\r"):
        builder.add(paragraph, kind, page=page)


def parse_ppt(path: Path, *, ocr_lang: str = "eng+chi_sim") -> ParsedDocument:
    """Parse a PowerPoint 97-2003 .ppt: one page a slide, its title the heading, then its other
    text (placeholders, text boxes, table cells), the text OCR'd in the pictures it shows
    (ingest.office_art, ingest.pictures) and its speaker notes as ``notes`` blocks. Pictures only
    a master shows (logos) are not read. A file whose picture store cannot be read has all its
    pictures OCR'd after the last slide instead."""
    with olefile.OleFileIO(str(path)) as ole:
        if ole.exists("EncryptedSummary"):
            raise UnreadableDocument("encrypted", "password-protected PowerPoint 97-2003 presentation")
        if not (ole.exists("PowerPoint Document") and ole.exists("Current User")):
            raise UnreadableDocument("unsupported_format", "an OLE file without a PowerPoint Document stream (not a presentation)")
        doc = ole.openstream("PowerPoint Document").read()
        user = ole.openstream("Current User").read()
        stored_pictures = ole.openstream("Pictures").read() if ole.exists("Pictures") else b""
    edit, = struct.unpack_from("<I", user, 8 + 8)
    offsets, document_ref = _persist_offsets(doc, edit)
    document = _body(doc, offsets[document_ref], _DOCUMENT)
    if document is None:
        raise UnreadableDocument("corrupt", "the presentation's document record is damaged")
    slides: list[tuple[int, list[tuple[int, str]]]] = []  # (slide persist id, placeholder texts)
    notes_pages: dict[int, int] = {}  # notes id → its persist id
    for kind, inst, body, stop in art_records(doc, *document):
        if kind == _SLIDE_LIST and inst == 0:
            for sub, _, sub_body, sub_stop in art_records(doc, body, stop):
                if sub == _SLIDE_PERSIST:
                    slides.append((struct.unpack_from("<I", doc, sub_body)[0], []))
                elif sub in (_TEXT_HEADER, _TEXT_CHARS, _TEXT_BYTES) and slides:
                    slides[-1][1].extend(_texts(doc, sub_body - 8, sub_stop))
        elif kind == _SLIDE_LIST and inst == 2:
            for sub, _, sub_body, sub_stop in art_records(doc, body, stop):
                if sub == _SLIDE_PERSIST and sub_stop - sub_body >= 16:
                    persist_id, _, _, notes_id = struct.unpack_from("<IIII", doc, sub_body)
                    notes_pages[notes_id] = persist_id
    builder = BlockBuilder()
    pictures = PictureReader(ocr_lang)
    store = store_pictures(doc, *document, delayed=stored_pictures) if stored_pictures else []
    for page, (persist_id, placeholders) in enumerate(slides, start=1):
        builder.reset_headings()
        slide = _body(doc, offsets.get(persist_id, len(doc)), _SLIDE)
        drawn = _shapes(doc, *slide) if slide else []
        texts = placeholders + drawn
        for text_type, text in texts:
            if text_type in _TITLES:
                builder.heading(text.replace("\x0b", " ").replace("\r", " "), 1, page=page)
        for text_type, text in texts:
            if text_type == _TABLE:
                builder.add_table(text, page=page)
            elif text_type not in _TITLES and text_type != _NOTES_TEXT:
                _add_text(builder, text, page, "list_item" if text_type in _BULLETED else "paragraph")
        for entry in pictures_shown(doc, *slide) if slide and store else []:
            blob = store[entry - 1] if 0 < entry <= len(store) else None
            if blob:
                pictures.add_text(builder, blob, page=page)
        notes_id = _notes_id(doc, slide) if slide else 0
        notes = _body(doc, offsets.get(notes_pages.get(notes_id, -1), len(doc)), _NOTES) if notes_id else None
        for text_type, text in _texts(doc, *notes) if notes else []:
            if text_type == _NOTES_TEXT:
                _add_text(builder, text, page, "notes")
    if not store:  # no picture store to place them by: every picture, after the last slide
        builder.reset_headings()
        for blob in blips(stored_pictures):
            pictures.add_text(builder, blob)
    return make_document(builder, format="ppt", parser="olefile", page_count=len(slides),
                         title=builder.first_heading or ole_title(path), **pictures.metadata())


def _notes_id(doc: bytes, slide: tuple[int, int]) -> int:
    """The id of a slide's notes page (SlideAtom.notesIdRef; 0: none)."""
    for kind, _, body, stop in art_records(doc, *slide):
        if kind == _SLIDE_ATOM and stop - body >= 20:
            return struct.unpack_from("<I", doc, body + 16)[0]
    return 0
