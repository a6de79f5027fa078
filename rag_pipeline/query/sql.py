"""DuckDB over the published LanceDB tables, for analysts who think in SQL.

    con = rag_pipeline.query.sql.connect("data/lake")
    con.sql("SELECT reason, count(*) FROM quarantine GROUP BY reason").pl()

Each view scans the table version the index manifest published (not a newer, unpublished write).
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from rag_pipeline.store.lake import PUBLISHED_TABLES, Lake


def connect(lake_dir: str | Path) -> duckdb.DuckDBPyConnection:
    lake = Lake(Path(lake_dir))
    manifest = lake.read_manifest()
    con = duckdb.connect()
    for name in PUBLISHED_TABLES:
        dataset = lake.open_published(name, manifest).to_lance()  # a pyarrow-compatible dataset
        con.register(name, dataset)
    return con
