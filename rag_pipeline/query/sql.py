"""DuckDB over the published LanceDB tables, for analysts who think in SQL — under search's rules.

    con = rag_pipeline.query.sql.connect("data/lake")                      # an ordinary employee
    con = rag_pipeline.query.sql.connect("data/lake", principal=Principal(groups=("finance",), clearance="confidential"))
    con.sql("SELECT status, count(*) FROM documents GROUP BY status").pl()
    ops = rag_pipeline.query.sql.connect("data/lake", admin=True)           # every row, quarantine too
    ops.sql("SELECT reason, count(*) FROM quarantine GROUP BY reason").pl()

Without ``admin``, ``documents`` and ``chunks`` hold exactly the rows the principal may read: the
predicate is ``query.filters.search_filter(principal)`` — the one every retrieval arm runs with —
evaluated by Lance inside the scan each view is defined over, so the rows a view yields are the rows
a search could return to that principal (only ``published`` documents, at or below the clearance,
shared group / department / owner). Nothing unfiltered is registered under any name: plain SQL on
the returned connection (``duckdb_views()``, ``SHOW ALL TABLES``) finds only the filtered views.
The default principal is the CLI's anonymous user (``Principal()``: all-staff, internal clearance).

``quarantine`` (file paths, reasons and parser details of files that never got indexed) has no
permission metadata of its own — the sidecar that would grant access is exactly what was not
indexed — so it is an operator's table: without ``admin`` the view exists with its columns but any
query over it fails with a message pointing at ``admin=True``.

Each view scans the table version the index manifest published (not a newer, unpublished write).
The filtered views read whole rows each query (the filter is fixed in the scan, so DuckDB cannot push
its own column projection into it); ``admin=True`` scans the raw datasets with projection pushdown.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from rag_pipeline.query.filters import Principal, search_filter
from rag_pipeline.store import schema as s
from rag_pipeline.store.lake import PUBLISHED_TABLES, Lake
from rag_pipeline.store.predicates import sql_string

FILTERED_TABLES = (s.DOCUMENTS, s.CHUNKS)  # both carry the lifecycle/ACL columns the predicate reads
ADMIN_ONLY = f"the {s.QUARANTINE} table lists files outside any permission metadata: open it with connect(lake, admin=True)"


def connect(lake_dir: str | Path, principal: Principal | None = None, *, admin: bool = False) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection whose views show `principal` what search would; `admin=True`: the raw tables."""
    if admin and principal is not None:
        raise ValueError("connect(): pass either a principal (filtered views) or admin=True (raw tables), not both")
    lake = Lake(Path(lake_dir))
    manifest = lake.read_manifest()
    con = duckdb.connect()
    if admin:
        for name in PUBLISHED_TABLES:
            con.register(name, lake.open_published(name, manifest).to_lance())  # a pyarrow-compatible dataset
        return con
    predicate = search_filter(principal or Principal())
    for name in FILTERED_TABLES:
        # A scanner built with the predicate: however DuckDB reads it, only readable rows come out.
        con.register(name, lake.open_published(name, manifest).to_lance().scanner(filter=predicate))
    _admin_only_view(con, s.QUARANTINE, s.quarantine_schema())
    return con


def _admin_only_view(con: duckdb.DuckDBPyConnection, name: str, schema) -> None:
    """A view with the table's columns and no rows, whose every query fails with `ADMIN_ONLY`."""
    scratch = duckdb.connect()
    empty = scratch.from_arrow(schema.empty_table())
    columns = ", ".join(f"CAST(NULL AS {t}) AS {_ident(c)}" for c, t in zip(empty.columns, empty.types))
    scratch.close()
    con.execute(f"CREATE TEMP VIEW {_ident(name)} AS SELECT * FROM (SELECT {columns}) WHERE error({sql_string(ADMIN_ONLY)}) IS NULL")


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
