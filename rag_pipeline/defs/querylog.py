"""The served query log, summarised in the Dagster UI: a thin shell over `serve.querylog_summary`.

`query_log_summary` reads `<lake>/querylog/` (what `rag serve` appends per request and per
feedback) and reports requests by endpoint and mode, refusal rate, p50/p95 latency, the slowest
requests, the most often refused questions, feedback and generations as materialization
metadata. It writes nothing into the lake and takes no writer lock, so it can run while an
index run writes; it has its own job (`query_log_job`), outside `index_job`.
"""

import dagster as dg
import pydantic

from rag_pipeline.defs.assets import OWNERS, _md_table
from rag_pipeline.defs.resources import RagSettingsResource
from rag_pipeline.serve.querylog_summary import QueryLogSummary, summarize_query_log

GROUP = "serving"


class QueryLogSummaryConfig(dg.Config):
    days: int = pydantic.Field(default=7, ge=1, description="UTC days of log to summarise, ending today")
    top: int = pydantic.Field(default=10, ge=1, description="rows in the slowest and most-refused tables")


def _cell(text, width: int = 120) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def summary_metadata(s: QueryLogSummary) -> dict:
    return {
        "window": dg.MetadataValue.text(f"{s.first_day} .. {s.last_day} UTC ({s.days} days)"),
        "log_files": dg.MetadataValue.int(s.files),
        "requests": dg.MetadataValue.int(s.requests),
        "errors": dg.MetadataValue.int(s.errors),
        "malformed_lines": dg.MetadataValue.int(s.malformed_lines),
        "answered_or_refused": dg.MetadataValue.int(s.answered_or_refused),
        "refused": dg.MetadataValue.int(s.refused),
        "refusal_rate": dg.MetadataValue.float(s.refusal_rate),
        "latency_p50_ms": dg.MetadataValue.float(s.latency_p50_ms),
        "latency_p95_ms": dg.MetadataValue.float(s.latency_p95_ms),
        "feedback_up": dg.MetadataValue.int(s.feedback_up),
        "feedback_down": dg.MetadataValue.int(s.feedback_down),
        "generations_seen": dg.MetadataValue.json(s.generations),
        "by_endpoint": _md_table(
            ["endpoint", "mode", "requests", "refused", "p50 ms", "p95 ms"],
            [[r["endpoint"], r["mode"], r["requests"], r["refused"], r["p50_ms"], r["p95_ms"]] for r in s.by_endpoint],
        ),
        "slowest_queries": _md_table(
            ["latency ms", "endpoint", "mode", "refused", "generation", "time", "question"],
            [[r["latency_ms"], r["endpoint"], r["mode"], r["refused"], r["generation"], r["time"], _cell(r["question"])]
             for r in s.slowest],
        ),
        "top_refused_questions": _md_table(
            ["times", "question", "last reason", "last time"],
            [[r["times"], _cell(r["question"]), _cell(r["last_reason"] or "", 80), r["last_time"]] for r in s.top_refused],
        ),
    }


@dg.asset(group_name=GROUP, kinds={"duckdb"}, owners=OWNERS)
def query_log_summary(
    context: dg.AssetExecutionContext, config: QueryLogSummaryConfig, rag: RagSettingsResource
) -> dg.MaterializeResult:
    """What `rag serve` answered over the last days: requests, refusal rate, latency, slowest
    requests, most often refused questions, feedback (read from <lake>/querylog, read-only)."""
    lake_dir = rag.settings().lake_dir
    summary = summarize_query_log(lake_dir, config.days, top=config.top)
    context.log.info(
        f"{summary.requests} requests in {summary.files} log files under {lake_dir}; "
        f"refusal rate {summary.refusal_rate:.3f}, p95 {summary.latency_p95_ms} ms"
    )
    return dg.MaterializeResult(metadata=summary_metadata(summary))
