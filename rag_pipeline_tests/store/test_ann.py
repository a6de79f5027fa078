"""ANN index policy: pure plan, and a real LanceDB table where stage() builds the index."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from rag_pipeline.query.answer import RefusalPolicy
from rag_pipeline.query.api import RagIndex
from rag_pipeline.query.filters import Principal
from rag_pipeline.store import schema as s
from rag_pipeline.store.ann import DEFAULT_MIN_ROWS, EXACT, INDEX_TYPE, MIN_TRAINABLE_ROWS, AnnPolicy, vector_index_plan
from rag_pipeline.store import lake as lake_module
from rag_pipeline.store.lake import Lake
from rag_pipeline.text import search_tokens

DIM, ROWS, CLUSTERS = 64, 4_000, 40
WORDS = ["quokka", "wombat", "numbat", "bilby"]  # one night's added rows each


def test_small_tables_stay_exact_large_ones_get_a_sane_ivf_plan():
    policy = AnnPolicy()
    assert vector_index_plan(DEFAULT_MIN_ROWS - 1, policy) == {"kind": EXACT, "rows": DEFAULT_MIN_ROWS - 1}
    plan = vector_index_plan(1_000_000, policy)
    assert plan["kind"] == INDEX_TYPE and plan["metric"] == "cosine" and plan["num_partitions"] == 1_000
    assert 1 <= plan["nprobes"] <= plan["num_partitions"] and plan["refine_factor"] >= 1
    # a threshold set below what an IVF index can train on still leaves tiny tables exact
    assert vector_index_plan(MIN_TRAINABLE_ROWS - 1, AnnPolicy(min_rows=0))["kind"] == EXACT
    assert vector_index_plan(MIN_TRAINABLE_ROWS, AnnPolicy(min_rows=0, nprobes=500))["nprobes"] == 32  # <= partitions
    with pytest.raises(ValueError):
        AnnPolicy(refine_factor=0)


class _Vectors:
    """Query encoder stand-in: the test's query vectors by name."""

    def __init__(self, vectors):
        self.vectors = vectors

    def encode_query(self, text):
        return self.vectors[text]


def _corpus(rng) -> tuple[pa.Table, np.ndarray]:
    centroids = rng.standard_normal((CLUSTERS, DIM))
    vectors = centroids[rng.integers(0, CLUSTERS, ROWS)] + 0.5 * rng.standard_normal((ROWS, DIM))
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    text = [" ".join(rng.choice(["alpha", "beta", "gamma", "delta", "omega"], 5)) for _ in range(ROWS)]
    columns = {
        "chunk_id": [f"c{i}" for i in range(ROWS)],
        "text": text,
        s.SEARCH_TEXT_COLUMN: text,
        "language": ["en"] * ROWS,
        "status": rng.choice(["published", "draft"], ROWS, p=[0.9, 0.1]),
        "security_level": rng.choice(["public", "internal", "secret"], ROWS, p=[0.4, 0.4, 0.2]),
        "access_groups": [[g] for g in rng.choice(["all-staff", "finance", "hr"], ROWS, p=[0.6, 0.25, 0.15])],
        "owner": rng.choice(["boss", ""], ROWS, p=[0.01, 0.99]),
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIM),
    }
    return _table(columns, s.chunks_schema(DIM), ROWS), vectors


def _table(columns: dict, schema: pa.Schema, n: int) -> pa.Table:
    return pa.table({f.name: columns.get(f.name, pa.nulls(n, f.type)) for f in schema}, schema=schema)


def _may_read(row: dict, p: Principal) -> bool:
    levels = ("public", "internal") if p.clearance == "internal" else ("public", "internal", "secret")
    access = bool(set(row["access_groups"]) & set(p.groups)) or (bool(p.user) and row["owner"] == p.user)
    return row["status"] == "published" and row["security_level"] in levels and access


