"""Key hashes (store.keyhash): the same key hashes the same wherever it stands, distinct keys apart."""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa

from rag_pipeline.store import keyhash
from rag_pipeline.store.keyhash import HashIndex, count_in, distinct_hashes, key_hashes


def _digest(i: int) -> str:
    return hashlib.sha256(str(i).encode()).hexdigest()


def test_a_key_hashes_the_same_in_any_column_chunk_or_neighbourhood():
    # digests, strings that are not (short, upper-case, non-ASCII of 64 characters, one non-hex digit)
    keys = [_digest(i) for i in range(5)] + ["k001", "", _digest(5).upper(), "é" * 64, "x" + _digest(6)[1:]]
    whole = key_hashes(pa.array(keys))
    assert len(set(whole.tolist())) == len(keys)
    assert whole[0] == int(keys[0][:16], 16)  # a digest is its first 64 bits
    assert (key_hashes(pa.chunked_array([keys[:3], keys[3:]])) == whole).all()
    assert (key_hashes(list(reversed(keys)))[::-1] == whole).all()
    assert (key_hashes(pa.array(keys).slice(4, 4)) == whole[4:8]).all()
    assert (key_hashes(pa.array(keys, pa.large_string())) == whole).all()


def test_distinct_hashes_and_counts_over_several_columns():
    a, b = distinct_hashes([pa.array(["x", "y"]), ["y", "z"]]), distinct_hashes([["z", "w"]])
    assert len(a) == 3 and (np.diff(a.astype(np.float64)) > 0).all()
    assert count_in(a, b) == 1 and count_in(a, distinct_hashes([])) == 0


def test_the_index_finds_every_row_of_a_repeated_hash_in_table_order():
    stored = np.array([50, 10, 30, 30, 90, 10], dtype=np.uint64)
    index = HashIndex(stored, presorted=False)
    assert index.contains(np.array([30, 40, 90, 100, 0], dtype=np.uint64)).tolist() == [True, False, True, False, False]
    assert index.positions(np.array([10, 90, 70, 30], dtype=np.uint64)).tolist() == [1, 2, 3, 4, 5]
    assert HashIndex(np.zeros(0, np.uint64)).contains(np.array([1], dtype=np.uint64)).tolist() == [False]


def test_chunk_ids_hash_in_numpy_and_apart_from_their_halves(monkeypatch):
    doc, fps = _digest(0)[:16], [_digest(i)[:16] for i in range(1, 2001)]
    ids = [f"{doc}-{fp}" for fp in fps] + [f"{fps[0]}-{doc}"]  # the halves swapped
    with monkeypatch.context() as patched:  # every well-formed chunk id is hashed without the per-value path
        patched.setattr(keyhash.hashlib, "blake2b", None)
        hashed = key_hashes(pa.chunked_array([ids[:700], ids[700:]]))
    assert len(set(hashed.tolist())) == len(ids)
    assert (key_hashes(ids[::-1])[::-1] == hashed).all()
    # a repeated text's id (`-1`), a malformed one and the digest halves alone are other keys
    others = key_hashes([f"{doc}-{fps[0]}-1", f"{doc}_{fps[0]}", f"{doc}-{fps[0].upper()}", doc, fps[0]])
    assert not set(others.tolist()) & set(hashed.tolist()) and len(set(others.tolist())) == 5
