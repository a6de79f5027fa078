"""Request bodies. None of them carries a principal: who asks comes from the bearer token only,
and a body that tries to say it (clearance, groups, user, ...) is rejected with 422."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Mode = Literal["hybrid", "hybrid-rrf", "vector", "keyword"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SearchRequest(_Strict):
    query: str = Field(min_length=1, max_length=4000)
    mode: Mode = "hybrid"
    k: int = Field(10, ge=1, le=100)
    retrieve_only: bool = Field(False, description="retrieval arms and fusion only: no reranking")
    debug: bool = Field(False, description="per-arm ranks, scores and weights (admin scope)")


class AskRequest(_Strict):
    question: str = Field(min_length=1, max_length=4000)
    k: int = Field(5, ge=1, le=50)
    stream: bool = Field(False, description="server-sent events: answer text, then citations")
    retrieve_only: bool = Field(False, description="return the retrieved passages, compose no answer")
    mode: Mode = Field("hybrid", description="retrieval mode for retrieve_only (answers always use hybrid)")
    debug: bool = Field(False, description="add the retrieved hits with per-arm ranks (admin scope)")


class FeedbackRequest(_Strict):
    request_id: str = Field(min_length=1, max_length=64)
    rating: Literal["up", "down"]
    comment: str = Field("", max_length=4000)


class ChatMessage(BaseModel):
    role: str
    content: str | list | None = None


class ChatRequest(BaseModel):
    """OpenAI's chat-completions body; unknown OpenAI fields (temperature, ...) are accepted and ignored."""

    model_config = ConfigDict(extra="ignore")
    model: str = "rag-pipeline"
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False

    def question(self) -> str:
        """The last user message's text (parts of type text joined)."""
        for message in reversed(self.messages):
            if message.role != "user":
                continue
            if isinstance(message.content, str):
                return message.content
            if isinstance(message.content, list):
                return " ".join(p.get("text", "") for p in message.content if isinstance(p, dict) and p.get("type") == "text")
        return ""
