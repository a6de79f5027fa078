"""A summary of the query log over the last N UTC days, for operators (the `query_log_summary` asset).

Reads `<lake>/querylog/queries-YYYY-MM-DD.jsonl` and `feedback-YYYY-MM-DD.jsonl` (written by
`querylog.QueryLog`) with DuckDB and returns plain numbers and rows: requests by endpoint and
mode, the refusal rate among answered questions, p50/p95 latency, the slowest requests, the most
often refused questions, feedback up/down and the generations that answered. Read-only; a lake
without a query log (or with an empty one) summarises to 0 requests.

A line that is not valid JSON (a write cut short) is skipped and counted in `malformed_lines`.
A question logged without its text (`rag serve --no-log-questions`) shows as `(text not kept)`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

from rag_pipeline.serve.querylog import QUERYLOG_DIR
from rag_pipeline.store.predicates import sql_string

NOT_KEPT = "(text not kept)"

# Explicit columns: a field absent from every line reads as NULL (not "column not found"), a
# field that is NULL on every line keeps its type, and fields added later are ignored.
_QUERY_COLUMNS = {
    "time": "VARCHAR",
    "request_id": "VARCHAR",
    "endpoint": "VARCHAR",
    "question": "VARCHAR",
    "mode": "VARCHAR",
    "refused": "BOOLEAN",
    "reason": "VARCHAR",
    "latency_ms": "DOUBLE",
    "generation": "BIGINT",
    "status": "INTEGER",
}
_FEEDBACK_COLUMNS = {"time": "VARCHAR", "request_id": "VARCHAR", "rating": "VARCHAR"}


@dataclass
class QueryLogSummary:
    days: int
    first_day: str
    last_day: str
    files: int = 0
    requests: int = 0
    malformed_lines: int = 0
    errors: int = 0  # status >= 400
    answered_or_refused: int = 0  # requests that went through the refusal gate (ask, chat)
    refused: int = 0
    refusal_rate: float = 0.0  # refused / answered_or_refused; 0.0 when none
    latency_p50_ms: float = 0.0
    latency_p95_ms: float = 0.0
    by_endpoint: list[dict] = field(default_factory=list)  # endpoint, mode, requests, refused, p50_ms, p95_ms
    slowest: list[dict] = field(default_factory=list)  # time, endpoint, mode, latency_ms, refused, generation, question
    top_refused: list[dict] = field(default_factory=list)  # question, times, last_reason, last_time
    feedback_up: int = 0
    feedback_down: int = 0
    generations: dict[str, int] = field(default_factory=dict)  # generation -> requests it answered

    def to_dict(self) -> dict:
        return asdict(self)


def day_files(folder: Path, kind: str, days: list[date]) -> list[Path]:
    return [p for p in (folder / f"{kind}-{d:%Y-%m-%d}.jsonl" for d in days) if p.is_file() and p.stat().st_size > 0]


def summarize_query_log(lake_dir: str | Path, days: int = 7, *, top: int = 10, today: date | None = None) -> QueryLogSummary:
    """Summarise the query log files of the `days` UTC days ending with `today` (default: now)."""
    if days < 1:
        raise ValueError(f"days must be at least 1, got {days}")
    today = today or datetime.now(timezone.utc).date()
    span = [today - timedelta(days=n) for n in range(days - 1, -1, -1)]
    summary = QueryLogSummary(days=days, first_day=span[0].isoformat(), last_day=span[-1].isoformat())
    folder = Path(lake_dir) / QUERYLOG_DIR
    queries = day_files(folder, "queries", span)
    feedback = day_files(folder, "feedback", span)
    summary.files = len(queries) + len(feedback)
    if not queries and not feedback:
        return summary

    import duckdb

    with duckdb.connect() as con:
        if queries:
            _summarize_queries(con, queries, summary, top)
        if feedback:
            con.execute(f"CREATE TEMP VIEW fb AS {_read(feedback, _FEEDBACK_COLUMNS)}")
            malformed, up, down = con.execute(
                "SELECT count(*) FILTER (WHERE time IS NULL), count(*) FILTER (WHERE rating = 'up'),"
                " count(*) FILTER (WHERE rating = 'down') FROM fb"
            ).fetchone()
            summary.malformed_lines += malformed
            summary.feedback_up, summary.feedback_down = up, down
    return summary


def _read(files: list[Path], columns: dict[str, str]) -> str:
    paths = ", ".join(sql_string(p) for p in files)
    cols = ", ".join(f"'{k}': '{v}'" for k, v in columns.items())
    return f"SELECT * FROM read_json([{paths}], format='newline_delimited', columns={{{cols}}}, ignore_errors=true)"


def _summarize_queries(con, files: list[Path], s: QueryLogSummary, top: int) -> None:
    con.execute(f"CREATE TEMP TABLE raw AS {_read(files, _QUERY_COLUMNS)}")
    s.malformed_lines += con.execute("SELECT count(*) FROM raw WHERE time IS NULL").fetchone()[0]
    con.execute("CREATE TEMP VIEW q AS SELECT * FROM raw WHERE time IS NOT NULL")
    row = con.execute(
        """SELECT count(*), count(*) FILTER (WHERE status >= 400),
                  count(*) FILTER (WHERE refused IS NOT NULL), count(*) FILTER (WHERE refused),
                  quantile_cont(latency_ms, 0.5), quantile_cont(latency_ms, 0.95)
           FROM q"""
    ).fetchone()
    s.requests, s.errors, s.answered_or_refused, s.refused = row[0], row[1], row[2], row[3]
    s.refusal_rate = round(s.refused / s.answered_or_refused, 4) if s.answered_or_refused else 0.0
    s.latency_p50_ms = round(row[4], 2) if row[4] is not None else 0.0
    s.latency_p95_ms = round(row[5], 2) if row[5] is not None else 0.0
    s.by_endpoint = [
        {"endpoint": e, "mode": m, "requests": n, "refused": r, "p50_ms": _r(p50), "p95_ms": _r(p95)}
        for e, m, n, r, p50, p95 in con.execute(
            """SELECT coalesce(endpoint, '?'), coalesce(mode, '?'), count(*), count(*) FILTER (WHERE refused),
                      quantile_cont(latency_ms, 0.5), quantile_cont(latency_ms, 0.95)
               FROM q GROUP BY ALL ORDER BY 3 DESC, 1, 2"""
        ).fetchall()
    ]
    s.slowest = [
        {"time": t, "endpoint": e, "mode": m, "latency_ms": _r(lat), "refused": ref, "generation": g,
         "question": qn if qn is not None else NOT_KEPT, "request_id": rid}
        for t, e, m, lat, ref, g, qn, rid in con.execute(
            """SELECT time, endpoint, mode, latency_ms, refused, generation, question, request_id FROM q
               WHERE latency_ms IS NOT NULL ORDER BY latency_ms DESC, time DESC LIMIT ?""",
            [top],
        ).fetchall()
    ]
    s.top_refused = [
        {"question": qn if qn is not None else NOT_KEPT, "times": n, "last_reason": reason, "last_time": last}
        for qn, n, reason, last in con.execute(
            """SELECT question, count(*), arg_max(reason, time), max(time) FROM q WHERE refused
               GROUP BY question ORDER BY 2 DESC, 4 DESC LIMIT ?""",
            [top],
        ).fetchall()
    ]
    s.generations = {
        str(g) if g is not None else "none": n
        for g, n in con.execute("SELECT generation, count(*) FROM q GROUP BY 1 ORDER BY 1 NULLS LAST").fetchall()
    }


def _r(value) -> float | None:
    return None if value is None else round(value, 2)
