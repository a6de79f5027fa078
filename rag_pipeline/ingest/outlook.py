"""Outlook messages (.msg: an OLE compound file of MAPI properties) through python-oxmsg.

A message saved or dragged out of Outlook is a .msg, not an .eml. It is turned into the RFC 822
message it stands for and read by the .eml reader (ingest.email_message), so both give the same
blocks: the subject as title, a From/To/Cc/Date block, the body (plain text, else HTML) and the
attachments as the .eml reader reads them. The addresses come from the transport headers a
received message keeps, else from the MAPI sender and recipients (blind copies left out).

A message attached to a message (a forward "as attachment", a bounce's original) is a storage
inside the attachment's (``__substg1.0_3701000D``), whose property stream has a 24-byte header
where a top-level message has 32 (MS-OXMSG 2.4.1): python-oxmsg reads only the latter, so it is
read here as a Message over that storage with the shorter header, and becomes a message/rfc822
part the .eml reader reads as a forwarded message.
"""

from __future__ import annotations

import base64
import email
import email.parser
import email.policy
import email.utils
from email.message import EmailMessage
from pathlib import Path

from rag_pipeline.ingest.document import ParsedDocument, UnreadableDocument
from rag_pipeline.ingest.email_message import read_message

_TRANSPORT_HEADERS = 0x007D  # PidTagTransportMessageHeaders: the header block as received
_RECIPIENT_TYPE = 0x0C15  # PidTagRecipientType: 1 To, 2 Cc, 3 Bcc
_ATTACH_METHOD = 0x3705  # PidTagAttachMethod: 5 = an embedded message
_EMBEDDED_MESSAGE = 5
_EMBEDDED_STORAGE = "__substg1.0_3701000D"  # PidTagAttachDataObject as a storage: the attached message
_EMBEDDED_HEADER_BYTES = 24  # an embedded message's property-stream header (a top-level one: 32)
MAX_NESTING = 8  # messages attached inside attached messages read this deep; deeper ones are named


def _one_line(value: object) -> str:
    """A header value unfolded (received headers keep their line folds) and stripped."""
    return " ".join(str(value or "").split())


def _embedded(attachment):  # type: ignore[no-untyped-def]
    """The message an attachment carries, read with an embedded message's header size; None
    when its storage is missing."""
    from oxmsg import Message
    from oxmsg.properties import Properties

    class EmbeddedMessage(Message):
        @property
        def _properties(self) -> Properties:
            return Properties(self._storage, properties_header_offset=_EMBEDDED_HEADER_BYTES)

    storage = next((s for s in attachment._storage.storages if s.name == _EMBEDDED_STORAGE), None)
    return EmbeddedMessage(storage) if storage is not None else None


def _attachment_part(attachment, depth: int) -> EmailMessage:  # type: ignore[no-untyped-def]
    """An attachment as a MIME part: its name, type and bytes; an embedded message as a
    message/rfc822 part carrying it (the .eml reader reads it as a forwarded message)."""
    part = EmailMessage(policy=email.policy.default)
    if attachment.properties.int_prop_value(_ATTACH_METHOD) == _EMBEDDED_MESSAGE:
        try:
            inner = _embedded(attachment) if depth < MAX_NESTING else None
            carried = _as_email(inner, depth + 1) if inner is not None else None
        except Exception:  # a damaged attached message is named, and its message still read
            carried = None
        part.set_content(carried if carried is not None else EmailMessage(policy=email.policy.default))
        return part
    part["Content-Type"] = attachment.mime_type or "application/octet-stream"
    part["Content-Disposition"] = "attachment"
    part.set_param("filename", attachment.file_name or "unnamed attachment", header="Content-Disposition")
    part["Content-Transfer-Encoding"] = "base64"
    part.set_payload(base64.encodebytes(attachment.file_bytes or b"").decode("ascii"))
    return part


def _as_email(message, depth: int = 0) -> EmailMessage:  # type: ignore[no-untyped-def]
    """The RFC 822 message an oxmsg Message stands for (headers, body, attachments as parts)."""
    props = message.properties
    received = email.parser.HeaderParser(policy=email.policy.compat32).parsestr(props.str_prop_value(_TRANSPORT_HEADERS) or "")
    mail = EmailMessage(policy=email.policy.default)
    mail["Subject"] = _one_line(message.subject)
    sender = _one_line(received["From"] or message.sender)
    if sender:
        mail["From"] = sender
    for header, kind in (("To", 1), ("Cc", 2)):
        value = _one_line(received[header]) or ", ".join(
            email.utils.formataddr((r.name if r.name != r.email_address else "", r.email_address))
            for r in message.recipients
            if (r.properties.int_prop_value(_RECIPIENT_TYPE) or 1) == kind
        )
        if value:
            mail[header] = value
    date = _one_line(received["Date"]) or (email.utils.format_datetime(message.sent_date) if message.sent_date else None)
    if date:
        mail["Date"] = date
    if message.body and message.body.strip():
        mail.set_content(message.body)
    elif message.html_body:
        mail.set_content(message.html_body, subtype="html")
    attachments = [_attachment_part(a, depth) for a in message.attachments]
    if attachments:
        mail.make_mixed()
        for part in attachments:
            mail.attach(part)
    return mail


def parse_msg(path: Path, *, ocr_lang: str = "eng+chi_sim") -> ParsedDocument:
    """Parse an Outlook .msg like an .eml (see ingest.email_message.parse_email).

    Quarantine: ``corrupt`` for a file that is not an Outlook message (damaged, or another OLE
    file); ``encrypted`` for an S/MIME-encrypted message (its body is an encrypted attachment);
    ``no_text`` as for .eml.
    """
    from oxmsg import Message  # on first use: the definitions never need it

    try:
        message = Message.load(str(path))
        mail = _as_email(message)
    except UnreadableDocument:
        raise
    except Exception as exc:  # not an OLE file, or not a message
        raise UnreadableDocument("corrupt", f"not a readable Outlook message: {type(exc).__name__}: {exc}"[:500]) from exc
    if message.message_class.upper().startswith("IPM.NOTE.SMIME") and "MULTIPARTSIGNED" not in message.message_class.upper():
        raise UnreadableDocument("encrypted", f"S/MIME-encrypted Outlook message ({message.message_class})")
    data = mail.as_bytes()  # read back, so the .eml reader sees headers as they travel (encoded words)
    return read_message(email.message_from_bytes(data, policy=email.policy.default), data, format="msg", parser="python-oxmsg", ocr_lang=ocr_lang)
