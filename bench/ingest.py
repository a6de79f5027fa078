"""Ingest benchmark: parse throughput by format, and OCR scaling across worker processes.

Corpus: ../shared/corpus (the files its manifest.tsv lists; 81 files, 11 format folders).

1. Serial parse: every file parsed in this process, one after the other, --repeats times
   (default 3); each file's time is the median of its runs. One OCR thread (pdf.OCR_WORKERS
   = 1), so a scanned PDF's pages are not OCR'd in parallel either: this is one core's rate.
   Per format folder: files/s = files / sum of medians; pages/s counts pages, slides, sheets
   or frames where the format has them (pdf, scanned-pdf, image, pptx, xlsx), else "-".
2. OCR scaling: the scanned files (scanned-pdf/ and image/) through parse_many, the pool
   that index_job uses, with 1 worker and 1 OCR thread, 1 worker and the default OCR
   threads per PDF, and 2 workers (1 OCR thread each); wall time of the whole batch, median
   of --ocr-repeats (default 1) after a warm-up of the pool.

Reproduce (about 10 minutes on 2 cores, most of it OCR):

    .venv/bin/python bench/ingest.py [--repeats 3] [--ocr-repeats 1] [--only-ocr] [--corpus ../shared/corpus]

Prints two markdown tables. The machine should be otherwise idle: on a shared box the
numbers measure the neighbours too (the script prints the load average before and after).
"""

from __future__ import annotations

import argparse
import csv
import functools
import os
import resource
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from rag_pipeline.config import Settings
from rag_pipeline.ingest import pdf
from rag_pipeline.ingest.document import ParsedDocument
from rag_pipeline.ingest.parsers import parse_file
from rag_pipeline.ingest.pool import ocr_threads_per_worker, parse_many
from rag_pipeline.ingest.triage import parse_outcome

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus"
OCR_FOLDERS = ("scanned-pdf", "image")
PAGED = {"pdf", "scanned-pdf", "image", "pptx", "xlsx"}


def corpus_files(corpus: Path) -> list[str]:
    manifest = corpus / "manifest.tsv"
    if manifest.is_file():
        with open(manifest, encoding="utf-8", newline="") as fh:
            return [r["file"] for r in csv.DictReader(fh, delimiter="\t")]
    return sorted(p.relative_to(corpus).as_posix() for p in corpus.rglob("*") if p.is_file() and p.name != "SOURCES.md")


def pages_of(outcome) -> int:
    return (outcome.page_count or 1) if isinstance(outcome, ParsedDocument) else 1


def serial(corpus: Path, files: list[str], repeats: int, lang: str) -> tuple[dict[str, float], dict[str, object]]:
    pdf.OCR_WORKERS = 1
    times: dict[str, list[float]] = defaultdict(list)
    outcomes: dict[str, object] = {}
    cpu0, wall0 = _cpu_now(), time.perf_counter()
    for _ in range(repeats):
        for rel in files:
            started = time.perf_counter()
            outcomes[rel] = parse_outcome(corpus / rel, lambda p: parse_file(p, ocr_lang=lang))
            times[rel].append(time.perf_counter() - started)
    share = (_cpu_now() - cpu0) / (time.perf_counter() - wall0)
    print(f"serial pass: {share:.2f} CPU seconds per wall second (1.00 = it had a core to itself)")
    return {rel: statistics.median(t) for rel, t in times.items()}, outcomes


def format_table(medians: dict[str, float], outcomes: dict[str, object]) -> str:
    groups: dict[str, list[str]] = defaultdict(list)
    for rel in medians:
        groups[rel.split("/")[0]].append(rel)
    lines = ["| format | files | pages | seconds (sum of medians) | files/s | pages/s | slowest file (s) |",
             "|---|---:|---:|---:|---:|---:|---|"]
    total_s = total_files = total_pages = 0
    for fmt in sorted(groups):
        rels = groups[fmt]
        secs = sum(medians[r] for r in rels)
        pages = sum(pages_of(outcomes[r]) for r in rels) if fmt in PAGED else None
        slow = max(rels, key=medians.get)
        total_s += secs
        total_files += len(rels)
        total_pages += pages or 0
        lines.append(
            f"| {fmt} | {len(rels)} | {pages if pages is not None else '-'} | {secs:.2f} | {len(rels) / secs:.2f} | "
            f"{f'{pages / secs:.2f}' if pages else '-'} | {slow.split('/', 1)[1]} ({medians[slow]:.2f}) |"
        )
    lines.append(f"| **all** | {total_files} | {total_pages} (paged formats) | {total_s:.2f} | {total_files / total_s:.2f} | - | |")
    return "\n".join(lines)


