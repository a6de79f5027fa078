"""E-mail (.eml) parsing through unstructured: real messages written with the stdlib
``email`` package, parsed offline (a network call fails the test)."""

from __future__ import annotations

import base64
import socket
from email.message import EmailMessage
from email.mime.nonmultipart import MIMENonMultipart
from pathlib import Path

import pytest

from rag_pipeline.ingest.document import UnreadableDocument
from rag_pipeline.ingest.email_message import SPACY_MODEL, parse_email
from rag_pipeline.ingest.parsers import SUPPORTED_EXTENSIONS, parse_file


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """unstructured must neither download a spaCy model nor ping its analytics."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def _write(path: Path, msg) -> Path:
    path.write_bytes(msg.as_bytes())
    return path


def _gb2312_word(text: str) -> str:
    """An encoded word the way Chinese mail clients write one: labelled gb2312, GBK bytes."""
    return "=?gb2312?B?" + base64.b64encode(text.encode("gbk")).decode("ascii") + "?="


def test_plain_english_message(tmp_path):
    msg = EmailMessage()
    msg["From"] = "Alice Smith <alice@example.com>"
    msg["To"] = "Bob Jones <bob@example.com>"
    msg["Cc"] = "night-shift@example.com"
    msg["Date"] = "Tue, 01 Oct 2024 10:00:00 +0000"
    msg["Subject"] = "Welding robot maintenance moved"
    msg.set_content(
        "Hi Bob,\n\nThe maintenance window for the welding robots moves to\n"
        "Friday 14:00. Please tell the night shift.\n\n- check the grippers\n- replace the filters\n\nThanks,\nAlice\n"
    )
    doc = parse_file(_write(tmp_path / "plain.eml", msg))

    assert (doc.format, doc.parser, doc.language) == ("eml", "unstructured", "en")
    assert doc.title == "Welding robot maintenance moved"
    assert doc.blocks[0].kind == "heading" and doc.blocks[0].text == doc.title
    assert doc.blocks[1].text == (
        "From: Alice Smith <alice@example.com>\nTo: Bob Jones <bob@example.com>\n"
        "Cc: night-shift@example.com\nDate: 2024-10-01T10:00:00+00:00"
    )
    assert "moves to Friday 14:00. Please tell the night shift." in doc.text  # hard wrap joined
    assert [b.text for b in doc.blocks if b.kind == "list_item"] == ["check the grippers", "replace the filters"]
    assert all(b.heading_path == (doc.title,) for b in doc.blocks)
    assert doc.warnings == []


def test_alternative_prefers_plain_text_and_names_attachments(tmp_path):
    msg = EmailMessage()
    msg["From"] = "alice@example.com"
    msg["To"] = "bob@example.com, carol@example.com"
    msg["Subject"] = "Q3 report"
    msg.set_content("The plain version: the Q3 report is attached.\n")
    msg.add_alternative("<html><body><p>The <b>HTML</b> version of the Q3 mail.</p></body></html>", subtype="html")
    msg.add_attachment(b"%PDF-1.4 secret pdf body", maintype="application", subtype="pdf", filename="q3-report.pdf")
    msg.add_attachment("客户名单".encode(), maintype="application", subtype="octet-stream", filename="客户名单.xlsx")
    doc = parse_email(_write(tmp_path / "alt.eml", msg))

    assert "The plain version: the Q3 report is attached." in doc.text
    assert "HTML version" not in doc.text and "<b>" not in doc.text
    assert "secret pdf body" not in doc.text  # attachments are named, not parsed
    last = doc.blocks[-1].text
    assert last.startswith("Attachments (not indexed): ")
    assert "q3-report.pdf (application/pdf, 24 bytes)" in last and "客户名单.xlsx" in last
    assert any("2 attachment(s) not indexed" in w and "q3-report.pdf" in w for w in doc.warnings)
    assert "To: bob@example.com, carol@example.com" in doc.blocks[1].text


def test_html_only_body_becomes_text_with_headings_and_tables(tmp_path):
    msg = EmailMessage()
    msg["From"] = "ops@example.com"
    msg["Subject"] = "Weekly status"
    msg.set_content(
        "<html><head><style>p {color: red}</style></head><body><h1>Status</h1>"
        "<p>All lines running.</p><table><tr><th>Item</th><th>Qty</th></tr><tr><td>Bolts</td><td>40</td></tr>"
        "</table><ul><li>first point</li></ul></body></html>",
        subtype="html",
    )
    doc = parse_email(_write(tmp_path / "html.eml", msg))

    assert "<" not in doc.text and "color" not in doc.text
    assert ("heading", ("Weekly status", "Status")) in {(b.kind, b.heading_path) for b in doc.blocks}
    assert "All lines running." in doc.text
    assert ("table_row", "Item: Bolts; Qty: 40") in {(b.kind, b.text) for b in doc.blocks}
    assert ("list_item", "first point") in {(b.kind, b.text) for b in doc.blocks}


def test_gbk_chinese_message_with_gb2312_encoded_words(tmp_path):
    """Clients label GBK text "gb2312"; 镕 exists only in GBK, so a strict gb2312 decode
    would lose it (in the subject, the sender's name and the body)."""
    subject = "关于朱镕基讲话的安全生产会议通知"
    body = "各位同事：\n\n本周五下午两点在三号会议室召开安全生产会议，\n请准时参加。\n\n朱镕基同志的讲话也会讨论。\n\n行政部\n"
    msg = MIMENonMultipart("text", "plain", charset="gb2312")
    msg["Subject"] = _gb2312_word(subject)
    msg["From"] = f"{_gb2312_word('行政部')} <admin@example.cn>"
    msg["To"] = "all@example.cn"
    msg["Date"] = "Wed, 02 Oct 2024 09:00:00 +0800"
    msg["Content-Transfer-Encoding"] = "base64"
    msg.set_payload(base64.encodebytes(body.encode("gbk")).decode("ascii"))
    path = _write(tmp_path / "gbk.eml", msg)
    assert b"=?gb2312?B?" in path.read_bytes()

    doc = parse_file(path)
    assert doc.title == subject
    assert doc.language == "zh"
    assert "\ufffd" not in doc.text
    assert "From: 行政部 <admin@example.cn>" in doc.text
    assert "Date: 2024-10-02T09:00:00+08:00" in doc.text
    assert "本周五下午两点在三号会议室召开安全生产会议，请准时参加。" in doc.text  # no space at the wrap
    assert "朱镕基同志的讲话也会讨论。" in doc.text
    assert any("gb2312" in w and "gb18030" in w for w in doc.warnings)


def test_utf8_chinese_html_message(tmp_path):
    msg = EmailMessage()
    msg["From"] = "张伟 <zhang.wei@example.cn>"
    msg["Subject"] = "季度销售总结"
    msg.set_content("<p>第三季度销售额同比增长百分之十二。</p><p>华东区表现最好。</p>", subtype="html", charset="utf-8")
    doc = parse_email(_write(tmp_path / "utf8.eml", msg))
    assert doc.title == "季度销售总结"
    assert doc.language == "zh"
    assert "From: 张伟 <zhang.wei@example.cn>" in doc.text
    assert "第三季度销售额同比增长百分之十二。" in doc.text and "华东区表现最好。" in doc.text


def test_empty_and_garbled_messages_are_quarantined(tmp_path):
    empty = tmp_path / "empty.eml"
    empty.write_bytes(b"")
    with pytest.raises(UnreadableDocument) as exc:
        parse_file(empty)
    assert exc.value.reason == "no_text"

    blank = tmp_path / "blank.eml"
    blank.write_bytes(b"\r\n\r\n  \r\n")
    with pytest.raises(UnreadableDocument) as exc:
        parse_email(blank)
    assert exc.value.reason == "no_text"

    headers_only = EmailMessage()
    headers_only["From"] = "a@example.com"
    headers_only["Subject"] = "nothing here"
    with pytest.raises(UnreadableDocument) as exc:
        parse_file(_write(tmp_path / "headers_only.eml", headers_only))
    assert exc.value.reason == "no_text" and "no body text" in exc.value.detail

    binary = tmp_path / "binary.eml"
    binary.write_bytes(bytes(range(256)) * 8)
    with pytest.raises(UnreadableDocument) as exc:
        parse_file(binary)
    assert exc.value.reason == "corrupt"

    not_mail = tmp_path / "notes.eml"
    not_mail.write_text("Just some notes saved with the wrong extension.\nSecond line.\n", encoding="utf-8")
    with pytest.raises(UnreadableDocument) as exc:
        parse_file(not_mail)
    assert exc.value.reason == "corrupt" and "not an e-mail" in exc.value.detail


def test_encrypted_messages_are_quarantined_encrypted_and_signed_ones_read(tmp_path):
    """PGP/MIME (unstructured's real `fake-encrypted.eml`), S/MIME and an inline PGP body hide the
    text: quarantined `encrypted`, as an encrypted PDF is, not indexed as addresses and ciphertext.
    A signed message's text is in the clear: read, and a body that only quotes a PGP block too."""
    with pytest.raises(UnreadableDocument) as exc:
        parse_file(FILES / "fake-encrypted.eml")
    assert exc.value.reason == "encrypted" and "PGP/MIME" in exc.value.detail

    smime = EmailMessage()
    smime["From"], smime["Subject"] = "hr@example.com", "Salary review"
    smime.set_content(b"0\x82\x05\x10\x06\t*\x86H\x86\xf7\r\x01\x07\x03", maintype="application",
                      subtype="pkcs7-mime", params={"smime-type": "enveloped-data", "name": "smime.p7m"})
    with pytest.raises(UnreadableDocument) as exc:
        parse_file(_write(tmp_path / "smime.eml", smime))
    assert exc.value.reason == "encrypted" and "S/MIME" in exc.value.detail

    armor = "-----BEGIN PGP MESSAGE-----\n\nhIwDY32hYGCE8MkBA/wOu7d45aUxF4Q0RKJprD3v5Z9K1Yc\n=zzaA\n-----END PGP MESSAGE-----\n"
    inline = EmailMessage()
    inline["From"], inline["Subject"] = "a@example.com", "Board minutes"
    inline.set_content(armor)
    with pytest.raises(UnreadableDocument) as exc:
        parse_file(_write(tmp_path / "inline.eml", inline))
    assert exc.value.reason == "encrypted" and "inline PGP" in exc.value.detail

    quoting = EmailMessage()
    quoting["From"], quoting["Subject"] = "it@example.com", "How to send encrypted mail"
    quoting.set_content("Encrypted mail looks like the block below; your client decrypts it for you.\n\n" + armor)
    assert "your client decrypts it" in parse_file(_write(tmp_path / "quoting.eml", quoting)).text

    signed = tmp_path / "signed.eml"
    signed.write_text(
        "From: a@example.com\nSubject: Signed notice\nMIME-Version: 1.0\nContent-Type: multipart/signed; "
        'protocol="application/pgp-signature"; micalg=pgp-sha256; boundary="b"\n\n--b\nContent-Type: text/plain\n\n'
        "The office closes at noon on Friday.\n\n--b\nContent-Type: application/pgp-signature\n\n"
        "-----BEGIN PGP SIGNATURE-----\nabc\n-----END PGP SIGNATURE-----\n\n--b--\n", encoding="utf-8")
    assert "The office closes at noon on Friday." in parse_file(signed).text


def test_attachment_only_message_is_kept_with_a_warning(tmp_path):
    msg = EmailMessage()
    msg["From"] = "scanner@example.com"
    msg["Subject"] = "Scan 0042"
    msg.add_attachment(b"\x89PNG\r\n\x1a\n fake", maintype="image", subtype="png", filename="scan-0042.png")
    doc = parse_email(_write(tmp_path / "scan.eml", msg))
    assert "scan-0042.png (image/png" in doc.text
    assert any("no body text" in w for w in doc.warnings)


def test_registered_and_pointed_at_the_bundled_spacy_model(tmp_path):
    from unstructured.nlp import tokenize

    assert ".eml" in SUPPORTED_EXTENSIONS
    msg = EmailMessage()
    msg["From"] = "a@example.com"
    msg["Subject"] = "Model check"
    msg.set_content("This sentence is long enough that unstructured tags its parts of speech.\n")
    parse_email(_write(tmp_path / "m.eml", msg))
    assert tokenize._SPACY_MODEL_NAME == SPACY_MODEL
    with pytest.raises(RuntimeError, match="downloading one is disabled"):
        tokenize._install_spacy_model()


# ---------------------------------------------------------------- Outlook .msg

FILES = Path(__file__).parent / "files"


def test_outlook_msg_reads_like_the_eml_it_stands_for(tmp_path):
    """A real Outlook message (a Chinese mail server's bounce: the GBK-encoded sender name of its
    transport headers, an English body, the bounced message attached): the subject as title,
    the header block, the body, then the bounced message read as a forwarded one (an embedded
    message: python-oxmsg alone gives it empty) — its own attachment named, not read."""
    doc = parse_file(FILES / "delivery-failure.msg")
    assert (doc.format, doc.parser, doc.title) == ("msg", "python-oxmsg", "投递状态通知 (Failure Notice)")
    assert [b.kind for b in doc.blocks[:3]] == ["heading", "paragraph", "paragraph"]
    assert doc.blocks[1].text == "From: Mail Delivery Subsystem <mailer-daemon@tjdpf.org.cn>\nTo: <yosipnps@model.com>\nDate: 2017-11-27T17:44:30+08:00"
    assert "I'm afraid I was not able to deliver your message to the following recipient: hp_lsz@tjdpf.org.cn" in doc.text
    bounced = "回复：转发：反馈·北京 2017年12月02-03日 销售"
    inner = [b for b in doc.blocks if b.heading_path[:2] == (doc.title, bounced)]
    assert inner[0].kind == "heading" and inner[0].text == bounced
    assert inner[1].text == "From: Meredith chen <yosipnps@model.com>\nTo: <hp_lsz@tjdpf.org.cn>\nDate: 2017-11-27T17:44:11+08:00"
    assert [b.text for b in inner[2:4]] == ["Meredith", "FYI..."]
    assert doc.blocks[-1].text.startswith("Attachments (not indexed): 北京 2017年12月02-03日 销售主管 确认n.pdf")
    assert doc.warnings[0] == f"attachment forwarded message {bounced!r}: read (11 blocks)"


def test_outlook_msg_gives_the_blocks_of_the_same_message_as_eml(tmp_path):
    """An Outlook message with no sender, one recipient and a message embedded as its
    attachment gives the blocks the .eml reader gives the same message written by the stdlib."""
    same, attached = EmailMessage(), EmailMessage()
    same["Subject"], same["To"] = "outer subject", "outer@foo.bar"
    same.set_content("Outer body\n")
    attached["Subject"], attached["To"] = "test", "test@foobar.com"
    attached.set_content("body\n")
    same.add_attachment(attached)
    eml = parse_file(_write(tmp_path / "outer.eml", same))
    msg = parse_file(FILES / "outer.msg")
    assert [(b.kind, b.text) for b in msg.blocks] == [(b.kind, b.text) for b in eml.blocks]
    assert [(b.kind, b.text, b.heading_path) for b in msg.blocks] == [
        ("heading", "outer subject", ("outer subject",)),
        ("paragraph", "To: outer@foo.bar", ("outer subject",)),
        ("paragraph", "Outer body", ("outer subject",)),
        ("heading", "test", ("outer subject", "test")),
        ("paragraph", "To: test@foobar.com", ("outer subject", "test")),
        ("paragraph", "body", ("outer subject", "test")),
    ]


def test_a_msg_that_is_not_an_outlook_message_is_corrupt(tmp_path):
    other_ole = tmp_path / "policy.msg"
    other_ole.write_bytes((FILES / "差旅报销制度.doc").read_bytes())  # an OLE file, but a Word document
    garbage = tmp_path / "garbage.msg"
    garbage.write_bytes(b"not an OLE compound file at all " * 20)
    for path in (other_ole, garbage):
        with pytest.raises(UnreadableDocument) as info:
            parse_file(path)
        assert info.value.reason == "corrupt" and "not a readable Outlook message" in info.value.detail


# ---------------------------------------------------------------- attachments read


def test_an_attachment_is_read_under_a_heading_of_its_name():
    """unstructured's example message with a text file attached: the file's text follows the body,
    under the subject and the file's name, as the same file alone would read."""
    doc = parse_file(FILES / "fake-email-attachment.eml")
    assert [(b.kind, b.text, b.heading_path) for b in doc.blocks[-2:]] == [
        ("heading", "fake-attachment.txt", ("Fake email with attachment", "fake-attachment.txt")),
        ("paragraph", "Hey this is a fake attachment!", ("Fake email with attachment", "fake-attachment.txt")),
    ]
    assert doc.warnings == ["attachment fake-attachment.txt: read (1 blocks)"]
    assert "Attachments (not indexed)" not in doc.text


def _policy_mail(tmp_path: Path) -> Path:
    """A notice with a Word policy and a scan attached, a logo inline and a damaged PDF."""
    msg = EmailMessage()
    msg["From"] = "hr@example.com"
    msg["To"] = "all@example.com"
    msg["Subject"] = "新版差旅报销制度"
    msg.set_content("各位同事：新版制度见附件，请遵照执行。\n")
    msg.add_related(b"\x89PNG\r\n\x1a\n logo", maintype="image", subtype="png", cid="<logo>", filename="logo.png")
    msg.add_attachment((FILES / "差旅报销制度.docx").read_bytes(), maintype="application",
                       subtype="vnd.openxmlformats-officedocument.wordprocessingml.document", filename="差旅报销制度.docx")
    msg.add_attachment(SCAN.read_bytes(), maintype="image", subtype="png", filename="安全须知_扫描.png")
    msg.add_attachment(b"%PDF-1.4 cut off", maintype="application", subtype="pdf", filename="旧版制度.pdf")
    return _write(tmp_path / "notice.eml", msg)


SCAN = Path(__file__).resolve().parents[2] / "data" / "sample" / "scans" / "安全须知_扫描.png"


def test_attached_documents_and_scans_are_read_as_those_files_and_the_rest_is_named(tmp_path):
    doc = parse_file(_policy_mail(tmp_path))
    subject = "新版差旅报销制度"
    policy = parse_file(FILES / "差旅报销制度.docx")
    attached = [b for b in doc.blocks if b.heading_path[:2] == (subject, "差旅报销制度.docx")]
    assert [(b.kind, b.text, b.heading_path[2:]) for b in attached[1:]] == [(b.kind, b.text, b.heading_path) for b in policy.blocks]
    scan = [b for b in doc.blocks if b.heading_path[:2] == (subject, "安全须知_扫描.png") and b.kind == "ocr_text"]
    assert [b.text for b in scan] == [b.text for b in parse_file(SCAN).blocks] and all(b.ocr_confidence for b in scan)
    closing = doc.blocks[-1]
    assert closing.heading_path == (subject,) and closing.text.startswith("Attachments (not indexed): ")
    assert "logo.png (image/png" in closing.text and "旧版制度.pdf (application/pdf" in closing.text  # inline; damaged
    assert "attachment 旧版制度.pdf: not read (corrupt: " in "\n".join(doc.warnings)
    assert doc.language == "zh"


def test_an_attachment_is_stopped_after_its_time_without_progress_and_read_whole_while_it_progresses(monkeypatch):
    """A stand-in parser that sleeps (no page read, no beat) is stopped at the 1 s limit and named,
    the message's own text kept; one that beats every 0.2 s runs twice that long and is read whole
    (a long scan attached, on a slow machine as on a fast one)."""
    import time

    from rag_pipeline.ingest import embedded, heartbeat, parsers

    real = parsers._TEXT_PARSERS[".txt"]

    def slow(path):
        time.sleep(30)

    def progressing(path):
        for _ in range(10):
            time.sleep(0.2)
            heartbeat.beat()
        return real(path)

    monkeypatch.setattr(embedded, "EMBEDDED_STALL_S", 1.0)
    monkeypatch.setitem(parsers._TEXT_PARSERS, ".txt", slow)
    started = time.monotonic()
    doc = parse_file(FILES / "fake-email-attachment.eml")
    assert time.monotonic() - started < 10
    assert "Hello!" in doc.text and "Hey this is a fake attachment!" not in doc.text
    assert "attachment fake-attachment.txt: not read (stopped after 1 s without progress)" in doc.warnings

    monkeypatch.setitem(parsers._TEXT_PARSERS, ".txt", progressing)
    started = time.monotonic()
    doc = parse_file(FILES / "fake-email-attachment.eml")
    assert time.monotonic() - started >= 2
    assert "Hey this is a fake attachment!" in doc.text and "attachment fake-attachment.txt: read (1 blocks)" in doc.warnings


@pytest.mark.parametrize("how", ["as a file", "forwarded"])
def test_an_attached_message_is_read_but_not_its_own_attachments(tmp_path, how):
    """A message attached as an .eml file or forwarded (message/rfc822, under its own subject)."""
    import email
    import email.policy

    data = (FILES / "fake-email-attachment.eml").read_bytes()
    outer = EmailMessage()
    outer["From"] = "a@example.com"
    outer["Subject"] = "Fwd: files"
    outer.set_content("See the attached message.\n")
    if how == "forwarded":
        outer.add_attachment(email.message_from_bytes(data, policy=email.policy.default))
    else:
        outer.add_attachment(data, maintype="application", subtype="octet-stream", filename="original.eml")
    doc = parse_file(_write(tmp_path / "outer.eml", outer))
    label = "original.eml" if how == "as a file" else "forwarded message 'Fake email with attachment'"
    path = ("Fwd: files", "original.eml", "Fake email with attachment") if how == "as a file" else ("Fwd: files", "Fake email with attachment")
    assert [b.heading_path for b in doc.blocks if b.text == "Here's the attachments!"] == [path]  # the attached message's body
    assert "Hey this is a fake attachment!" not in doc.text  # its attachment: named only
    assert any(w.startswith(f"attachment {label}: 1 attachment(s) not indexed: fake-attachment.txt") for w in doc.warnings)


def test_the_attachment_time_limit_keeps_an_outer_timer():
    """A timer set before (pytest-timeout's, a caller's) keeps running through the limit, less the
    time spent; one due first is left alone and the limit only bounds OCR calls."""
    import signal
    import time

    from rag_pipeline.ingest.deadline import TimeLimitPassed, remaining, time_limit

    fired = []
    previous = signal.signal(signal.SIGALRM, lambda *_: fired.append(time.monotonic()))
    try:
        signal.setitimer(signal.ITIMER_REAL, 3.0)
        with pytest.raises(TimeLimitPassed), time_limit(0.2):
            time.sleep(2)
        assert 2.3 < signal.getitimer(signal.ITIMER_REAL)[0] <= 2.8 and not fired
        with time_limit(10.0):  # the outer timer is due first: no timer of its own
            assert remaining(180) <= 10.0
            time.sleep(0.2)
        assert 2.0 < signal.getitimer(signal.ITIMER_REAL)[0] <= 2.6
        assert remaining(180) == 180  # no limit outside
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_a_damaged_message_attached_to_an_outlook_message_is_named_and_the_message_read(tmp_path, monkeypatch):
    """The attached message's property stream overwritten with 0xFF (olefile writes a stream in
    place at its size), and, injected, a reader that raises on it: either way it is named
    "forwarded message", not read, and the outer message is read."""
    import olefile

    from rag_pipeline.ingest import outlook

    damaged = tmp_path / "damaged.msg"
    damaged.write_bytes((FILES / "outer.msg").read_bytes())
    stream = "__attach_version1.0_#00000000/__substg1.0_3701000D/__properties_version1.0"
    with olefile.OleFileIO(str(damaged), write_mode=True) as ole:
        ole.write_stream(stream, b"\xff" * ole.get_size(stream))

    def raising(attachment):
        raise KeyError("__substg1.0_0037001F")

    for _ in ("overwritten", "raising"):
        doc = parse_file(damaged)
        assert [b.text for b in doc.blocks[:3]] == ["outer subject", "To: outer@foo.bar", "Outer body"]
        assert doc.blocks[-1].text == "Attachments (not indexed): forwarded message (message/rfc822)"
        monkeypatch.setattr(outlook, "_embedded", raising)
