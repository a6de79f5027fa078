"""Outlook messages (.msg: an OLE compound file of MAPI properties) through python-oxmsg.

A message saved or dragged out of Outlook is a .msg, not an .eml. It is turned into the RFC 822
message it stands for and read by the .eml reader (ingest.email_message), so both give the same
blocks: the subject as title, a From/To/Cc/Date block, the body (plain text, else HTML) and the
attachments named, not indexed. The addresses come from the transport headers a received
message keeps, else from the MAPI sender and recipients (blind copies left out).
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


def _one_line(value: object) -> str:
    """A header value unfolded (received headers keep their line folds) and stripped."""
    return " ".join(str(value or "").split())


def _attachment_part(attachment) -> EmailMessage:  # type: ignore[no-untyped-def]
    """An attachment as a MIME part: its name, type and bytes; an embedded message as a
    message/rfc822 part (the .eml reader names it "forwarded message")."""
    part = EmailMessage(policy=email.policy.default)
    if attachment.properties.int_prop_value(_ATTACH_METHOD) == _EMBEDDED_MESSAGE:
        part.set_content(EmailMessage(policy=email.policy.default))
        return part
    part["Content-Type"] = attachment.mime_type or "application/octet-stream"
    part["Content-Disposition"] = "attachment"
    part.set_param("filename", attachment.file_name or "unnamed attachment", header="Content-Disposition")
    part["Content-Transfer-Encoding"] = "base64"
    part.set_payload(base64.encodebytes(attachment.file_bytes or b"").decode("ascii"))
    return part


def _as_email(message) -> EmailMessage:  # type: ignore[no-untyped-def]
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
    attachments = [_attachment_part(a) for a in message.attachments]
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
