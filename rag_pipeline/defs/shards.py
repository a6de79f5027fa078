"""Hash shards of the document id: the partitions of the per-document stages.

parsed_documents, quarantine, chunks, chunk_fingerprints and embeddings are partitioned by
`sha256(doc_id) mod N`, so a step works one shard at a time (its memory bounded by the
shard), the UI shows each shard's state, and one shard can be materialized again alone.
`raw_documents` (the scan) and the publish side (`lancedb_index` onwards) stay whole.

N comes from ``RAG_SHARDS`` (default 4) when the code location loads: the partition set is
part of the asset graph. Keys name N (``"02of08"``), so after N changes no shard written
under the old N can be mistaken for one of the new set.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping

import dagster as dg
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rag_pipeline.config import env_str
from rag_pipeline.defs.io import release_pages_of

DEFAULT_SHARDS = 4
MAX_SHARDS = 256


def shard_count(environ: Mapping[str, str] | None = None) -> int:
    raw = env_str("RAG_SHARDS", environ=environ).strip() or str(DEFAULT_SHARDS)
    try:
        count = int(raw)
    except ValueError:
        raise ValueError(f"RAG_SHARDS must be a whole number from 1 to {MAX_SHARDS}, got {raw!r}") from None
    if not 1 <= count <= MAX_SHARDS:
        raise ValueError(f"RAG_SHARDS must be a whole number from 1 to {MAX_SHARDS}, got {count}")
    return count


def shard_keys(count: int) -> list[str]:
    width = len(str(count))
    return [f"{i:0{max(width, 2)}d}of{count:0{max(width, 2)}d}" for i in range(count)]


def shard_index(doc_id: str, count: int) -> int:
    """Stable across runs, machines and Python versions (not `hash()`, which is salted)."""
    return int.from_bytes(hashlib.sha256(doc_id.encode("utf-8")).digest()[:8], "big") % count


def shard_of(doc_id: str, keys: list[str]) -> str:
    return keys[shard_index(doc_id, len(keys))]


SHARD_KEYS = shard_keys(shard_count())
SHARDS = dg.StaticPartitionsDefinition(SHARD_KEYS)

# A step holds one shard's parses, chunks and vectors at a time: measured (bench/README.md,
# pipeline at scale) 1.9 GB peak at 2,500 documents a shard. Above twice that, a run says so.
DOCUMENTS_PER_SHARD = 2_500


def shard_advice(documents: int, shards: int) -> str | None:
    """What to set when the shards have grown past what a step should hold at once, else None."""
    per_shard = -(-documents // shards)
    if per_shard <= 2 * DOCUMENTS_PER_SHARD:
        return None
    wanted = min(MAX_SHARDS, -(-documents // DOCUMENTS_PER_SHARD))
    return (f"{per_shard:,} documents a shard: each per-document step holds a shard in memory at once; "
            f"set RAG_SHARDS={wanted} (about {DOCUMENTS_PER_SHARD:,} a shard) to keep its memory flat as the corpus grows")


def all_shards_tags() -> dict[str, str]:
    """Run tags for one run over every shard (each step loops over its shards in turn)."""
    return {
        "dagster/asset_partition_range_start": SHARD_KEYS[0],
        "dagster/asset_partition_range_end": SHARD_KEYS[-1],
    }


def step_shards(context) -> list[str]:
    """The shards this step materializes: one in a single-shard run, all in a whole run."""
    return sorted(context.partition_keys)


# --- what the publish side checks before it combines the shards --------------------------

LINEAGE_KEY = b"rag_shard_scan"


class StaleShardError(RuntimeError):
    """A shard's stage output was built from another scan of the raw folder than the one published."""


def split_by_shard(table: pa.Table, keys: list[str] = SHARD_KEYS) -> dict[str, pa.Table]:
    """Rows of a table with a doc_id column, by shard (every key present, possibly empty)."""
    return dict(iter_shards(table, keys, keys))


def iter_shards(table: pa.Table, wanted: Iterable[str], keys: list[str] = SHARD_KEYS) -> Iterator[tuple[str, pa.Table]]:
    """The rows of each `wanted` shard in turn, each copied out when it is reached: a step over
    every shard holds one shard's rows, not a copy of the whole table (the scan's 100k rows split
    at once were ~40 MB of a no-op's parse step, bench/README.md)."""
    shard = pa.array([shard_of(d, keys) for d in table.column("doc_id").to_pylist()], pa.string())
    wanted = set(wanted)
    for key in keys:
        if key in wanted:
            yield key, table.filter(pc.equal(shard, key))


