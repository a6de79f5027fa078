"""Analysts' SQL (query.sql.connect) shows a principal exactly what search would, and nothing else.

Runs on the sample corpus indexed once per session by the real Dagster job (`indexed_sample`); the
sample holds a confidential finance memo and a withdrawn leave policy. Who may read what comes from
the independent oracle (rag_pipeline_tests.oracle), applied to the documents table's ACL columns.
"""

from __future__ import annotations

import duckdb
import pytest

from rag_pipeline.query.filters import Principal, search_filter
from rag_pipeline.query.sql import connect
from rag_pipeline.store import schema as s
from rag_pipeline_tests.oracle import may_read

pytestmark = pytest.mark.slow

PRINCIPALS = {
    "default (CLI anonymous)": None,
    "cfo": Principal(user="cfo@northwind-robotics.example", groups=("finance",), clearance="confidential"),
    "finance dept, internal": Principal(groups=(), departments=("Finance",), clearance="internal"),
    "hr owner, secret": Principal(user="hr@northwind-robotics.example", groups=(), clearance="secret"),
    "public only": Principal(clearance="public"),
    "nobody": Principal(groups=(), clearance="public"),
    "everything but lifecycle": Principal(groups=("all-staff", "finance"), clearance="secret"),
}


@pytest.fixture(scope="module")
def lake(indexed_sample):
    assert indexed_sample["exit_code"] == 0
    return indexed_sample["lake"]


@pytest.fixture(scope="module")
def raw(lake):
    """Every published row, through the admin connection (checked against the lake itself below)."""
    con = connect(lake, admin=True)
    docs = {d["doc_id"]: d for d in con.sql("SELECT * FROM documents").arrow().read_all().to_pylist()}
    chunks = dict(con.sql("SELECT chunk_id, doc_id FROM chunks").fetchall())
    quarantine = con.sql("SELECT source, reason FROM quarantine").fetchall()
    return docs, chunks, quarantine


def _one(con, sql) -> tuple:
    (row,) = con.sql(sql).fetchall()
    return row


def _ids(con, sql) -> set[str]:
    return {r[0] for r in con.sql(sql).fetchall()}


def test_admin_sees_every_published_row_confidential_and_withdrawn_included(lake, raw, sample_index):
    docs, chunks, _ = raw
    lake_docs = sample_index.lake.published_arrow(s.DOCUMENTS, sample_index.manifest, columns=["doc_id"]).column("doc_id").to_pylist()
    lake_chunks = sample_index.lake.published_arrow(s.CHUNKS, sample_index.manifest, columns=["chunk_id"]).column("chunk_id").to_pylist()
    assert set(docs) == set(lake_docs) and set(chunks) == set(lake_chunks)
    # the sample must hold what the filters are there to hide, or the tests below prove nothing
    assert {d["status"] for d in docs.values()} > {"published"}
    assert {"confidential"} <= {d["security_level"] for d in docs.values()}
    with pytest.raises(ValueError, match="not both"):
        connect(lake, Principal(), admin=True)


