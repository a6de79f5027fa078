"""Per-document stages partitioned by hash shard of the document id (issue 16, item 1).

Real Dagster runs (index_job over every shard, index_shard_job for one), real LanceDB lakes and
the real model: one shard can be rebuilt alone, and a shard built from an older scan of the raw
folder never reaches a generation. That neither the shard count nor shards run side by side (one
run per shard, `cluster.fanout`) change what is served is tested on the cluster,
test_distributed.py: 2 shards on Celery workers against the in-process default of 4.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import dagster as dg
import numpy as np
import pyarrow as pa
import pytest

from rag_pipeline.definitions import build_definitions
from rag_pipeline.defs.io import read_arrow, release_stage_pages, write_arrow
from rag_pipeline.defs.resources import RagSettingsResource
from rag_pipeline.defs.shards import (
    SHARD_KEYS,
    ShardedTable,
    StaleShardError,
    gather_shards,
    scan_digest,
    shard_advice,
    shard_count,
    shard_keys,
    shard_of,
    split_by_shard,
    with_lineage,
)
from rag_pipeline.ingest.scan import doc_id_for
from rag_pipeline.query import RagIndex
from rag_pipeline.store.lake import Lake
from rag_pipeline_tests.indexing import _error_chain, assert_consistent

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "sample"
# text, table, Office, web and PDF formats; no scans (OCR is covered elsewhere and slow)
SUBSET = ["handbook", "finance", "it", "products/x2000_datasheet.pdf", "products/service_centers.csv"]


def test_shard_keys_name_the_count_and_shards_are_stable_and_spread():
    assert shard_keys(4) == ["00of04", "01of04", "02of04", "03of04"]
    assert shard_keys(128)[5] == "005of128"
    assert shard_count({}) == 4 and shard_count({"RAG_SHARDS": "16"}) == 16
    for bad in ("0", "-1", "x", "257"):
        with pytest.raises(ValueError, match="RAG_SHARDS"):
            shard_count({"RAG_SHARDS": bad})
    ids = [doc_id_for(f"folder/file_{i}.pdf") for i in range(4000)]
    keys = shard_keys(8)
    assert [shard_of(d, keys) for d in ids] == [shard_of(d, keys) for d in ids]  # no salted hash()
    counts = np.bincount([keys.index(shard_of(d, keys)) for d in ids], minlength=8)
    assert counts.min() > 4000 / 8 * 0.85, counts  # balanced within 15 %
    # known value: a shard must not move between machines or Python versions
    assert shard_of(doc_id_for("handbook/notes.txt"), shard_keys(4)) == shard_of(doc_id_for(b"handbook/notes.txt"), shard_keys(4))


def _raw(doc_ids: list[str], shas: list[str]) -> pa.Table:
    n = len(doc_ids)
    return pa.table(
        {"doc_id": doc_ids, "source": [f"{d}.md" for d in doc_ids], "sha256": shas, "metadata": ["{}"] * n, "metadata_error": [None] * n},
        schema=pa.schema([(c, pa.string()) for c in ("doc_id", "source", "sha256", "metadata", "metadata_error")]),
    )


def test_gather_refuses_a_shard_built_from_another_scan_and_restores_scan_order():
    ids = [doc_id_for(f"doc_{i}.md") for i in range(12)]
    raw = _raw(ids, [f"sha{i}" for i in range(12)])
    parsed = {k: with_lineage(t.select(["doc_id"]), scan_digest(t)) for k, t in split_by_shard(raw).items()}
    combined = gather_shards(raw, parsed=parsed)["parsed"].read_all()
    assert combined.column("doc_id").to_pylist() == ids  # scan order, whatever the shards
    assert combined.schema.metadata is None

    edited = _raw(ids, [f"sha{i}" for i in range(11)] + ["sha11-edited"])
    stale_key = shard_of(ids[11], SHARD_KEYS)
    with pytest.raises(StaleShardError, match=rf"parsed\[{stale_key}\]") as error:
        gather_shards(edited, parsed=parsed)
    assert "1 shard outputs" in str(error.value)


def test_a_run_advises_more_shards_only_when_a_shard_outgrows_what_was_measured():
    assert shard_advice(10_000, 4) is None and shard_advice(0, 4) is None
    assert "RAG_SHARDS=40 " in shard_advice(100_000, 4) and "25,000 documents a shard" in shard_advice(100_000, 4)
    assert "RAG_SHARDS=256 " in shard_advice(10_000_000, 4)  # the most shards there may be


def test_sharded_rows_are_taken_batch_by_batch_in_the_order_asked_without_concatenating_the_corpus():
    rng = np.random.default_rng(16)
    batches = [pa.record_batch({"n": np.arange(start, start + 3_000), "text": [f"{i:06d}" + "x" * 300 for i in range(start, start + 3_000)]})
               for start in range(0, 15_000, 3_000)]
    table = pa.Table.from_batches(batches)
    wanted = rng.permutation(table.num_rows)[:500]
    before = pa.total_allocated_bytes()
    taken = ShardedTable(table).take(wanted)
    assert taken.column("n").to_pylist() == wanted.tolist()
    assert taken.column("text").to_pylist() == [f"{i:06d}" + "x" * 300 for i in wanted]
    # Arrow's table.take would first concatenate the 4.6 MB text column; rows are 500 × 306 bytes
    assert pa.total_allocated_bytes() - before < 1_000_000
    order = rng.permutation(table.num_rows)
    scan_ordered = ShardedTable(table, order)
    assert pa.concat_tables([scan_ordered.slice(s, 4_096) for s in range(0, table.num_rows, 4_096)]).column("n").to_pylist() == order.tolist()
    assert scan_ordered.read_all().equals(table.take(pa.array(order)))
    assert ShardedTable(table).take(np.array([], dtype=np.int64)).num_rows == 0


def _resident_kb(folder: Path) -> int:
    """Resident kB of this process's mappings of files under `folder`."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if fields and "-" in fields[0] and not fields[0].endswith(":"):  # a mapping's header line
            inside = len(fields) > 5 and fields[5].startswith(str(folder))
        elif inside and fields[:1] == ["Rss:"]:
            total += int(fields[1])
    return total


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="reads /proc/self/smaps (Linux)")
def test_rows_taken_across_mapped_shards_leave_no_shard_file_resident(tmp_path):
    """A 1 % change's publish takes ~110 scattered rows from each of 40 chunk shards; each page
    fault maps its neighbours too, so without letting each shard go the whole chunk stage was
    resident at once (720 MB at 100k documents). The rows come back equal either way."""
    rng = np.random.default_rng(7)
    shards = []
    for shard in range(6):
        n = np.arange(shard * 2_000, (shard + 1) * 2_000)
        write_arrow(tmp_path / f"{shard}.arrow", pa.table({"n": n, "text": [f"{i:06d} " + "lorem ipsum " * 60 for i in n]}))
        shards.append(read_arrow(tmp_path / f"{shard}.arrow"))  # memory-mapped, as the IO manager reads a stage
    table = pa.concat_tables(shards)
    release_stage_pages()
    wanted = rng.permutation(table.num_rows)[:300]
    by_hand = [b.take(pa.array(wanted[(wanted >= s) & (wanted < s + b.num_rows)] - s))
               for s, b in zip(range(0, table.num_rows, 2_000), table.to_batches())]
    assert sum(t.num_rows for t in by_hand) == 300 and _resident_kb(tmp_path) > 0  # taking rows faults pages in
    release_stage_pages()
    taken = ShardedTable(table).take(wanted)
    assert _resident_kb(tmp_path) == 0
    assert taken.column("n").to_pylist() == wanted.tolist()
    assert taken.column("text").to_pylist() == [f"{i:06d} " + "lorem ipsum " * 60 for i in wanted]


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="reads /proc/self/smaps (Linux)")
def test_the_io_manager_writes_shard_after_shard_without_keeping_their_pages(tmp_path, monkeypatch):
    """A partitioned step that returns columns selected from mapped stage files (chunk_fingerprints:
    chunk_id and fingerprint of every chunk shard) has the IO manager read each shard's pages as
    it writes it; kept, every shard was resident at once by the last write (~45 MB of a 1 % change's
    chunk_fingerprints at 100k documents, bench/README.md). What is written equals what was returned."""
    from rag_pipeline.defs import io

    stage = tmp_path / "stage"
    stage.mkdir()
    selected = {}
    for shard in SHARD_KEYS:
        n = np.arange(3_000)
        write_arrow(stage / f"{shard}.arrow", pa.table({"chunk_id": [f"{shard}-{i:06d}" * 4 for i in n], "text": ["lorem " * 50] * len(n)}))
        selected[shard] = read_arrow(stage / f"{shard}.arrow").select(["chunk_id"])
    release_stage_pages()
    resident_at_write = []
    real_write = io.write_arrow
    monkeypatch.setattr(io, "write_arrow", lambda path, table: (resident_at_write.append(_resident_kb(stage)), real_write(path, table)))
    context = dg.build_output_context(
        asset_key="chunk_fingerprints", run_id="r1", asset_partitions_def=dg.StaticPartitionsDefinition(SHARD_KEYS),
        asset_partition_key_range=dg.PartitionKeyRange(SHARD_KEYS[0], SHARD_KEYS[-1]),
    )
    io.LakeStaging(tmp_path / "lake").handle_output(context, selected)
    assert len(resident_at_write) == len(SHARD_KEYS) and max(resident_at_write) == 0, resident_at_write
    for shard in SHARD_KEYS:
        assert read_arrow(io.staged_path(tmp_path / "lake", "r1", "chunk_fingerprints", shard=shard)).equals(selected[shard])


