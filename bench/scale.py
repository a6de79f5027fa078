"""Scale benchmark: query latency, ANN recall and build cost at 10k / 100k / 1M chunks.

Corpus: synthetic chunks in the real chunks schema. Vectors are 384-d unit vectors around 1,000
gaussian centroids, themselves grouped under 50 topics (cosine ~0.4 to chunks of sibling clusters,
~0 across topics), plus a document offset and chunk noise. The topic level matters: without it
every chunk outside the query's cluster is equally far (cosine 0 +- noise), and once a narrow
filter leaves fewer than 10 permitted chunks in the cluster the "exact top 10" is noise that no
index can reproduce. `search_text`: 100 words per chunk from a 50,000-word vocabulary with
Zipfian frequencies, 15 of them from the cluster's 20 topic words. ACL columns as in a company
corpus (90% published; 80% all-staff, 5% legal-only; four security levels; 500 owners).

Each size is built in a child process through the real `Lake.stage` path (FTS and filter-column
indexes, then the `store.ann` policy forced on with min_rows=0); its peak RSS is read with
getrusage(RUSAGE_CHILDREN). The exact baseline is the same chunks table one version earlier
(every index but the vector one, checked), so both run on identical data.

Queries run through the real `RagIndex.search` (k=10; dense and keyword arms 100 deep, query-aware
fusion, refusal evidence) with the query encoder replaced by a lookup of precomputed vectors near
a centroid: latency EXCLUDES query encoding. Query texts are two topic words of the query's
cluster plus two vocabulary words (rank >= 20). Recall@10 compares the ANN vector top 10 with the
exact one under the same permission pre-filter, for the default principal (~58% of rows visible)
and two narrow ones: the legal group (~4.5%) and one owner's documents (~0.2%, where the dense arm
falls back to exact search); every row they get back is checked against the ACL.

    .venv/bin/python bench/scale.py [--sizes 10000,100000,1000000] [--queries 200] [--keep DIR]

Time on 2 shared cores (load 4-7 from other jobs): 10k + 100k ~1.5 min, 1M ~6 min (the build
child peaks at ~4 GB RSS, the measuring process at ~4 GB, mostly RagIndex's idf table; ~4 GB of
disk in a temporary folder, removed unless --keep).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rag_pipeline.query.answer import RefusalPolicy
from rag_pipeline.query.api import RagIndex
from rag_pipeline.query.filters import Principal, search_filter
from rag_pipeline.query.retrieve import dense_arm
from rag_pipeline.store import schema as s
from rag_pipeline.store.ann import AnnPolicy
from rag_pipeline.store.lake import Lake

DIM = 384
CLUSTERS, TOPICS = 1_000, 50
VOCABULARY = 50_000
WORDS_PER_CHUNK = 100
TOPIC_WORDS, TOPIC_SHARE = 20, 15  # per cluster; per chunk
CHUNKS_PER_DOC = 10
BATCH = 50_000
MODEL = {"name": "synthetic-384", "key": "synthetic", "dimension": DIM}
# narrow principals: the legal group (~4.5% of rows visible), one owner's documents (~0.2%)
NARROW = {
    "legal": (Principal(groups=("legal",), clearance="secret"), lambda acl, d: acl["group"][d] == "legal"),
    "owner": (Principal(user="user7@example.com", groups=(), clearance="secret"), lambda acl, d: acl["owner"][d] == "user7@example.com"),
}
SWEEP = [(10, 5), (40, 5), (20, 1), (20, 2), (20, 10)]  # (nprobes, refine_factor) beside the policy's


class Corpus:
    """Deterministic synthetic corpus: everything derives from the seed, so parent and child agree."""

    def __init__(self, seed: int = 7):
        rng = np.random.default_rng(seed)
        self.seed = seed
        topics = _unit(rng.standard_normal((TOPICS, DIM)))  # clusters group into topics, as real ones do
        noise = rng.standard_normal((CLUSTERS, DIM)) / np.sqrt(DIM)
        self.centroids = _unit(topics[np.arange(CLUSTERS) % TOPICS] + noise)
        syllables = [c + v for c in "bdfghjklmnprstvwxyz" + "c" for v in "aeiou"]
        ids = rng.choice(len(syllables) ** 3, VOCABULARY, replace=False)
        self.vocab = [syllables[i // 10_000] + syllables[i // 100 % 100] + syllables[i % 100] for i in ids]
        weights = 1.0 / np.arange(1, VOCABULARY + 1)  # Zipf, s = 1
        self.cdf = np.cumsum(weights) / weights.sum()
        self.topics = rng.integers(1_000, 20_000, (CLUSTERS, TOPIC_WORDS))  # mid-frequency ranks

    def zipf(self, rng, shape) -> np.ndarray:
        return np.minimum(np.searchsorted(self.cdf, rng.random(shape)), VOCABULARY - 1)

    def acl(self, n_docs: int) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(self.seed + 1)

        def pick(values, p):
            return np.asarray(values, dtype=object)[rng.choice(len(values), n_docs, p=p)]

        return {
            "cluster": rng.integers(0, CLUSTERS, n_docs),
            "status": pick(["published", "draft", "archived"], [0.9, 0.05, 0.05]),
            "security_level": pick(["public", "internal", "confidential", "secret"], [0.3, 0.5, 0.15, 0.05]),
            "department": pick(["Engineering", "Finance", "HR", "Legal", "Sales"], None),
            "group": pick(["all-staff", "finance", "hr", "legal"], [0.8, 0.1, 0.05, 0.05]),
            "owner": np.array([f"user{i}@example.com" for i in rng.integers(0, 500, n_docs)], dtype=object),
        }

    def tables(self, n: int) -> tuple[pa.Table, pa.Table]:
        """(documents, chunks) for n chunks, ten per document."""
        n_docs = -(-n // CHUNKS_PER_DOC)
        acl = self.acl(n_docs)
        doc_ids = np.array([f"d{i:07d}" for i in range(n_docs)], dtype=object)
        doc_offsets = np.random.default_rng(self.seed + 2).standard_normal((n_docs, DIM)).astype(np.float32)
        doc_offsets *= 0.6 / np.sqrt(DIM)
        parts = [self._chunk_batch(start, min(n, start + BATCH), acl, doc_ids, doc_offsets) for start in range(0, n, BATCH)]
        chunks = pa.concat_tables(parts)
        documents = _with_nulls(
            {
                "doc_id": doc_ids,
                "source": [f"synthetic/{d}.txt" for d in doc_ids],
                "title": [f"Document {d}" for d in doc_ids],
                "language": ["en"] * n_docs,
                "status": acl["status"],
                "security_level": acl["security_level"],
                "department": acl["department"],
                "access_groups": [[g] for g in acl["group"]],
                "owner": acl["owner"],
                "version": [1] * n_docs,
                "n_chunks": np.bincount(np.arange(n) // CHUNKS_PER_DOC).astype(np.int32),
            },
            s.documents_schema(),
        )
        return documents, chunks

    def _chunk_batch(self, start, stop, acl, doc_ids, doc_offsets) -> pa.Table:
        rng = np.random.default_rng((self.seed, start))
        idx = np.arange(start, stop)
        doc = idx // CHUNKS_PER_DOC
        cluster = acl["cluster"][doc]
        noise = rng.standard_normal((len(idx), DIM)).astype(np.float32) * (0.4 / np.sqrt(DIM))
        vectors = _unit(self.centroids[cluster] + doc_offsets[doc] + noise).astype(np.float32)
        words = self.zipf(rng, (len(idx), WORDS_PER_CHUNK))
        topic_pick = rng.integers(0, TOPIC_WORDS, (len(idx), TOPIC_SHARE))
        words[:, :TOPIC_SHARE] = self.topics[cluster[:, None], topic_pick]
        rng.permuted(words, axis=1, out=words)
        tokens = pa.array(self.vocab).take(pa.array(words.ravel()))
        text = pc.binary_join(pa.ListArray.from_arrays(np.arange(0, len(tokens) + 1, WORDS_PER_CHUNK, dtype=np.int32), tokens), " ")
        columns = {
            "chunk_id": [f"c{i:08d}" for i in idx],
            "doc_id": doc_ids[doc],
            "source": [f"synthetic/{d}.txt" for d in doc_ids[doc]],
            "title": [f"Document {d}" for d in doc_ids[doc]],
            "ordinal": (idx % CHUNKS_PER_DOC).astype(np.int32),
            "page": (idx % CHUNKS_PER_DOC // 3 + 1).astype(np.int32),
            "heading_path": [""] * len(idx),
            "text": text,
            s.SEARCH_TEXT_COLUMN: text,
            "language": ["en"] * len(idx),
            "fingerprint": [f"{i:064x}" for i in idx],
            "status": acl["status"][doc],
            "security_level": acl["security_level"][doc],
            "department": acl["department"][doc],
            "access_groups": [[g] for g in acl["group"][doc]],
            "owner": acl["owner"][doc],
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIM),
        }
        return pa.table(columns, schema=s.chunks_schema(DIM))

    def queries(self, count: int) -> dict[str, np.ndarray]:
        """Query text -> vector near its cluster's centroid (unique texts)."""
        rng = np.random.default_rng(self.seed + 3)
        out: dict[str, np.ndarray] = {}
        while len(out) < count:
            cluster = int(rng.integers(0, CLUSTERS))
            topic = [self.vocab[w] for w in rng.choice(self.topics[cluster], 2, replace=False)]
            common = [self.vocab[w] for w in self.zipf(rng, 40) if w >= 20][:2]
            vector = _unit(self.centroids[cluster] + rng.standard_normal(DIM) * (0.6 / np.sqrt(DIM)))
            out[" ".join(topic + common)] = vector.astype(np.float32)
        return out


