"""Shard steps of one index write the lake's caches from several processes at once."""

from __future__ import annotations

import subprocess
import sys

import lancedb
import pytest

from rag_pipeline.store import schema as s
from rag_pipeline.store.lake import Lake
from rag_pipeline.store.pending import PendingEntries

WRITER = """
import sys
from rag_pipeline.store.lake import Lake
lake, who = Lake(sys.argv[1]), sys.argv[2]
for batch in range(12):
    # half the keys are shared by every writer (identical files in two shards), half are its own
    lake.add_parses({f"{who}-{batch}-{i}" if i % 2 else f"shared-{batch}-{i}": f"{who}" for i in range(40)})
"""


def test_three_processes_fill_a_new_cache_table_at_once_and_lose_nothing(tmp_path):
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), f"w{n}"], stderr=subprocess.PIPE, text=True)
               for n in range(3)]
    errors = [w.communicate(timeout=300)[1] for w in writers]
    assert [w.returncode for w in writers] == [0, 0, 0], errors
    keys = lancedb.connect(str(tmp_path)).open_table(s.PARSE_CACHE).to_arrow().column("cache_key").to_pylist()
    expected = {f"w{n}-{b}-{i}" for n in range(3) for b in range(12) for i in range(1, 40, 2)}
    expected |= {f"shared-{b}-{i}" for b in range(12) for i in range(0, 40, 2)}
    assert set(keys) == expected  # none lost
    # a shared key may be stored twice (two writers inserted it at once); a look-up reads it once
    assert {k for k in keys if keys.count(k) > 1} <= {k for k in expected if k.startswith("shared-")}
    found = Lake(tmp_path)._lookup(s.PARSE_CACHE, sorted(expected), ["cache_key", "outcome"])
    assert sorted(found.column("cache_key").to_pylist()) == sorted(expected)


def test_a_cache_table_folder_left_without_a_version_is_created_again(tmp_path):
    """What a creator killed mid-create leaves (the folder, no first version): the next insert
    creates the table instead of failing on every run with "Table ... was not found"."""
    (tmp_path / f"{s.PARSE_CACHE}.lance" / "data").mkdir(parents=True)
    lake = Lake(tmp_path)
    assert s.PARSE_CACHE in lake._tables()
    lake.add_parses({"k": "{}"})
    assert lake.cached_parses(["k", "other"]) == {"k": "{}"}


def test_a_look_up_after_an_insert_sees_it_though_the_key_column_is_read_once_per_version(tmp_path):
    """The key column is held per table version (Lake._key_column): an insert, by this process
    or another shard's, makes a new version, and the next look-up reads the keys again."""
    lake = Lake(tmp_path)
    lake.add_parses({"a": "1"})
    assert lake.cached_parses(["a", "b"]) == {"a": "1"}
    subprocess.run([sys.executable, "-c", f"from rag_pipeline.store.lake import Lake; Lake({str(tmp_path)!r}).add_parses({{'b': '2'}})"],
                   check=True)
    assert lake.cached_parses(["a", "b"]) == {"a": "1", "b": "2"}
    lake.add_parses({"c": "3"})
    assert lake.cached_parses(["c"]) == {"c": "3"}


def test_pending_entries_insert_a_bound_at_a_time_and_what_is_left_at_the_end(tmp_path):
    lake = Lake(tmp_path)
    inserts = []

    def insert(entries):
        inserts.append(len(entries))
        lake.add_parses(entries)

    with PendingEntries(insert, bound=5) as pending:
        pending.add({f"a{i}": "x" for i in range(3)})
        assert inserts == [] and pending.found(["a1", "zz"]) == {"a1": "x"}  # a later shard sees it
        pending.add({f"b{i}": "y" for i in range(3)})  # 6 held >= 5: inserted
        assert inserts == [6] and pending.found(["a1"]) == {}
        pending.add({"c0": "z"})
    assert inserts == [6, 1]  # the rest at the end of the step
    assert set(lake.cached_parses([*(f"a{i}" for i in range(3)), *(f"b{i}" for i in range(3)), "c0"])) == {"a0", "a1", "a2", "b0", "b1", "b2", "c0"}


