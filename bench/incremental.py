"""Incremental re-indexing benchmark: what a re-run costs, and what each kind of change embeds.

Corpus: the bundled sample (13 files, 2 OCR scans) plus N SciFact abstracts written as .txt
files (default 300, from ../shared/bench/scifact-train; sample only if it is absent).
Every run is a real Dagster run of index_job (ephemeral instance) in this one process, so the
model is loaded once and process start-up is excluded from every timing.

    .venv/bin/python bench/incremental.py [--docs 300] [--repeats 3]

Prints a markdown table: full build vs. no-op re-run (median of --repeats, and the ratio),
then chunks embedded and files parsed by each kind of change. ~3 min on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from rag_pipeline_tests.indexing import run_index

REPO = Path(__file__).resolve().parents[1]
SCIFACT = REPO.parent / "shared" / "bench" / "scifact-train" / "corpus.jsonl"


def build_corpus(dest: Path, n_docs: int) -> None:
    shutil.copytree(REPO / "data" / "sample", dest)
    if not SCIFACT.exists():
        return
    with SCIFACT.open(encoding="utf-8") as fh:
        for i, line in zip(range(n_docs), fh):
            doc = json.loads(line)
            path = dest / "scifact" / f"{doc['_id']}.txt"
            path.parent.mkdir(exist_ok=True)
            path.write_text(f"{doc['title']}\n\n{doc['text']}\n", encoding="utf-8")


def timed(raw: Path, lake: Path, **settings) -> tuple[float, dict]:
    started = time.perf_counter()
    report = run_index(raw, lake, **settings)
    assert report["success"], report
    return time.perf_counter() - started, report


def changes(raw: Path) -> list[tuple[str, callable]]:
    handbook = raw / "handbook" / "employee_handbook_en.md"
    sidecar = raw / "handbook" / "employee_handbook_en.md.meta.json"

    def edit_paragraph():
        text = handbook.read_text(encoding="utf-8")
        handbook.write_text(text.replace("15 working days", "16 working days", 1), encoding="utf-8")

    def insert_at_top():
        text = handbook.read_text(encoding="utf-8")
        cut = text.index("\n") + 1
        handbook.write_text(text[:cut] + "\nReviewed by the works council.\n" + text[cut:], encoding="utf-8")

    def rename():
        (raw / "handbook" / "notes.txt").rename(raw / "handbook" / "faq.txt")

    def metadata_only():
        sidecar.write_text(sidecar.read_text(encoding="utf-8").replace('"HR"', '"People"'), encoding="utf-8")

    def withdraw():
        sidecar.write_text(sidecar.read_text(encoding="utf-8").replace('"published"', '"withdrawn"'), encoding="utf-8")

    def delete():
        (raw / "products" / "price_list.xlsx").unlink()

    return [
        ("edit one paragraph", edit_paragraph),
        ("insert a paragraph at the top", insert_at_top),
        ("rename a file", rename),
        ("metadata-only change (department)", metadata_only),
        ("withdraw a document", withdraw),
        ("delete a file", delete),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        raw, lake = Path(tmp) / "raw", Path(tmp) / "lake"
        build_corpus(raw, args.docs)
        run_index(REPO / "data" / "sample", Path(tmp) / "warmup")  # load the model once, outside timings
        full, report = timed(raw, lake)
        files = report["raw_documents"]["files"]
        chunks = report["chunks"]["chunks"]
        noop = [timed(raw, lake)[0] for _ in range(args.repeats)]
        rows = []
        for name, change in changes(raw):
            change()
            seconds, rep = timed(raw, lake)
            li = rep["lancedb_index"]
            rows.append(
                f"| {name} | {rep['parsed_documents']['parsed_now']} | {rep['embeddings']['embedded']} | "
                f"{li['added']}/{li['updated']}/{li['deleted']} | {seconds:.1f} |"
            )
    median = statistics.median(noop)
    print(f"corpus: {files} files, {chunks} chunks\n")
    print("| run | wall s (median) | vs. full build |\n|---|---|---|")
    print(f"| full build | {full:.1f} | 100 % |")
    print(f"| no-op re-run (x{args.repeats}) | {median:.2f} | {100 * median / full:.1f} % |\n")
    print("| change | files parsed | chunks embedded | docs added/updated/deleted | wall s |\n|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
