"""64-bit hashes of string keys, held in numpy: set arithmetic over a whole corpus's keys (which
cache rows exist, which fingerprints are new) at 8 bytes a key.

A Python string per key, or the key columns themselves read whole, made a no-op run's fingerprint
and embedding steps hold 250–290 MB more at 100k documents than these hashes do (bench/README.md,
"Key hashes instead of key columns").
Hashing goes one Arrow chunk (record batch) at a time, so no step holds a second copy of a key
column. The lake's keys are sha256 hex digests: a key of 64 characters whose first 16 are lower-case
hex hashes to those 64 bits, read in numpy; a chunk id (`<16 hex>-<16 hex>`) to both halves mixed;
any other string (a test's "k001", a repeated text's `<id>-<n>`) to a blake2b digest.
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
CHUNK_ID_CHARS = 33  # <doc id>-<fingerprint prefix> (chunking.chunk_document)
PREFIX = 16  # hex digits read: 64 bits
_MIX = np.uint64(0x9E3779B97F4A7C15)  # odd: doc·_MIX + fp keeps both halves' 64 bits apart
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
    lengths = pc.binary_length(piece).fill_null(0).to_numpy(zero_copy_only=False)
    left = np.ones(len(piece), dtype=bool)  # rows no vectorized form hashed
    for width, form in ((DIGEST_CHARS, _digest_form), (CHUNK_ID_CHARS, _chunk_id_form)):
        rows = np.flatnonzero(lengths == width)
        if len(rows):
            text = piece if len(rows) == len(piece) else piece.take(pa.array(rows))
            hashed, ok = form(text.cast(pa.binary()))
            out[rows[ok]] = hashed[ok]
            left[rows[ok]] = False
    for row in np.flatnonzero(left):  # neither form: rare in a lake, so one at a time
        value = piece[int(row)].as_py()
        out[row] = int.from_bytes(hashlib.blake2b(str(value).encode("utf-8"), digest_size=8).digest(), "big")
    return out


def _digest_form(text: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A sha256 hex digest: its first 64 bits."""
    return _hex64(text, 0)


def _chunk_id_form(text: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A chunk id `<doc id: 16 hex>-<fingerprint: 16 hex>`: both halves' 64 bits, mixed (the doc
    half alone is every chunk of a document, the fingerprint half every copy of a text)."""
    doc, doc_ok = _hex64(text, 0)
    fp, fp_ok = _hex64(text, PREFIX + 1)
    dash = _bytes_at(text, PREFIX, 1)[:, 0] == ord("-")
    return doc * _MIX + fp, doc_ok & fp_ok & dash


def _hex64(text: pa.Array, start: int) -> tuple[np.ndarray, np.ndarray]:
    """The 16 lower-case hex digits at `start` of each value as 64 bits, and whether they are hex."""
    nibbles = _NIBBLE[_bytes_at(text, start, PREFIX)]
    packed = np.ascontiguousarray((nibbles[:, 0::2] << 4) | nibbles[:, 1::2]).view(">u8").ravel().astype(np.uint64)
    return packed, (nibbles != 255).all(axis=1)


def _bytes_at(text: pa.Array, start: int, width: int) -> np.ndarray:
    """Bytes start..start+width of each (binary, long enough) value: an (n, width) uint8 view."""
    cut = pc.binary_slice(text, start, start + width)
    offsets = np.frombuffer(cut.buffers()[1], dtype=np.int32, count=len(cut) + 1, offset=cut.offset * 4)
    data = np.frombuffer(cut.buffers()[2], dtype=np.uint8, count=offsets[-1] - offsets[0], offset=offsets[0])
    return data.reshape(-1, width)


def distinct_hashes(columns: Iterable[pa.Array | pa.ChunkedArray | Iterable[str]]) -> np.ndarray:
    """Sorted distinct hashes of the values of several columns (a key in two columns counts once)."""
    return union(key_hashes(column) for column in columns)


def union(parts: Iterable[np.ndarray]) -> np.ndarray:
    """Sorted distinct hashes of several hash arrays (e.g. one per record batch)."""
    parts = list(parts)
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