def scan_digest(raw_shard: pa.Table) -> str:
    """What a shard's outputs were derived from: its files, contents and sidecar metadata."""
    digest = hashlib.sha256()
    columns = raw_shard.select(["doc_id", "source", "sha256", "metadata", "metadata_error"]).combine_chunks()
    for batch in columns.to_batches():
        digest.update(batch.serialize())
    return digest.hexdigest()


def with_lineage(table: pa.Table, lineage: str) -> pa.Table:
    return table.replace_schema_metadata({LINEAGE_KEY: lineage.encode()})


def lineage(table: pa.Table | pa.Schema) -> str:
    schema = table if isinstance(table, pa.Schema) else table.schema
    return ((schema.metadata or {}).get(LINEAGE_KEY) or b"").decode()


class ShardedTable:
    """Every shard of one asset read as one table, in the scan's document order, without copying.

    The shards stay what the IO manager read (memory-mapped Arrow files); rows are taken a few
    thousand at a time, batch by batch. Arrow's own `take` on a multi-chunk table first
    concatenates every chunk of every column (the corpus's text, every vector, in memory);
    this never does.
    """

    def __init__(self, table: pa.Table, order: np.ndarray | None = None):
        self.table = table  # the shards concatenated, in shard order
        self.order = order  # row numbers of `table` in scan order; None: the rows' own order
        self._batches = table.to_batches()
        self._starts = np.cumsum([0] + [b.num_rows for b in self._batches])

    @property
    def num_rows(self) -> int:
        return self.table.num_rows

    @property
    def schema(self) -> pa.Schema:
        return self.table.schema

    def take(self, rows: np.ndarray) -> pa.Table:
        """Rows of `table` by number, in the order asked, touching only the batches they sit in;
        each batch's mapped pages are let go once its rows are copied out (io.release_pages_of)."""
        rows = np.asarray(rows, dtype=np.int64)
        if not len(rows):
            return self.table.schema.empty_table()
        batch = np.searchsorted(self._starts, rows, side="right") - 1
        grouped = np.argsort(batch, kind="stable")
        parts = []
        for b in np.unique(batch):
            parts.append(self._batches[b].take(pa.array(rows[batch == b] - self._starts[b])))
            release_pages_of(self._batches[b])
        table = pa.Table.from_batches(parts, self.table.schema).combine_chunks()
        return table.take(pa.array(np.argsort(grouped)))  # back from batch order to the order asked

    def rows(self, start: int, length: int) -> np.ndarray:
        """Row numbers of `table` at positions start .. start+length in scan order."""
        if self.order is None:
            return np.arange(start, min(start + length, self.num_rows), dtype=np.int64)
        return self.order[start: start + length]

    def slice(self, start: int, length: int) -> pa.Table:
        """Rows start .. start+length in scan order."""
        if self.order is None:
            return self.table.slice(start, length)
        return self.take(self.rows(start, length))

    def read_all(self) -> pa.Table:
        return self.slice(0, self.num_rows).combine_chunks()


def gather_shards(raw_documents: pa.Table, **assets: dict[str, pa.Table]) -> dict[str, ShardedTable]:
    """Every shard of every asset, checked against this scan and combined in scan order.

    A shard materialized from an older scan (a file changed or deleted since, and only other
    shards re-run) would publish stale text, so it stops the publish naming the shard. Rows
    come out in the scan's document order whatever N is, so the generation (and its content
    signature) does not depend on the shard count.
    """
    expected = {key: scan_digest(table) for key, table in split_by_shard(raw_documents).items()}
    stale = sorted((key, name) for name, shards in assets.items() for key, table in shards.items() if lineage(table) != expected.get(key))
    if stale:
        listed = ", ".join(f"{name}[{key}]" for key, name in stale[:8]) + (" …" if len(stale) > 8 else "")
        raise StaleShardError(
            f"{len(stale)} shard outputs were built from another scan of the raw folder than this one "
            f"({listed}): materialize those shards again, or run the whole index_job (`rag index`)"
        )
    scan = raw_documents.column("doc_id")
    combined = {}
    for name, shards in assets.items():
        table = pa.concat_tables([shards[key].replace_schema_metadata(None) for key in sorted(shards)])
        order = None
        if "doc_id" in table.column_names:
            position = pc.index_in(table.column("doc_id"), value_set=scan)  # each row's document's place in the scan
            order = pc.sort_indices(position).to_numpy()  # stable: a document's chunks keep their order
        combined[name] = ShardedTable(table, order)
    return combined
