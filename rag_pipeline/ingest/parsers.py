"""Entry point: pick a parser by extension (checked against magic bytes) and turn every
failure into an :class:`UnreadableDocument` with a quarantine reason."""

from __future__ import annotations

import os
import pathlib
import stat
import zipfile
from collections.abc import Callable

import olefile

from rag_pipeline.ingest.delimited import parse_csv
from rag_pipeline.ingest.document import IMAGE_EXTENSIONS, ParsedDocument, TransientFailure, UnreadableDocument
from rag_pipeline.ingest.ebook import parse_epub
from rag_pipeline.ingest.email_message import parse_email
from rag_pipeline.ingest.image import is_heif, parse_image
from rag_pipeline.ingest.json_data import parse_json
from rag_pipeline.ingest.markdown_text import parse_markdown
from rag_pipeline.ingest.ocr import OcrEngineError
from rag_pipeline.ingest.opendocument import parse_opendocument
from rag_pipeline.ingest.org_text import parse_org
from rag_pipeline.ingest.outlook import parse_msg
from rag_pipeline.ingest.pdf import parse_pdf
from rag_pipeline.ingest.plain_text import parse_txt
from rag_pipeline.ingest.rest_text import parse_rst
from rag_pipeline.ingest.rich_text import looks_like_rtf, parse_rtf
from rag_pipeline.ingest.serialize import READ_AS
from rag_pipeline.ingest.sheet_xml import looks_like_sheet_xml, parse_sheet_xml
from rag_pipeline.ingest.sheets import parse_xls, parse_xlsx
from rag_pipeline.ingest.slides import parse_pptx
from rag_pipeline.ingest.slides_binary import parse_ppt
from rag_pipeline.ingest.web import parse_html, parse_mhtml
from rag_pipeline.ingest.word import parse_docx
from rag_pipeline.ingest.word_binary import parse_doc
from rag_pipeline.ingest.word_xml import looks_like_word_xml, parse_word_xml

__all__ = ["SUPPORTED_EXTENSIONS", "OcrEngineError", "parse_file"]

# OOXML by family: documents, macro-enabled files, templates, slide shows
_WORD_EXTENSIONS = {".docx", ".docm", ".dotx", ".dotm"}
_EXCEL_EXTENSIONS = {".xlsx", ".xlsm", ".xltx", ".xltm"}
_POWERPOINT_EXTENSIONS = {".pptx", ".pptm", ".ppsx", ".ppsm", ".potx", ".potm"}
_OOXML_EXTENSIONS = _WORD_EXTENSIONS | _EXCEL_EXTENSIONS | _POWERPOINT_EXTENSIONS
_OPENDOCUMENT_EXTENSIONS = {".odt", ".ods", ".odp"}
_ZIP_EXTENSIONS = _OOXML_EXTENSIONS | _OPENDOCUMENT_EXTENSIONS | {".epub"}
# Formats whose pictures or attachments are OCR'd: their parsers take the OCR languages.
_READ_WITH_OCR = _OOXML_EXTENSIONS | _OPENDOCUMENT_EXTENSIONS | {".doc", ".ppt", ".xls", ".eml", ".msg"}


def _office_xml(path: pathlib.Path) -> ParsedDocument:
    """An `.xml` file: a Word or an Excel 2003 XML document, told by its first bytes; any other
    XML (data, configuration) is refused before it is parsed."""
    with open(path, "rb") as f:
        head = f.read(4096)
    return parse_sheet_xml(path) if looks_like_sheet_xml(head) and not looks_like_word_xml(head) else parse_word_xml(path)


