"""Scan the raw folder: one record per document file, with its hash and sidecar metadata.

A sidecar is a JSON file named ``<file>.meta.json`` beside the document. It carries what the
file itself cannot: lifecycle status, security level, access groups, department, owner.
Files without a sidecar get the defaults below.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import time
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from rag_pipeline.ingest.ignore import OFFICE_LOCK_PREFIX, IgnoreRules
from rag_pipeline.ingest.textutil import display_name

SIDECAR_SUFFIX = ".meta.json"
STATUSES = ("draft", "ingested", "published", "withdrawn")
SECURITY_LEVELS = ("public", "internal", "confidential", "secret")
MAX_SIDECAR_BYTES = 1 << 20  # a few hundred bytes in practice; a huge one is a mistake or an attack


@dataclass(frozen=True)
class DocumentMetadata:
    title: str | None = None
    department: str = ""
    security_level: str = "internal"
    status: str = "published"
    access_groups: tuple[str, ...] = ("all-staff",)
    owner: str = ""
    language: str | None = None
    quarantine_release: bool = False  # operator accepts an ocr_low_confidence / no_text file (ingest/release.py)


@dataclass(frozen=True)
class RawFile:
    doc_id: str  # stable id of the document *location*: hash of its relative path's bytes
    source: str  # posix path relative to the raw folder, as valid UTF-8 text (display_name)
    path: Path
    size: int
    sha256: str
    metadata: DocumentMetadata = field(default_factory=DocumentMetadata)
    metadata_error: str | None = None  # set when the sidecar exists but is unusable

    def as_row(self) -> dict:
        row = asdict(self)
        row["path"] = str(self.path)
        row["metadata"] = asdict(self.metadata)
        return row


def doc_id_for(relative_path: str | bytes | os.PathLike) -> str:
    """Stable id of a document location: a hash of the raw bytes of its path relative to the
    raw folder (``os.fsencode``), never of a display form of it.

    ``source`` is lossy for names that are not valid UTF-8 (their bytes become ``\\xNN``
    text, which a real file can be literally named): hashing it gave two files one doc_id
    and lost one of them. For valid UTF-8 names the bytes are the UTF-8 text, so their ids
    are what they always were.
    """
    return hashlib.sha1(os.fsencode(relative_path)).hexdigest()[:16]


def file_sha256(path: Path, chunk_size: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(chunk_size):
            digest.update(block)
    return digest.hexdigest()


def parse_sidecar(raw: dict) -> DocumentMetadata:
    """Validate a sidecar dict; raise ValueError with a message an operator can act on."""
    if not isinstance(raw, dict):
        raise ValueError("sidecar must be a JSON object")
    known = set(DocumentMetadata.__dataclass_fields__)
    unknown = set(raw) - known
    if unknown:
        raise ValueError(f"unknown sidecar keys {sorted(unknown)}; allowed: {sorted(known)}")
    values = dict(raw)
    for key in ("title", "department", "owner", "language"):
        if values.get(key) is not None and not isinstance(values[key], str):
            raise ValueError(f"{key} must be a string, got {type(values[key]).__name__}")
    if values.get("status", "published") not in STATUSES:
        raise ValueError(f"status must be one of {STATUSES}, got {values['status']!r}")
    if values.get("security_level", "internal") not in SECURITY_LEVELS:
        raise ValueError(
            f"security_level must be one of {SECURITY_LEVELS}, got {values['security_level']!r}"
        )
    if not isinstance(values.get("quarantine_release", False), bool):
        raise ValueError("quarantine_release must be true or false")
    groups = values.get("access_groups", ["all-staff"])
    if not isinstance(groups, (list, tuple)) or not all(isinstance(g, str) for g in groups):
        raise ValueError("access_groups must be a list of strings")
    values["access_groups"] = tuple(groups)
    return DocumentMetadata(**values)


def read_sidecar(path: Path) -> tuple[DocumentMetadata, str | None]:
    """The document's metadata, or the defaults and an error an operator can act on.

    Only a regular file is read: a sidecar that is a symbolic link could pull metadata from
    outside the raw folder, and a pipe would block the scan forever.
    """
    sidecar = path.with_name(path.name + SIDECAR_SUFFIX)
    try:
        st = sidecar.lstat()
    except OSError as exc:  # ENAMETOOLONG: the document's name leaves no room for a sidecar
        if exc.errno in (errno.ENOENT, errno.ENAMETOOLONG):
            return DocumentMetadata(), None
        return DocumentMetadata(), f"{display_name(sidecar.name)}: {exc.strerror}"
    if not stat.S_ISREG(st.st_mode):
        return DocumentMetadata(), f"{display_name(sidecar.name)}: not a plain file (a link, folder or pipe is never read)"
    if st.st_size > MAX_SIDECAR_BYTES:
        return DocumentMetadata(), f"{display_name(sidecar.name)}: {st.st_size} bytes (limit {MAX_SIDECAR_BYTES})"
    try:
        return parse_sidecar(json.loads(sidecar.read_bytes().decode("utf-8"))), None
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        return DocumentMetadata(), f"{display_name(sidecar.name)}: {exc}"


# A file changed this close before a scan started may change again within its filesystem's
# timestamp granularity without its stat changing (git's "racily clean" entries): re-hashed.
RACY_WINDOW_NS = 2_000_000_000


_path_hash = hash  # a name of its own so a test can make every path collide


class PathRows:
    """The row of each path in a list of paths held as their bytes concatenated, found by the
    path: one hash per path sorted once, no Python object per path. A dict of path to row was
    ~30 MB of the scan step at 100k files (with the list it was built from; bench/README.md)."""

    def __init__(self, data: bytes, ends: Sequence[int]):
        self._data = bytes(data)
        # array.array, not numpy: indexing it per file gives a Python int without a numpy scalar
        self._starts = array("q", np.concatenate([[0], np.asarray(ends, dtype=np.int64)]).tobytes())
        starts = self._starts
        hashes = np.fromiter((_path_hash(self._data[starts[row] : starts[row + 1]]) for row in range(len(starts) - 1)), np.int64, count=len(starts) - 1)
        order = np.argsort(hashes, kind="stable")
        self._order = array("q", order.tobytes())
        self._sorted = hashes[order]
        self._next = 0  # the row find tries first

    def find(self, path: bytes) -> int | None:
        """The path's row, or None when it is not listed. A scan lists the folder in the order the
        last one did, so the row after the last one found is tried first (a slice compare); else
        Python's hash of the bytes is searched, checked against the bytes (a collision is skipped)."""
        guess = self._next
        if guess < len(self._sorted) and self._data[self._starts[guess] : self._starts[guess + 1]] == path:
            self._next = guess + 1
            return guess
        wanted = _path_hash(path)
        at = int(np.searchsorted(self._sorted, wanted))
        while at < len(self._sorted) and self._sorted[at] == wanted:
            row = self._order[at]
            if self._data[self._starts[row] : self._starts[row + 1]] == path:
                self._next = row + 1
                return row
            at += 1
        return None