def test_pending_entries_are_inserted_when_the_step_fails_and_the_step_error_is_kept(tmp_path):
    lake = Lake(tmp_path)
    with pytest.raises(RuntimeError, match="shard 3 failed"):
        with PendingEntries(lake.add_parses) as pending:
            pending.add({"ocr-result": "{}"})  # expensive work done before the failure
            raise RuntimeError("shard 3 failed")
    assert set(lake.cached_parses(["ocr-result"])) == {"ocr-result"}

    def broken(entries):
        raise OSError("disk full")

    with pytest.raises(RuntimeError, match="shard 3 failed"):  # not masked by the failing insert
        with PendingEntries(broken) as pending:
            pending.add({"k": "v"})
            raise RuntimeError("shard 3 failed")


def test_an_index_run_inserts_its_chunk_cache_rows_once_and_parses_with_one_pool(tmp_path, monkeypatch):
    """A real run over the sample's shards: the chunk rows of every shard are held back and
    inserted together, and the step's shards share one parse pool (bench/README.md: an insert and
    a pool a shard cost a 1 % change seconds at 100k documents)."""
    import shutil
    from pathlib import Path

    from rag_pipeline.defs.shards import SHARD_KEYS
    from rag_pipeline.ingest.pool import ParsePool
    from rag_pipeline_tests.indexing import run_index

    inserts, pools = [], []
    real_add, real_started = Lake.add_chunks, ParsePool._started
    monkeypatch.setattr(Lake, "add_chunks", lambda self, rows: (inserts.append(rows.num_rows), real_add(self, rows))[1])
    monkeypatch.setattr(ParsePool, "_started", lambda self: (pools.append(self._pool is None), real_started(self))[1])
    raw = tmp_path / "raw"
    shutil.copytree(Path(__file__).resolve().parents[2] / "data" / "sample", raw)
    report = run_index(raw, tmp_path / "lake", golden_file="none")
    assert report["success"], report["failures"]
    documents = report["chunks"]["documents"]
    assert len(SHARD_KEYS) > 1 and report["parsed_documents"]["shards"] > 1  # the rows came from several shards
    assert inserts == [documents]  # one insert, one row a document
    assert sum(pools) == 1  # one pool started, used by every shard with files to parse
    keys = lancedb.connect(str(tmp_path / "lake")).open_table(s.CHUNK_CACHE).to_arrow().column("cache_key").to_pylist()
    assert len(set(keys)) == len(keys) == documents  # every document's chunks cached, once


def test_a_look_up_on_a_pruned_cache_takes_exactly_the_live_rows_asked_in_table_order(tmp_path):
    """Look-ups take rows by row id (Lake._lookup): after housekeeping deleted entries and a
    compaction left deletion files, every key asked is found with its own value, deleted keys
    never, in the order a scan of the table gives."""
    lake = Lake(tmp_path)
    for batch in range(4):  # four inserts: four fragments
        lake.add_parses({f"k{batch}-{i:03d}": f"value of {batch}-{i}" for i in range(200)})
    table = lancedb.connect(str(tmp_path)).open_table(s.PARSE_CACHE)
    table.delete("cache_key LIKE 'k1-%' OR cache_key LIKE '%7'")
    table.to_lance().optimize.compact_files(target_rows_per_fragment=500, materialize_deletions=False)
    assert any(f.metadata.deletion_file is not None for f in table.to_lance().get_fragments())
    asked = [f"k{b}-{i:03d}" for b in range(4) for i in range(0, 200, 3)] + ["missing"]
    found = Lake(tmp_path)._lookup(s.PARSE_CACHE, asked, ["cache_key", "outcome"])
    live = {k for k in asked if k != "missing" and not k.startswith("k1-") and not k.endswith("7")}
    assert found.column("outcome").to_pylist() == [f"value of {k[1]}-{int(k[3:])}" for k in found.column("cache_key").to_pylist()]
    scan_order = [k for k in table.to_lance().to_table(columns=["cache_key"]).column("cache_key").to_pylist() if k in live]
    assert found.column("cache_key").to_pylist() == scan_order