_TEXT_PARSERS: dict[str, Callable[[pathlib.Path], ParsedDocument]] = {
    **dict.fromkeys(_WORD_EXTENSIONS, parse_docx),
    **dict.fromkeys(_POWERPOINT_EXTENSIONS, parse_pptx),
    **dict.fromkeys(_EXCEL_EXTENSIONS, parse_xlsx),
    ".ppt": parse_ppt,
    ".xls": parse_xls,
    ".doc": parse_doc,
    ".odt": parse_opendocument,
    ".ods": parse_opendocument,
    ".odp": parse_opendocument,
    ".epub": parse_epub,
    ".rtf": parse_rtf,
    ".csv": parse_csv,
    ".tsv": parse_csv,
    ".html": parse_html,
    ".htm": parse_html,
    ".mht": parse_mhtml,
    ".mhtml": parse_mhtml,
    ".md": parse_markdown,
    ".markdown": parse_markdown,
    ".rst": parse_rst,
    ".rest": parse_rst,
    ".org": parse_org,
    ".json": parse_json,
    ".jsonl": parse_json,
    ".ndjson": parse_json,
    ".txt": parse_txt,
    ".eml": parse_email,
    ".msg": parse_msg,
    ".xml": _office_xml,
}
# Kingsoft WPS Office's own extensions: its files are Microsoft's 97-2003 binary formats under
# names of its own (LibreOffice opens them with its Word, Excel and PowerPoint filters), read as those.
# The map lives with the cache keys, which carry the reader's version for these extensions.
_KINGSOFT = READ_AS
_WORKS_HINT = "Microsoft Works? open it in Word and save it as .docx"
SUPPORTED_EXTENSIONS: frozenset[str] = frozenset(_TEXT_PARSERS) | frozenset(_KINGSOFT) | frozenset(IMAGE_EXTENSIONS) | {".pdf"}

_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"II*\x00", b"MM\x00*", b"GIF87a", b"GIF89a", b"BM")
# Real Office packages unpack to 1-6x their size on disk, a zip bomb to hundreds of times
# that; python-docx/python-pptx then hold ~10x the XML in memory. A package may unpack to
# at most this many times the per-file limit.
MAX_UNPACK_FACTOR = 3


# The stream that makes an OLE compound file a Word, Excel or PowerPoint 97-2003 file.
_LEGACY_STREAMS = {".doc": {"WordDocument"}, ".xls": {"Workbook", "Book"}, ".ppt": {"PowerPoint Document"}}


def _ole_streams(path: pathlib.Path) -> set[str]:
    """An OLE compound file's stream names; a password-protected Office package is refused."""
    try:
        with olefile.OleFileIO(str(path)) as ole:
            if ole.exists("EncryptionInfo") or ole.exists("EncryptedPackage"):
                raise UnreadableDocument("encrypted", "password-protected Office file (OLE EncryptedPackage)")
            return {"/".join(s) for s in ole.listdir()}
    except UnreadableDocument:
        raise
    except Exception as exc:  # damaged OLE
        raise UnreadableDocument("corrupt", f"damaged OLE compound file: {type(exc).__name__}: {exc}") from exc


def _ole_package(path: pathlib.Path, ext: str, ocr_lang: str) -> ParsedDocument:
    """An OLE compound file where OOXML (a zip) was expected.

    Office writes password-protected .docx/.xlsx/.pptx as an OLE container holding
    "EncryptionInfo" and "EncryptedPackage"; a Word, Excel or PowerPoint 97-2003 file saved
    under the new extension is read as what it is; any other OLE file is not read.
    """
    streams = _ole_streams(path)
    for family, legacy in ((_WORD_EXTENSIONS, ".doc"), (_EXCEL_EXTENSIONS, ".xls"), (_POWERPOINT_EXTENSIONS, ".ppt")):
        if ext in family and streams & _LEGACY_STREAMS[legacy]:
            return _TEXT_PARSERS[legacy](path, ocr_lang=ocr_lang)
    raise UnreadableDocument(
        "unsupported_format", f"legacy binary Office file with {path.suffix} extension (streams: {sorted(streams)[:5]})"
    )


