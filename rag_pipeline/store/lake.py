"""The lake: LanceDB tables on local disk plus generation manifests.

Readers never look at "the latest" table version: they open the versions recorded in
``index_manifest.json``. A run writes new table versions and a *staged* generation manifest;
promotion swaps ``index_manifest.json`` last (atomic rename), so a run that dies or fails its
checks half way leaves the previously served index fully readable. LanceDB keeps old table
versions, so rolling back is promoting an older generation's manifest again.
"""

from __future__ import annotations

import errno
import itertools
import json
import os
import re
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rag_pipeline.faults import failpoint
from rag_pipeline.store import schema as s
from rag_pipeline.store.ann import EXACT, AnnPolicy, vector_index_plan
from rag_pipeline.store.keyhash import HashIndex, distinct_hashes, key_hashes, union
from rag_pipeline.store.lock import table_creation_lock
from rag_pipeline.store.predicates import sql_in
from rag_pipeline.store.terms import changed_frequencies, document_frequencies, sum_frequencies

MANIFEST_NAME = "index_manifest.json"  # the served generation
REFUSAL_POLICY_NAME = "refusal_policy.json"  # thresholds fitted by `rag calibrate`, per model
GENERATIONS_DIR = "generations"  # one immutable manifest per staged generation
SCAN_HASHES_NAME = "scan_hashes.arrow"  # the last scan's file stats and hashes (ingest.scan.FileHashes)
PROMOTION_LOG = "promotions.jsonl"  # append-only: which generation was served when
CACHES_PRUNED_NAME = "caches_pruned.json"  # the newest generation and cache versions the last prune left
PUBLISHED_TABLES = (s.DOCUMENTS, s.CHUNKS, s.QUARANTINE)
# The lifecycle/ACL columns every search pre-filters on (query.filters): indexed, the filter costs
# both arms almost nothing (bench/scale.py, 100k chunks: keyword arm p50 18 -> 9 ms)
# (lancedb.index class names: LanceDB is imported only when a table is opened, see lancedb_module)
FILTER_INDEXES = {
    "status": "Bitmap",
    "security_level": "Bitmap",
    "department": "Bitmap",
    "access_groups": "LabelList",
    "owner": "BTree",
}


def lancedb_module():
    """LanceDB, imported on first use: its import costs ~3.4 s on 2 cores (pandas, its namespace
    client's validators), which loading the definitions — what a Dagster code server, the daemon
    and every `dagster` CLI command do first — need not pay (bench/README.md, "CLI start-up")."""
    import lancedb
    import lancedb.index

    return lancedb


def index_config(kind: str, **settings):
    """A lancedb.index configuration by class name ("Bitmap", "FTS", "IvfSq", ...)."""
    return getattr(lancedb_module().index, kind)(**settings)


def fts_config():
    return index_config("FTS", **FTS_SETTINGS)


class IndexNotFoundError(FileNotFoundError):
    """No published index in this lake folder yet."""


class LakeWriteError(OSError):
    """The lake could not be written (disk full, permissions, ...); nothing was promoted."""


class IndexUnreadableError(RuntimeError):
    """A table of a generation cannot be read (files missing or damaged)."""


_WRITE_HINTS = {
    errno.ENOSPC: "the disk is full: free space or point RAG_LAKE_DIR at a larger disk",
    errno.EDQUOT: "the disk quota is used up: free space or point RAG_LAKE_DIR elsewhere",
    errno.EACCES: "this user may not write there: fix the folder's permissions or point RAG_LAKE_DIR elsewhere",
    errno.EPERM: "this user may not write there: fix the folder's permissions or point RAG_LAKE_DIR elsewhere",
    errno.EROFS: "the file system is mounted read-only: point RAG_LAKE_DIR at a writable one",
    errno.EFBIG: "a file-size limit (ulimit -f) stopped the write: raise it for the indexing user",
    errno.ENOTDIR: "a file stands where the lake expects a folder: move it or point RAG_LAKE_DIR elsewhere",
}


FTS_SETTINGS = dict(
    base_tokenizer="whitespace",  # text is pre-tokenized by rag_pipeline.text
    lower_case=True,
    stem=False,
    remove_stop_words=False,
    ascii_folding=False,
    with_position=False,
)
DELETE_BATCH_IDS = 500  # documents per delete predicate when a generation replaces rows
# A generation built from the served one indexes its added rows as a new segment ("delta") of each
# index instead of merging them into the existing one: a merge reads and rewrites the whole index
# (540k 384-d chunks, 1 % of rows replaced: 10.1 s the first night, 2.8 s later ones; a delta
# 0.5 s — bench/README.md, "Index deltas"). A search reads every segment, so an index's deltas are
# merged into one once it has more than this many segments; a whole build
# (defs.assets.REBUILD_AFTER_REPLACED) starts again from one.
INDEX_SEGMENTS_MAX = 8
# Cache compaction merges only fragments smaller than this. With Lance's default (1M rows) a cache
# under a million rows is one fragment, rewritten whole after every run that adds to it (every
# vector of the embedding cache for a 1 % change: bench/README.md, "Cache compaction").
CACHE_FRAGMENT_ROWS = 65_536
# ... and copies their pages as they are when no merged fragment has deleted rows (Lance falls back
# to decoding and re-encoding otherwise): a first build leaves one fragment per shard write, and
# re-encoding them held about the whole cache in memory (+520 MB for the chunk cache of 100k
# documents; copied: +56 MB; bench/README.md, "Cache compaction by page copy").
CACHE_COMPACTION_MODE = "try_binary_copy"
# A fragment holding this much data counts as settled whatever its row count (a chunk-cache row is
# ~6 kB, a vector row 0.2–1.5 kB): compaction leaves it alone until Lance's deletion threshold
# (10 % of its rows) calls for a rewrite. Otherwise a cache under CACHE_FRAGMENT_ROWS rows — all of
# them at 10k documents — is one "small" fragment, merged with each run's new rows and, once
# pruning deleted a few of its rows, decoded and re-encoded whole every night.
CACHE_SETTLED_BYTES = 32 * 2**20
CACHE_DELETED_SHARE = 0.1  # Lance's default materialize_deletions_threshold