class FileHashes:
    """Content hashes a previous scan computed, reused while a file's stat says it holds the same
    bytes — hashing every byte of the corpus was most of a no-op run's scan (100k files: 8 of 12 s).

    Reused only when size, mtime, ctime and inode all match and the file last changed more than
    RACY_WINDOW_NS before the previous scan started. ctime cannot be set back by a user (`touch
    -d`, `cp -p`, `rsync -t` set mtime, not ctime) and a file replaced by rename has a new inode,
    so an edit that keeps size and mtime is still seen. What this scan sees (`seen_columns`) is
    the next scan's `known`, keyed by the path's bytes; files gone from the folder drop out.

    Both sides are kept as columns, not a tuple per file: at 100k files the two dicts of
    `(stat, sha)` tuples were 100 MB of the scan step's peak (bench/scan_memory.py).
    """

    SHA_WIDTH = 64  # a sha256 hex digest; every recorded hash is one (special files too)

    def __init__(
        self,
        known_paths: tuple[bytes, Sequence[int]] = (b"", ()),
        known_stats: Sequence[Sequence[int]] = ((), (), (), ()),
        known_shas: bytes = b"",
        previous_scan_ns: int = 0,
    ):
        """`known_paths`: a previous scan's paths' bytes concatenated and where each ends (as
        `seen_columns` gives them); `known_stats`: size, mtime_ns, ctime_ns and inode columns;
        `known_shas`: the hex digests concatenated, SHA_WIDTH characters each, in the same order."""
        self._known_row = PathRows(*known_paths)
        self._known_stats = known_stats
        self._known_shas = known_shas
        self.previous_scan_ns = previous_scan_ns
        self.started_ns = time.time_ns()
        self._seen_paths, self._seen_path_ends = bytearray(), array("q")
        self._seen_stats = (array("q"), array("q"), array("q"), array("Q"))
        self._seen_shas = bytearray()
        self.hashed = self.reused = 0

    def sha256(self, path: Path, st: os.stat_result) -> str:
        key = os.fsencode(path)
        stat_key = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        row = self._known_row.find(key)
        settled = max(st.st_mtime_ns, st.st_ctime_ns) < self.previous_scan_ns - RACY_WINDOW_NS
        if row is not None and settled and all(column[row] == value for column, value in zip(self._known_stats, stat_key)):
            self.reused += 1
            sha = self._known_shas[row * self.SHA_WIDTH : (row + 1) * self.SHA_WIDTH].decode("ascii")
        else:
            self.hashed += 1
            sha = file_sha256(path)
        self._seen_paths += key
        self._seen_path_ends.append(len(self._seen_paths))
        for column, value in zip(self._seen_stats, stat_key):
            column.append(value)
        self._seen_shas += sha.encode("ascii")
        return sha

    def seen_columns(self) -> tuple[bytearray, array, tuple[array, ...], bytearray]:
        """What this scan saw: the paths' bytes concatenated and where each ends, the four stat
        columns, and the hex digests concatenated (the next scan's `known`); the buffers
        themselves, not copies."""
        return self._seen_paths, self._seen_path_ends, self._seen_stats, self._seen_shas


