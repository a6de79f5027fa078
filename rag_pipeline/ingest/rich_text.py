"""Rich Text Format (.rtf, as Word, WordPad and LibreOffice save it), read by a small RTF reader.

RTF is text: groups ``{…}``, control words ``\\word N`` and text. The reader keeps what a
reader of the document sees and the structure the index needs:

- characters: ``\\uN`` (then the fallback it announces skipped), ``\\'hh`` bytes decoded in the
  code page of the current font's charset (``\\fcharset134`` is GBK whatever ``\\ansicpg`` says:
  Chinese text from an English-locale Word), else the document's ``\\ansicpg``;
- paragraphs (``\\par``), headings (a paragraph style named "heading N" in the style sheet, or an
  ``\\outlinelevel``), list items (``\\ls``), the title from ``{\\info{\\title …}}``;
- tables: ``\\cell`` and ``\\row``, each row's cell edges (``\\cellx``) and merges (``\\clvmrg``,
  ``\\clmrg``) put back on the column grid as the .doc reader does;
- footnotes and endnotes: their text in brackets where they are cited (the .odt/.docx readers' rule);
  a text box's paragraphs (``\\shptxt`` inside a shape) after the paragraph it is anchored in;
- skipped: text a tracked change deleted (``\\deleted``, until ``\\deleted0`` or ``\\plain``; inserted
  text reads as the rest), the font, colour and style tables, pictures and objects (their hex is most of a
  file's bytes), headers and footers, comments, field instructions (a field's result is kept,
  but not a table of contents' or an index's), and every ``{\\*\\…}`` destination the reader
  does not know.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from rag_pipeline.ingest.blocks import BlockBuilder, make_document
from rag_pipeline.ingest.document import ParsedDocument, UnreadableDocument
from rag_pipeline.ingest.table_grid import RowLayout, grid_rows

_TOKEN = re.compile(rb"\\([a-zA-Z]{1,32})(-?\d{1,10})? ?|\\'([0-9a-fA-F]{2})|\\([^a-zA-Z])|([{}])|([^\\{}\r\n]+)|[\r\n]+")
_SKIPPED = {b"fonttbl", b"colortbl", b"stylesheet", b"info", b"pict", b"object", b"header", b"headerl", b"headerr",
            b"headerf", b"footer", b"footerl", b"footerr", b"footerf", b"footnote", b"annotation", b"fldinst",
            b"themedata", b"colorschememapping", b"datastore", b"latentstyles", b"listtable", b"listoverridetable",
            b"rsidtbl", b"generator", b"xmlnstbl", b"pgdsctbl", b"shp", b"nonshppict", b"shppict", b"pntext",
            b"listtext", b"bkmkstart", b"bkmkend", b"template", b"atnid", b"atnauthor", b"revtbl", b"filetbl"}
# \fcharset → code page (Windows charsets as RTF names them)
_CHARSET_CODEPAGES = {0: 1252, 128: 932, 129: 949, 134: 936, 136: 950, 161: 1253, 162: 1254, 163: 1258, 177: 1255,
                      178: 1256, 186: 1257, 204: 1251, 222: 874, 238: 1250}
_SYMBOLS = {b"~": " ", b"_": "-", b"-": "", b"\\": "\\", b"{": "{", b"}": "}"}
_WORD_CHARS = {b"line": "\n", b"tab": "\t", b"emdash": "—", b"endash": "–", b"bullet": "•", b"lquote": "‘",
               b"rquote": "’", b"ldblquote": "“", b"rdblquote": "”", b"emspace": " ", b"enspace": " ", b"qmspace": " "}
_GENERATED_FIELDS = {"TOC", "INDEX", "TOA"}  # their results are generated from the text itself
_HEADING_NAME = re.compile(r"^\s*(?:heading|标题|標題)\s*(\d)\s*$", re.I)
_TITLE_NAME = re.compile(r"^\s*(?:title|标题|標題)\s*$", re.I)


def looks_like_rtf(head: bytes) -> bool:
    return head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{\\rtf")


def _paired(text: str) -> str:
    """A character outside the BMP comes as two ``\\u`` surrogates: joined here (a lone one
    becomes U+FFFD, never a string that cannot be encoded)."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _codepage_name(codepage: int) -> str:
    return {65001: "utf-8", 10000: "mac_roman"}.get(codepage, f"cp{codepage}")