class _LookupEncoder:
    """Stands in for the model: query encoding is excluded from every timing."""

    def __init__(self, vectors: dict[str, np.ndarray]):
        self.vectors = vectors

    def encode_query(self, text: str) -> np.ndarray:
        return self.vectors[text]


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _with_nulls(columns: dict, schema: pa.Schema) -> pa.Table:
    n = len(next(iter(columns.values())))
    return pa.table({f.name: columns.get(f.name, pa.nulls(n, f.type)) for f in schema}, schema=schema)


def build(n: int, lake_dir: Path) -> dict:
    """Child process: generate n chunks and stage them through the real pipeline write path."""
    started = time.perf_counter()
    documents, chunks = Corpus().tables(n)
    generated = time.perf_counter()
    quarantine = _with_nulls({"doc_id": []}, s.quarantine_schema())
    manifest = Lake(lake_dir).stage(
        documents, chunks, quarantine, model=MODEL, run_id="bench-scale", ann_policy=AnnPolicy(min_rows=0)
    )
    return {"generate_s": generated - started, "stage_s": time.perf_counter() - generated, "manifest": manifest}


def exact_twin(lake: Lake, manifest: dict) -> dict:
    """The same generation one chunks-table version earlier: every index but the vector one."""
    version = manifest["table_versions"][s.CHUNKS] - 1
    table = lake.db.open_table(s.CHUNKS)
    table.checkout(version)
    indexed = {c for index in table.list_indices() for c in index.columns}
    assert "vector" not in indexed and s.SEARCH_TEXT_COLUMN in indexed, indexed
    return {
        **manifest,
        "table_versions": {**manifest["table_versions"], s.CHUNKS: version},
        "vector_index": {"kind": "exact", "rows": manifest["counts"]["chunks"]},
    }


