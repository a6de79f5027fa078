"""rag_pipeline: an offline RAG indexing pipeline (Dagster assets) and a cited-answer query module."""

__version__ = "0.1.0"