@dataclass
class _Group:
    """What a group sets and hands to the groups inside it."""

    skip: bool = False
    destination: bytes = b""  # the destination word a skipped group is read for (fonttbl, stylesheet, info…)
    font: int | None = None
    unicode_skip: int = 1  # \ucN: fallback characters after each \uN
    deleted: bool = False  # \deleted: a tracked deletion, not in the document as it reads


@dataclass
class _Paragraph:
    style: int = 0
    outline: int | None = None
    in_table: bool = False
    listed: bool = False


@dataclass
class _RowDefinition:
    left: int = 0
    edges: list[int] = field(default_factory=list)
    above: list[bool] = field(default_factory=list)
    left_merge: list[bool] = field(default_factory=list)
    pending_above: bool = False
    pending_left: bool = False

    def define(self, word: bytes, param: int) -> None:
        """A row-definition word: the row's left edge, a cell's merge flags, then its right edge."""
        if word == b"trleft":
            self.left = param
        elif word == b"clvmrg":
            self.pending_above = True
        elif word == b"clmrg":
            self.pending_left = True
        else:  # cellx
            self.edges.append(param)
            self.above.append(self.pending_above)
            self.left_merge.append(self.pending_left)
            self.pending_above = self.pending_left = False


_ROW_WORDS = {b"trleft", b"clvmrg", b"clmrg", b"cellx"}


