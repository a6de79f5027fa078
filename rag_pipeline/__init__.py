"""rag_pipeline: an offline RAG indexing pipeline (Dagster assets) and a cited-answer query module."""

__version__ = "0.1.0"

import os as _os

# lance's Rust logger warns on every table creation; must be set before lancedb is imported.
_os.environ.setdefault("LANCEDB_LOG", "error")