@pytest.mark.parametrize("who", list(PRINCIPALS))
def test_views_hold_exactly_what_the_principal_may_read_and_search_returns(lake, raw, sample_index, who):
    principal = PRINCIPALS[who]
    asker = principal or Principal()
    docs, chunks, _ = raw
    readable_docs = {d for d, doc in docs.items() if may_read(doc, asker)}
    readable_chunks = {c for c, d in chunks.items() if d in readable_docs}

    con = connect(lake, principal)
    assert _ids(con, "SELECT doc_id FROM documents") == readable_docs
    assert _ids(con, "SELECT chunk_id FROM chunks") == readable_chunks
    assert _ids(con, "SELECT DISTINCT doc_id FROM chunks") == readable_docs - {d for d in readable_docs if docs[d]["n_chunks"] == 0}
    # nothing outside the lifecycle or above the clearance, whatever the SQL asks
    levels = ("public", "internal", "confidential", "secret")
    allowed = set(levels[: levels.index(asker.clearance) + 1])
    for table in ("documents", "chunks"):
        for status, level in con.sql(f"SELECT DISTINCT status, security_level FROM {table}").fetchall():
            assert status == "published" and level in allowed, (table, status, level)
        in_list = ", ".join(f"'{level}'" for level in sorted(allowed))
        hidden = _one(con, f"SELECT count(*) FROM {table} WHERE status <> 'published' OR security_level NOT IN ({in_list})")
        assert hidden == (0,)

    # the chunks a search could return to this principal: the dense arm ranks every chunk it may see
    hits = sample_index.search("policy budget leave backup robot", mode="vector", k=len(chunks), principal=principal)
    assert {h.chunk_id for h in hits} <= readable_chunks
    assert {h.doc_id for h in hits} == _ids(con, "SELECT DISTINCT doc_id FROM chunks")

    # one predicate, two engines: search's filter string selects the same rows in DuckDB as in Lance
    admin = connect(lake, admin=True)
    assert _ids(admin, f"SELECT doc_id FROM documents WHERE {search_filter(principal)}") == readable_docs
    assert _ids(admin, f"SELECT chunk_id FROM chunks WHERE {search_filter(principal)}") == readable_chunks


def test_the_default_principal_never_sees_the_confidential_memo_or_the_withdrawn_policy(lake):
    con = connect(lake)
    sources = _ids(con, "SELECT source FROM documents") | _ids(con, "SELECT source FROM chunks")
    assert "finance/budget_memo_2026.md" not in sources
    assert "handbook/old_leave_policy_2019.md" not in sources
    assert "handbook/employee_handbook_en.md" in sources
    cfo = connect(lake, PRINCIPALS["cfo"])
    assert "finance/budget_memo_2026.md" in _ids(cfo, "SELECT source FROM chunks")
    assert "handbook/old_leave_policy_2019.md" not in _ids(cfo, "SELECT source FROM chunks")


def test_no_catalog_object_exposes_raw_rows(lake, raw):
    docs, chunks, _ = raw
    con = connect(lake)  # the anonymous default: internal clearance, all-staff
    readable_docs = {d for d, doc in docs.items() if may_read(doc, Principal())}
    assert readable_docs and readable_docs < set(docs)

    assert _one(con, "SELECT count(*) FROM duckdb_tables()") == (0,)
    views = {r[0] for r in con.sql("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
    assert views == {"documents", "chunks", "quarantine"}
    listed = {r[2] for r in con.sql("SHOW ALL TABLES").fetchall()}
    assert listed == views
    assert {r[0] for r in con.sql("SELECT table_name FROM information_schema.tables").fetchall()} == views
    assert {r[0] for r in con.sql("SELECT database_name FROM duckdb_databases() WHERE NOT internal").fetchall()} <= {"memory", "temp"}
    # every object that can be read yields only readable documents' rows
    for view in views - {"quarantine"}:
        assert _ids(con, f"SELECT DISTINCT doc_id FROM {view}") <= readable_docs
    # quarantine: file names and reasons of files with no permission metadata are for operators only
    assert {c for c, in con.sql("SELECT column_name FROM (DESCRIBE quarantine)").fetchall()} >= {"source", "reason", "detail"}
    for sql in ("SELECT * FROM quarantine", "SELECT count(*) FROM quarantine", "SELECT reason, count(*) FROM quarantine GROUP BY reason"):
        with pytest.raises(duckdb.Error, match=r"admin=True"):
            con.sql(sql).fetchall()


def test_each_query_rescans_the_filtered_views(lake, raw):
    """The views are not one-shot readers: repeated queries and self-joins see the same rows."""
    con = connect(lake, PRINCIPALS["cfo"])
    first = _one(con, "SELECT count(*) FROM chunks")
    assert _one(con, "SELECT count(*) FROM chunks") == first
    pairs = _one(con, "SELECT count(*) FROM chunks a JOIN chunks b USING (chunk_id)")
    assert pairs == first and first[0] > 0