def content_sha256(path: Path) -> str:
    """What the scan records as ``sha256`` for ``path`` now (see :func:`_content_sha256`)."""
    return _content_sha256(path, path.lstat())


def _content_sha256(path: Path, st: os.stat_result, hashes: FileHashes | None = None) -> str:
    """The file's sha256, or for anything but a regular file a hash of what it is: a symbolic
    link, pipe or device is never opened (a pipe would block the scan, a link could reach
    outside the raw folder); the parser quarantines it."""
    if stat.S_ISREG(st.st_mode):
        return hashes.sha256(path, st) if hashes is not None else file_sha256(path)
    what = f"symlink:{os.readlink(path)}" if stat.S_ISLNK(st.st_mode) else f"special:{stat.S_IFMT(st.st_mode)}"
    return hashlib.sha256(os.fsencode(what)).hexdigest()


def raw_folder_files(
    raw_dir: Path, ignored: list[str] | None = None, ignore_file: Path | None = None
) -> Iterator[tuple[Path, str]]:
    """(path, path relative to raw_dir) of every file under raw_dir except sidecars, hidden files
    and what the folder's `.ragignore` and `ignore_file` exclude (ingest.ignore) or Office's lock
    files (each of these appended to `ignored`, a folder as `name/`), sorted by path. Symbolic links (to files or directories) and other
    non-regular files are listed but never followed or opened, so they are quarantined instead
    of silently disappearing."""
    if not raw_dir.is_dir():
        raise FileNotFoundError(f"raw folder {raw_dir} does not exist")
    raw_dir = raw_dir.resolve()
    rules = IgnoreRules.of_folder(raw_dir, ignore_file)
    for root, dirs, files in os.walk(raw_dir, followlinks=False):
        # the relative path joined as a string per file, parsed once per folder: a Path and a
        # relative_to per file were 0.70 s of each 100k-file listing (0.22 s so; median of 5, bench/README.md)
        folder = Path(root)
        prefix = Path(os.path.relpath(root, raw_dir)).as_posix()
        prefix = "" if prefix == "." else prefix + "/"
        linked_dirs = [d for d in dirs if os.path.islink(os.path.join(root, d))]
        kept = []
        for d in sorted(d for d in dirs if not d.startswith(".") and d not in linked_dirs):
            if rules.rules and rules.ignores(prefix + d, is_folder=True):
                if ignored is not None:
                    ignored.append(prefix + d + "/")
            else:
                kept.append(d)
        dirs[:] = kept
        for name in sorted(files + linked_dirs):
            if name.startswith(".") or name.endswith(SIDECAR_SUFFIX):
                continue
            if name.startswith(OFFICE_LOCK_PREFIX) or (rules.rules and rules.ignores(prefix + name)):
                if ignored is not None:
                    ignored.append(prefix + name)
                continue
            yield folder / name, prefix + name


def listed_sources(raw_dir: Path, ignore_file: Path | None = None) -> dict[str, str]:
    """doc_id -> source of every file the scan lists, without reading a file (the accounting check)."""
    return {doc_id_for(relative): display_name(relative) for _, relative in raw_folder_files(raw_dir, ignore_file=ignore_file)}


def iter_raw_files(
    raw_dir: Path, hashes: FileHashes | None = None, ignored: list[str] | None = None, ignore_file: Path | None = None
) -> Iterator[RawFile]:
    """Every file raw_folder_files lists, with its size, content hash and sidecar metadata
    (hashes: a previous scan's, reused for files whose stat is unchanged; see FileHashes), one
    at a time: the scan step turns them into Arrow batches as they come (a RawFile and its Path
    per file of a 100k-file folder were the step's largest Python objects)."""
    for path, relative in raw_folder_files(raw_dir, ignored, ignore_file):
        st = path.lstat()
        metadata, error = read_sidecar(path)
        yield RawFile(
            doc_id=doc_id_for(relative),
            source=display_name(relative),
            path=path,
            size=st.st_size,
            sha256=_content_sha256(path, st, hashes),
            metadata=metadata,
            metadata_error=error,
        )


def scan_raw_folder(raw_dir: Path, hashes: FileHashes | None = None) -> list[RawFile]:
    """iter_raw_files as a list."""
    return list(iter_raw_files(raw_dir, hashes))
