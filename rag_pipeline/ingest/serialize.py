"""Parse outcomes as JSON, so unchanged files are never parsed (or OCR'd) twice.

The cache key is the file's sha256 plus everything that changes what a parser returns
(the cache version and the OCR languages). Triage — the quarantine decision — runs again
on every run from the cached result, so changing the OCR threshold needs no re-OCR.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import PurePosixPath

from rag_pipeline.ingest.document import ParsedDocument, TextBlock, UnreadableDocument

# Bump when a parser changes its output for the same bytes (2: hostile-input fixes;
# 3: pages OCR'd right side up, per-page OCR confidence in ``ocr_pages``; 4: vertical Chinese
# pages read in columns, tables stacked in one worksheet folded under their own headers;
# 5: OCR blocks carry their paragraph's confidence, paragraphs read well at another angle added;
# 6: ocr_pages record the share of the page's text ink read; 7: .doc, .ppt, .xls, .odt/.ods/.odp,
# .rtf, .epub, .mht, .tsv, .bmp/.gif/.webp and the .docm/.xlsm/.pptm family are read, where a cached
# outcome says "not supported").
PARSE_CACHE_VERSION = 7
# A change that touches only some extensions re-parses only their files: an extension's own version,
# added to the key when set, so every other cached parse stays valid (PARSE_CACHE_VERSION re-parses
# everything, OCR included). Word 2003 XML (.xml, under .doc) — .doc/.xml 1: read; 2: cells spanning
# columns fill the first (were repeated in each). Excel 2003 XML — .xml 3, .xls 1: read (under .xls
# it was read as HTML). Text boxes and notes — .docx family 1, .doc 3, .xml 4, .rtf 1: a text box's
# paragraphs read after its anchor (lost in .docx, .doc and RTF, run into the anchor in Word 2003
# XML), a footnote's or endnote's text in brackets where cited (was dropped). Pictures — .docx,
# .pptx and .xlsx families, .odt, .odp 1: OCR'd. WPS Office's .wps/.wpt, .et/.ett, .dps/.dpt and
# Outlook's .msg — 1: read (a cached outcome says "not supported"). Encrypted mail — .eml 2,
# .msg 3: quarantined ``encrypted`` (was indexed as its addresses and ciphertext); attachments
# stopped by time without progress, not by 45 s for all (a message cut short is read whole).
# .ppt 2: a picture's text on the slide that shows it (was after the last slide, no page); .doc 5:
# an inline picture's text after its paragraph (was after the text). .msg 4: a message attached to
# the message read as a forwarded one (python-oxmsg gave it empty: named, not read). .xls 3: a
# picture's text after the rows of the sheet that shows it (was after the last sheet, no page).
# .doc 6: a floating picture's text after the paragraph it is anchored in (was after the text).
# WPS 3: read by the .doc/.xls/.ppt readers, so their changes are its (.doc 5 and .ppt 2 missed it);
# since then its key carries its reader's version itself (READ_AS), so such a miss cannot recur.
# .pdf 1: a filled form's values and FreeText annotations read (were lost: drawn apart from the page's
# content stream). Every PDF is parsed again once, its scanned pages OCR'd again.
# Tracked changes read as accepted — .docx family 2 (inserted text, a content control's filled-in
# value, a smart tag's or simple field's text, content imported from a part of its own (w:altChunk),
# automatic list numbers "第十二条" were lost), .doc 7 and .rtf 2 (deleted text was read).
# Charts' data as table rows and SmartArt boxes as list items — .pptx family 2 (only a chart's title
# was read), .docx family 2 (neither).
# Percentages as shown — .xlsx family 3, .xls 4, .ods 2: 0.125 in a "0.0%" cell reads "12.5%" (was 0.125).
# Embedded objects in OpenDocument — .odt 3, .odp 3: a chart's title and data, an embedded
# spreadsheet's tables, an embedded text (were not read).
# Mail — .eml 3, .msg 5: its attachments are read by the readers above, so their changes are its.
EXTENSION_VERSIONS = {
    **dict.fromkeys((".docx", ".docm", ".dotx", ".dotm"), 2),
    **dict.fromkeys((".pptx", ".pptm", ".ppsx", ".ppsm", ".potx", ".potm"), 2),
    **dict.fromkeys((".xlsx", ".xlsm", ".xltx", ".xltm"), 3),
    ".pdf": 1, ".odt": 3, ".ods": 2, ".odp": 3, ".doc": 7, ".ppt": 2, ".xml": 4, ".rtf": 2, ".xls": 4, ".msg": 5, ".eml": 3,
    **dict.fromkeys((".wps", ".wpt", ".et", ".ett", ".dps", ".dpt"), 3),
    **dict.fromkeys((".rst", ".rest", ".org", ".heic", ".heif", ".json", ".jsonl", ".ndjson"), 1),  # were unsupported_format: that cached outcome must not stand
}


# Kingsoft WPS Office's own extensions: Microsoft's 97-2003 formats under names of its own, always
# read by that format's reader (ingest.parsers dispatches by this map). Their key carries the reader's
# version too, so a change to the .doc, .xls or .ppt reader re-parses them with no second bump to forget.
READ_AS = {".wps": ".doc", ".wpt": ".doc", ".et": ".xls", ".ett": ".xls", ".dps": ".ppt", ".dpt": ".ppt"}


def extension_version(suffix: str) -> str:
    """The parse version of one extension's files: the cache's, the extension's own and, for an
    extension read by another's reader, that reader's."""
    suffix = suffix.lower()
    own = EXTENSION_VERSIONS.get(suffix)
    version = f"v{PARSE_CACHE_VERSION}" + (f".{own}" if own else "")
    reader = READ_AS.get(suffix)
    return version + (f"+{EXTENSION_VERSIONS.get(reader, 0)}" if reader else "")


def parse_cache_key(sha256: str, ocr_lang: str, suffix: str) -> str:
    """Content, OCR languages and extension: the same bytes named .txt and .exe parse differently."""
    suffix = suffix.lower()
    version = extension_version(suffix)
    return hashlib.sha256(f"{version}\0{ocr_lang}\0{suffix}\0{sha256}".encode()).hexdigest()


def parse_key_of(ocr_lang: str) -> Callable[[str, str], str]:
    """(sha256, source path) -> the parse cache key a run with these OCR languages uses: what
    cache housekeeping (store.lake.Lake.prune) keeps for the files a generation holds."""
    return lambda sha256, source: parse_cache_key(sha256, ocr_lang, PurePosixPath(source).suffix)


def outcome_to_json(outcome: ParsedDocument | UnreadableDocument) -> str:
    if isinstance(outcome, UnreadableDocument):
        return json.dumps({"unreadable": {"reason": outcome.reason, "detail": outcome.detail}}, ensure_ascii=False)
    return json.dumps({"parsed": asdict(outcome)}, ensure_ascii=False)


@dataclass(frozen=True)
class ParseHeader:
    """A parsed document's document-level facts: all a documents row takes from its parse."""

    format: str
    parser: str
    language: str
    page_count: int | None
    ocr_used: bool
    ocr_confidence: float | None
    title: str | None


def plain_header_from_json(text: str) -> ParseHeader | None:
    """The header of a parsed document read without OCR that holds some text, None for any other
    outcome: what triage keeps exactly as it is (ingest.triage.kept_as_cached) can be judged from
    this, without building its blocks."""
    parsed = json.loads(text).get("parsed")
    if parsed is None or parsed.get("ocr_used") or not any(b["text"].strip() for b in parsed["blocks"]):
        return None
    return _header(parsed)


def _header(parsed: dict) -> ParseHeader:
    return ParseHeader(**{f.name: parsed.get(f.name) for f in fields(ParseHeader)})


def outcome_from_json(text: str) -> ParsedDocument | UnreadableDocument:
    data = json.loads(text)
    if "unreadable" in data:
        return UnreadableDocument(data["unreadable"]["reason"], data["unreadable"]["detail"])
    parsed = dict(data["parsed"])
    parsed["blocks"] = [TextBlock(**{**b, "heading_path": tuple(b["heading_path"])}) for b in parsed["blocks"]]
    return ParsedDocument(**parsed)
