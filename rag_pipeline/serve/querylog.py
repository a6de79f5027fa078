"""Query log and feedback: one JSON line per request under `<lake>/querylog/`, one file per UTC day.

Operators read it with DuckDB:

    SELECT mode, count(*), avg(latency_ms), avg(refused::INT)
    FROM read_json_auto('data/lake/querylog/queries-*.jsonl') GROUP BY mode;

A record holds the time, the request id, the endpoint, a hash of the principal (never the
token or the user id), the question (unless `log_questions=False`), the mode, each hit with its
rank in every arm, whether it was refused and why, the latency and the generation that answered.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from datetime import datetime, timezone
from pathlib import Path

QUERYLOG_DIR = "querylog"


def hit_record(rank: int, hit) -> dict:
    h = hit if isinstance(hit, dict) else hit.__dict__
    return {
        "rank": rank,
        "chunk_id": h["chunk_id"],
        "doc_id": h["doc_id"],
        "score": h.get("score"),
        "dense_rank": h.get("dense_rank"),
        "keyword_rank": h.get("keyword_rank"),
        "rerank_rank": h.get("rerank_rank"),
    }


class QueryLog:
    def __init__(self, lake_dir: str | Path, log_questions: bool = True):
        self.folder = Path(lake_dir) / QUERYLOG_DIR
        self.log_questions = log_questions
        self._lock = threading.Lock()

    def _append(self, kind: str, record: dict) -> None:
        """One whole line per record, also across server processes (`rag serve --processes N`):
        a single write() to an O_APPEND file under an exclusive lock, so lines never interleave."""
        now = datetime.now(timezone.utc)
        line = json.dumps({"time": now.isoformat(timespec="milliseconds"), **record}, ensure_ascii=False, default=str)
        data = (line + "\n").encode("utf-8")
        with self._lock:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.folder / f"{kind}-{now:%Y-%m-%d}.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                written = 0
                while written < len(data):
                    written += os.write(fd, data[written:])
            finally:
                os.close(fd)  # releases the lock

    def query(
        self,
        *,
        request_id: str,
        endpoint: str,
        principal_hash: str,
        question: str,
        mode: str,
        hits: list,
        refused: bool | None,
        reason: str | None,
        latency_ms: float,
        generation: int | None,
        status: int = 200,
    ) -> None:
        self._append(
            "queries",
            {
                "request_id": request_id,
                "endpoint": endpoint,
                "principal": principal_hash,
                "question": question if self.log_questions else None,
                "mode": mode,
                "hits": [hit_record(n, h) for n, h in enumerate(hits, start=1)],
                "refused": refused,
                "reason": reason,
                "latency_ms": round(latency_ms, 2),
                "generation": generation,
                "status": status,
            },
        )

    def feedback(self, *, request_id: str, principal_hash: str, rating: str, comment: str) -> None:
        self._append("feedback", {"request_id": request_id, "principal": principal_hash, "rating": rating, "comment": comment})

    def files(self, kind: str = "queries") -> list[Path]:
        return sorted(self.folder.glob(f"{kind}-*.jsonl"))