def _ms(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered) * 1e3, ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))] * 1e3


def timed_search(index: RagIndex, queries: list[str], mode: str, principal: Principal | None = None):
    """(seconds per query, top-10 chunk ids per query); a few untimed warm-up queries first."""
    for q in queries[:5]:
        index.search(q, mode=mode, principal=principal)
    seconds, tops = [], []
    for q in queries:
        started = time.perf_counter()
        hits = index.search(q, mode=mode, principal=principal)
        seconds.append(time.perf_counter() - started)
        tops.append([h.chunk_id for h in hits])
    return seconds, tops


def recall(approx: list[list[str]], exact: list[list[str]]) -> float:
    """Mean recall@10 over the queries with any permitted hit (nan when none has: a tiny corpus)."""
    scores = [len(set(a) & set(e)) / len(e) for a, e in zip(approx, exact) if e]
    return statistics.mean(scores) if scores else float("nan")


def measure(n: int, lake_dir: Path, n_queries: int) -> dict:
    lake = Lake(lake_dir)
    ann_manifest = lake.list_generations()[-1]
    manifests = {"exact": exact_twin(lake, ann_manifest), "ANN": ann_manifest}
    corpus = Corpus()
    vectors = corpus.queries(n_queries)
    queries = list(vectors)
    acl = corpus.acl(-(-n // CHUNKS_PER_DOC))
    result = {"latency": {}, "tops": {}, "warmup_s": {}, "leaked": 0}
    for name, manifest in manifests.items():
        index = RagIndex(lake, manifest, _LookupEncoder(vectors), RefusalPolicy())
        started = time.perf_counter()
        index.search(queries[0], mode="hybrid")  # builds the idf table and background sample once
        result["warmup_s"][name] = time.perf_counter() - started
        for mode in ("vector", "keyword", "hybrid"):
            seconds, tops = timed_search(index, queries, mode)
            result["latency"][name, mode] = _ms(seconds)
            result["tops"][name, mode] = tops
        for who, (principal, may_read) in NARROW.items():
            seconds, tops = timed_search(index, queries, "vector", principal)
            result["latency"][name, who] = _ms(seconds)
            result["tops"][name, who] = tops
            docs = [int(cid[1:]) // CHUNKS_PER_DOC for top in tops for cid in top]
            result["leaked"] += sum(1 for d in docs if not may_read(acl, d) or acl["status"][d] != "published")
    result["recall"] = {who: recall(result["tops"]["ANN", who], result["tops"]["exact", who]) for who in ("vector", *NARROW)}
    result["sweep"] = sweep(lake, ann_manifest, vectors, result["tops"])
    return result


def sweep(lake: Lake, manifest: dict, vectors: dict, exact_tops: dict) -> list[tuple]:
    """Vector arm alone (100 deep) at other (nprobes, refine_factor): recall for all-staff and legal."""
    table = lake.open_published(s.CHUNKS, manifest)
    plan = manifest["vector_index"]
    rows = []
    for nprobes, refine in [(plan["nprobes"], plan["refine_factor"]), *SWEEP]:
        setting = {**plan, "nprobes": nprobes, "refine_factor": refine}
        row = [nprobes, refine]
        for who, principal in (("vector", Principal()), ("legal", NARROW["legal"][0])):
            predicate = search_filter(principal)
            seconds, tops = [], []
            for vector in vectors.values():
                started = time.perf_counter()
                hits = dense_arm(table, vector, predicate, 100, setting)
                seconds.append(time.perf_counter() - started)
                tops.append([h["chunk_id"] for h in hits[:10]])
            row += [recall(tops, exact_tops["exact", who]), *_ms(seconds)]
        rows.append(tuple(row))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--keep", type=Path, help="build the lakes here and keep them (default: a temp folder)")
    parser.add_argument("--build", type=int, help=argparse.SUPPRESS)  # child mode
    parser.add_argument("--lake", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build:
        print(json.dumps(build(args.build, args.lake)))
        return

    work = args.keep or Path(tempfile.mkdtemp(prefix="rag-scale-"))
    builds, measured = {}, {}
    try:
        for n in sorted(int(x) for x in args.sizes.split(",")):
            lake_dir = work / f"lake-{n}"
            shutil.rmtree(lake_dir, ignore_errors=True)
            load_before = os.getloadavg()[0]
            child = subprocess.run(
                [sys.executable, __file__, "--build", str(n), "--lake", str(lake_dir)],
                check=True, capture_output=True, text=True,
            )
            builds[n] = json.loads(child.stdout.strip().splitlines()[-1])
            # sizes ascend, so the children's maximum is this (largest so far) build's peak
            builds[n]["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
            measured[n] = measure(n, lake_dir, args.queries)
            measured[n]["load"] = (load_before, os.getloadavg()[0])
            if not args.keep:
                shutil.rmtree(lake_dir, ignore_errors=True)
            print(f"[{n:,} chunks done]", file=sys.stderr, flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    report(builds, measured, args.queries)


def report(builds: dict, measured: dict, n_queries: int) -> None:
    print(f"\n{n_queries} queries per cell, k=10, arms 100 deep; latency excludes query encoding.\n")
    print("| chunks | generate s | stage s (write + FTS, filter, ANN indexes) | ANN build s | index | partitions | peak RSS MiB | load avg |")
    print("|---|---|---|---|---|---|---|---|")
    for n, b in builds.items():
        v = b["manifest"]["vector_index"]
        load = measured[n]["load"]
        print(
            f"| {n:,} | {b['generate_s']:.1f} | {b['stage_s']:.1f} | {v['build_s']:.1f} | {v['kind']} | "
            f"{v['num_partitions']} | {b['peak_rss_mib']:,.0f} | {load[0]:.1f} → {load[1]:.1f} |"
        )
    print("\n| chunks | vector index | vector p50 / p95 ms | keyword p50 / p95 ms | hybrid p50 / p95 ms | vector, legal only | vector, one owner | first query s |")
    print("|---|---|---|---|---|---|---|---|")
    for n, m in measured.items():
        for name in ("exact", "ANN"):
            cells = [f"{m['latency'][name, mode][0]:.1f} / {m['latency'][name, mode][1]:.1f}" for mode in ("vector", "keyword", "hybrid", *NARROW)]
            print(f"| {n:,} | {name} | " + " | ".join(cells) + f" | {m['warmup_s'][name]:.1f} |")
    print("\n| chunks | recall@10 ANN vs exact: all-staff (~58% visible) | legal only (~4.5%) | one owner (~0.2%) | rows outside the ACL |")
    print("|---|---|---|---|---|")
    for n, m in measured.items():
        r = m["recall"]
        print(f"| {n:,} | {r['vector']:.3f} | {r['legal']:.3f} | {r['owner']:.3f} | {m['leaked']} |")
    print("\n| chunks | nprobes | refine_factor | all-staff recall@10 | p50 / p95 ms | legal-only recall@10 | p50 / p95 ms |")
    print("|---|---|---|---|---|---|---|")
    for n, m in measured.items():
        for i, (nprobes, refine, r, p50, p95, r_legal, p50_legal, p95_legal) in enumerate(m["sweep"]):
            mark = " (policy)" if i == 0 else ""
            print(
                f"| {n:,} | {nprobes}{mark} | {refine} | {r:.3f} | {p50:.1f} / {p95:.1f} | "
                f"{r_legal:.3f} | {p50_legal:.1f} / {p95_legal:.1f} |"
            )


if __name__ == "__main__":
    main()