class _Reader:
    def __init__(self) -> None:
        self.builder = BlockBuilder()
        self.codepage = 1252
        self.fonts: dict[int, int] = {}  # font → code page
        self.styles: dict[int, int] = {}  # paragraph style → heading level (0: title)
        self.title = ""
        self.text: list[str] = []
        self.pending: bytearray = bytearray()  # \'hh bytes not decoded yet
        self.paragraph = _Paragraph()
        self.row = _RowDefinition()
        self.cell: list[str] = []
        self.cells: list[str] = []
        self.rows: list[tuple[list[str], RowLayout]] = []
        self.unicode_pending = 0
        self.field_code = ""  # the instruction of the field being read (its result follows)
        self.note = ""  # the text of the footnote being read (put in brackets where it is cited)
        self.boxes: list[str] = [""]  # paragraphs of the text boxes met in this paragraph (added after it)
        # what a font-table or style-sheet entry read so far says
        self.entry: dict[str, object] = {}

    # -- characters
    def _flush_bytes(self, group: _Group) -> None:
        if self.pending:
            codepage = self.fonts.get(group.font, self.codepage) if group.font is not None else self.codepage
            try:
                text = bytes(self.pending).decode(_codepage_name(codepage), "replace")
            except LookupError:
                text = bytes(self.pending).decode("cp1252", "replace")
            self._emit(text, group)
            self.pending.clear()

    def _emit(self, text: str, group: _Group) -> None:
        if group.deleted and group.destination not in (b"fonttbl", b"stylesheet", b"title"):
            return
        if group.skip:
            if group.destination in (b"fonttbl", b"stylesheet", b"title"):
                self.entry["name"] = str(self.entry.get("name", "")) + text
            elif group.destination == b"fldinst":
                self.field_code += text
            elif group.destination == b"footnote":
                self.note += text
            elif group.destination == b"shptxt":
                self.boxes[-1] += text
            return
        self.text.append(text)

    # -- structure
    def _take_text(self) -> str:
        """The text read since the last paragraph or cell end."""
        text = _paired("".join(self.text)).strip()
        self.text = []
        return text

    def end_paragraph(self) -> None:
        text = self._take_text()
        if self.paragraph.in_table:
            self.cell.extend([text, *self._take_boxes()])
            return
        self._flush_table()
        level = self.paragraph.outline + 1 if self.paragraph.outline is not None and self.paragraph.outline < 9 else None
        if level is None:
            level = self.styles.get(self.paragraph.style)
        if level:
            self.builder.heading(text, level)
        else:
            self.builder.add(text, "title" if level == 0 else "list_item" if self.paragraph.listed else "paragraph")
        for box in self._take_boxes():  # text boxes anchored in it: after it, as the .docx/.odt readers put them
            self.builder.add(box)

    def _take_boxes(self) -> list[str]:
        """The paragraphs of the text boxes read since the last paragraph or cell end."""
        boxes, self.boxes = [_paired(b).strip() for b in self.boxes if b.strip()], [""]
        return boxes

    def end_cell(self) -> None:
        self.cell.extend([self._take_text(), *self._take_boxes()])
        self.cells.append("\n".join(t for t in self.cell if t))
        self.cell = []

    def end_row(self) -> None:
        if self.text or self.cell:
            self.end_cell()
        edges = [self.row.left, *self.row.edges]
        layout = RowLayout(tuple(edges), tuple(self.row.above), tuple(self.row.left_merge))
        self.rows.append((self.cells, layout))
        self.cells = []

    def _flush_table(self) -> None:
        if self.rows:
            self.builder.add_table(grid_rows(self.rows))
            self.rows = []

    def finish(self) -> None:
        if "".join(self.text).strip() or any(b.strip() for b in self.boxes):
            self.end_paragraph()
        self._flush_table()

    def entry_done(self, group: _Group) -> None:
        """A font-table or style-sheet entry ends (its ';')."""
        name = str(self.entry.pop("name", "")).strip().rstrip(";").strip()
        if group.destination == b"fonttbl" and "font" in self.entry:
            self.fonts[int(self.entry["font"])] = int(self.entry.get("codepage", self.codepage))  # type: ignore[arg-type]
        elif group.destination == b"stylesheet" and "style" in self.entry:
            style, outline = int(self.entry["style"]), self.entry.get("outline")  # type: ignore[arg-type]
            heading = _HEADING_NAME.match(name)
            if outline is not None and int(outline) < 9:  # type: ignore[arg-type]
                self.styles[style] = int(outline) + 1  # type: ignore[arg-type]
            elif heading:
                self.styles[style] = int(heading.group(1))
            elif _TITLE_NAME.match(name):
                self.styles[style] = 0
        self.entry = {}

    # -- control words
    def control(self, word: bytes, param: int | None, group: _Group) -> None:
        if group.skip:
            self._control_in_table_of(word, param, group)
            return
        if word == b"par" or word == b"sect" or word == b"page":
            self.end_paragraph()
        elif word == b"pard":
            self.paragraph = _Paragraph()
        elif word == b"s":
            self.paragraph.style = param or 0
        elif word == b"outlinelevel":
            self.paragraph.outline = param
        elif word in (b"intbl", b"itap"):
            self.paragraph.in_table = word == b"intbl" or bool(param)
        elif word in (b"ls", b"ilvl"):
            self.paragraph.listed = True
        elif word == b"cell":
            self.end_cell()
        elif word == b"nestcell":
            self.cell.append(self._take_text())
        elif word == b"row":
            self.end_row()
        elif word == b"trowd":
            self.row = _RowDefinition()
        elif word in _ROW_WORDS:
            self.row.define(word, param or 0)
        elif word == b"f":
            group.font = param
        elif word == b"uc":
            group.unicode_skip = param or 0
        elif word in (b"deleted", b"plain"):
            group.deleted = word == b"deleted" and param != 0
        elif word == b"ansicpg" and param:
            self.codepage = param
        elif word in _WORD_CHARS:
            self._emit(_WORD_CHARS[word], group)

    def _control_in_table_of(self, word: bytes, param: int | None, group: _Group) -> None:
        """Control words inside the font table, the style sheet, the info group and a footnote."""
        if group.destination in (b"footnote", b"shptxt"):
            if word == b"f":
                group.font = param
            elif word == b"uc":
                group.unicode_skip = param or 0
            elif word in (b"deleted", b"plain"):
                group.deleted = word == b"deleted" and param != 0
            elif word == b"par" and group.destination == b"shptxt":
                self.boxes.append("")
            elif word in (b"par", b"tab", b"line"):
                self.note += " "
        elif group.destination == b"fonttbl":
            if word == b"f":
                self.entry["font"] = param
            elif word == b"fcharset" and param in _CHARSET_CODEPAGES and param != 0:  # 0: the document's code page
                self.entry.setdefault("codepage", _CHARSET_CODEPAGES[param])
            elif word == b"cpg" and param:
                self.entry["codepage"] = param
        elif group.destination == b"stylesheet":
            if word == b"s":
                self.entry["style"] = param
            elif word in (b"cs", b"ds", b"ts"):  # character, section, table styles: not paragraphs
                self.entry.pop("style", None)
            elif word == b"outlinelevel":
                self.entry["outline"] = param


