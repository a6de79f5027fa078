"""Parsing fidelity benchmark (issue 15): rotated scans, per-strategy OCR cost, PDF tables.

1. Rotation: real scans (data/sample/scans, and ../shared/corpus image/scanned-pdf pages
   when present) turned 0/90/180/270 degrees with PIL, read by four strategies:
   ``none`` (one reading as is: the code before issue 15), ``osd`` (tesseract --psm 0, then
   one reading turned as it says), ``all4`` (read at every turn, keep the most confident) and
   ``hybrid`` (what ingest/ocr.py does: read as is, and only a doubtful page again, OSD's
   turn first). Per strategy: mean character-trigram recall of the upright reading's text,
   the worst page's recall, and seconds per page.
   Mixed orientation: the same scans with their lower half (cut at the blank pixel row nearest
   the middle) pasted back upside down (a slip or
   a table turned on an otherwise upright page), through ``parse_image`` and triage's page and
   paragraph gate: recall of the upright reading, precision (share of the indexed text's
   trigrams that the upright reading holds: garbage read off the upside-down half lowers it),
   and indexed characters per upright character. Run it from another checkout's code with
   ``PYTHONPATH=<checkout>`` for a before/after.
2. Scanned corpus cost: every file of ../shared/corpus/image and scanned-pdf parsed with
   orientation retries off (``none``) and on (``hybrid``): seconds, pages turned.
3. PDF text and tables: trigram recall of parse_pdf's text against ``pdftotext`` for every
   ../shared/corpus/pdf file, two ways: against ``-layout`` output taken whole (the first
   measure, kept for comparison: layout mode sets two columns, or a table's cells, side by
   side on one line, so it demands trigrams that run from one column into the next) and
   against reading-order output line by line (no trigram across a line end is demanded); cell recall of a TeX-set table (words drawn apart with no
   space glyph) with pdfplumber's default cell text vs the font-relative word gap.

Reproduce (~10 min on 2 shared cores, most of it OCR):

    .venv/bin/python bench/parse_fidelity.py [--skip-corpus | --pdf-text-only]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image

from rag_pipeline.ingest import ocr
from rag_pipeline.ingest.ocr import detect_rotation, prepare_image, read_page

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus"
TURNS = {0: None, 90: Image.Transpose.ROTATE_90, 180: Image.Transpose.ROTATE_180, 270: Image.Transpose.ROTATE_270}
LANG = "eng+chi_sim"


def _grams(text: str) -> set[str]:
    s = "".join(text.split()).lower()
    return {s[i : i + 3] for i in range(len(s) - 2)}


def trigram_recall(reference: str, candidate: str) -> float:
    ref = _grams(reference)
    return len(ref & _grams(candidate)) / len(ref) if ref else 0.0


def line_recall(reference: str, candidate: str) -> float:
    """trigram_recall with the reference taken line by line: no trigram across a line end."""
    wanted = set().union(*map(_grams, reference.splitlines())) if reference.strip() else set()
    return len(wanted & _grams(candidate)) / len(wanted) if wanted else 0.0


def _text(page) -> str:
    return "\n".join(getattr(p, "text", p) for p in page.paragraphs)  # str paragraphs: code before 2026-12-02


def _strategy(name: str, img: Image.Image):
    if name == "none":
        return read_page(img, LANG)
    if name == "osd":
        turn = detect_rotation(img) or 0
        return read_page(img.transpose(TURNS[turn]) if turn else img, LANG)
    if name == "all4":
        readings = [read_page(img.transpose(t) if t else img, LANG) for t in TURNS.values()]
        return max(readings, key=lambda p: p.confidence)
    return ocr.ocr_image(img, LANG, upscale=False)


def _pages() -> list[tuple[str, Image.Image]]:
    pages = [(p.name, Image.open(p)) for p in sorted((REPO / "data" / "sample" / "scans").glob("*.png"))]
    if CORPUS.is_dir():
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "page"
            subprocess.run(["pdftoppm", "-r", "200", "-f", "1", "-l", "1", "-png", "-singlefile",
                            str(CORPUS / "scanned-pdf" / "image.pdf"), str(out)], check=True)
            with Image.open(out.with_suffix(".png")) as img:
                pages.append(("scanned-pdf/image.pdf p1", img.copy()))
        pages.append(("image/chi_sim_image.jpeg", Image.open(CORPUS / "image" / "chi_sim_image.jpeg")))
    return [(name, prepare_image(img)) for name, img in pages]


def rotation_table() -> None:
    pages = _pages()
    print("\n### Rotated pages\n")
    print(f"{len(pages)} real scans x 4 turns: " + ", ".join(n for n, _ in pages) + "\n")
    print("| strategy | mean recall 0/90/180/270 | recall at 180 | recall at 270 | worst page | s/page |")
    print("|---|---|---|---|---|---|")
    references = {name: _text(read_page(img, LANG)) for name, img in pages}
    for strategy in ("none", "osd", "all4", "hybrid"):
        by_turn: dict[int, list[float]] = {t: [] for t in TURNS}
        seconds = []
        for name, img in pages:
            for turn, op in TURNS.items():
                turned = img.transpose(op) if op else img
                started = time.perf_counter()
                page = _strategy(strategy, turned)
                seconds.append(time.perf_counter() - started)
                by_turn[turn].append(trigram_recall(references[name], _text(page)))
        every = [r for rs in by_turn.values() for r in rs]
        print(f"| {strategy} | {statistics.mean(every):.3f} | {statistics.mean(by_turn[180]):.3f} | "
              f"{statistics.mean(by_turn[270]):.3f} | {min(every):.3f} | {statistics.mean(seconds):.2f} |", flush=True)


def mixed_orientation_table() -> None:
    from rag_pipeline.config import Settings
    from rag_pipeline.ingest.image import parse_image
    from rag_pipeline.ingest.triage import _drop_low_confidence_pages
    from rag_pipeline_tests.ingest.test_ocr_pages import upside_down_lower_half

    threshold = Settings().ocr_min_confidence
    print("\n### Pages with their lower half upside down\n")
    print("| page | upright words | recall | precision | chars / upright | warnings |")
    print("|---|---:|---:|---:|---:|---|")
    recalls, precisions = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for name, img in _pages():
            upright = read_page(img, LANG)
            reference = _text(upright)
            path = Path(tmp) / "mixed.png"
            upside_down_lower_half(img).save(path)
            doc = _drop_low_confidence_pages(parse_image(path, ocr_lang=LANG), threshold, lambda *a: None)
            text = "\n".join(b.text for b in doc.blocks) if doc else ""
            got = _grams(text)
            precision = len(got & _grams(reference)) / len(got) if got else 0.0
            recalls.append(trigram_recall(reference, text))
            precisions.append(precision)
            ratio = len("".join(text.split())) / max(1, len("".join(reference.split())))
            notes = "; ".join(w for w in (doc.warnings if doc else ["quarantined"]) if "angle" in w or "dropped" in w or w == "quarantined")
            print(f"| {name} | {upright.word_count} | {recalls[-1]:.3f} | {precision:.3f} | {ratio:.2f} | {notes} |", flush=True)
    print(f"| **mean** | | **{statistics.mean(recalls):.3f}** | **{statistics.mean(precisions):.3f}** | | |")


def corpus_cost_table() -> None:
    from rag_pipeline.ingest.document import ParsedDocument, UnreadableDocument
    from rag_pipeline.ingest.parsers import parse_file

    files = sorted((CORPUS / "image").iterdir()) + sorted((CORPUS / "scanned-pdf").iterdir())
    print("\n### Scanned corpus: cost of orientation checks\n")
    print("| mode | files | seconds | s/file | pages read turned | pages < 60 |")
    print("|---|---|---|---|---|---|")
    saved = ocr.ROTATION_RETRY_BELOW
    for mode, retry in (("none", -1.0), ("hybrid", saved)):
        ocr.ROTATION_RETRY_BELOW = retry
        started, turned, low = time.perf_counter(), 0, 0
        for path in files:
            try:
                doc = parse_file(path)
            except UnreadableDocument:
                continue
            if isinstance(doc, ParsedDocument):
                turned += sum(1 for p in doc.ocr_pages if p["rotation"])
                low += sum(1 for p in doc.ocr_pages if p["confidence"] < 60)
        took = time.perf_counter() - started
        print(f"| {mode} | {len(files)} | {took:.1f} | {took / len(files):.2f} | {turned} | {low} |", flush=True)
    ocr.ROTATION_RETRY_BELOW = saved


def pdf_tables() -> None:
    import pdfplumber

    from rag_pipeline.ingest import pdf
    from rag_pipeline.ingest.pdf import parse_pdf

    sys.path.insert(0, str(REPO))
    from rag_pipeline_tests.ingest.test_pdf_tables import ROWS, tex_like_table_pdf

    print("\n### PDF tables and text\n")
    with tempfile.TemporaryDirectory() as tmp:
        path = tex_like_table_pdf(Path(tmp) / "t.pdf")
        cells = [c for row in ROWS for c in row]
        with pdfplumber.open(path) as doc:
            table = doc.pages[0].find_tables()[0]
            before = [c for row in table.extract() for c in row]
            after = [c for row in table.extract(x_tolerance_ratio=pdf.TABLE_WORD_GAP) for c in row]
        print("| TeX-set table | cells exactly right |\n|---|---|")
        print(f"| pdfplumber default (x_tolerance 3 pt) | {sum(a == b for a, b in zip(cells, before))}/{len(cells)} |")
        print(f"| word gap {pdf.TABLE_WORD_GAP} x font size | {sum(a == b for a, b in zip(cells, after))}/{len(cells)} |")
        rows = [b.text for b in parse_pdf(path).blocks if b.kind == "table_row"]
        print(f"\nfirst row as indexed: `{rows[0]}`\n")
    if not CORPUS.is_dir():
        return
    pdf_text_table()


def pdf_text_table() -> None:
    from rag_pipeline.ingest.pdf import parse_pdf

    print("| text-layer PDF | recall vs pdftotext -layout, whole | recall vs pdftotext, per line | s |\n|---|---|---|---|")
    for f in sorted((CORPUS / "pdf").glob("*.pdf")):
        layout = subprocess.run(["pdftotext", "-layout", str(f), "-"], capture_output=True, text=True).stdout
        reading = subprocess.run(["pdftotext", str(f), "-"], capture_output=True, text=True).stdout
        started = time.perf_counter()
        try:
            text = parse_pdf(f).text
        except Exception as exc:  # encrypted etc.
            text = f"<{type(exc).__name__}>"
        seconds = time.perf_counter() - started
        print(f"| {f.name} | {trigram_recall(layout, text):.3f} | {line_recall(reading, text):.3f} | {seconds:.2f} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-corpus", action="store_true", help="only the rotation and table parts")
    ap.add_argument("--pdf-text-only", action="store_true", help="only the text-layer PDF recall table")
    ap.add_argument("--mixed-only", action="store_true", help="only the mixed-orientation table")
    args = ap.parse_args()
    os.environ.setdefault("OMP_THREAD_LIMIT", "1")
    if args.pdf_text_only:
        pdf_text_table()
        return
    if args.mixed_only:
        mixed_orientation_table()
        return
    print(f"load average before: {os.getloadavg()}")
    rotation_table()
    mixed_orientation_table()
    pdf_tables()
    if not args.skip_corpus and CORPUS.is_dir():
        corpus_cost_table()
    print(f"\nload average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
