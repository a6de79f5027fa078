"""parse_many: files parsed in worker processes, a hung file killed at its time limit.

The faults are real: a parser that blocks on a child process (like a tesseract that never
returns), a worker killed by SIGKILL (like the OOM killer), a missing OCR engine. The seam
is parse_many's ``parse`` argument; these functions run in the workers, so they live at
module level (workers import them by name).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from rag_pipeline.config import Settings
from rag_pipeline.ingest.document import ParsedDocument, UnreadableDocument
from rag_pipeline.ingest.ocr import OcrEngineError
from rag_pipeline.ingest.parsers import parse_file
from rag_pipeline.ingest.pool import ParsePool, is_transient, ocr_threads_per_worker, parse_many, stop_parse_server
from rag_pipeline.ingest.triage import parse_outcome

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample"
OCR_LANG = Settings().ocr_lang


def hang_or_parse(path: Path) -> ParsedDocument:
    """Files named hang* block forever in a child process; the rest parse normally."""
    if path.name.startswith("hang"):
        child = subprocess.Popen(["sleep", "600"])
        path.with_name(path.name + ".pid").write_text(str(child.pid))
        child.wait()
    return parse_file(path)


def crash_or_parse(path: Path) -> ParsedDocument:
    if path.name.startswith("crash"):
        os.kill(os.getpid(), signal.SIGKILL)
    return parse_file(path)


def parse_in(path: Path) -> ParsedDocument:
    """Parses normally and records which worker process did it (a file named after the pid)."""
    path.with_name(f"{path.name}.{os.getpid()}.worker").touch()
    return parse_file(path)


def engine_missing(path: Path) -> ParsedDocument:
    raise OcrEngineError("tesseract executable not found ('tesseract')")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"  # an orphan nobody reaped yet is dead too


def _small_files(tmp_path: Path) -> dict[str, Path]:
    files = {
        "notes.md": "# Notes\n\nThe pump must be serviced every 90 days.\n",
        "table.csv": "part,qty\nvalve,3\nhose,12\n",
        "plain.txt": "Plain text survives a hung neighbour.\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return {name: tmp_path / name for name in files}


def test_a_hung_file_is_killed_at_its_limit_and_the_others_parse(tmp_path):
    paths = _small_files(tmp_path)
    (tmp_path / "hang.txt").write_text("this parser never returns\n", encoding="utf-8")
    paths["hang.txt"] = tmp_path / "hang.txt"

    started = time.perf_counter()
    out = parse_many(paths, ocr_lang=OCR_LANG, max_bytes=10**8, workers=2, timeout_s=2, parse=hang_or_parse)
    elapsed = time.perf_counter() - started

    hung = out["hang.txt"]
    assert isinstance(hung, UnreadableDocument) and hung.reason == "timeout"
    assert "2 s limit" in hung.detail and "RAG_PARSE_TIMEOUT_S" in hung.detail
    assert is_transient(hung)  # never cached: a later run with a larger limit retries
    for name in ("notes.md", "table.csv", "plain.txt"):
        assert isinstance(out[name], ParsedDocument), (name, out[name])
        assert out[name] == parse_file(paths[name])
    assert elapsed < 20, f"the run waited for the hung file ({elapsed:.1f}s)"
    # The worker's child (the "stuck tesseract") died with the worker, not minutes later.
    pid = int((tmp_path / "hang.txt.pid").read_text())
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid), f"child {pid} of the killed worker is still running"


def test_a_dead_worker_costs_one_file(tmp_path):
    paths = _small_files(tmp_path)
    (tmp_path / "crash.txt").write_text("the worker dies on this one\n", encoding="utf-8")
    paths["crash.txt"] = tmp_path / "crash.txt"
    out = parse_many(paths, ocr_lang=OCR_LANG, max_bytes=10**8, workers=2, timeout_s=30, parse=crash_or_parse)
    crashed = out["crash.txt"]
    assert isinstance(crashed, UnreadableDocument) and crashed.reason == "corrupt"
    assert "signal 9" in crashed.detail and is_transient(crashed)
    assert all(isinstance(out[n], ParsedDocument) for n in ("notes.md", "table.csv", "plain.txt"))


def test_a_missing_ocr_engine_fails_the_run(tmp_path):
    paths = _small_files(tmp_path)
    with pytest.raises(OcrEngineError, match="tesseract"):
        parse_many(paths, ocr_lang=OCR_LANG, max_bytes=10**8, workers=2, timeout_s=30, parse=engine_missing)


def _workers_of(paths: dict[str, Path]) -> set[int]:
    return {int(w.name.rsplit(".", 2)[-2]) for p in paths.values() for w in p.parent.glob(f"{p.name}.*.worker")}


def test_a_pool_keeps_its_workers_across_batches_restarts_after_an_error_and_replaces_a_dead_one(tmp_path):
    dirs = [tmp_path / name for name in ("a", "b", "c", "d")]
    for folder in dirs:
        folder.mkdir()
    first, second, third, fourth = (_small_files(folder) for folder in dirs)
    (dirs[2] / "crash.txt").write_text("kills its worker\n", encoding="utf-8")
    options = {"ocr_lang": OCR_LANG, "max_bytes": 1 << 20, "timeout_s": 60}
    with ParsePool(workers=1) as pool:  # one worker: which process parses a file is certain
        one = pool.parse(first, parse=parse_in, **options)
        started = _workers_of(first)
        assert len(started) == 1 and all(isinstance(o, ParsedDocument) for o in one.values())
        pool.parse(second, parse=parse_in, **options)
        assert _workers_of(second) == started  # the same process: nothing started for the second batch
        with pytest.raises(OcrEngineError):
            pool.parse(second, parse=engine_missing, **options)
        assert not any(_alive(pid) for pid in started)  # the error stopped the pool
        three = pool.parse({**third, "crash": dirs[2] / "crash.txt"}, parse=crash_or_parse, **options)
        assert three["crash"].reason == "corrupt" and is_transient(three["crash"])  # one file lost, not the batch
        four = pool.parse(fourth, parse=parse_in, **options)  # a new pool, its dead worker replaced
        assert {k: v.text for k, v in four.items()} == {k: v.text for k, v in one.items()}
        restarted = _workers_of(fourth)
        assert len(restarted) == 1 and not restarted & started
    assert not any(_alive(pid) for pid in restarted)  # leaving the block stops the workers


def test_ocr_threads_never_oversubscribe():
    cpus = os.cpu_count() or 1
    assert ocr_threads_per_worker(cpus) == 1
    assert 1 <= ocr_threads_per_worker(1) <= 4
    assert parse_many({}, ocr_lang=OCR_LANG, max_bytes=1, workers=2, timeout_s=1) == {}


@pytest.mark.skipif(not (SAMPLE / "scans").is_dir(), reason="data/sample not present")
def _forkservers() -> set[int]:
    children = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read_text().split()
    return {int(pid) for pid in children if b"forkserver" in Path(f"/proc/{pid}/cmdline").read_bytes()}


def test_the_parse_server_stops_when_parsing_is_over_and_starts_again_for_the_next_parse(tmp_path):
    paths = _small_files(tmp_path)
    stop_parse_server()  # one an earlier test started
    assert not _forkservers()
    first = parse_many(paths, ocr_lang=OCR_LANG, max_bytes=1 << 20, workers=1, timeout_s=60)
    server = _forkservers()
    assert len(server) == 1 and all(_alive(pid) for pid in server)  # holding the imported parsers
    stop_parse_server()
    assert not any(_alive(pid) for pid in server)
    again = parse_many(paths, ocr_lang=OCR_LANG, max_bytes=1 << 20, workers=1, timeout_s=60)
    assert {k: v.text for k, v in again.items()} == {k: v.text for k, v in first.items()}
    stop_parse_server()


def test_parallel_outcomes_equal_serial_on_real_files(tmp_path):
    rels = [
        "handbook/employee_handbook_en.md",
        "handbook/员工手册.docx",
        "it/运维手册.html",
        "products/price_list.xlsx",
        "products/x2000_datasheet.pdf",
        "scans/expense_policy_scan.png",  # OCR
    ]
    paths = {rel: SAMPLE / rel for rel in rels}
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4\n%%EOF\n")
    paths["broken.pdf"] = broken

    serial = {k: parse_outcome(p, lambda p: parse_file(p, ocr_lang=OCR_LANG)) for k, p in paths.items()}
    parallel = parse_many(paths, ocr_lang=OCR_LANG, max_bytes=100 * 1024 * 1024, workers=2, timeout_s=120)

    assert parallel.keys() == serial.keys()
    for key in paths:
        a, b = serial[key], parallel[key]
        if isinstance(a, UnreadableDocument):
            assert isinstance(b, UnreadableDocument) and (a.reason, a.detail) == (b.reason, b.detail), key
        else:
            assert a == b, key
    assert parallel["scans/expense_policy_scan.png"].ocr_used
    assert parallel["broken.pdf"].reason == "corrupt"