def _kingsoft(path: pathlib.Path, ext: str, head: bytes, ocr_lang: str, max_bytes: int) -> ParsedDocument:
    """A WPS Office file, read as the Microsoft format it is written in. A `.wps` is also
    Microsoft Works' extension (an OLE file without a Word document, or the older non-OLE
    layout): refused with how to convert it, never guessed at."""
    legacy = _KINGSOFT[ext]
    if head.startswith(_OLE_MAGIC):
        streams = _ole_streams(path)
        if not streams & _LEGACY_STREAMS[legacy]:
            works = f"; {_WORKS_HINT}" if legacy == ".doc" else ""
            raise UnreadableDocument(
                "unsupported_format",
                f"a {ext} file holding no {legacy} (97-2003) stream, which WPS Office writes (streams: {sorted(streams)[:5]}){works}",
            )
    try:
        return _dispatch(path, legacy, head, ocr_lang, max_bytes)
    except UnreadableDocument as exc:
        if legacy == ".doc" and exc.reason == "corrupt" and not head.startswith(_OLE_MAGIC):
            raise UnreadableDocument("unsupported_format", f"{ext} that is not WPS Writer's ({exc.detail}); {_WORKS_HINT}") from exc
        raise


def _check_unpacked_size(path: pathlib.Path, limit: int) -> None:
    """Refuse a zip bomb before any parser inflates it. The declared sizes are a true bound:
    Python's zipfile never returns more bytes than a member declares."""
    with zipfile.ZipFile(path) as zf:
        unpacked = sum(info.file_size for info in zf.infolist())
    if unpacked > limit:  # not cached: the limit follows RAG_MAX_FILE_MB, which may be raised
        raise TransientFailure(
            "too_large", f"the package unpacks to {unpacked} bytes, over the {limit}-byte limit "
            f"(a zip bomb? else raise RAG_MAX_FILE_MB; the next run looks again)"
        )


def _refuse_non_regular(path: pathlib.Path, mode: int) -> None:
    """Never follow a symbolic link (it can reach files outside the raw folder) nor open a
    pipe or device (reading one can block forever)."""
    if stat.S_ISLNK(mode):
        target = os.readlink(path)
        raise UnreadableDocument(
            "unsupported_format", f"symbolic link to {target!r}, not followed (links can point outside the raw folder)"
        )
    if stat.S_ISDIR(mode):  # the scan lists folders' contents, never a folder: it replaced a file since
        raise TransientFailure("unavailable", "the file was replaced by a folder after the scan; the next run looks again")
    if not stat.S_ISREG(mode):
        raise UnreadableDocument("unsupported_format", "not a regular file (a pipe, socket or device)")


def _dispatch(path: pathlib.Path, ext: str, head: bytes, ocr_lang: str, max_bytes: int) -> ParsedDocument:
    is_pdf = b"%PDF-" in head[:1024]
    is_image = head.startswith(_IMAGE_MAGIC) or is_heif(head)
    # Content wins over the name for the two binary families we can always recognise.
    if ext == ".pdf" or (is_pdf and ext in IMAGE_EXTENSIONS):
        if not is_pdf:
            if is_image:
                return parse_image(path, ocr_lang=ocr_lang)
            raise UnreadableDocument("corrupt", "no %PDF- header")
        return parse_pdf(path, ocr_lang=ocr_lang)
    if ext in IMAGE_EXTENSIONS:
        return parse_image(path, ocr_lang=ocr_lang)
    if ext in _KINGSOFT:
        return _kingsoft(path, ext, head, ocr_lang, max_bytes)
    if ext in _MISNAMED and not head.startswith(_OLE_MAGIC):
        return _misnamed(path, ext, head, max_bytes, ocr_lang)
    if ext in _ZIP_EXTENSIONS:
        if head.startswith(_OLE_MAGIC):
            return _ole_package(path, ext, ocr_lang)
        if not zipfile.is_zipfile(path):
            raise UnreadableDocument("corrupt", f"{ext} is not a zip package")
        _check_unpacked_size(path, MAX_UNPACK_FACTOR * max_bytes)
    if ext in _READ_WITH_OCR:
        return _TEXT_PARSERS[ext](path, ocr_lang=ocr_lang)
    return _TEXT_PARSERS[ext](path)


