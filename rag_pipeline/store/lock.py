"""One writer per lake: an exclusive lock file held while a run (or a promotion) writes; the
steps of one shard hold it shared, beside the other shards, and their shard's lock exclusively.

`flock` on ``<lake>/.writer.lock``: the kernel drops it when the holder exits, however it
exits (SIGKILL, OOM, a crashed host's process table), so a stale lock never needs clearing by
hand. The file's content names the holder (run id, pid, host, since) for the message a second
writer gets. Local and most network file systems honour flock; on an object store, run one
writer per lake through Dagster's run queue instead (see README, "Running on a cluster").
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

LOCK_NAME = ".writer.lock"
CREATE_LOCK_NAME = ".create.lock"
CREATE_WAIT_S = 120.0


class LakeBusyError(RuntimeError):
    """Another run is writing this lake; nothing was changed."""


def describe_holder(lake_dir: Path, lock_name: str = LOCK_NAME) -> str:
    """Who holds (or last held) the lock, as one phrase; for a lake held by shards, the shards."""
    holder = _read_holder(Path(lake_dir) / lock_name)
    if not holder and lock_name == LOCK_NAME:
        shards = sorted(Path(lake_dir).glob(".shard-*.lock"))
        held = [describe_holder(lake_dir, p.name) for p in shards if _is_held(p)]
        if held:
            return "shard runs: " + "; ".join(held)
    if not holder:
        return "another process"
    return f"{holder.get('what', 'a run')} {holder.get('run_id') or ''} (pid {holder.get('pid')} on {holder.get('host')}, since {holder.get('since')})".replace("  ", " ")


@contextmanager
def lake_writer_lock(
    lake_dir: Path, *, what: str, run_id: str | None = None, wait_s: float = 0.0, shard: str | None = None
) -> Iterator[None]:
    """Hold the lake's writer lock for the block; LakeBusyError after wait_s seconds if taken.

    With `shard`, the lake is held shared and ``.shard-<shard>.lock`` exclusively: the steps of
    different shards write side by side (their cache writes are content-addressed inserts),
    while a whole run, a publish or a promotion, which hold the lake exclusively, exclude them all.
    """
    lake_dir = Path(lake_dir)
    lake_dir.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + max(wait_s, 0.0)
    holder = {
        "what": what + (f" (shard {shard})" if shard else ""),
        "run_id": run_id,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "since": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    # Shared holders leave the lake file empty (many writing it would tear it); each names itself
    # in its shard's file, where describe_holder finds it.
    with _flocked(lake_dir / LOCK_NAME, fcntl.LOCK_SH if shard else fcntl.LOCK_EX, deadline, None if shard else holder):
        if shard is None:
            yield
            return
        with _flocked(lake_dir / f".shard-{shard}.lock", fcntl.LOCK_EX, deadline, holder, name=f"shard {shard} of the lake"):
            yield


@contextmanager
def table_creation_lock(lake_dir: Path) -> Iterator[None]:
    """One process at a time creates a table in the lake. Creating a Lance table is not atomic:
    shard processes creating one cache table at once saw a commit conflict in one creator, and an
    opener found the table's folder before its first version ("Table ... was not found")."""
    deadline = time.monotonic() + CREATE_WAIT_S
    with _flocked(Path(lake_dir) / CREATE_LOCK_NAME, fcntl.LOCK_EX, deadline, None, name="table creation in the lake"):
        yield


@contextmanager
def _flocked(path: Path, operation: int, deadline: float, holder: dict | None, name: str = "the lake") -> Iterator[None]:
    """flock(path) until the deadline, then write who holds it into the file (for the next one's
    message); holder None empties it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        while True:
            try:
                fcntl.flock(fd, operation | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LakeBusyError(
                        f"{name} {path.parent} is being written by {describe_holder(path.parent, path.name)}: "
                        "wait for it to finish (or set RAG_LOCK_WAIT_S to wait); nothing was changed"
                    ) from None
                time.sleep(0.5)
        os.ftruncate(fd, 0)
        if holder is not None:
            os.pwrite(fd, json.dumps(holder).encode(), 0)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _read_holder(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}


def is_locked(lake_dir: Path) -> bool:
    """Whether a writer holds the lake right now (a probe: takes and drops the lock at once)."""
    return _is_held(Path(lake_dir) / LOCK_NAME)


def _is_held(path: Path) -> bool:
    if not path.exists():
        return False
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
