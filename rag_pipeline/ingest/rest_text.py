"""reStructuredText (.rst: Sphinx and Python project documentation, READMEs): rendered by docutils
to HTML and read like HTML, as Markdown is, so sections, lists and every table form (grid, simple,
``csv-table``, ``list-table``) share the HTML walker's heading path and table folding.

Safe on untrusted files: nothing outside the file is read (``include``, ``raw``, a csv-table's
``:file:``/``:url:`` are off; no docutils.conf is looked for in the working or home folder), and
markup errors never stop the parse: they are counted in the warnings, their messages kept out of
the text. Sphinx's own directives and roles, unknown to docutils, are read as what they hold:
``code-block`` as code, ``seealso``/``glossary``/``versionadded 2.1``… as their content, a
``:ref:`text <target>``` as its text; ``toctree``, ``autofunction`` and the other directives whose
content Sphinx generates from elsewhere are dropped.
"""

from __future__ import annotations

import collections
import io
import re
from pathlib import Path

from docutils import nodes
from docutils.core import publish_doctree, publish_from_doctree
from docutils.parsers.rst import Directive, directives, roles
from docutils.parsers.rst.languages import en
from docutils.writers import html4css1

from rag_pipeline.ingest.blocks import BlockBuilder, make_document
from rag_pipeline.ingest.document import ParsedDocument
from rag_pipeline.ingest.encoding import decode_bytes, encoding_notes
from rag_pipeline.ingest.plain_text import text_blocks
from rag_pipeline.ingest.web import blocks_from_html

# docutils' guard against slow markup on huge lines: a longer line empties the whole document, so
# such a file is read as plain text instead.
_LINE_LENGTH_LIMIT = 10_000
_SETTINGS = {
    "line_length_limit": _LINE_LENGTH_LIMIT,
    "report_level": 3,  # errors are kept (to be counted) and removed before the text is read
    "halt_level": 5,  # never stop on a markup error
    "file_insertion_enabled": False,
    "raw_enabled": False,
    "_disable_config": True,
    "input_encoding": "unicode",
    "output_encoding": "unicode",
    "syntax_highlight": "none",
    "embed_stylesheet": False,
    "math_output": "HTML",  # MathML would spell a formula out one token per element
    "sectsubtitle_xform": False,
    "initial_header_level": 2,  # <h1> is the document title (html4css1 would start sections at <h1> too)
}
# Sphinx directives whose content is generated from elsewhere (the API, other files) or is markup.
_GENERATED = {
    "toctree", "autosummary", "automodule", "autoclass", "autofunction", "automethod", "autoattribute",
    "autodata", "autoexception", "literalinclude", "highlight", "currentmodule", "index", "tabularcolumns",
    "sectionauthor", "moduleauthor", "codeauthor", "default-role", "default-domain", "graphviz", "uml",
}
_CODE = {"code-block", "sourcecode"}
_CONDITIONS = {"only", "ifconfig"}  # their argument decides when the content shows: not text
_VERSIONS = {"versionadded": "New in version", "versionchanged": "Changed in version", "deprecated": "Deprecated since version"}
# Names are bounded and a role's has one domain colon at most: a long run of colons stays linear.
_DIRECTIVE_USE = re.compile(r"^[ \t]*\.\.[ \t]+([\w.+-]{1,60}(?::[\w.+-]{1,60})?)[ \t]*::", re.M)
_ROLE_USE = re.compile(r":([\w.+-]{1,60}(?::[\w.+-]{1,60})?):`")
_EXPLICIT_TARGET = re.compile(r"^(.*?)\s*<[^<>]*>$", re.S)


class _Dropped(Directive):
    has_content = True
    optional_arguments = 1
    final_argument_whitespace = True
    option_spec = collections.defaultdict(lambda: directives.unchanged)

    def run(self) -> list:
        return []


class _Code(_Dropped):
    def run(self) -> list:
        return [nodes.literal_block("\n".join(self.content), "\n".join(self.content))]


class _Container(_Dropped):
    """An unknown directive's argument (a version, a function signature) and content, as text."""

    def run(self) -> list:
        box = nodes.container()
        short = self.name.rsplit(":", 1)[-1].lower()
        arguments = [] if short in _CONDITIONS else self.arguments
        text = " ".join(filter(None, [_VERSIONS.get(short), *arguments]))
        if text:  # its markup read too (a version's explanation may follow on the directive's lines)
            inline, messages = self.state.inline_text(text, self.lineno)
            box += nodes.paragraph(text, "", *inline)
            box += messages
        self.state.nested_parse(self.content, self.content_offset, box)
        return [box]


def _text_role(name, rawtext, text, lineno, inliner, options=None, content=None):  # type: ignore[no-untyped-def]  # noqa: ARG001
    """A Sphinx cross-reference as the words a reader sees: `text <target>` -> text, ~a.b -> b."""
    explicit = _EXPLICIT_TARGET.match(text)
    shown = explicit.group(1) if explicit else text.lstrip("!")
    if not explicit and shown.startswith("~"):
        shown = shown[1:].rsplit(".", 1)[-1]
    return [nodes.literal(rawtext, shown)], []


def _register_unknown(source: str) -> None:
    """Sphinx's directives and roles this file uses, registered for this process as read above."""
    for name in set(_DIRECTIVE_USE.findall(source)):
        if name.lower() not in en.directives:
            short = name.rsplit(":", 1)[-1].lower()  # "py:function" -> "function"
            kind = _Dropped if short in _GENERATED else _Code if short in _CODE else _Container
            directives.register_directive(name, kind)
    for name in set(_ROLE_USE.findall(source)):
        if name.lower() not in en.roles:
            roles.register_local_role(name, _text_role)


def parse_rst(path: Path) -> ParsedDocument:
    """Parse reStructuredText into heading/paragraph/list_item/table_row blocks; the title is the
    document title docutils finds (a lone top section), else the first heading."""
    text, encoding = decode_bytes(path.read_bytes())
    if max(map(len, text.splitlines()), default=0) > _LINE_LENGTH_LIMIT:  # docutils would drop every line
        notes = [*encoding_notes(encoding), f"a line over {_LINE_LENGTH_LIMIT:,} characters: read as plain text"]
        return make_document(text_blocks(text), format="rst", parser="text", warnings=notes)
    _register_unknown(text)
    settings = dict(_SETTINGS, warning_stream=io.StringIO())
    doctree = publish_doctree(text, source_path=path.name, settings_overrides=settings)
    in_text = list(doctree.findall(nodes.system_message))
    problems = sum(m.get("level", 0) >= 3 for m in [*in_text, *doctree.transform_messages])
    for message in in_text:
        message.parent.remove(message)
    for bad in list(doctree.findall(nodes.problematic)):  # markup that did not parse: its source text
        bad.parent.replace(bad, nodes.Text(bad.astext()))
    # html4css1, not html5: html5 writes admonitions and topics as <aside>, which the walker drops as
    # chrome; report_level 5 keeps the parse's messages out of the page (a "System Messages" section)
    html = publish_from_doctree(doctree, writer=html4css1.Writer(), settings_overrides=dict(settings, report_level=5))
    builder = BlockBuilder()
    blocks_from_html(html, builder, drop_by_class=False)
    notes = encoding_notes(encoding)
    if problems:
        notes.append(f"{problems} reStructuredText markup error(s): read as plain text or skipped")
    return make_document(builder, format="rst", parser="docutils", title=doctree.get("title") or None, warnings=notes)