TERM_PARTS_HELD = 16  # per-batch term counts summed into one once this many are held


def index_added_rows(dataset, max_segments: int = INDEX_SEGMENTS_MAX) -> dict[str, int]:
    """Index the rows added since each index was written, as a new delta segment of it (not merged:
    that rewrites the whole index); an index then holding more than `max_segments` segments has its
    deltas merged into one, its first segment left as written. Returns the segments per index."""
    dataset.optimize.optimize_indices(num_indices_to_merge=0)
    segments = index_segments(dataset)
    for name, count in segments.items():
        if count > max_segments:
            dataset.optimize.optimize_indices(num_indices_to_merge=count - 1, index_names=[name])
    return index_segments(dataset)


def index_segments(dataset) -> dict[str, int]:
    """How many segments each index of a Lance dataset has (one, plus one per unmerged delta)."""
    return dict(Counter(index["name"] for index in dataset.list_indices()))


def settled_fragments(dataset) -> list[int]:
    """Fragments cache compaction leaves as they are: CACHE_SETTLED_BYTES of data or more, and at
    most CACHE_DELETED_SHARE of their rows deleted."""
    return [
        fragment.fragment_id
        for fragment in dataset.get_fragments()
        if sum(f.file_size_bytes or 0 for f in fragment.metadata.files) >= CACHE_SETTLED_BYTES
        and fragment.metadata.num_deletions <= CACHE_DELETED_SHARE * fragment.metadata.physical_rows
    ]


def _counted(tables: Iterable[pa.Table], counted: dict) -> Iterator[pa.RecordBatch]:
    """The batches of `tables`, counting rows and term frequencies into `counted` on the way.

    The per-batch counts are summed every TERM_PARTS_HELD batches, so what is held grows with
    the vocabulary, not with the number of batches (108 of them at 540k chunks).
    """
    for table in tables:
        counted["rows"] += table.num_rows
        if table.num_rows:
            counted["terms"].append(document_frequencies(table.column(s.SEARCH_TEXT_COLUMN)))
            if len(counted["terms"]) >= TERM_PARTS_HELD:
                counted["terms"] = [sum_frequencies(counted["terms"])]
        yield from table.to_batches()


def os_errno(exc: BaseException) -> int | None:
    """The OS error behind an exception, also when LanceDB (Rust) reports it as text."""
    if isinstance(exc, OSError) and exc.errno:
        return exc.errno
    found = re.search(r"os error (\d+)", str(exc))
    return int(found.group(1)) if found else None


def _from_lance(exc: BaseException) -> bool:
    text = f"{type(exc).__module__} {exc}".lower()
    return "lance" in text or "not found" in text or os_errno(exc) is not None


