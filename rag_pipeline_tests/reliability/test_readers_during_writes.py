"""Readers during writes: queries in threads and in another process while a real re-index runs.

The writer is a real `rag index` process adding, editing, deleting and withdrawing documents.
Readers: a thread that reopens the index before every query (sees the new generation when it
is promoted), a thread holding one index open throughout (a notebook), and a separate process
that reopens too. Every answer must come from exactly one generation: each hit is a chunk of the
generation its index reported, with that generation's text, readable in it (never withdrawn).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from rag_pipeline.query import RagIndex
from rag_pipeline.store import schema as s
from rag_pipeline.store.lake import Lake
from rag_pipeline_tests.indexing import assert_consistent

pytestmark = pytest.mark.slow
QUERIES = ["E-45 error", "annual leave days", "服务器备份", "Where do staff park bicycles?", "memo rule topic", "password policy"]
MODES = ("hybrid", "vector", "keyword")
WITHDRAWN = "handbook/employee_handbook_en.md"
READER_SCRIPT = """
import json, sys, time
from pathlib import Path
from rag_pipeline.query import RagIndex
lake, stop = Path(sys.argv[1]), Path(sys.argv[2])
queries, modes = json.loads(sys.argv[3]), json.loads(sys.argv[4])
i = 0
while not stop.exists() or i < 6:
    q, m = queries[i % len(queries)], modes[i % len(modes)]
    try:
        index = RagIndex.open(lake)
        hits = index.search(q, mode=m, k=10)
        print(json.dumps({"generation": index.manifest["generation"], "hits": [[h.chunk_id, h.text] for h in hits]}), flush=True)
    except Exception as exc:
        print(json.dumps({"error": repr(exc)}), flush=True)
    i += 1
"""


def _change_corpus(raw: Path) -> None:
    (raw / "extra").mkdir()
    for i in range(8):
        (raw / "extra" / f"memo_{i}.md").write_text(
            f"# Memo {i}\n\n" + " ".join(f"Rule {i}-{j} of memo {i} on topic {i * j}." for j in range(30)), encoding="utf-8"
        )
    with (raw / "handbook" / "notes.txt").open("a", encoding="utf-8") as fh:
        fh.write("\nStaff park in the east car park; bicycles go in the basement.\n")
    (raw / "products" / "service_centers.csv").unlink()
    sidecar = raw / (WITHDRAWN + ".meta.json")
    sidecar.write_text(sidecar.read_text(encoding="utf-8").replace('"published"', '"withdrawn"'), encoding="utf-8")


def _generation_chunks(lake: Lake, generation: int) -> dict[str, tuple[str, str]]:
    manifest = lake.read_generation(generation)
    table = lake.published_arrow(s.CHUNKS, manifest).select(["chunk_id", "text", "status"]).to_pylist()
    return {c["chunk_id"]: (c["text"], c["status"]) for c in table}


def test_queries_during_a_reindex_never_fail_and_never_mix_generations(work):
    lake_dir = work / "lake"
    records: list[dict] = []
    errors: list[str] = []
    writing = threading.Event()
    writing.set()

    def record(index: RagIndex, i: int) -> None:
        try:
            query, mode = QUERIES[i % len(QUERIES)], MODES[i % len(MODES)]
            hits = index.search(query, mode=mode, k=10)
            records.append({"generation": index.manifest["generation"], "hits": [[h.chunk_id, h.text] for h in hits]})
            if i % 5 == 0:
                answer = index.ask(query)
                records.append({"generation": index.manifest["generation"],
                                "hits": [[c.chunk_id, None] for c in answer.citations]})
        except Exception as exc:  # noqa: BLE001 - every failure is counted, none may happen
            errors.append(repr(exc))

    def reopening_reader() -> None:
        i = 0
        while writing.is_set() or i < 6:
            try:
                index = RagIndex.open(lake_dir)
            except Exception as exc:  # noqa: BLE001
                errors.append(repr(exc))
                continue
            record(index, i)
            i += 1

    def long_lived_reader(index: RagIndex) -> None:
        i = 0
        while writing.is_set():
            record(index, i)
            i += 1

    _change_corpus(work / "raw")
    stop = work / "stop"
    reader_proc = subprocess.Popen(
        [sys.executable, "-c", READER_SCRIPT, str(lake_dir), str(stop), json.dumps(QUERIES), json.dumps(MODES)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    threads = [threading.Thread(target=reopening_reader),
               threading.Thread(target=long_lived_reader, args=(RagIndex.open(lake_dir),))]
    for t in threads:
        t.start()
    writer = subprocess.run(
        [sys.executable, "-m", "rag_pipeline.cli", "index", "--raw", str(work / "raw"), "--lake", str(lake_dir)],
        check=False, capture_output=True, text=True, env={**os.environ, "DAGSTER_HOME": str(work / "home"), "RAG_GOLDEN_FILE": "none"}, timeout=600,
    )
    writing.clear()
    stop.touch()
    for t in threads:
        t.join(timeout=120)
    out, err = reader_proc.communicate(timeout=300)
    assert writer.returncode == 0, writer.stderr[-3000:]
    assert reader_proc.returncode == 0, err[-3000:]
    process_records = [json.loads(line) for line in out.splitlines()]
    errors += [r["error"] for r in process_records if "error" in r]
    records += [r for r in process_records if "error" not in r]

    lake = Lake(lake_dir)
    final = assert_consistent(lake_dir)
    generations = {r["generation"] for r in records}
    print(f"\nreader queries during the re-index: {len(records)} ({len(process_records)} from the reader process), "
          f"errors: {len(errors)}, generations seen: {sorted(generations)}")
    assert errors == []
    assert generations == {final["generation"] - 1, final["generation"]}  # old while writing, new after promote
    chunks = {g: _generation_chunks(lake, g) for g in generations}
    for r in records:
        served = chunks[r["generation"]]
        for chunk_id, text in r["hits"]:
            assert chunk_id in served, f"{chunk_id} is not in generation {r['generation']}"
            assert text is None or text == served[chunk_id][0], f"{chunk_id}: text of another generation"
            assert served[chunk_id][1] == "published"
    withdrawn = [cid for cid, (_, status) in chunks[final["generation"]].items() if status == "withdrawn"]
    assert withdrawn  # the withdrawal reached the new generation, and the check above kept it out
