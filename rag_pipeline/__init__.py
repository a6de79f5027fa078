"""rag_pipeline: an offline RAG indexing pipeline (Dagster assets) and a cited-answer query module."""

__version__ = "0.1.0"

from rag_pipeline.config import apply_offline_environment as _apply_offline_environment

# Offline and quiet switches (LANCEDB_LOG, HF_HUB_OFFLINE, DO_NOT_TRACK, ...): before any module
# of the package imports lancedb, huggingface_hub, transformers or unstructured.
_apply_offline_environment()