def _misnamed(path: pathlib.Path, ext: str, head: bytes, max_bytes: int, ocr_lang: str) -> ParsedDocument:
    """A ".doc" or ".xls" that is not an Office 97-2003 file: a renamed .docx/.xlsx, or what web
    systems and older tools save under those names (RTF or Word 2003 XML as .doc, Excel 2003 XML
    as .xls, an HTML page or table as either), all of which Word and Excel open."""
    if zipfile.is_zipfile(path):
        _check_unpacked_size(path, MAX_UNPACK_FACTOR * max_bytes)
        return (parse_docx if ext == ".doc" else parse_xlsx)(path, ocr_lang=ocr_lang)
    if ext == ".doc" and looks_like_rtf(head):
        return parse_rtf(path)
    if ext == ".doc" and looks_like_word_xml(head):
        return parse_word_xml(path)
    if ext == ".xls" and looks_like_sheet_xml(head):  # before HTML: its <Table> reads as "<table"
        return parse_sheet_xml(path)
    if b"<table" in head.lower() or b"<html" in head.lower():
        return parse_html(path)
    if ext == ".doc":
        raise UnreadableDocument("corrupt", "neither a Word 97-2003 file (OLE2), a .docx package, RTF, Word 2003 XML nor HTML")
    raise UnreadableDocument("corrupt", "neither an Excel 97-2003 file (OLE2), a .xlsx package, Excel 2003 XML nor HTML")


_MISNAMED = {".doc", ".xls"}


def parse_file(
    path: pathlib.Path, *, ocr_lang: str = "eng+chi_sim", max_bytes: int = 100 * 1024 * 1024
) -> ParsedDocument:
    """Parse one file into a :class:`ParsedDocument`, or raise :class:`UnreadableDocument`.

    Reasons: unsupported_format (unknown extension, legacy binary Office, a symbolic link
    or other non-regular file), too_large (over ``max_bytes``, an Office package unpacking
    to over ``MAX_UNPACK_FACTOR`` times that, or an image over the pixel limit), encrypted
    (password PDF or Office file), corrupt (cannot be opened or parsed; any unexpected
    exception, with its type and message), no_text (parsed but empty, including OCR finding
    no words), timeout (OCR/rendering timed out and nothing else was readable). Low OCR
    confidence is not judged here: see ``ocr_used`` / ``ocr_confidence``.

    A :class:`TransientFailure` (a subclass) says nothing about the file's bytes and must
    not be cached: the file vanished or was replaced by a folder (``unavailable``), or the
    parse ran out of memory (``too_large``).

    The one exception that escapes is :class:`OcrEngineError` (tesseract or poppler
    missing, language data not installed): a deployment fault that must fail the run
    instead of quarantining every scan as "corrupt".
    """
    path = pathlib.Path(path)
    ext = path.suffix.lower()
    try:
        st = path.lstat()
        _refuse_non_regular(path, st.st_mode)
        if ext not in SUPPORTED_EXTENSIONS:
            raise UnreadableDocument("unsupported_format", f"extension {ext or '(none)'!r} is not supported")
        size = st.st_size
        if size > max_bytes:  # not cached: a run with a raised limit parses it
            raise TransientFailure("too_large", f"{size} bytes exceeds the {max_bytes}-byte limit; raise "
                                   f"RAG_MAX_FILE_MB to index it (the next run looks again)")
        if size == 0:
            raise UnreadableDocument("no_text", "empty file (0 bytes)")
        with open(path, "rb") as fh:
            head = fh.read(2048)
        return _dispatch(path, ext, head, ocr_lang, max_bytes)
    except (UnreadableDocument, OcrEngineError):
        raise
    except (FileNotFoundError, NotADirectoryError) as exc:
        if os.path.lexists(path):  # a parser's own missing piece, not the file
            raise UnreadableDocument("corrupt", f"{type(exc).__name__}: {exc}"[:500]) from exc
        raise TransientFailure(
            "unavailable", f"the file vanished before or while it was parsed (deleted or moved); the next run looks again: {exc}"
        ) from exc
    except MemoryError as exc:
        raise TransientFailure(
            "too_large", f"out of memory while parsing ({exc}); not cached: a run with more memory (parse_memory_mb) retries it"
        ) from exc
    except Exception as exc:
        raise UnreadableDocument("corrupt", f"{type(exc).__name__}: {exc}"[:500]) from exc
