"""The lake: LanceDB tables on local disk (or object storage) plus a published-index manifest.

Readers never look at "the latest" table version: they open the versions recorded in
``index_manifest.json``. A run writes new table versions first and swaps the manifest last
(atomic rename), so a run that dies half way leaves the previous index fully readable.
"""

from __future__ import annotations

import json
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("LANCE_LOG", "error")  # lance's Rust logger warns on every table creation

import lancedb  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
from lancedb.index import FTS  # noqa: E402

from rag_pipeline.store import schema as s

MANIFEST_NAME = "index_manifest.json"
PUBLISHED_TABLES = (s.DOCUMENTS, s.CHUNKS, s.QUARANTINE)


class IndexNotFoundError(FileNotFoundError):
    """No published index in this lake folder yet."""


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Lake:
    def __init__(self, lake_dir: Path):
        self.lake_dir = Path(lake_dir)
        self._db = None

    @property
    def db(self):
        """Connected lazily: opening a lake to read must not create its folder."""
        if self._db is None:
            self.lake_dir.mkdir(parents=True, exist_ok=True)
            self._db = lancedb.connect(str(self.lake_dir))
        return self._db

    # --- embedding cache -------------------------------------------------------------------

    def cached_vectors(self, model_key: str, fingerprints: list[str]) -> dict[str, np.ndarray]:
        """Vectors already computed for these fingerprints by this exact model."""
        if s.EMBEDDING_CACHE not in self._tables() or not fingerprints:
            return {}
        dataset = self.db.open_table(s.EMBEDDING_CACHE).to_lance()
        found: dict[str, np.ndarray] = {}
        unique = sorted(set(fingerprints))
        for start in range(0, len(unique), 1000):
            keys = ", ".join(f"'{model_key}:{fp}'" for fp in unique[start : start + 1000])
            batch = dataset.to_table(columns=["fingerprint", "vector"], filter=f"cache_key IN ({keys})")
            vectors = batch.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False)
            vectors = vectors.reshape(batch.num_rows, -1).astype(np.float32)
            found.update(zip(batch.column("fingerprint").to_pylist(), vectors))
        return found

    def add_to_cache(self, model_key: str, vectors: dict[str, np.ndarray]) -> None:
        if not vectors:
            return
        dimension = len(next(iter(vectors.values())))
        schema = s.embedding_cache_schema(dimension)
        fps = list(vectors)
        table = pa.table(
            {
                "cache_key": [f"{model_key}:{fp}" for fp in fps],
                "model_key": [model_key] * len(fps),
                "fingerprint": fps,
                "vector": [np.asarray(vectors[fp], dtype=np.float32) for fp in fps],
            },
            schema=schema,
        )
        if s.EMBEDDING_CACHE not in self._tables():
            self.db.create_table(s.EMBEDDING_CACHE, data=table, schema=schema)
            return
        (
            self.db.open_table(s.EMBEDDING_CACHE)
            .merge_insert("cache_key")
            .when_not_matched_insert_all()
            .execute(table)
        )

    # --- publication -----------------------------------------------------------------------

    def publish(
        self,
        documents: pa.Table,
        chunks: pa.Table,
        quarantine: pa.Table,
        *,
        model: dict,
        run_id: str | None,
    ) -> dict:
        """Write all published tables as new versions, index them, then swap the manifest."""
        versions = {}
        for name, table in ((s.DOCUMENTS, documents), (s.CHUNKS, chunks), (s.QUARANTINE, quarantine)):
            written = self.db.create_table(name, data=table, schema=table.schema, mode="overwrite")
            if name == s.CHUNKS and table.num_rows:
                written.create_index(
                    s.SEARCH_TEXT_COLUMN,
                    config=FTS(
                        base_tokenizer="whitespace",  # text is pre-tokenized by rag_pipeline.text
                        lower_case=True,
                        stem=False,
                        remove_stop_words=False,
                        ascii_folding=False,
                        with_position=False,
                    ),
                    replace=True,
                )
            versions[name] = written.version
        previous = self.read_manifest(missing_ok=True)
        manifest = {
            "generation": (previous or {}).get("generation", 0) + 1,
            "published_at": utc_now(),
            "run_id": run_id,
            "model": model,
            "table_versions": versions,
            "counts": {
                "documents": documents.num_rows,
                "chunks": chunks.num_rows,
                "quarantined": quarantine.num_rows,
            },
        }
        self._write_manifest(manifest)
        return manifest

    def read_manifest(self, missing_ok: bool = False) -> dict | None:
        path = self.lake_dir / MANIFEST_NAME
        if not path.exists():
            if missing_ok:
                return None
            raise IndexNotFoundError(
                f"no published index in {self.lake_dir} — run `rag index` (or the Dagster "
                "index_job) first, or point --lake / RAG_LAKE_DIR at an existing lake"
            )
        return json.loads(path.read_text(encoding="utf-8"))

    def open_published(self, name: str, manifest: dict | None = None):
        """The table at the version the manifest published, immune to concurrent writers."""
        manifest = manifest or self.read_manifest()
        table = self.db.open_table(name)
        table.checkout(manifest["table_versions"][name])
        return table

    def published_arrow(self, name: str, manifest: dict | None = None) -> pa.Table:
        return self.open_published(name, manifest).to_arrow()

    def _write_manifest(self, manifest: dict) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.lake_dir, prefix=".manifest-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(manifest, fh, indent=2, ensure_ascii=False)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.lake_dir / MANIFEST_NAME)

    def _tables(self) -> set[str]:
        result = self.db.list_tables()
        names = getattr(result, "tables", result)
        return set(names)
