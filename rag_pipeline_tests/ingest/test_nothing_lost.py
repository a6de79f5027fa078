"""Nothing silently lost: one doc_id per file, and transient parse failures never cached.

Real files on disk, real worker processes (parse_many), a real lake parse cache.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from rag_pipeline.config import Settings
from rag_pipeline.ingest.document import ParsedDocument, TransientFailure, UnreadableDocument
from rag_pipeline.ingest.parsers import parse_file
from rag_pipeline.ingest.pool import is_transient, parse_many
from rag_pipeline.ingest.scan import doc_id_for, file_sha256, scan_raw_folder
from rag_pipeline.ingest.serialize import outcome_from_json, outcome_to_json, parse_cache_key
from rag_pipeline.store.lake import Lake

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample"
OCR_LANG = Settings().ocr_lang


# --- doc_id -------------------------------------------------------------------------------


def test_a_non_utf8_name_and_its_escaped_twin_are_two_documents(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    undecodable = os.fsdecode(b"caf\xe9.txt")  # Latin-1 name, not valid UTF-8
    twin = "caf\\xe9.txt"  # a real file literally named with the escape
    try:
        (raw / undecodable).write_text("Latin-1 named file about the boiler.\n", encoding="utf-8")
    except (OSError, UnicodeEncodeError) as exc:  # pragma: no cover - filesystems that enforce UTF-8
        pytest.skip(f"this filesystem refuses non-UTF-8 names: {exc}")
    (raw / twin).write_text("Literally escaped name about the chiller.\n", encoding="utf-8")
    files = scan_raw_folder(raw)
    assert len(files) == 2
    assert files[0].source == files[1].source == "caf\\xe9.txt"  # the display form is lossy...
    assert files[0].doc_id != files[1].doc_id  # ...the id is not
    texts = {f.doc_id: parse_file(f.path).text for f in files}
    assert sorted(texts.values()) == [
        "Latin-1 named file about the boiler.",
        "Literally escaped name about the chiller.",
    ]


def test_doc_id_hashes_the_path_bytes_and_keeps_utf8_ids_stable():
    assert doc_id_for("manuals/泵.pdf") == hashlib.sha1("manuals/泵.pdf".encode()).hexdigest()[:16]
    assert doc_id_for(os.fsdecode(b"a/caf\xe9.txt")) == hashlib.sha1(b"a/caf\xe9.txt").hexdigest()[:16]
    assert doc_id_for(b"a/caf\xe9.txt") == doc_id_for(os.fsdecode(b"a/caf\xe9.txt"))


def test_the_listing_names_each_file_by_its_path_under_the_raw_folder(tmp_path):
    """raw_folder_files joins the relative path as a string: it must equal pathlib's, at any depth,
    for odd names, next to the files it skips (hidden, sidecars) and the links it lists unfollowed."""
    from rag_pipeline.ingest.scan import raw_folder_files

    raw = tmp_path / "raw"
    for relative in ("top.txt", "手册/第 1 章/规定.md", "a b/c d/e f.txt", "a b/.hidden.txt", "x/y.txt.meta.json",
                     ".git/config", "x/y.txt", "deep/" + "/".join("d" * 3 for _ in range(6)) + "/leaf.md"):
        (raw / relative).parent.mkdir(parents=True, exist_ok=True)
        (raw / relative).write_text("text", encoding="utf-8")
    (raw / "linked").symlink_to(raw / "x", target_is_directory=True)
    listed = list(raw_folder_files(raw))
    assert [relative for _, relative in listed] == [path.relative_to(raw.resolve()).as_posix() for path, _ in listed]
    assert sorted(relative for _, relative in listed) == sorted(
        ["top.txt", "手册/第 1 章/规定.md", "a b/c d/e f.txt", "x/y.txt", "linked",
         "deep/" + "/".join("d" * 3 for _ in range(6)) + "/leaf.md"])


def test_every_file_of_the_sample_gets_its_own_doc_id():
    files = scan_raw_folder(SAMPLE)
    assert len({f.doc_id for f in files}) == len(files) > 5


# --- transient outcomes -------------------------------------------------------------------
# These run in the parse workers, so they live at module level.


def vanish_then_parse(path: Path) -> ParsedDocument:
    """The file is deleted between the scan and the parse (a user tidying up)."""
    shutil.move(path, path.with_name(path.name + ".away"))
    return parse_file(path)


def folder_then_parse(path: Path) -> ParsedDocument:
    """The file is replaced by a folder of the same name."""
    shutil.move(path, path.with_name(path.name + ".away"))
    path.mkdir()
    return parse_file(path)


def rewrite_while_parsing(path: Path) -> ParsedDocument:
    doc = parse_file(path)
    path.write_text("Rewritten while it was parsed.\n", encoding="utf-8")
    return doc


def exhaust_memory(path: Path) -> ParsedDocument:
    raise MemoryError("cannot allocate 4 GiB")  # what the worker's RLIMIT_AS cap raises


def _write(path: Path) -> Path:
    path.write_text("Pump P-101 is serviced every 90 days.\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("parse", "reason"),
    [(vanish_then_parse, "unavailable"), (folder_then_parse, "unavailable"),
     (rewrite_while_parsing, "corrupt"), (exhaust_memory, "too_large")],
)
def test_a_transient_failure_is_not_cached_and_the_restored_file_is_indexed(tmp_path, parse, reason):
    """The parse-stage rule (defs/assets.py): cache every outcome that is not transient."""
    path = _write(tmp_path / "pump.txt")
    sha = file_sha256(path)
    key = parse_cache_key(sha, OCR_LANG, path.suffix)
    lake = Lake(tmp_path / "lake")

    outcomes = parse_many({key: path}, ocr_lang=OCR_LANG, max_bytes=1 << 20, workers=1, parse=parse)
    outcome = outcomes[key]
    assert isinstance(outcome, UnreadableDocument) and outcome.reason == reason, outcome
    assert is_transient(outcome)
    lake.add_parses({k: outcome_to_json(o) for k, o in outcomes.items() if not is_transient(o)})
    assert lake.cached_parses([key]) == {}

    # The identical file comes back: it is parsed again and indexed.
    if path.is_dir():
        path.rmdir()
    if path.with_name(path.name + ".away").exists():
        shutil.move(path.with_name(path.name + ".away"), path)
    _write(path)
    assert file_sha256(path) == sha
    assert lake.cached_parses([key]) == {}
    again = parse_many({key: path}, ocr_lang=OCR_LANG, max_bytes=1 << 20, workers=1)
    assert isinstance(again[key], ParsedDocument) and "Pump P-101" in again[key].text
    lake.add_parses({k: outcome_to_json(o) for k, o in again.items() if not is_transient(o)})
    cached = outcome_from_json(lake.cached_parses([key])[key])
    assert isinstance(cached, ParsedDocument)


def test_a_file_changed_after_the_scan_is_not_parsed_under_its_old_key(tmp_path):
    path = _write(tmp_path / "pump.txt")
    scanned = file_sha256(path)
    path.write_text("Totally different content now.\n", encoding="utf-8")
    out = parse_many({"k": path}, ocr_lang=OCR_LANG, max_bytes=1 << 20, workers=1, expected_sha256={"k": scanned})
    assert isinstance(out["k"], TransientFailure) and out["k"].reason == "unavailable"
    same = parse_many({"k": path}, ocr_lang=OCR_LANG, max_bytes=1 << 20, workers=1,
                      expected_sha256={"k": file_sha256(path)})
    assert isinstance(same["k"], ParsedDocument)


def test_permanent_outcomes_stay_permanent(tmp_path):
    """A real property of the bytes is still cached: a symbolic link, an empty file."""
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "link.txt").symlink_to(tmp_path / "nowhere")
    out = parse_many({"e": tmp_path / "empty.txt", "l": tmp_path / "link.txt"}, ocr_lang=OCR_LANG,
                     max_bytes=1 << 20, workers=1)
    assert out["e"].reason == "no_text" and not is_transient(out["e"])
    assert out["l"].reason == "unsupported_format" and not is_transient(out["l"])
