"""EPUB e-books (2 and 3): the chapters in reading order, each read by the HTML parser.

The package names its OPF file in ``META-INF/container.xml``; the OPF's spine lists the
chapters (XHTML) in reading order. Each chapter is walked by ``web.blocks_from_html`` into
one builder, so headings carry across chapters as they do in the book. A book whose content
is encrypted (DRM) is ``encrypted``; the font obfuscation of EPUB's own spec is not.
"""

from __future__ import annotations

import posixpath
import zipfile
from pathlib import Path
from urllib.parse import unquote

from lxml import etree

from rag_pipeline.ingest.blocks import BlockBuilder, make_document
from rag_pipeline.ingest.document import ParsedDocument, UnreadableDocument
from rag_pipeline.ingest.encoding import decode_bytes
from rag_pipeline.ingest.web import blocks_from_html

_NS = {
    "c": "urn:oasis:names:tc:opendocument:xmlns:container",
    "opf": "http://www.idpf.org/2007/opf",
    "dc": "http://purl.org/dc/elements/1.1/",
    "enc": "http://www.w3.org/2001/04/xmlenc#",
}
# Font obfuscation (IDPF and Adobe): fonts mangled with the book's id, not content encryption.
_FONT_OBFUSCATION = {"http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC"}
_XML = etree.XMLParser(resolve_entities=False, no_network=True)


def _xml(package: zipfile.ZipFile, name: str) -> etree._Element:
    try:
        return etree.fromstring(package.read(name), parser=_XML)
    except KeyError as exc:
        raise UnreadableDocument("corrupt", f"the EPUB package has no {name}") from exc


def _check_not_encrypted(package: zipfile.ZipFile) -> None:
    if "META-INF/encryption.xml" not in package.namelist():
        return
    methods = {m.get("Algorithm") for m in _xml(package, "META-INF/encryption.xml").iterfind(".//enc:EncryptionMethod", _NS)}
    if methods - _FONT_OBFUSCATION:
        raise UnreadableDocument("encrypted", "the EPUB's content is encrypted (DRM)")


def spine(package: zipfile.ZipFile) -> tuple[list[str], str | None]:
    """The chapters' paths inside the package in reading order, and the book's title."""
    rootfile = _xml(package, "META-INF/container.xml").find(".//c:rootfile", _NS)
    if rootfile is None or not rootfile.get("full-path"):
        raise UnreadableDocument("corrupt", "META-INF/container.xml names no package (OPF) file")
    opf_path = rootfile.get("full-path")
    opf = _xml(package, opf_path)
    base = posixpath.dirname(opf_path)
    manifest = {item.get("id"): item for item in opf.iterfind("opf:manifest/opf:item", _NS)}
    chapters = []
    for ref in opf.iterfind("opf:spine/opf:itemref", _NS):
        item = manifest.get(ref.get("idref"))
        if item is not None and "html" in (item.get("media-type") or ""):
            chapters.append(posixpath.normpath(posixpath.join(base, unquote(item.get("href")))))
    title = opf.find("opf:metadata/dc:title", _NS)
    return chapters, (title.text or "").strip() or None if title is not None else None


def parse_epub(path: Path) -> ParsedDocument:
    """Parse an EPUB into the blocks of its chapters, in spine order."""
    with zipfile.ZipFile(path) as package:
        _check_not_encrypted(package)
        chapters, title = spine(package)
        names = set(package.namelist())
        builder = BlockBuilder()
        missing = []
        for chapter in chapters:
            if chapter not in names:
                missing.append(chapter)
                continue
            text, _ = decode_bytes(package.read(chapter))
            blocks_from_html(text, builder, drop_by_class=False)
    notes = [f"chapters listed in the spine but missing from the package: {missing}"] if missing else []
    return make_document(builder, format="epub", parser="beautifulsoup", page_count=len(chapters) or None,
                         title=title, warnings=notes)
