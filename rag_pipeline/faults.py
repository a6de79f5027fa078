"""Named crash points for fault-injection tests (the way databases test crash safety).

``RAG_FAILPOINTS=lancedb_write`` makes the process SIGKILL itself when it reaches
``failpoint("lancedb_write")``: a real crash at an exact, repeatable moment, which a signal
sent from outside cannot hit. Unset (always, outside tests) a failpoint is one dict lookup.
"""

from __future__ import annotations

import os
import signal

from rag_pipeline.config import env_str

ENV = "RAG_FAILPOINTS"
POINTS = {
    "parse": "parsing: one file parsed, the others still in the worker processes",
    "lancedb_write": "staging: the documents table written, chunks and quarantine not yet",
    "promote": "promotion: the generation staged and judged, the served manifest not yet swapped",
    "promote_log": "promotion: the served manifest swapped, the promotion log not yet appended",
}


def failpoint(name: str) -> None:
    """Die here, as the OOM killer or a power cut would, when the test armed this point."""
    armed = env_str(ENV)
    if armed and name in armed.split(","):
        os.kill(os.getpid(), signal.SIGKILL)
