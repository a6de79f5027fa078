"""A PDF's filled form fields and typed-on text are read (ingest/pdf_fields.py): they are drawn from
annotations, apart from the content stream the text layer comes from."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from pdfminer.psparser import LIT

from rag_pipeline.ingest.parsers import parse_file
from rag_pipeline.ingest.pdf_fields import page_field_lines

FILES = Path(__file__).parent / "files"


def _utf16(text: str) -> bytes:
    return b"\xfe\xff" + text.encode("utf-16-be")


def test_a_filled_forms_values_are_read_on_their_page_after_its_text():
    """`filled-form.pdf`: LibreOffice's form, filled in with Chinese values and a typewriter note
    by pypdf. Its text layer holds only the labels; the values were lost before."""
    document = parse_file(FILES / "filled-form.pdf")
    texts = [b.text for b in document.blocks]
    assert {b.page for b in document.blocks} == {1}
    values = ["First Name: 小明", "Last Name: 王", "Birthday: 1990-05-12", "Nationality: German", "gdpr: Yes",
              "Checked by HR on 2026-03-02: ID card number 4401 verified.", "First Name_2: Bob"]
    assert texts[-len(values):] == values  # top to bottom, after the page's own text
    assert texts.index("Example for a Form") < texts.index("First Name: 小明")
    # boxes left unticked ("female" radio group, "other") say nothing; each field once
    assert not any(t.startswith(("female", "other")) for t in texts)
    assert len(texts) == len(set(texts))


def test_hidden_damaged_and_machine_named_annotations():
    """Hidden annotations, sticky notes, links and signatures are not read; a damaged annotation
    or a field tree that loops loses only itself; machine names give the value alone."""
    group = {"T": b"colour", "FT": LIT("Btn"), "V": LIT("2")}
    loop: dict = {"FT": LIT("Tx")}
    loop["Parent"] = loop
    page = SimpleNamespace(annots=[
        {"Subtype": LIT("Widget"), "Rect": [0, 700, 100, 720], "FT": LIT("Tx"), "T": b"Employer", "V": _utf16("北风机器人")},
        {"Subtype": LIT("Widget"), "Rect": [0, 600, 100, 620], "FT": LIT("Tx"), "F": 2, "T": b"Secret", "V": b"hidden"},
        {"Subtype": LIT("Widget"), "Rect": "not a rectangle", "FT": LIT("Tx"), "T": b"Grade", "V": b"B2"},
        {"Subtype": LIT("Widget"), "Rect": [0, 500, 100, 520], "T": b"topmostSubform[0].Page1[0].f1_01[0]", "FT": LIT("Tx"), "V": b"Ada Lovelace"},
        {"Subtype": LIT("Widget"), "Rect": [0, 400, 100, 420], "TU": b"Enter the project code.", "T": b"Text7", "FT": LIT("Tx"), "V": b"NW-2041"},
        {"Subtype": LIT("Widget"), "Rect": [0, 300, 9, 309], "Parent": group, "AS": LIT("2")},  # radio: "2" is no word
        {"Subtype": LIT("Widget"), "Rect": [0, 200, 100, 220], "FT": LIT("Ch"), "T": b"Office", "V": b"sh",
         "Opt": [[b"bj", _utf16("北京")], [b"sh", _utf16("上海")]]},
        {"Subtype": LIT("Widget"), "Rect": [0, 150, 100, 170], "FT": LIT("Sig"), "T": b"Signature", "V": {"Contents": b"x"}},
        {"Subtype": LIT("Widget"), "Rect": [0, 120, 100, 140], "Parent": loop},
        {"Subtype": LIT("Text"), "Rect": [0, 100, 9, 109], "Contents": b"reviewer: looks fine"},
        {"Subtype": LIT("Link"), "Rect": [0, 90, 9, 99], "Contents": b"https://example.com"},
        {"Subtype": LIT("FreeText"), "Rect": [0, 800, 300, 820], "Contents": b"Received 12 May"},
        "not an annotation",
    ])
    assert page_field_lines(page) == [  # top to bottom; one without a readable place last
        "Received 12 May", "Employer: 北风机器人", "Ada Lovelace", "Enter the project code: NW-2041", "Office: 上海", "Grade: B2",
    ]
    assert page_field_lines(SimpleNamespace(annots=None)) == []
