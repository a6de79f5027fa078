"""Query the published index: hybrid retrieval, RRF fusion, cited extractive answers or refusal."""

from rag_pipeline.query.answer import Answer, Citation, RefusalPolicy
from rag_pipeline.query.api import Hit, RagIndex, SearchResult

__all__ = ["Answer", "Citation", "Hit", "RagIndex", "RefusalPolicy", "SearchResult"]
