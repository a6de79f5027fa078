"""A scan reuses the last scan's content hash only for a file whose stat says it is unchanged."""

from __future__ import annotations

import os

import pytest

from rag_pipeline.ingest import scan
from rag_pipeline.ingest.scan import file_sha256, scan_raw_folder
from rag_pipeline.store import staging
from rag_pipeline.store.lake import SCAN_HASHES_NAME, Lake


def _scan(raw, lake):
    """One scan as raw_documents runs it: the lake's hashes in, this scan's hashes out."""
    hashes = staging.file_hashes_from_table(Lake(lake).read_scan_hashes())
    files = {f.source: f.sha256 for f in scan_raw_folder(raw, hashes)}
    Lake(lake).write_scan_hashes(staging.file_hashes_to_table(hashes))
    return files, hashes


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setattr(scan, "RACY_WINDOW_NS", 0)  # nanosecond timestamps here; the window is tested apart
    raw = tmp_path / "raw"
    (raw / "sub").mkdir(parents=True)
    for name in ("a.txt", "b.md", "sub/c.txt", "naïve name.txt"):
        (raw / name).write_text(f"text of {name}\n", encoding="utf-8")
    return raw, tmp_path / "lake"


def test_an_unchanged_folder_is_not_hashed_again(folder):
    raw, lake = folder
    first, hashes = _scan(raw, lake)
    assert (hashes.hashed, hashes.reused) == (4, 0)
    second, hashes = _scan(raw, lake)
    assert (hashes.hashed, hashes.reused) == (0, 4)
    assert second == first == {source: file_sha256(raw / source) for source in first}


def test_an_edit_that_keeps_size_and_mtime_is_hashed_again(folder):
    """`touch -r`, `cp -p`, `rsync -t` put the old mtime back; ctime they cannot."""
    raw, lake = folder
    _scan(raw, lake)
    path = raw / "a.txt"
    before = path.stat()
    path.write_text("TEXT OF a.txt\n", encoding="utf-8")  # same size
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    files, hashes = _scan(raw, lake)
    assert hashes.hashed == 1 and files["a.txt"] == file_sha256(path)


def test_a_file_replaced_by_rename_is_hashed_again(folder):
    raw, lake = folder
    _scan(raw, lake)
    path, before = raw / "b.md", (raw / "b.md").stat()
    (raw / "new.tmp").write_text("TEXT OF b.md\n", encoding="utf-8")
    os.utime(raw / "new.tmp", ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(raw / "new.tmp", path)
    files, hashes = _scan(raw, lake)
    assert hashes.hashed == 1 and files["b.md"] == file_sha256(path)


def test_a_file_changed_just_before_the_last_scan_is_hashed_again(folder, monkeypatch):
    """Within the window a coarse-timestamp filesystem could hide a second write: not trusted."""
    raw, lake = folder
    monkeypatch.setattr(scan, "RACY_WINDOW_NS", 60 * 10**9)
    _scan(raw, lake)
    _, hashes = _scan(raw, lake)
    assert (hashes.hashed, hashes.reused) == (4, 0)


def test_another_folders_hashes_and_an_unreadable_table_only_cost_a_full_hash(folder, tmp_path):
    raw, lake = folder
    _scan(raw, lake)
    other = tmp_path / "other"
    os.rename(raw, other)  # same files, same inodes, another path
    files, hashes = _scan(other, lake)
    assert hashes.hashed == 4 and files["sub/c.txt"] == file_sha256(other / "sub/c.txt")
    (lake / SCAN_HASHES_NAME).write_bytes(b"not an arrow file")
    assert Lake(lake).read_scan_hashes() is None
    _, hashes = _scan(other, lake)
    assert (hashes.hashed, hashes.reused) == (4, 0)


@pytest.mark.parametrize("colliding", [False, True], ids=["python-hash", "every-path-colliding"])
def test_known_paths_are_found_by_their_bytes_in_any_order(monkeypatch, colliding):
    """The last scan's paths are held as one bytes and their ends (no dict of paths); a path is
    found at its row whatever order the files come in, a new one is not found, and a hash shared
    by several paths never returns another path's row."""
    if colliding:
        monkeypatch.setattr(scan, "_path_hash", lambda path: len(path) % 3)
    paths = [b"/raw/a.txt", b"/raw/b\xff.txt", b"/raw/sub/c.txt", b"/raw/sub/d.txt", b"/raw/na\xc3\xafve.txt", b"/raw/e.md"]
    ends, total = [], 0
    for path in paths:
        total += len(path)
        ends.append(total)
    for order in ([0, 1, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0], [3, 0, 5, 1, 4, 2]):
        rows = scan.PathRows(b"".join(paths), ends)
        assert [rows.find(paths[row]) for row in order] == order
        assert rows.find(b"/raw/new.txt") is None and rows.find(b"/raw/a.tx") is None and rows.find(b"/raw/sub/e.txt") is None
    assert scan.PathRows(b"", []).find(b"/raw/a.txt") is None