def _disk_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else 0


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Lake:
    def __init__(self, lake_dir: Path):
        self.lake_dir = Path(lake_dir)
        self._db = None
        self._key_columns: dict[str, tuple[int, HashIndex, np.ndarray]] = {}  # name -> (version, key hashes, row ids)

    @property
    def db(self):
        """Connected lazily: opening a lake to read must not create its folder."""
        if self._db is None:
            with self.writing("create the lake folder"):
                self.lake_dir.mkdir(parents=True, exist_ok=True)
            self._db = lancedb_module().connect(str(self.lake_dir))
        return self._db

    @contextmanager
    def writing(self, what: str) -> Iterator[None]:
        """Turn a failed write into one actionable error that says what still serves."""
        try:
            yield
        except LakeWriteError:
            raise
        except (OSError, RuntimeError) as exc:
            hint = _WRITE_HINTS.get(os_errno(exc) or 0, "")
            try:
                served = self.read_manifest(missing_ok=True)
            except (OSError, ValueError):
                served = None
            still = f"generation {served['generation']} keeps serving" if served else "no generation was served yet"
            cause = str(exc).splitlines()[0][:300]
            raise LakeWriteError(
                f"cannot {what} in the lake {self.lake_dir}: {cause}" + (f" — {hint}" if hint else "") + f". Nothing was promoted: {still}."
            ) from exc

    @contextmanager
    def reading(self, name: str, manifest: dict) -> Iterator[None]:
        """Turn an unreadable table of a generation into one actionable error."""
        try:
            yield
        except (OSError, RuntimeError, ValueError) as exc:
            if isinstance(exc, IndexUnreadableError) or not _from_lance(exc):
                raise
            raise IndexUnreadableError(
                f"table {name} of generation {manifest['generation']} in {self.lake_dir} cannot be read "
                f"({str(exc).splitlines()[0][:300].rstrip('.')}). Serve the previous generation with `rag generations rollback`, "
                "or run `rag index` to write a new generation from the caches"
            ) from exc

    # --- embedding cache -------------------------------------------------------------------

    def cached_vectors(self, model_key: str, fingerprints: list[str]) -> dict[str, np.ndarray]:
        """Vectors already computed for these fingerprints by this exact model."""
        found = self._lookup(s.embedding_cache_table(model_key), fingerprints, ["cache_key", "vector"])
        if found.num_rows == 0:
            return {}
        vectors = found.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False)
        vectors = vectors.reshape(found.num_rows, -1).astype(np.float32)
        return dict(zip(found.column("cache_key").to_pylist(), vectors))

    def add_to_cache(self, model_key: str, vectors: dict[str, np.ndarray]) -> None:
        if not vectors:
            return
        dimension = len(next(iter(vectors.values())))
        fps = list(vectors)
        table = pa.table(
            {"cache_key": fps, "vector": [np.asarray(vectors[fp], dtype=np.float32) for fp in fps]},
            schema=s.embedding_cache_schema(dimension),
        )
        self._insert_new(s.embedding_cache_table(model_key), table)

    def cached_parses(self, keys: list[str]) -> dict[str, str]:
        """Parse outcomes (JSON) already computed for these file-content keys."""
        found = self._lookup(s.PARSE_CACHE, keys, ["cache_key", "outcome"])
        return dict(zip(found.column("cache_key").to_pylist(), found.column("outcome").to_pylist()))

    def add_parses(self, outcomes: dict[str, str]) -> None:
        if outcomes:
            table = pa.table({"cache_key": list(outcomes), "outcome": list(outcomes.values())}, schema=s.parse_cache_schema())
            self._insert_new(s.PARSE_CACHE, table)

    def cached_chunks(self, keys: list[str]) -> pa.Table:
        """Chunk rows (store.schema.chunk_cache_schema) already computed for these document keys."""
        found = self._lookup(s.CHUNK_CACHE, keys, s.chunk_cache_schema().names)
        return found if found.num_rows else s.chunk_cache_schema().empty_table()

    def add_chunks(self, rows: pa.Table) -> None:
        if rows.num_rows:
            self._insert_new(s.CHUNK_CACHE, rows)

    def cached_parse_keys(self, keys: list[str]) -> set[str]:
        return self._present(s.PARSE_CACHE, keys)

    def cached_chunk_keys(self, keys: list[str]) -> set[str]:
        return self._present(s.CHUNK_CACHE, keys)

    def count_uncached_vectors(self, model_key: str, fingerprints: Iterable[pa.ChunkedArray | pa.Array]) -> tuple[int, int]:
        """(distinct fingerprints, how many of them this model's cache lacks), by 64-bit hashes
        (store.keyhash): no Python object, nor an Arrow hash table, per fingerprint."""
        wanted = distinct_hashes(fingerprints)
        name = s.embedding_cache_table(model_key)
        if name not in self._tables() or not len(wanted):
            return len(wanted), len(wanted)
        stored, _ = self._key_column(name, self.db.open_table(name).to_lance())
        return len(wanted), len(wanted) - int(stored.contains(wanted).sum())

    def _present(self, name: str, keys: list[str]) -> set[str]:
        """Which keys a cache table holds, by their hashes (to size a step's work up front: a key
        taken for present by a hash collision is still computed when `_lookup`, which is exact,
        does not find it)."""
        if name not in self._tables() or not keys:
            return set()
        stored, _ = self._key_column(name, self.db.open_table(name).to_lance())
        wanted = list(set(keys))
        return {key for key, held in zip(wanted, stored.contains(key_hashes(wanted))) if held}

    def _lookup(self, name: str, keys: list[str], columns: list[str]) -> pa.Table:
        """Rows of a content-addressed cache table whose cache_key is among keys.

        The rows whose key hash matches are taken by row id, then their keys are compared (a hash
        collision is dropped there). A `cache_key IN (...)` filter per 1,000 keys scanned the whole
        table once per batch (quadratic in the corpus), and Lance's take by row *offset* maps
        offsets through each fragment's deletion file — after housekeeping pruned 1 % of a cache it
        took 1.7–4.5 s per 2,500 rows at 100k documents against 0.03 s by row id (bench/README.md,
        "Cache look-ups by row id"). Rows come back in table order, as before.
        """
        if name not in self._tables() or not keys:
            return pa.table({c: [] for c in columns})
        dataset = self.db.open_table(name).to_lance()
        stored, row_ids = self._key_column(name, dataset)
        wanted = pa.array(list(set(keys)), pa.string())
        rows = stored.positions(key_hashes(wanted))
        fetched = dataset._take_rows(row_ids[rows].tolist(), columns=list(dict.fromkeys(["cache_key", *columns])))
        exact = pc.is_in(fetched.column("cache_key"), value_set=wanted)
        fetched = fetched.filter(exact)  # a key whose hash matched another's is dropped here
        found = fetched.column("cache_key")
        if pc.count_distinct(found).as_py() < len(found):  # see _insert_new: one row per key
            first = pa.table({"key": found, "at": np.arange(len(found))}).group_by("key", use_threads=False).aggregate([("at", "min")])
            fetched = fetched.take(first.column("at_min").sort())
        return fetched.select(columns)

    def _key_column(self, name: str, dataset) -> tuple[HashIndex, np.ndarray]:
        """The table's key hashes (sorted for look-ups) and row ids at the dataset's version, read
        once per version (a step looks up each of its shards in turn, which at 100k documents read
        the embedding cache's 540k keys 40 times a step: bench/cache_lookup.py) and batch by batch:
        24 bytes a row are held, not the keys. Row ids name rows of that version only."""
        held = self._key_columns.get(name)
        if held is None or held[0] != dataset.version:
            hashes, row_ids = [], []
            for batch in dataset.to_batches(columns=["cache_key"], with_row_id=True):
                hashes.append(key_hashes(batch.column("cache_key")))
                row_ids.append(batch.column("_rowid").to_numpy())
            held = (dataset.version, HashIndex(np.concatenate(hashes) if hashes else np.zeros(0, np.uint64), presorted=False),
                    np.concatenate(row_ids) if row_ids else np.zeros(0, np.uint64))
            self._key_columns[name] = held
        return held[1], held[2]

    def _insert_new(self, name: str, table: pa.Table) -> None:
        """Insert rows whose cache_key is new; an existing key is never rewritten (content-addressed).

        Shard steps insert from several processes at once. Lance retries the concurrent commits,
        but two processes inserting the same new key (identical files or chunk texts in two
        shards) may both add it: `_lookup` reads one row per key, and the rows are equal.
        """
        with self.writing(f"add {table.num_rows} rows to {name}"):
            self._cache_table(name, table.schema).merge_insert("cache_key").when_not_matched_insert_all().execute(table)

    def _cache_table(self, name: str, schema: pa.Schema):
        """The cache table, created when absent: creating and opening an absent table happen under
        the lake's table-creation lock (shard processes do both at once; see store.lock)."""
        if name in self._tables():
            try:
                return self.db.open_table(name)
            except ValueError as exc:  # its folder exists, its first version not yet: a creator is at work
                _raise_unless_not_found(exc)
        with table_creation_lock(self.lake_dir):
            if name in self._tables():
                try:
                    return self.db.open_table(name)
                except ValueError as exc:  # no creator is at work now: a folder a crashed creator left
                    _raise_unless_not_found(exc)
                    return self.db.create_table(name, schema=schema, mode="overwrite")
            return self.db.create_table(name, schema=schema)

    def stage(
        self,
        documents: pa.Table,
        chunks: pa.Table | Iterable[pa.Table],
        quarantine: pa.Table,
        *,
        model: dict,
        run_id: str | None,
        stats: dict | None = None,
        ann_policy: AnnPolicy = AnnPolicy(),
        content_signature: str | None = None,
        extra: dict | None = None,
    ) -> dict:
        """Write the tables as new versions and record them as a new, not yet served, generation.

        `chunks` may come as batches (tables of the chunks schema, in row order): they are
        streamed into the table one at a time, so no caller needs the whole generation's rows in
        memory at once; the term statistics are counted per batch and summed.
        """
        with self.writing("stage a new generation"):
            versions = {s.DOCUMENTS: self._overwrite(s.DOCUMENTS, documents)}
            failpoint("lancedb_write")
            counted = {"rows": 0, "terms": []}
            batches = iter([chunks] if isinstance(chunks, pa.Table) else chunks)
            first = next(batches, None)
            schema = first.schema if first is not None else s.chunks_schema(model["dimension"])
            written = self.db.create_table(
                s.CHUNKS,
                data=pa.RecordBatchReader.from_batches(schema, _counted(itertools.chain([first] if first is not None else [], batches), counted)),
                schema=schema,
                mode="overwrite",
            )
            n_chunks = counted["rows"]
            vector_index = {"kind": EXACT, "rows": n_chunks}
            if n_chunks:
                written.create_index(s.SEARCH_TEXT_COLUMN, config=fts_config(), replace=True)
                for column, kind in FILTER_INDEXES.items():
                    written.create_index(column, config=index_config(kind), replace=True)
                vector_index = self._index_vectors(written, n_chunks, ann_policy)
            versions[s.CHUNKS] = written.version
            return self._record_generation(
                versions, documents, quarantine, sum_frequencies(counted["terms"]), n_chunks,
                model=model, run_id=run_id, stats=stats, vector_index=vector_index,
                content_signature=content_signature, extra={"build": {"kind": "full", "replaced_rows": 0}, **(extra or {})},
            )

    def stage_changes(
        self,
        base: dict,
        documents: pa.Table,
        chunks: Iterable[pa.Table],
        replaced: set[str],
        quarantine: pa.Table,
        *,
        model: dict,
        run_id: str | None,
        stats: dict | None = None,
        content_signature: str | None = None,
        extra: dict | None = None,
    ) -> dict:
        """Stage a generation as the `base` generation's chunks with the `replaced` documents'
        rows deleted and `chunks` (their new rows) added: a change of 1 % writes 1 % of the rows.

        The chunks table is restored to the base's version first (a later staged generation that
        was never promoted is not built upon); the full-text, filter and vector indexes take the
        new rows in as a delta segment (`index_added_rows`: no retraining), the term statistics are the base's plus
        the added rows' minus the deleted ones'. Older versions stay as they were, so rollback
        and readers of the served generation are untouched. Documents and quarantine are small
        and written whole.
        """
        with self.writing("stage a new generation from the served one"):
            versions = {s.DOCUMENTS: self._overwrite(s.DOCUMENTS, documents)}
            failpoint("lancedb_write")
            table = self.db.open_table(s.CHUNKS)
            table.checkout(base["table_versions"][s.CHUNKS])
            table.restore()
            removed, counted, deleted_rows = [], {"rows": 0, "terms": []}, 0
            ids = sorted(replaced)
            for start in range(0, len(ids), DELETE_BATCH_IDS):
                predicate = sql_in("doc_id", ids[start : start + DELETE_BATCH_IDS])
                gone = table.to_lance().to_table(columns=[s.SEARCH_TEXT_COLUMN], filter=predicate).column(s.SEARCH_TEXT_COLUMN)
                if len(gone):
                    removed.append(document_frequencies(gone))
                    deleted_rows += len(gone)
                    table.delete(predicate)
            batches = _counted(chunks, counted)
            first = next(batches, None)
            if first is not None:
                table.add(pa.RecordBatchReader.from_batches(first.schema, itertools.chain([first], batches)))
            segments = index_added_rows(table.to_lance(), INDEX_SEGMENTS_MAX)
            chunk_table = self.db.open_table(s.CHUNKS)
            versions[s.CHUNKS] = chunk_table.version
            n_chunks = chunk_table.count_rows()
            base_terms = self.open_published(s.TERM_STATS, base).to_arrow() if s.TERM_STATS in base["table_versions"] else None
            terms = changed_frequencies(base_terms, counted["terms"], removed)
            previous_build = base.get("build") or {}
            return self._record_generation(
                versions, documents, quarantine, terms, n_chunks,
                model=model, run_id=run_id, stats=stats,
                vector_index={**base["vector_index"], "rows": n_chunks},
                content_signature=content_signature,
                extra={
                    "build": {
                        "kind": "changes",
                        "base_generation": base["generation"],
                        "documents_replaced": len(ids),
                        "rows_added": counted["rows"],
                        "rows_deleted": deleted_rows,
                        # rows replaced since the last full build: the full-text index's BM25
                        # statistics still count deleted rows until one (see REBUILD_AFTER_REPLACED)
                        "replaced_rows": int(previous_build.get("replaced_rows", 0)) + deleted_rows + counted["rows"],
                        "index_segments": max(segments.values(), default=0),  # what each search reads, at most
                    },
                    **(extra or {}),
                },
            )

    def _overwrite(self, name: str, table: pa.Table) -> int:
        return self.db.create_table(name, data=table, schema=table.schema, mode="overwrite").version

    def _record_generation(
        self, versions, documents, quarantine, terms, n_chunks, *, model, run_id, stats, vector_index, content_signature, extra
    ) -> dict:
        """Write quarantine and term statistics, then the generation's manifest (not yet served)."""
        versions[s.QUARANTINE] = self._overwrite(s.QUARANTINE, quarantine)
        written = self.db.create_table(s.TERM_STATS, data=terms, schema=terms.schema, mode="overwrite")
        if terms.num_rows:
            written.create_index("term", config=index_config("BTree"), replace=True)
        versions[s.TERM_STATS] = written.version
        existing = [g["generation"] for g in self.list_generations()]
        manifest = {
            "generation": max(existing, default=0) + 1,
            "staged_at": utc_now(),
            "run_id": run_id,
            "model": model,
            "table_versions": versions,
            "counts": {"documents": documents.num_rows, "chunks": n_chunks, "quarantined": quarantine.num_rows},
            "vector_index": vector_index,  # how readers search the vectors (store.ann)
            "stats": stats or {},
            **extra,
        }
        if content_signature:
            manifest["content_signature"] = content_signature
        self._write_json(self._generation_path(manifest["generation"]), manifest)
        return manifest

    @staticmethod
    def _index_vectors(table, n_rows: int, policy: AnnPolicy) -> dict:
        """Build the ANN index the policy asks for (none below its threshold); the plan, timed."""
        plan = vector_index_plan(n_rows, policy)
        if plan["kind"] == EXACT:
            return plan
        started = time.perf_counter()
        table.create_index(
            "vector", config=index_config("IvfSq", distance_type=plan["metric"], num_partitions=plan["num_partitions"]), replace=True
        )
        return {**plan, "build_s": round(time.perf_counter() - started, 2)}

    def promote(self, generation: int) -> dict:
        """Make a staged (or older) generation the one queries read: one atomic file swap."""
        path = self._generation_path(generation)
        if not path.exists():
            known = [g["generation"] for g in self.list_generations()]
            raise ValueError(f"no generation {generation} in {self.lake_dir}; known: {known}")
        manifest = {**json.loads(path.read_text(encoding="utf-8")), "promoted_at": utc_now()}
        self.repair_promotion_log()
        failpoint("promote")
        with self.writing(f"promote generation {generation}"):
            self._write_json(self.lake_dir / MANIFEST_NAME, manifest)
        failpoint("promote_log")
        self._log_promotion(generation, manifest["promoted_at"])
        return manifest

    def repair_promotion_log(self) -> None:
        """A crash between the manifest swap and the log append lost the served generation's
        entry: restore it, so rollback walks back through every generation that served."""
        served = self.read_manifest(missing_ok=True)
        history = self.promotion_history()
        if served and (not history or history[-1] != served["generation"]):
            self._log_promotion(served["generation"], served.get("promoted_at", utc_now()))

    def _log_promotion(self, generation: int, at: str) -> None:
        with (self.lake_dir / PROMOTION_LOG).open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"generation": generation, "at": at}) + "\n")

    def rollback(self) -> dict:
        """Re-promote the generation that was served before the current one."""
        history = self.promotion_history()
        served = self.read_manifest(missing_ok=True)  # the truth, should the log lag behind it
        current = served["generation"] if served else (history[-1] if history else None)
        kept = {g["generation"] for g in self.list_generations()}  # housekeeping may have pruned some
        previous = next((g for g in reversed(history) if g != current and g in kept), None)
        if previous is None:
            raise ValueError("nothing to roll back to: only one generation has ever been served")
        return self.promote(previous)

    def promotion_history(self) -> list[int]:
        path = self.lake_dir / PROMOTION_LOG
        if not path.exists():
            return []
        return [json.loads(line)["generation"] for line in path.read_text(encoding="utf-8").splitlines() if line]

    def list_generations(self) -> list[dict]:
        folder = self.lake_dir / GENERATIONS_DIR
        if not folder.is_dir():
            return []
        current = (self.read_manifest(missing_ok=True) or {}).get("generation")
        generations = []
        for path in sorted(folder.glob("[0-9]*[0-9].json")):  # not the *.eval.json reports
            manifest = json.loads(path.read_text(encoding="utf-8"))
            manifest["current"] = manifest["generation"] == current
            generations.append(manifest)
        return generations

    def prune(self, keep: int, parse_key: Callable[[str, str], str] | None = None) -> dict:
        """Drop generations, table versions and staging folders nothing can serve any more.

        Kept: the served generation, the `keep` generations served before it (rollback walks
        back through them), and the newest staged one (it may await an explicit promote).
        LanceDB versions not recorded by a kept generation are deleted; the cache tables are
        compacted and keep only their latest version. With `parse_key` ((sha256, source) -> the
        parse cache key), cache entries the newest generation was not built from are deleted
        first (`_prune_caches`). Caller holds the writer lock.
        """
        if keep < 1:
            raise ValueError(f"keep must be at least 1 (rollback needs a previous generation), got {keep}")
        before = _disk_bytes(self.lake_dir)
        generations = {g["generation"]: g for g in self.list_generations()}
        served = self.read_manifest(missing_ok=True)
        kept = {served["generation"]} if served else set()
        previous = []
        for g in reversed(self.promotion_history()):
            if g in generations and g not in kept and g not in previous and len(previous) < keep:
                previous.append(g)
        kept |= set(previous)
        if generations:
            kept.add(max(generations))
        removed = sorted(set(generations) - kept)
        for g in removed:
            path = self._generation_path(g)
            path.with_suffix(".eval.json").unlink(missing_ok=True)
            path.unlink(missing_ok=True)
        versions_removed = 0
        # Pruning the caches reads every key of the newest generation and of each cache (a no-op's
        # largest cost at 100k documents). When neither has changed since the last prune, that
        # prune's result stands: skipping it is exact, not a guess.
        caches_state = self._caches_state(max(generations) if generations else None)
        caches_unchanged = caches_state == self._read_json(self.lake_dir / CACHES_PRUNED_NAME)
        cache_rows_removed = (
            self._prune_caches(generations[max(generations)], parse_key) if generations and parse_key and not caches_unchanged else {}
        )
        with self.writing("remove old table versions"):
            tables = self._tables()
            for name in (*PUBLISHED_TABLES, s.TERM_STATS):
                if name not in tables:
                    continue
                needed = {generations[g]["table_versions"].get(name) for g in kept if g in generations}
                dataset = self.db.open_table(name).to_lance()
                drop = [v["version"] for v in dataset.versions() if v["version"] not in needed and v["version"] != dataset.version]
                if drop:
                    dataset.cleanup_old_versions(versions=drop, error_if_tagged_old_versions=False)
                    versions_removed += len(drop)
            for name in [] if caches_unchanged else sorted(caches_state["versions"]):
                dataset = self.db.open_table(name).to_lance()
                dataset.optimize.compact_files(
                    target_rows_per_fragment=CACHE_FRAGMENT_ROWS,
                    compaction_mode=CACHE_COMPACTION_MODE,
                    materialize_deletions_threshold=CACHE_DELETED_SHARE,
                    excluded_fragment_ids=settled_fragments(dataset),
                )
                dataset = self.db.open_table(name).to_lance()
                drop = [v["version"] for v in dataset.versions() if v["version"] != dataset.version]
                if drop:
                    dataset.cleanup_old_versions(versions=drop, error_if_tagged_old_versions=False)
                    versions_removed += len(drop)
            if parse_key and not caches_unchanged:
                self._write_json(self.lake_dir / CACHES_PRUNED_NAME, self._caches_state(caches_state["generation"]))
            staging_removed = self._prune_staging()
        return {
            "generations_kept": sorted(kept),
            "generations_removed": len(removed),
            "table_versions_removed": versions_removed,
            "staging_runs_removed": staging_removed,
            "cache_rows_removed": cache_rows_removed,
            "caches": "unchanged since the last housekeeping" if caches_unchanged else "pruned and compacted",
            "lake_bytes_before": before,
            "lake_bytes_after": _disk_bytes(self.lake_dir),
        }

    def _caches_state(self, newest_generation: int | None) -> dict:
        """What a cache prune depends on: the newest generation and each cache table's version."""
        names = sorted(t for t in self._tables() if t in (s.PARSE_CACHE, s.CHUNK_CACHE) or t.startswith("embedding_cache_"))
        versions = {}
        for name in names:  # a version number and when it was written: a table made anew restarts its numbers
            dataset = self.db.open_table(name).to_lance()
            written = next((str(v["timestamp"]) for v in dataset.versions() if v["version"] == dataset.version), None)
            versions[name] = [dataset.version, written]
        return {"generation": newest_generation, "versions": versions}

    @staticmethod
    def _read_json(path: Path) -> dict | None:
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def _prune_caches(self, newest: dict, parse_key: Callable[[str, str], str]) -> dict[str, int]:
        """Delete cache entries the newest generation was not built from: the parses and chunkings of
        file contents no longer in the folder, the vectors of chunk texts no longer indexed.

        Caches are content-addressed, so a wrong guess costs a re-parse or re-embedding, never a
        wrong answer; without this they grow with every changed file (bench/disk_growth.py).
        Kept: the parse of every document and quarantined file of the newest generation, every
        chunking all of whose chunk ids it indexes, the vectors of its chunk fingerprints (its
        model's cache only: another model's vectors serve a switch back).
        """
        parse_keys, chunk_ids, fingerprints = [], [], []
        for name in (s.DOCUMENTS, s.QUARANTINE):
            for batch in self.open_published(name, newest).to_lance().to_batches(columns=["sha256", "source"]):
                pairs = zip(batch.column("sha256").to_pylist(), batch.column("source").to_pylist())
                parse_keys.append(key_hashes([parse_key(sha, source) for sha, source in pairs if sha]))
        for batch in self.open_published(s.CHUNKS, newest).to_lance().to_batches(columns=["chunk_id", "fingerprint"]):
            chunk_ids.append(key_hashes(batch.column("chunk_id")))
            fingerprints.append(key_hashes(batch.column("fingerprint")))
        tables = self._tables()
        removed = {}
        if s.PARSE_CACHE in tables:
            removed[s.PARSE_CACHE] = self._delete_keys(s.PARSE_CACHE, self._keys_not_in(s.PARSE_CACHE, union(parse_keys)))
        if s.CHUNK_CACHE in tables:
            removed[s.CHUNK_CACHE] = self._delete_keys(s.CHUNK_CACHE, self._keys_not_in(s.CHUNK_CACHE, union(chunk_ids), "chunk_id"))
        vectors = s.embedding_cache_table(newest["model"]["key"])
        if vectors in tables:
            removed[vectors] = self._delete_keys(vectors, self._keys_not_in(vectors, union(fingerprints)))
        return removed

    def _keys_not_in(self, name: str, used: np.ndarray, column: str = "cache_key") -> list[str]:
        """The cache_keys of a cache table's rows whose `column` — a key, or a list of keys (a
        chunking's chunk ids) — holds a key whose hash is not among the sorted `used` hashes, read a
        record batch at a time. A key whose hash collides with a used one counts as used (a stale
        row kept, never a lost one). The key columns read whole, with Arrow hash tables over them,
        were the largest allocation of a 1 %-change run's housekeeping at 100k documents."""
        index, unused = HashIndex(used), []
        for batch in self.db.open_table(name).to_lance().to_batches(columns=list(dict.fromkeys(["cache_key", column]))):
            values = batch.column(column)
            if pa.types.is_list(values.type):
                outside = ~index.contains(key_hashes(pc.list_flatten(values)))
                rows = np.unique(pc.list_parent_indices(values).to_numpy()[outside])
            else:
                rows = np.flatnonzero(~index.contains(key_hashes(values)))
            unused.extend(batch.column("cache_key").take(pa.array(rows, pa.int64())).to_pylist())
        return unused

    def _delete_keys(self, name: str, keys: list[str], batch: int = 500) -> int:
        with self.writing(f"delete {len(keys)} unused rows from {name}"):
            table = self.db.open_table(name)
            for start in range(0, len(keys), batch):
                table.delete(sql_in("cache_key", keys[start : start + batch]))
        return len(keys)

    def _prune_staging(self, keep_runs: int = 1) -> int:
        """Remove stage outputs of old runs, except what a run on this lake may still read.

        Kept: the newest run (housekeeping is its last step) and every run a `latest` pointer
        names (assets it did not re-materialize are read from there). An older run's outputs
        served only a re-execution of that run, which a newer successful run supersedes; they
        were half the lake after 30 nightly runs (bench/disk_growth.py).
        """
        root = self.lake_dir / "staging"
        runs = root / "runs"
        if not runs.is_dir():
            return 0
        referenced = {json.loads(p.read_text(encoding="utf-8"))["run_id"] for p in (root / "latest").rglob("*.json")}
        by_age = sorted(runs.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True)
        removed = 0
        for path in by_age[keep_runs:]:
            if path.name not in referenced:
                shutil.rmtree(path, ignore_errors=True)
                removed += 1
        return removed

    def publish(self, documents: pa.Table, chunks: pa.Table, quarantine: pa.Table, *, model: dict, run_id: str | None) -> dict:
        """Stage and promote at once (tests and tools that need no quality gate in between)."""
        staged = self.stage(documents, chunks, quarantine, model=model, run_id=run_id)
        return self.promote(staged["generation"])

    def read_manifest(self, missing_ok: bool = False) -> dict | None:
        """The served generation's manifest."""
        path = self.lake_dir / MANIFEST_NAME
        if not path.exists():
            if missing_ok:
                return None
            raise IndexNotFoundError(
                f"no published index in {self.lake_dir} — run `rag index` (or the Dagster "
                "index_job) first, or point --lake / RAG_LAKE_DIR at an existing lake"
            )
        return json.loads(path.read_text(encoding="utf-8"))

    def read_refusal_policy(self, model_key: str) -> dict | None:
        """The calibrated thresholds, if they were fitted for this model (else None)."""
        path = self.lake_dir / REFUSAL_POLICY_NAME
        if not path.exists():
            return None
        record = json.loads(path.read_text(encoding="utf-8"))
        return record if record.get("model_key") == model_key else None

    def write_refusal_policy(self, record: dict) -> Path:
        path = self.lake_dir / REFUSAL_POLICY_NAME
        self._write_json(path, record)
        return path

    def read_scan_hashes(self) -> pa.Table | None:
        """The last scan's file hashes, or None when there are none or they cannot be read (the
        scan then hashes every file: the table only saves work, it never decides anything)."""
        try:
            with pa.memory_map(str(self.lake_dir / SCAN_HASHES_NAME)) as source:
                return pa.ipc.open_file(source).read_all()
        except (OSError, pa.ArrowInvalid):
            return None

    def write_scan_hashes(self, table: pa.Table) -> None:
        """Write-then-rename (a one-shard run may write it beside another: last one wins, whole)."""
        self.lake_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.lake_dir, prefix=".tmp-", suffix=".arrow")
        with os.fdopen(fd, "wb") as fh, pa.ipc.new_file(fh, table.schema) as writer:
            writer.write_table(table)
        os.replace(tmp, self.lake_dir / SCAN_HASHES_NAME)

    def read_generation_eval(self, generation: int) -> dict | None:
        """The golden-set report of one generation (written by the golden_eval asset)."""
        path = self._generation_path(generation).with_suffix(".eval.json")
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None

    def write_generation_eval(self, generation: int, report: dict) -> None:
        self._write_json(self._generation_path(generation).with_suffix(".eval.json"), report)

    def read_generation(self, generation: int) -> dict:
        return json.loads(self._generation_path(generation).read_text(encoding="utf-8"))

    def open_published(self, name: str, manifest: dict | None = None):
        """The table at the version a manifest recorded, immune to concurrent writers."""
        manifest = manifest or self.read_manifest()
        with self.reading(name, manifest):
            table = self.db.open_table(name)
            table.checkout(manifest["table_versions"][name])
        return table

    def is_readable(self, manifest: dict) -> bool:
        """Whether every data file of a generation's tables can be read (one small column each)."""
        try:
            for name in PUBLISHED_TABLES:
                with self.reading(name, manifest):
                    key = "chunk_id" if name == s.CHUNKS else "doc_id"
                    self.open_published(name, manifest).to_lance().to_table(columns=[key])
        except IndexUnreadableError:
            return False
        return True

    def published_arrow(self, name: str, manifest: dict | None = None, columns: list[str] | None = None) -> pa.Table:
        """A served table (or only `columns` of it: a diff needs one column, not every vector)."""
        manifest = manifest or self.read_manifest()
        with self.reading(name, manifest):
            table = self.open_published(name, manifest)
            return table.to_arrow() if columns is None else table.to_lance().to_table(columns=columns)

    def published_batches(self, name: str, manifest: dict, columns: list[str]) -> Iterator[pa.RecordBatch]:
        """Some columns of a served table, a record batch at a time (a whole-corpus scan held flat)."""
        with self.reading(name, manifest):
            yield from self.open_published(name, manifest).to_lance().to_batches(columns=columns)

    def _generation_path(self, generation: int) -> Path:
        return self.lake_dir / GENERATIONS_DIR / f"{generation:06d}.json"

    def _write_json(self, path: Path, data: dict) -> None:
        """Write-then-rename, so a reader sees the old file or the new one, never half of one."""
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, ensure_ascii=False)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)

    def _tables(self) -> set[str]:
        result = self.db.list_tables()
        names = getattr(result, "tables", result)
        return set(names)


def _raise_unless_not_found(exc: ValueError) -> None:
    """Only "Table ... was not found" (no first version) may be created over; anything else is raised."""
    if "was not found" not in str(exc):
        raise exc
