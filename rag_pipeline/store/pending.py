"""Cache entries a step holds back and inserts a bound at a time.

Every insert into a cache table is a `merge_insert` on `cache_key`, a join against every key the
table stores (~70 ms at 540k rows, bench/README.md); inserting once per shard cost 40 of them a
step at 100k documents in 40 shards, on every run that changes anything. Held back up to `bound`
entries, a run that changes 1 % inserts about once per step, a first build still about once per
shard (a shard's fresh entries reach the bound), and a crash (a killed process) loses at most
`bound` entries of work: cache entries, recomputed by the next run. A step that fails with an
exception still inserts what it holds.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping

CACHE_INSERT_ENTRIES = 2_000


class PendingEntries:
    """Entries (cache key -> value) not yet inserted; `found` lets later shards of the step use them."""

    def __init__(self, insert: Callable[[dict], None], bound: int = CACHE_INSERT_ENTRIES):
        self._insert = insert
        self._bound = bound
        self._entries: dict = {}

    def add(self, entries: Mapping) -> None:
        self._entries.update(entries)
        if len(self._entries) >= self._bound:
            self.flush()

    def found(self, keys: Iterable[str]) -> dict:
        """The held entries among `keys` (an identical file or chunk text in an earlier shard)."""
        return {key: self._entries[key] for key in keys if key in self._entries}

    def flush(self) -> None:
        if self._entries:
            entries, self._entries = self._entries, {}
            self._insert(entries)

    def __enter__(self) -> "PendingEntries":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.flush()
        else:
            with contextlib.suppress(Exception):  # the step's own error is the one to report
                self.flush()
