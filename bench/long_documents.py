"""Long documents through the parse pool: a long scan and a long text-layer PDF, built by repeating
the shared corpus's pages (pypdfium2, installed with pdfplumber), each parsed alone through
`parse_many` with the pipeline's defaults (two workers, one OCR thread each) under two limits:

- fixed: the whole file stopped at ``--limit`` s (before session 51: ``timeout_s`` was the file's),
- progress: stopped after ``--limit`` s without a page read, or at RAG_PARSE_MAX_S's default in all
  (what the pipeline does now, pool.py / heartbeat.py).

    .venv/bin/python bench/long_documents.py                      # 60-page scan, 900-page PDF: ~12 min
    .venv/bin/python bench/long_documents.py --scan-pages 10 --text-pages 100 --limit 20   # ~2 min
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pypdfium2 as pdfium

from rag_pipeline.config import Settings
from rag_pipeline.ingest.document import UnreadableDocument
from rag_pipeline.ingest.pool import parse_many

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
SCAN_SOURCES = ["scanned-pdf/image.pdf", "scanned-pdf/c02-22.pdf", "scanned-pdf/epson.pdf", "scanned-pdf/skew.pdf"]
TEXT_SOURCE = "pdf/redp5110_sampled.pdf"


def repeated(sources: list[Path], pages: int, out: Path) -> Path:
    """A PDF of `pages` pages taken in turn from `sources`' pages."""
    docs = [pdfium.PdfDocument(str(p)) for p in sources]
    merged = pdfium.PdfDocument.new()
    turn = 0
    while len(merged) < pages:
        doc = docs[turn % len(docs)]
        take = min(len(doc), pages - len(merged))
        merged.import_pages(doc, list(range(take)))
        turn += 1
    merged.save(str(out))
    return out


def run(path: Path, *, timeout_s: float | None, max_s: float | None) -> tuple[str, float, int]:
    started = time.perf_counter()
    out = parse_many({"f": path}, ocr_lang=Settings().ocr_lang, max_bytes=10**9, workers=2,
                     timeout_s=timeout_s, max_s=max_s)["f"]
    took = time.perf_counter() - started
    if isinstance(out, UnreadableDocument):
        return f"quarantined {out.reason}", took, 0
    return f"parsed, {len(out.blocks)} blocks", took, out.page_count or 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scan-pages", type=int, default=60)
    ap.add_argument("--text-pages", type=int, default=900)
    ap.add_argument("--limit", type=float, default=Settings().parse_timeout_s)
    args = ap.parse_args()
    cap = Settings().parse_max_s
    with tempfile.TemporaryDirectory() as tmp:
        files = {
            f"scan, {args.scan_pages} pages": repeated([CORPUS / s for s in SCAN_SOURCES], args.scan_pages, Path(tmp) / "scan.pdf"),
            f"text, {args.text_pages} pages": repeated([CORPUS / TEXT_SOURCE], args.text_pages, Path(tmp) / "text.pdf"),
        }
        print("| file | limit | outcome | s | pages/s |\n|---|---|---|---:|---:|")
        for name, path in files.items():
            for label, timeout_s, max_s in (("fixed", None, args.limit), ("progress", args.limit, cap)):
                outcome, took, pages = run(path, timeout_s=timeout_s, max_s=max_s)
                rate = f"{pages / took:.2f}" if pages else "-"
                print(f"| {name} | {label} ({args.limit:g} s) | {outcome} | {took:.0f} | {rate} |", flush=True)


if __name__ == "__main__":
    main()