def _cpu_now() -> float:
    """CPU seconds of this process plus its finished children (tesseract, pdftoppm)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def cpu_metered_parse(path: Path, *, lang: str, log_dir: str) -> ParsedDocument:
    """parse_file, run in a pool worker, that leaves the CPU seconds it cost in log_dir
    (pool workers are forked by a server process, so their CPU never reaches our rusage)."""
    started = _cpu_now()
    try:
        return parse_file(path, ocr_lang=lang, max_bytes=1 << 30)
    finally:
        with open(Path(log_dir) / f"{os.getpid()}-{time.monotonic_ns()}", "w") as fh:
            fh.write(str(_cpu_now() - started))


def _metered(scans: dict[str, Path], lang: str, workers: int, threads: int | None) -> tuple[float, float, int]:
    with tempfile.TemporaryDirectory(prefix="bench-cpu-") as log_dir:
        parse = functools.partial(cpu_metered_parse, lang=lang, log_dir=log_dir)
        started = time.perf_counter()
        out = parse_many(scans, ocr_lang=lang, max_bytes=1 << 30, workers=workers, timeout_s=None,
                         ocr_threads=threads, parse=parse)
        wall = time.perf_counter() - started
        cpu = sum(float(p.read_text()) for p in Path(log_dir).iterdir())
    return wall, cpu, sum(pages_of(o) for o in out.values())


def ocr_scaling(corpus: Path, files: list[str], repeats: int, lang: str) -> str:
    """Wall time of the scanned files through the pool. "CPUs used" = CPU seconds the
    parses cost (workers + their tesseract/pdftoppm) / wall seconds: well below the worker
    count, the CPUs were busy with something else and the speed-up says nothing."""
    scans = {rel: corpus / rel for rel in files if rel.split("/")[0] in OCR_FOLDERS}
    parse_many({"warm-up": corpus / "txt" / "fake-text-utf-16.txt"}, ocr_lang=lang, max_bytes=1 << 30, workers=2)
    configs = [("1 worker, 1 OCR thread", 1, 1), (f"1 worker, {ocr_threads_per_worker(1)} OCR threads per PDF", 1, None),
               ("2 workers, 1 OCR thread each", 2, None)]
    rows, pages, base = [], 0, None
    for label, workers, threads in configs:
        walls, cpus = [], []
        for _ in range(repeats):
            wall, cpu, pages = _metered(scans, lang, workers, threads)
            walls.append(wall)
            cpus.append(cpu)
        wall = statistics.median(walls)
        base = base or wall
        rows.append(f"| {label} | {wall:.1f} | {statistics.median(cpus) / wall:.2f} | {pages / wall:.2f} | {base / wall:.2f}x |")
    return "\n".join([f"OCR scaling on {len(scans)} scanned files ({pages} pages), {os.cpu_count()} CPUs, median of {repeats}:", "",
                      "| pool | wall s | CPUs used | OCR pages/s | speed-up |", "|---|---:|---:|---:|---:|", *rows])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ocr-repeats", type=int, default=1)
    ap.add_argument("--only-ocr", action="store_true", help="skip the serial table")
    args = ap.parse_args()
    if not args.corpus.is_dir():
        raise SystemExit(f"corpus not found: {args.corpus}")
    lang = Settings().ocr_lang
    files = corpus_files(args.corpus)
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    if not args.only_ocr:
        medians, outcomes = serial(args.corpus, files, args.repeats, lang)
        print(f"\nSerial parse, median of {args.repeats} (one OCR thread), OCR languages {lang}:\n")
        print(format_table(medians, outcomes))
    print()
    print(ocr_scaling(args.corpus, files, args.ocr_repeats, lang))
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
