"""SmartArt: the text of an org chart, a process or a cycle drawn as a diagram in a .pptx or .docx.

A SmartArt graphic keeps its text in its own data part (``dgm:dataModel``), not in the slide's or
the document's text, so it was lost. Its points are the diagram's boxes; ``parOf`` connections
make them a tree under the document point (an org chart's manager over the people below, a
process's steps side by side). Read depth first in the connections' order, a box with a box above
it is written "above > box" (an org chart's "总经理 张三 > 技术部 李四" says who reports to whom as
a table row says which column a value is in); a top-level box stands alone. Empty boxes, the
connectors' own points and a placeholder box's prompt ("[Text]") are not read.
"""

from __future__ import annotations

from lxml import etree

_DGM = "{http://schemas.openxmlformats.org/drawingml/2006/diagram}"
_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_PARSER = etree.XMLParser(resolve_entities=False, no_network=True)
_BOXES = {"node", "asst"}  # a box and an assistant box; "doc" is the root, the rest connectors and layout
MAX_DIAGRAM_POINTS = 2000


def _point_text(pt) -> str:  # type: ignore[no-untyped-def]
    body = pt.find(f"{_DGM}t")
    if body is None:
        return ""
    paragraphs = ("".join(t.text or "" for t in p.iter(f"{_A}t")) for p in body.iter(f"{_A}p"))
    return " ".join(" ".join(p.split()) for p in paragraphs if p.strip())


def diagram_lines(xml: bytes) -> list[str]:
    """A SmartArt data part's boxes as lines, depth first, each below the top level after its
    parent's text ("parent > box"). Raises on a part that is not XML."""
    root = etree.fromstring(xml, parser=_PARSER)
    points = {}
    root_ids = []
    for pt in root.iter(f"{_DGM}pt"):
        kind = pt.get("type", "node")
        if kind == "doc":
            root_ids.append(pt.get("modelId"))
        elif kind in _BOXES and len(points) < MAX_DIAGRAM_POINTS:
            points[pt.get("modelId")] = _point_text(pt)
    children: dict[str, list[tuple[int, str]]] = {}
    has_parent = set()
    for cxn in root.iter(f"{_DGM}cxn"):
        if cxn.get("type", "parOf") != "parOf":
            continue
        child = cxn.get("destId")
        if child in points:
            try:
                order = int(cxn.get("srcOrd", "0"))
            except ValueError:
                order = 0
            children.setdefault(cxn.get("srcId"), []).append((order, child))
            has_parent.add(child)
    lines: list[str] = []
    seen: set[str] = set()

    def walk(node: str, above: str) -> None:
        for _, child in sorted(children.get(node, ())):
            if child in seen:  # a damaged model's loop
                continue
            seen.add(child)
            text = points[child]
            if text:
                lines.append(f"{above} > {text}" if above else text)
            walk(child, text or above)

    for start in root_ids:
        walk(start, "")
    for node, text in points.items():  # boxes no connection reaches: in the order they are listed
        if node not in seen and node not in has_parent and text:
            seen.add(node)
            lines.append(text)
            walk(node, text)
    return lines
