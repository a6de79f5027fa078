"""Reduced-precision encoders: own identity (never mixed with fp32 vectors), close to fp32 output."""

import hashlib
import json

import numpy as np
import pytest

from rag_pipeline.config import Settings
from rag_pipeline.embedding.encoder import PRECISIONS, ModelLoadError, apply_precision, load_encoder

TEXTS = [
    "The X-2000 arm carries a maximum payload of 20 kg.",
    "员工每年享有十五天带薪年假，未休完的假期可顺延至次年。",
    "Error E-45 means the safety lidar is blocked or dirty.",
]


def _encoder(precision):
    s = Settings()
    return load_encoder(s.embedding_model, str(s.model_cache_dir), s.embed_batch_size, precision)


def test_fp32_key_is_unchanged_and_other_precisions_get_their_own():
    fp32 = _encoder("fp32").identity
    legacy = {k: v for k, v in fp32.__dict__.items() if k != "precision"}
    assert fp32.key == hashlib.sha256(json.dumps(legacy, sort_keys=True).encode()).hexdigest()[:16]
    keys = {p: _encoder(p).identity.key for p in PRECISIONS}
    assert len(set(keys.values())) == len(PRECISIONS)
    assert _encoder("bf16").identity.as_dict()["precision"] == "bf16"


@pytest.mark.parametrize("precision,min_cos", [("bf16", 0.99), ("int8", 0.93), ("int8-onnx", 0.99)])
def test_reduced_precision_vectors_stay_close_to_fp32(precision, min_cos):
    reference = _encoder("fp32").encode_passages(TEXTS)
    vectors = _encoder(precision).encode_passages(TEXTS)
    assert vectors.dtype == np.float32 and vectors.shape == reference.shape
    cos = (vectors * reference).sum(axis=1)
    assert cos.min() >= min_cos, cos
    assert not np.allclose(vectors, reference)  # the precision really changed the computation


def test_unknown_precision_is_refused():
    with pytest.raises(ValueError, match="precision"):
        apply_precision(object(), "fp8")


def test_int8_onnx_is_exported_once_from_the_local_weights_and_encodes_queries_too():
    encoder = _encoder("int8-onnx")
    onnx_file = Settings().model_cache_dir / "onnx" / f"{encoder.identity.key}.onnx"
    assert encoder.backend is not None and onnx_file.is_file()
    stamp = onnx_file.stat().st_mtime_ns
    load_encoder.cache_clear()
    again = _encoder("int8-onnx")
    assert onnx_file.stat().st_mtime_ns == stamp  # reused, not re-exported
    query = again.encode_query("What does error E-45 mean?")
    passages = again.encode_passages(TEXTS)
    assert int(np.argmax(passages @ query)) == 2  # the E-45 sentence


def test_int8_onnx_needs_a_local_model_folder(tmp_path):
    with pytest.raises(ModelLoadError, match="cannot load the embedding model"):
        load_encoder(str(tmp_path / "missing"), str(tmp_path), 32, "int8-onnx")
