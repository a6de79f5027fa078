"""The query log summarised in Dagster: real log lines from the server's own writer (QueryLog),
the `query_log_summary` asset materialized over a tmp lake, its metadata checked against numbers
computed here from what was written. No index, no model: the asset only reads <lake>/querylog."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta, timezone

import dagster as dg
import numpy as np
import pytest

from rag_pipeline.defs.querylog import query_log_summary
from rag_pipeline.defs.resources import RagSettingsResource
from rag_pipeline.serve.querylog import QueryLog
from rag_pipeline.serve.querylog_summary import NOT_KEPT, summarize_query_log

HIT = {"chunk_id": "c1", "doc_id": "d1", "score": 0.8, "dense_rank": 1, "keyword_rank": 2, "rerank_rank": None}

# (endpoint, mode, question, refused, reason, latency_ms, generation, status, keep question text)
REQUESTS = [
    ("ask", "hybrid", "What is the travel allowance?", False, None, 41.0, 5, 200, True),
    ("ask", "hybrid", "What is the CEO's salary?", True, "no passage you may read answers this", 35.5, 5, 200, True),
    ("ask", "hybrid", "What is the CEO's salary?", True, "no passage you may read answers this", 38.25, 5, 200, True),
    ("chat", "hybrid", "What is the CEO's salary?", True, "no evidence", 52.0, 5, 200, True),
    ("ask", "hybrid", "Where is the Mars office?", True, "no evidence", 30.0, 5, 200, True),
    ("ask", "hybrid", "a secret question", True, "no evidence", 29.0, 5, 200, False),
    ("ask", "hybrid", "another secret question", False, None, 3100.0, 4, 200, False),
    ("search", "keyword", "travel allowance", None, None, 12.5, 5, 200, True),
    ("search", "vector", "expense policy", None, None, 18.0, 5, 200, True),
    ("ask", "hybrid", "How do I book a flight?", False, None, 2400.75, 4, 200, True),
    ("search", "hybrid", "broken request", None, None, 7.0, 5, 500, True),
]
FEEDBACK = ["up", "up", "down"]


def write_log(lake) -> list[str]:
    """Every request and feedback through the real writer; returns the request ids."""
    kept, hidden = QueryLog(lake), QueryLog(lake, log_questions=False)
    ids = []
    for n, (endpoint, mode, question, refused, reason, latency, generation, status, keep) in enumerate(REQUESTS):
        rid = f"req-{n}"
        (kept if keep else hidden).query(
            request_id=rid, endpoint=endpoint, principal_hash=f"p{n % 3}", question=question, mode=mode,
            hits=[] if refused else [HIT], refused=refused, reason=reason, latency_ms=latency,
            generation=generation, status=status,
        )
        ids.append(rid)
    for rid, rating in zip(ids, FEEDBACK):
        kept.feedback(request_id=rid, principal_hash="p0", rating=rating, comment="thanks | really")
    return ids


def materialize(lake, days: int | None = None):
    run_config = {"ops": {"query_log_summary": {"config": {"days": days}}}} if days else None
    result = dg.materialize(
        [query_log_summary], resources={"rag": RagSettingsResource(lake_dir=str(lake))}, run_config=run_config,
    )
    assert result.success
    (event,) = result.asset_materializations_for_node("query_log_summary")
    return {k: v.value for k, v in event.metadata.items()}


def files_under(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


def test_summary_metadata_matches_what_was_logged(tmp_path):
    lake = tmp_path / "lake"
    write_log(lake)
    # A line cut short (the server died mid-write) is skipped and counted, not fatal.
    (queries_file,) = QueryLog(lake).files("queries")
    with queries_file.open("a", encoding="utf-8") as fh:
        fh.write('{"time": "2026-')
    before = files_under(lake)

    meta = materialize(lake)

    assert files_under(lake) == before, "the asset must not write into the lake"
    gated = [r for r in REQUESTS if r[3] is not None]
    refused = [r for r in REQUESTS if r[3] is True]
    latencies = [r[5] for r in REQUESTS]
    assert meta["requests"] == len(REQUESTS)
    assert meta["malformed_lines"] == 1
    assert meta["errors"] == sum(r[7] >= 400 for r in REQUESTS)
    assert meta["answered_or_refused"] == len(gated)
    assert meta["refused"] == len(refused)
    assert meta["refusal_rate"] == pytest.approx(len(refused) / len(gated), abs=1e-4)
    assert meta["latency_p50_ms"] == pytest.approx(np.percentile(latencies, 50), abs=0.01)
    assert meta["latency_p95_ms"] == pytest.approx(np.percentile(latencies, 95), abs=0.01)
    assert meta["feedback_up"] == FEEDBACK.count("up")
    assert meta["feedback_down"] == FEEDBACK.count("down")
    assert meta["generations_seen"] == {str(g): n for g, n in Counter(r[6] for r in REQUESTS).items()}

    # The most often refused question (text kept) heads the table, with its count.
    counts = Counter(r[2] if r[8] else NOT_KEPT for r in refused)
    (top_question, top_times), = counts.most_common(1)
    top_rows = [line for line in meta["top_refused_questions"].splitlines()[2:]]
    assert top_rows[0].startswith(f"| {top_times} | {top_question} |")
    assert len(top_rows) == len(counts)
    # A question logged without its text shows as such: never the text.
    table = meta["top_refused_questions"] + meta["slowest_queries"]
    assert NOT_KEPT in table
    assert "secret question" not in table

    # The slowest request first (its text was not kept), then the next slowest with its text.
    slow_rows = meta["slowest_queries"].splitlines()[2:]
    by_latency = sorted(REQUESTS, key=lambda r: -r[5])
    assert len(slow_rows) == min(10, len(REQUESTS))
    assert slow_rows[0].startswith(f"| {by_latency[0][5]} | ask | hybrid |") and slow_rows[0].endswith(f"| {NOT_KEPT} |")
    assert slow_rows[1].startswith(f"| {by_latency[1][5]} |") and slow_rows[1].endswith(f"| {by_latency[1][2]} |")

    by_endpoint = meta["by_endpoint"].splitlines()[2:]
    expected = Counter((r[0], r[1]) for r in REQUESTS)
    assert len(by_endpoint) == len(expected)
    assert by_endpoint[0].startswith(f"| ask | hybrid | {expected[('ask', 'hybrid')]} | ")


def test_days_window_keeps_older_files_out(tmp_path):
    lake = tmp_path / "lake"
    QueryLog(lake).query(
        request_id="old", endpoint="ask", principal_hash="p", question="an old refused question", mode="hybrid",
        hits=[], refused=True, reason="no evidence", latency_ms=10.0, generation=1,
    )
    (today_file,) = QueryLog(lake).files("queries")
    old_day = datetime.now(timezone.utc).date() - timedelta(days=10)
    today_file.rename(today_file.with_name(f"queries-{old_day:%Y-%m-%d}.jsonl"))
    write_log(lake)

    assert materialize(lake)["requests"] == len(REQUESTS)
    wide = materialize(lake, days=30)
    assert wide["requests"] == len(REQUESTS) + 1
    assert "an old refused question" in wide["top_refused_questions"]


@pytest.mark.parametrize("state", ["no lake", "no querylog folder", "empty querylog folder", "empty file"])
def test_empty_or_missing_log_reports_zero_requests(tmp_path, state):
    lake = tmp_path / "lake"
    if state != "no lake":
        lake.mkdir()
    if state in ("empty querylog folder", "empty file"):
        (lake / "querylog").mkdir()
    if state == "empty file":
        (lake / "querylog" / f"queries-{datetime.now(timezone.utc):%Y-%m-%d}.jsonl").touch()

    meta = materialize(lake)

    assert meta["requests"] == 0
    assert meta["refusal_rate"] == 0.0 and meta["latency_p95_ms"] == 0.0
    assert meta["feedback_up"] == meta["feedback_down"] == 0
    assert meta["generations_seen"] == {}
    assert meta["top_refused_questions"].count("\n") == 1  # header and rule only
    assert lake.exists() == (state != "no lake"), "the asset must not create the lake"


def test_days_must_be_positive(tmp_path):
    with pytest.raises(ValueError):
        summarize_query_log(tmp_path, days=0)


def test_definitions_have_the_query_log_job_and_a_stopped_daily_schedule():
    from rag_pipeline.definitions import defs

    keys = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    assert "query_log_summary" in keys
    job = defs.resolve_job_def("query_log_job")
    assert {k.to_user_string() for k in job.asset_layer.executable_asset_keys} == {"query_log_summary"}
    index_keys = {k.to_user_string() for k in defs.resolve_job_def("index_job").asset_layer.executable_asset_keys}
    assert "query_log_summary" not in index_keys and "published_index" in index_keys
    schedule = defs.resolve_schedule_def("daily_query_log_schedule")
    assert schedule.job_name == "query_log_job"
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED
