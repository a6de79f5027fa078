"""64-bit hashes of string keys, held in numpy: set arithmetic over a whole corpus's keys (which
cache rows exist, which fingerprints are new) at 8 bytes a key.

A Python string per key, or the key columns themselves read whole, made a no-op run's fingerprint
and embedding steps hold 250–290 MB more at 100k documents than these hashes do (bench/README.md,
"Key hashes instead of key columns").
Hashing goes one Arrow chunk (record batch) at a time, so no step holds a second copy of a key
column. The lake's keys are sha256 hex digests: a key of 64 characters whose first 16 are lower-case
hex hashes to those 64 bits, read in numpy; any other string (a test's "k001") to a blake2b digest.
Two different keys share a hash with probability ~n·m/2⁶⁴ (5·10⁻⁹ for 10⁵ keys against 10⁶): where a
match decides what is read, the caller compares the keys it fetched (Lake._lookup); where it only
counts (progress totals, diff metadata), the count is what it is.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

DIGEST_CHARS = 64  # a sha256 hex digest
PREFIX = 16  # hex digits read: 64 bits
_NIBBLE = np.full(256, 255, dtype=np.uint8)
_NIBBLE[np.frombuffer(b"0123456789abcdef", dtype=np.uint8)] = np.arange(16, dtype=np.uint8)


def key_hashes(values: pa.Array | pa.ChunkedArray | Iterable[str]) -> np.ndarray:
    """uint64 hash per value, in order; the same value always hashes the same."""
    if isinstance(values, pa.ChunkedArray):
        pieces = values.chunks
    elif isinstance(values, pa.Array):
        pieces = [values]
    else:
        pieces = [pa.array(list(values), pa.string())]
    hashed = [_piece_hashes(piece) for piece in pieces if len(piece)]
    return np.concatenate(hashed) if hashed else np.zeros(0, dtype=np.uint64)


def _piece_hashes(piece: pa.Array) -> np.ndarray:
    out = np.empty(len(piece), dtype=np.uint64)
    digest = np.asarray(pc.equal(pc.binary_length(piece), DIGEST_CHARS).fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)
    if digest.any():
        digests = piece if digest.all() else pc.filter(piece, pa.array(digest))  # (no copy of a column of digests)
        heads = pc.binary_slice(digests.cast(pa.binary()), 0, PREFIX)
        offsets = np.frombuffer(heads.buffers()[1], dtype=np.int32, count=len(heads) + 1, offset=heads.offset * 4)
        data = np.frombuffer(heads.buffers()[2], dtype=np.uint8, count=offsets[-1] - offsets[0], offset=offsets[0])
        nibbles = _NIBBLE[data.reshape(-1, PREFIX)]
        hexed = (nibbles != 255).all(axis=1)
        packed = np.ascontiguousarray((nibbles[:, 0::2] << 4) | nibbles[:, 1::2]).view(">u8").ravel().astype(np.uint64)
        rows = np.flatnonzero(digest)
        out[rows[hexed]] = packed[hexed]
        digest[rows[~hexed]] = False
    for row in np.flatnonzero(~digest):  # not a digest: rare in a lake, so one at a time
        value = piece[int(row)].as_py()
        out[row] = int.from_bytes(hashlib.blake2b(str(value).encode("utf-8"), digest_size=8).digest(), "big")
    return out


def distinct_hashes(columns: Iterable[pa.Array | pa.ChunkedArray | Iterable[str]]) -> np.ndarray:
    """Sorted distinct hashes of the values of several columns (a key in two columns counts once)."""
    parts = [key_hashes(column) for column in columns]
    return np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.uint64)


def count_in(wanted: np.ndarray, stored: np.ndarray) -> int:
    """How many of the distinct `wanted` hashes the sorted `stored` (distinct_hashes) holds."""
    return int(HashIndex(stored).contains(wanted).sum())


class HashIndex:
    """A table's key hashes sorted once, for look-ups by binary search: a shard's few thousand keys
    against 540k stored ones cost a sort of all of them per shard with np.isin."""

    def __init__(self, hashes: np.ndarray, presorted: bool = True):
        self.order = None if presorted else np.argsort(hashes, kind="stable")
        self.sorted = hashes if presorted else hashes[self.order]

    def contains(self, wanted: np.ndarray) -> np.ndarray:
        """Whether each wanted hash is stored."""
        if not len(self.sorted):
            return np.zeros(len(wanted), dtype=bool)
        at = np.minimum(np.searchsorted(self.sorted, wanted), len(self.sorted) - 1)
        return self.sorted[at] == wanted

    def positions(self, wanted: np.ndarray) -> np.ndarray:
        """Positions (in the original order, ascending) of every stored hash equal to a wanted one."""
        start, stop = np.searchsorted(self.sorted, wanted, "left"), np.searchsorted(self.sorted, wanted, "right")
        counts = stop - start
        ranks = np.repeat(start - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
        return np.sort(ranks if self.order is None else self.order[ranks])