def _subset(root: Path) -> Path:
    raw = root / "raw"
    for part in SUBSET:
        source = SAMPLE / part
        if source.is_dir():
            shutil.copytree(source, raw / part)
        else:
            (raw / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, raw / part)
            sidecar = source.with_name(source.name + ".meta.json")
            if sidecar.exists():
                shutil.copy2(sidecar, raw / (part + ".meta.json"))
    return raw


def _execute(defs, instance, job: str, **kwargs):
    result = defs.resolve_job_def(job).execute_in_process(instance=instance, raise_on_error=False, **kwargs)
    failures = [_error_chain(e.event_specific_data.error) for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    return result, failures


def _doc_in_other_shard(raw: Path, than: str) -> Path:
    for path in sorted([*raw.rglob("*.md"), *raw.rglob("*.txt")]):
        if shard_of(doc_id_for(path.relative_to(raw).as_posix()), SHARD_KEYS) != than:
            return path
    raise AssertionError("every text file is in one shard")


@pytest.mark.slow
def test_one_shard_is_rebuilt_alone_and_a_stale_shard_never_reaches_a_generation(tmp_path):
    raw = _subset(tmp_path)
    lake = tmp_path / "lake"
    defs = build_definitions(RagSettingsResource(raw_dir=str(raw), lake_dir=str(lake), golden_file="none"))
    scan = [dg.AssetKey("raw_documents")]
    publish = [dg.AssetKey(k) for k in ("lancedb_index", "golden_eval", "published_index", "lake_housekeeping")]
    with dg.DagsterInstance.ephemeral() as instance:
        result, failures = _execute(defs, instance, "index_job")
        assert result.success, failures
        first = Lake(lake).read_manifest()
        # a whole run still gives each shard its own counts (the UI's per-partition metadata)
        per_shard = {name: {} for name in ("parsed_documents", "chunks", "embeddings")}
        for event in result.get_asset_materialization_events():
            name = event.asset_key.to_user_string()
            if name in per_shard:
                metadata = event.materialization.metadata
                per_shard[name][event.partition] = metadata["shard_documents" if name == "parsed_documents" else
                                                            "shard_chunks" if name == "chunks" else "shard_vectors"].value
        assert all(set(counts) == set(SHARD_KEYS) for counts in per_shard.values()), per_shard
        assert sum(per_shard["parsed_documents"].values()) == first["counts"]["documents"]
        assert sum(per_shard["chunks"].values()) == first["counts"]["chunks"]

        # an edit in one shard: scan, rebuild that shard alone, publish
        edited = raw / "handbook" / "employee_handbook_en.md"
        shard = shard_of(doc_id_for(edited.relative_to(raw).as_posix()), SHARD_KEYS)
        edited.write_text(edited.read_text(encoding="utf-8") + "\n\nThe QUOKKAPASS rule: badges are renewed yearly.\n", encoding="utf-8")
        assert _execute(defs, instance, "index_job", asset_selection=scan)[0].success
        rebuilt, failures = _execute(defs, instance, "index_shard_job", partition_key=shard)
        assert rebuilt.success, failures
        steps = {e.step_key for e in rebuilt.all_events if e.event_type_value == "STEP_SUCCESS"}
        assert steps == {"parse_documents", "chunks", "chunk_fingerprints", "embeddings"}
        materialized = {e.asset_key.to_user_string() for e in rebuilt.get_asset_materialization_events()}
        assert materialized == {"parsed_documents", "quarantine", "chunks", "chunk_fingerprints", "embeddings"}
        assert all(e.partition == shard for e in rebuilt.get_asset_materialization_events())
        # its fingerprint diff is against the served chunks of this shard's documents only
        served = RagIndex.open(lake).chunks.to_arrow().select(["doc_id", "fingerprint"]).to_pylist()
        here = {r["fingerprint"] for r in served if shard_of(r["doc_id"], SHARD_KEYS) == shard}
        edited_id = doc_id_for(edited.relative_to(raw).as_posix())
        diff = next(e.materialization.metadata for e in rebuilt.get_asset_materialization_events()
                    if e.asset_key.to_user_string() == "chunk_fingerprints")
        assert diff["same"].value + diff["gone"].value == len(here) > len({r["fingerprint"] for r in served if r["doc_id"] == edited_id})
        assert 1 <= diff["gone"].value <= len({r["fingerprint"] for r in served if r["doc_id"] == edited_id}) and diff["new"].value >= 1
        published, failures = _execute(defs, instance, "index_job", asset_selection=publish)
        assert published.success, failures
        second = assert_consistent(lake)
        assert second["generation"] == first["generation"] + 1
        hits = RagIndex.open(lake).search("QUOKKAPASS", mode="keyword", k=3).to_dicts()
        assert hits and "QUOKKAPASS" in hits[0]["text"]

        # an edit in another shard that is scanned but never rebuilt: the publish stops, nothing changes
        other = _doc_in_other_shard(raw, shard)
        other_shard = shard_of(doc_id_for(other.relative_to(raw).as_posix()), SHARD_KEYS)
        other.write_text(other.read_text(encoding="utf-8") + "\n\nWALLABYCODE 42.\n", encoding="utf-8")
        assert _execute(defs, instance, "index_job", asset_selection=scan)[0].success
        stale, failures = _execute(defs, instance, "index_job", asset_selection=publish)
        assert not stale.success
        assert any("StaleShardError" in f or "another scan of the raw folder" in f for f in failures), failures
        assert any(f"[{other_shard}]" in f for f in failures), failures
        assert Lake(lake).read_manifest()["generation"] == second["generation"]

        # the whole job makes it right again
        result, failures = _execute(defs, instance, "index_job")
        assert result.success, failures
    hits = RagIndex.open(lake).search("WALLABYCODE", mode="keyword", k=3).to_dicts()
    assert hits and "WALLABYCODE" in hits[0]["text"]
    runs = json.dumps(sorted(p.name for p in (lake / "staging" / "latest" / "chunks").iterdir()))
    assert runs == json.dumps([f"{k}.json" for k in SHARD_KEYS])