def parse_rtf(path: Path) -> ParsedDocument:
    """Parse an RTF file into heading, paragraph, list_item and table_row blocks."""
    data = path.read_bytes()
    if not looks_like_rtf(data[:64]):
        raise UnreadableDocument("corrupt", "no {\\rtf header: not a Rich Text Format file")
    reader = _Reader()
    stack = [_Group()]
    pending_destination = False  # a {\* group: skip it unless its word is known
    for match in _TOKEN.finditer(data):
        word, param, hexbyte, symbol, brace, text = match.groups()
        group = stack[-1]
        if hexbyte is None:
            reader._flush_bytes(group)
        if brace == b"{":
            stack.append(replace(group))
            pending_destination = False
            continue
        if brace == b"}":
            if group.destination in (b"fonttbl", b"stylesheet") and reader.entry:
                reader.entry_done(group)
            if group.destination == b"title":  # the last one: {\upr{ANSI title}{\*\ud{Unicode title}}}
                reader.title = _paired(str(reader.entry.pop("name", ""))).strip() or reader.title
            if group.destination == b"footnote" and len(stack) > 1 and stack[-2].destination != b"footnote":
                note, reader.note = " ".join(_paired(reader.note).split()), ""
                if note:  # where it is cited, in brackets: the .odt/.docx/.doc readers' rule
                    reader.text.append(f" ({note})")
            if len(stack) > 1:
                stack.pop()
            continue
        if hexbyte is not None:
            if reader.unicode_pending:
                reader.unicode_pending -= 1
            else:
                reader.pending.append(int(hexbyte, 16))
            continue
        if text is not None and not text.isascii():  # 8-bit text written raw: bytes of the font's code page
            reader.pending.extend(text)
            continue
        if text is not None:
            chunk = text.decode("ascii")
            if reader.unicode_pending:
                cut = min(reader.unicode_pending, len(chunk))
                chunk, reader.unicode_pending = chunk[cut:], reader.unicode_pending - cut
            if group.skip and group.destination in (b"fonttbl", b"stylesheet") and ";" in chunk:
                head, _, _ = chunk.partition(";")
                reader.entry["name"] = str(reader.entry.get("name", "")) + head
                reader.entry_done(group)
            elif chunk:
                reader._emit(chunk, group)
            continue
        reader.unicode_pending = 0
        if symbol is not None:
            if symbol == b"*":
                pending_destination = True
            elif symbol in (b"\n", b"\r"):
                reader.end_paragraph()
            elif symbol in _SYMBOLS:
                reader._emit(_SYMBOLS[symbol], group)
            continue
        if word is None:
            continue
        number = int(param) if param is not None else None
        if word == b"u" and number is not None:
            reader._emit(chr(number % 65536), group)
            reader.unicode_pending = group.unicode_skip
            continue
        if group.skip and group.destination == b"shp" and word == b"shptxt":  # a text box's text: read
            group.destination = b"shptxt"
            continue
        if not group.skip and (word in _SKIPPED or pending_destination):
            group.skip, group.destination = True, word
            if word == b"fldinst":
                reader.field_code = ""
            pending_destination = False
            continue
        if word == b"fldrslt" and reader.field_code.split()[:1] and reader.field_code.split()[0].upper() in _GENERATED_FIELDS:
            group.skip, group.destination = True, word  # a table of contents or an index: generated text
            continue
        if group.skip and group.destination == b"info" and word == b"title":
            group.destination = b"title"
            reader.entry = {}
            continue
        pending_destination = False
        reader.control(word, number, group)
    reader._flush_bytes(stack[-1])
    reader.finish()
    return make_document(reader.builder, format="rtf", parser="rtf", title=reader.title or None)