def test_a_look_up_stays_exact_when_key_hashes_collide(tmp_path, monkeypatch):
    """Look-ups match 64-bit key hashes (store.keyhash), then compare the keys they took: with a
    stand-in hash under which every key collides with many others, each key asked is found with
    its own value and nothing else comes back."""
    import numpy as np

    from rag_pipeline.store import lake as lake_module
    from rag_pipeline.store.keyhash import key_hashes

    lake = Lake(tmp_path)
    lake.add_parses({f"k{i:03d}": f"value {i}" for i in range(300)})
    monkeypatch.setattr(lake_module, "key_hashes", lambda values: key_hashes(values) % np.uint64(7))
    asked = [f"k{i:03d}" for i in range(0, 300, 11)] + ["missing"]
    found = Lake(tmp_path)._lookup(s.PARSE_CACHE, asked, ["cache_key", "outcome"])
    assert found.column("cache_key").to_pylist() == asked[:-1]
    assert found.column("outcome").to_pylist() == [f"value {int(k[1:])}" for k in asked[:-1]]
    assert found.column_names == ["cache_key", "outcome"]
    values = Lake(tmp_path)._lookup(s.PARSE_CACHE, asked, ["outcome"])  # the key column is compared, not returned
    assert values.column_names == ["outcome"] and values.num_rows == len(asked) - 1


def test_the_embedding_step_sizes_its_work_from_arrow_columns_of_every_shard(tmp_path):
    """count_uncached_vectors: distinct fingerprints across shards (a chunk text shared by two
    shards counts once) and how many this model's cache lacks; no cache table yet: all of them."""
    import numpy as np
    import pyarrow as pa

    lake = Lake(tmp_path)
    shards = [pa.chunked_array([["a", "b"], ["c"]]), pa.array(["c", "d", "a"]), pa.array([], pa.string())]
    assert lake.count_uncached_vectors("m1", shards) == (4, 4)
    assert lake.count_uncached_vectors("m1", []) == (0, 0)
    lake.add_to_cache("m1", {"a": np.ones(3, np.float32), "d": np.ones(3, np.float32), "z": np.ones(3, np.float32)})
    assert lake.count_uncached_vectors("m1", shards) == (4, 2)  # b and c
    assert lake.count_uncached_vectors("m2", shards) == (4, 4)  # another model's cache is another table


