"""The passage encoder's device and batch size are machine-local configuration: a GPU worker
says RAG_EMBEDDING_DEVICE=cuda (or auto), and a worker without one says so clearly."""

from __future__ import annotations

import pytest
import torch

from rag_pipeline.config import Settings
from rag_pipeline.embedding.encoder import ModelLoadError, encoder_for, torch_device


def test_the_device_names_resolve_and_a_missing_gpu_is_a_clear_error():
    assert torch_device("cpu") == "cpu"
    assert torch_device(" AUTO ") == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ModelLoadError, match="cpu, cuda, cuda:N or auto"):
        torch_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ModelLoadError, match="sees no CUDA device"):
            torch_device("cuda:0")


def test_the_encoder_runs_where_and_in_the_batches_the_environment_says(monkeypatch):
    monkeypatch.setenv("RAG_EMBEDDING_DEVICE", "auto")
    monkeypatch.setenv("RAG_EMBED_BATCH_SIZE", "7")
    settings = Settings()
    assert (settings.embedding_device, settings.embed_batch_size) == ("auto", 7)
    encoder = encoder_for(settings)
    vectors = encoder.encode_passages(["Amber widgets are stored in hall 9.", "琥珀色零件存放在九号厅。"])
    assert vectors.shape == (2, encoder.identity.dimension) and encoder.batch_size == 7
    assert str(encoder.model.device).startswith(torch_device("auto"))