def test_stage_builds_the_ann_index_and_filtered_search_keeps_recall_and_permissions(tmp_path):
    rng = np.random.default_rng(3)
    chunks, vectors = _corpus(rng)
    lake = Lake(tmp_path)

    def stage(policy):
        return lake.stage(
            _table({}, s.documents_schema(), 0), chunks, _table({}, s.quarantine_schema(), 0),
            model={"name": "test", "key": "test", "dimension": DIM}, run_id="t", ann_policy=policy,
        )

    exact, ann = stage(AnnPolicy(min_rows=ROWS + 1)), stage(AnnPolicy(min_rows=ROWS))
    assert exact["vector_index"] == {"kind": EXACT, "rows": ROWS}
    assert ann["vector_index"]["kind"] == INDEX_TYPE and ann["vector_index"]["num_partitions"] == 63
    indexed = {c for i in lake.open_published(s.CHUNKS, ann).list_indices() for c in i.columns}
    assert {"vector", s.SEARCH_TEXT_COLUMN, "status", "access_groups"} <= indexed

    queries = {f"q{i}": vectors[i] + 0.3 * rng.standard_normal(DIM).astype(np.float32) for i in range(0, ROWS, ROWS // 20)}
    acl = chunks.select(["status", "security_level", "access_groups", "owner"]).to_pylist()
    # ~20% of rows visible; ~1% (too few in the probed partitions: the exact fallback)
    for principal in (Principal(groups=("finance",)), Principal(user="boss", groups=(), clearance="secret")):
        visible = np.array([_may_read(row, principal) for row in acl])
        recalls = {}
        for manifest in (exact, ann):
            index = RagIndex(lake, manifest, _Vectors({**queries, "alpha omega": vectors[0]}), RefusalPolicy())
            found = []
            for name, q in queries.items():
                ids = [int(h.chunk_id[1:]) for h in index.search(name, mode="vector", principal=principal)]
                assert len(ids) == 10 and visible[ids].all()  # the pre-filter holds with the ANN index
                truth = np.argsort(-np.where(visible, vectors @ (q / np.linalg.norm(q)), -np.inf))[:10]
                found.append(len(set(ids) & set(truth.tolist())) / 10)
            recalls[manifest["vector_index"]["kind"]] = np.mean(found)
            assert all(visible[int(h.chunk_id[1:])] for h in index.search("alpha omega", principal=principal))
        assert recalls[EXACT] >= 0.98 and recalls[INDEX_TYPE] >= 0.9, recalls


def test_chunks_staged_in_batches_equal_chunks_staged_whole(tmp_path):
    """The pipeline streams chunk rows into the staged table batch by batch (bounded memory):
    same rows in the same order, same counts and the same term statistics as one whole table;
    no batches at all stage an empty generation."""
    chunks, _ = _corpus(np.random.default_rng(5))
    lake = Lake(tmp_path)
    model = {"name": "test", "key": "test", "dimension": DIM}
    empty_docs, empty_quarantine = _table({}, s.documents_schema(), 0), _table({}, s.quarantine_schema(), 0)

    def stage(data):
        return lake.stage(empty_docs, data, empty_quarantine, model=model, run_id="t", ann_policy=AnnPolicy(min_rows=ROWS + 1))

    whole = stage(chunks)
    batched = stage(chunks.slice(start, 700) for start in range(0, ROWS, 700))
    assert batched["counts"] == whole["counts"] and batched["counts"]["chunks"] == ROWS
    for table in (s.CHUNKS, s.TERM_STATS):
        columns = [c for c in lake.open_published(table, whole).to_arrow().column_names]
        assert lake.open_published(table, batched).to_arrow().select(columns).equals(lake.open_published(table, whole).to_arrow().select(columns))
    nothing = stage(iter(()))
    assert nothing["counts"]["chunks"] == 0 and lake.open_published(s.CHUNKS, nothing).count_rows() == 0


def test_a_generation_built_from_the_served_one_indexes_its_rows_as_deltas_merged_past_the_limit(tmp_path, monkeypatch):
    """Each night's added rows become a new segment of every index (merging rewrote the whole index);
    past INDEX_SEGMENTS_MAX segments the deltas are merged into one and the first segment is kept.
    Whatever the segments, a search finds every night's new rows and none of the deleted ones."""
    monkeypatch.setattr(lake_module, "INDEX_SEGMENTS_MAX", 3)
    rng = np.random.default_rng(7)
    chunks, vectors = _corpus(rng)
    chunks = chunks.set_column(chunks.schema.get_field_index("doc_id"), "doc_id", pa.array([f"d{i // 4}" for i in range(ROWS)]))
    lake = Lake(tmp_path)
    model = {"name": "test", "key": "test", "dimension": DIM}
    empty_docs, empty_quarantine = _table({}, s.documents_schema(), 0), _table({}, s.quarantine_schema(), 0)
    served = lake.stage(empty_docs, chunks, empty_quarantine, model=model, run_id="t", ann_policy=AnnPolicy(min_rows=ROWS))
    assert served["vector_index"]["kind"] == INDEX_TYPE
    first = {i["name"]: i["uuid"] for i in lake.open_published(s.CHUNKS, served).to_lance().list_indices()}
    everyone = Principal(user="boss", groups=("all-staff", "finance", "hr"), clearance="secret")
    published = np.array([row["status"] == "published" for row in chunks.select(["status"]).to_pylist()])
    deleted, added, seen_segments = [], {}, []
    for night, word in enumerate(WORDS, start=1):
        replaced = {f"d{d}" for d in range(night * 10, night * 10 + 10)}  # 40 rows out, 40 in
        deleted += [i for i in range(ROWS) if f"d{i // 4}" in replaced]
        fresh = rng.standard_normal((40, DIM)).astype(np.float32)
        fresh /= np.linalg.norm(fresh, axis=1, keepdims=True)
        text = [f"{word} alpha" for _ in range(40)]
        rows = _table({
            "chunk_id": [f"n{night}_{j}" for j in range(40)], "doc_id": sorted(replaced) * 4, "text": text,
            s.SEARCH_TEXT_COLUMN: [" ".join(search_tokens(t)) for t in text],  # as the pipeline writes it (stemmed)
            "language": ["en"] * 40, "status": ["published"] * 40, "security_level": ["public"] * 40,
            "access_groups": [["all-staff"]] * 40, "owner": [""] * 40,
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(fresh.ravel()), DIM),
        }, s.chunks_schema(DIM), 40)
        served = lake.stage_changes(served, empty_docs, [rows], replaced, empty_quarantine, model=model, run_id=f"n{night}")
        dataset = lake.open_published(s.CHUNKS, served).to_lance()
        segments = lake_module.index_segments(dataset)
        seen_segments.append(set(segments.values()))
        assert served["build"]["index_segments"] == max(segments.values())  # recorded for the operator
        assert set(first) == set(segments)
        assert {i["uuid"] for i in dataset.list_indices()} >= set(first.values())  # the first segment is never rewritten
        added.update({f"n{night}_{j}": fresh[j] for j in range(40)})

        queries = {**added, **{f"c{i}": vectors[i] for i in range(0, ROWS, 97) if published[i] and i not in deleted}}
        index = RagIndex(lake, served, _Vectors({**queries, **{f"q{i}": vectors[i] for i in deleted}, **dict.fromkeys(WORDS, vectors[0])}), RefusalPolicy())
        for name in queries:  # every row, old or added any night, is its own vector's nearest row
            assert index.search(name, mode="vector", principal=everyone)[0].chunk_id == name
        gone = {f"c{i}" for i in deleted}
        for i in deleted[::7]:
            assert not {h.chunk_id for h in index.search(f"q{i}", mode="vector", principal=everyone)} & gone
        for earlier, earlier_word in enumerate(WORDS[:night], start=1):
            found = index.search(earlier_word, mode="keyword", k=50, principal=everyone)
            assert {h.chunk_id for h in found} == {f"n{earlier}_{j}" for j in range(40)}
    assert seen_segments == [{2}, {3}, {2}, {3}]  # one delta a night; past 3 segments the deltas merged