def test_housekeeping_compacts_the_caches_keeping_every_live_row_as_written(tmp_path):
    """prune merges the fragments each insert leaves (one per shard write on a first build) by
    copying their pages (CACHE_COMPACTION_MODE), or by re-encoding where a fragment has deleted
    rows: either way every live row reads back as written — empty strings and lists, nulls,
    nested lists, CJK text, vectors — and the deleted ones stay gone."""
    import numpy as np
    import pyarrow as pa

    lake = Lake(tmp_path)
    for batch in range(5):  # five inserts per cache: five fragments each
        lake.add_parses({f"p{batch}-{i}": ("" if i % 7 == 0 else f"解析 {batch}/{i} " * i) for i in range(60)})
        lake.add_chunks(pa.table({
            "cache_key": [f"c{batch}-{i}" for i in range(30)],
            "chunk_id": [[f"id{batch}-{i}-{j}" for j in range(i % 4)] for i in range(30)],
            "doc_id": [[f"d{batch}-{i}"] * (i % 4) for i in range(30)],
            "ordinal": [list(range(i % 4)) for i in range(30)],
            "text": [[f"第{j}段 text {'x' * (i * j)}" for j in range(i % 4)] for i in range(30)],
            "embed_text": [[""] * (i % 4) for i in range(30)],
            "heading_path": [[[] if j % 2 else ["手册", f"H{j}"] for j in range(i % 4)] for i in range(30)],
            "page": [[None if j % 2 else j for j in range(i % 4)] for i in range(30)],
            "fingerprint": [[f"f{batch}-{i}-{j}" for j in range(i % 4)] for i in range(30)],
            "tokens": [[j * 3 for j in range(i % 4)] for i in range(30)],
            "model_limit": [None if i % 5 == 0 else 512 for i in range(30)],
        }, schema=s.chunk_cache_schema()))
        lake.add_to_cache("m1", {f"v{batch}-{i}": np.full(8, batch + i / 100, np.float32) for i in range(80)})
    db = lancedb.connect(str(tmp_path))
    names = (s.PARSE_CACHE, s.CHUNK_CACHE, s.embedding_cache_table("m1"))
    assert [len(db.open_table(n).to_lance().get_fragments()) for n in names] == [5, 5, 5]
    db.open_table(s.PARSE_CACHE).delete("cache_key LIKE 'p2-%' OR cache_key LIKE '%3'")  # one fragment gone, four with deletions
    before = {n: db.open_table(n).to_lance().to_table().sort_by("cache_key") for n in names}

    lake.prune(keep=1)

    for name in names:
        dataset = db.open_table(name).to_lance()
        assert len(dataset.get_fragments()) == 1, name
        assert dataset.to_table().sort_by("cache_key").equals(before[name]), name
        assert len(dataset.versions()) == 1  # the superseded versions went with the compaction
    assert before[s.PARSE_CACHE].num_rows == 4 * 60 - 4 * 6 and not any(
        k.startswith("p2-") for k in db.open_table(s.PARSE_CACHE).to_arrow().column("cache_key").to_pylist())
    assert Lake(tmp_path).cached_chunks(["c4-29", "c0-0"]).sort_by("cache_key").equals(
        before[s.CHUNK_CACHE].filter(pa.compute.is_in(before[s.CHUNK_CACHE].column("cache_key"), pa.array(["c0-0", "c4-29"]))))


def test_housekeeping_leaves_a_settled_cache_fragment_alone_until_its_deleted_rows_pass_the_threshold(tmp_path, monkeypatch):
    """A fragment holding CACHE_SETTLED_BYTES is not merged with each night's new rows (a cache
    under CACHE_FRAGMENT_ROWS rows would otherwise be re-encoded whole once pruning deleted a few of
    its rows); once more than CACHE_DELETED_SHARE of its rows are deleted it is rewritten."""
    from rag_pipeline.store import lake as lake_module

    monkeypatch.setattr(lake_module, "CACHE_SETTLED_BYTES", 1 << 20)
    lake = Lake(tmp_path)
    lake.add_parses({f"big-{i:04d}": f"{i} " * 600 for i in range(1000)})  # ~2.6 MB: settled
    def cache():  # opened afresh: housekeeping removes the versions an open handle points at
        return lancedb.connect(str(tmp_path)).open_table(s.PARSE_CACHE)

    settled = cache().to_lance().get_fragments()[0].fragment_id
    cache().delete("cache_key IN ('big-0001', 'big-0002', 'big-0003')")  # pruned: 0.3 % of its rows
    lake.add_parses({f"night1-{i}": "a" for i in range(20)})
    lake.add_parses({f"night2-{i}": "b" for i in range(20)})
    expected = cache().to_lance().to_table().sort_by("cache_key")

    lake.prune(keep=1)

    fragments = cache().to_lance().get_fragments()
    assert [f.fragment_id for f in fragments][0] == settled and fragments[0].metadata.num_deletions == 3  # left as it was
    assert len(fragments) == 2 and fragments[1].count_rows() == 40  # the nights' rows merged
    assert cache().to_lance().to_table().sort_by("cache_key").equals(expected)

    cache().delete("cache_key LIKE 'big-00%' OR cache_key LIKE 'big-01%'")  # 20 % of its rows
    expected = cache().to_lance().to_table().sort_by("cache_key")
    lake.prune(keep=1)
    fragments = cache().to_lance().get_fragments()
    assert settled not in [f.fragment_id for f in fragments] and all(f.metadata.num_deletions == 0 for f in fragments)
    assert cache().to_lance().to_table().sort_by("cache_key").equals(expected)
