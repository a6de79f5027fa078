"""The numpy query encoder (issue 19: cold `rag ask`): same vectors as sentence-transformers for the
built-in model, no torch on the query path, and only for a folder laid out as it reproduces."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rag_pipeline.config import Settings
from rag_pipeline.embedding.encoder import load_encoder, query_layers_export_path
from rag_pipeline.embedding.query_encoder import QueryEncoder, supported_layout

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "sentence_transformers", "transformers", "sklearn")


def _encoder():
    s = Settings()
    return load_encoder(s.embedding_model, str(s.model_cache_dir), s.embed_batch_size, "fp32")


def _questions() -> list[str]:
    lines = (REPO / "data" / "golden" / "sample_golden.jsonl").read_text(encoding="utf-8").splitlines()
    questions = [json.loads(line)["question"] for line in lines if line.strip()]
    return questions[::3] + [
        "  leading and trailing spaces  ",
        "tab\there\nnew line",
        "员工每年享有多少天带薪年假？",
        "E-45",
        "年假 " * 400,  # > 512 tokens: truncated as sentence-transformers truncates
        "What does error code E-45 mean on the X-2000? " * 40,
    ]


def test_query_vectors_match_sentence_transformers_on_real_questions():
    """Both ways the layers run: onnxruntime (the fp32 graph scripts/install.sh exports) and numpy
    (a folder without that export)."""
    encoder = _encoder()
    assert encoder.query_encoder is not None  # the built-in fp32 model takes the numpy path
    assert encoder.query_encoder._layers is not None  # ... its layers in onnxruntime
    numpy_layers = QueryEncoder(encoder.query_encoder.folder, 512)
    assert numpy_layers._layers is None
    worst = {"onnx": 0.0, "numpy": 0.0}
    for question in _questions():
        reference = encoder._encode([encoder.identity.query_prompt + question], False)[0]  # SentenceTransformer.encode
        for name, fast in (("onnx", encoder.encode_query(question)), ("numpy", numpy_layers.encode(encoder.identity.query_prompt + question))):
            assert fast.dtype == np.float32 and fast.shape == reference.shape == (encoder.identity.dimension,)
            worst[name] = max(worst[name], float(np.abs(fast - reference).max()))
    assert max(worst.values()) <= 1e-6, worst


def test_a_damaged_layers_export_falls_back_to_numpy_with_a_warning(tmp_path, caplog):
    """A truncated graph file (a disk filled mid-copy) costs speed, not the query."""
    encoder = _encoder()
    folder = encoder.query_encoder.folder
    damaged = tmp_path / "layers.onnx"
    damaged.write_bytes(query_layers_export_path(Settings().model_cache_dir, encoder.identity).read_bytes()[:4096])
    with caplog.at_level("WARNING", logger="rag_pipeline.embedding.query_encoder"):
        fallback = QueryEncoder(folder, 512, damaged)
    assert fallback._layers is None
    assert str(damaged) in caplog.text and "export_query_graphs" in caplog.text
    question = encoder.identity.query_prompt + "员工每年享有多少天带薪年假？"
    assert float(np.abs(fallback.encode(question) - encoder.query_encoder.encode(question)).max()) <= 1e-6


def test_a_cold_query_imports_neither_torch_nor_sentence_transformers():
    code = (
        "import sys\n"
        "from rag_pipeline.config import Settings\n"
        "from rag_pipeline.embedding.encoder import encoder_for\n"
        "encoder = encoder_for(Settings())\n"
        "vector = encoder.encode_query('How many days of annual leave do employees get?')\n"
        "from rag_pipeline.query.token_recall import sentence_recalls\n"  # how a cross-lingual answer picks its quote
        "scores = sentence_recalls(encoder.token_states, 'R-500 有多重？', ['R-500 重 3 公斤。', 'Error E-45.'], 'query: ', 'passage: ')\n"
        f"print(vector.shape[0], len(scores), [m for m in {HEAVY!r} if m in sys.modules])\n"
    )
    out = _run_fresh(code)  # from the int8 graph scripts/install.sh exports
    assert out.split(maxsplit=2) == ["384", "2", "[]\n"], out


def _run_fresh(code: str) -> str:
    """stdout of `code` run by a fresh interpreter (so sys.modules shows what it alone imported)."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_passages_still_go_through_sentence_transformers_loaded_on_first_use():
    encoder = _encoder()
    vectors = encoder.encode_passages(["The X-2000 arm carries a maximum payload of 20 kg.", "Error E-45: lidar blocked."])
    assert type(encoder.model).__name__ == "SentenceTransformer"
    assert vectors.shape == (2, encoder.identity.dimension)
    query = encoder.encode_query("What does error E-45 mean?")
    assert int(np.argmax(vectors @ query)) == 1


def _copy_layout(tmp_path: Path) -> Path:
    """The built-in folder's small files; the weights and tokenizer are linked, not copied."""
    source = Path(_encoder().query_encoder.folder)
    dest = tmp_path / "model"
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns("model.safetensors", "tokenizer.json"))
    for name in ("model.safetensors", "tokenizer.json"):
        (dest / name).symlink_to(source / name)
    return dest


@pytest.mark.parametrize(
    "file,change",
    [
        ("1_Pooling/config.json", {"pooling_mode_mean_tokens": False, "pooling_mode_cls_token": True}),
        ("config.json", {"model_type": "xlm-roberta"}),
        ("config.json", {"hidden_act": "gelu_new"}),
        ("sentence_bert_config.json", {"do_lower_case": True}),
        ("tokenizer_config.json", {"tokenizer_class": "XLMRobertaTokenizer"}),
    ],
)
def test_only_the_layout_it_reproduces_takes_the_numpy_path(tmp_path, file, change):
    folder = _copy_layout(tmp_path)
    assert supported_layout(folder) == 512
    data = json.loads((folder / file).read_text(encoding="utf-8"))
    (folder / file).write_text(json.dumps({**data, **change}), encoding="utf-8")
    assert supported_layout(folder) is None


def test_a_folder_without_normalize_is_not_taken(tmp_path):
    folder = _copy_layout(tmp_path)
    modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
    (folder / "modules.json").write_text(json.dumps(modules[:2]), encoding="utf-8")
    assert supported_layout(folder) is None


def test_a_local_folder_of_that_layout_loads_lazily_with_the_identity_of_the_loaded_model(tmp_path):
    """A user's own sentence-transformers folder (here: the built-in one's files under another
    path) gets the numpy query path too; its identity, read off the files, is the one the loaded
    model gives, so lakes indexed before keep their pin."""
    from sentence_transformers import SentenceTransformer

    from rag_pipeline.embedding.encoder import _identity_of_any

    folder = _copy_layout(tmp_path)
    encoder = load_encoder(str(folder), str(tmp_path / "cache"), 8, "fp32")
    assert encoder._query_encoder is None and encoder._model is None  # each loads on first use: an index run needs no query encoder
    assert encoder.query_encoder is not None and encoder._model is None  # nothing of torch loaded yet
    loaded = _identity_of_any(str(folder), SentenceTransformer(str(folder), device="cpu"))
    assert encoder.identity == loaded and encoder.identity.query_prompt == "query: "
    question = "How many days of annual leave do employees get?"
    reference = encoder._encode([encoder.identity.query_prompt + question], False)[0]  # loads the model now
    assert encoder._model is not None
    assert float(np.abs(encoder.encode_query(question) - reference).max()) <= 1e-6


def test_an_unloaded_model_loads_again_on_next_use_and_encodes_alike(tmp_path):
    """What an indexing step lets go of at its end (Encoder.unload) is freed by a collection and
    comes back on the next passage; the query encoder stays."""
    import gc
    import weakref

    folder = _copy_layout(tmp_path)
    encoder = load_encoder(str(folder), str(tmp_path / "cache"), 8, "fp32")
    passages = ["员工每年享有十五天带薪年假。", "The VPN client must be updated every quarter."]
    first = encoder.encode_passages(passages)
    encoder.query_encoder
    states = weakref.ref(encoder.token_states)  # what an answer's token recall opened
    loaded = weakref.ref(encoder.model)
    encoder.unload()
    gc.collect()
    assert loaded() is None and encoder._token_counter is None  # nothing else held the weights
    assert states() is None and encoder.token_states is not None  # let go, and back on next use
    assert encoder._query_encoder is not None
    assert float(np.abs(encoder.encode_passages(passages) - first).max()) <= 1e-6


def test_a_model_saved_by_todays_sentence_transformers_takes_the_numpy_path(tmp_path):
    """sentence-transformers 6 and transformers 5 write another layout (module names, "pooling_mode",
    "dtype", the tokenizer class TokenizersBackend) for the same computation: a random 2-layer
    BERT saved as a user would save their own model loads lazily and encodes queries alike."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Normalize, Pooling, Transformer
    from transformers import AutoTokenizer, BertConfig, BertModel

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(str(_encoder().query_encoder.folder))
    BertModel(BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=514, pad_token_id=tokenizer.pad_token_id)
              ).save_pretrained(str(tmp_path / "hf"))
    tokenizer.save_pretrained(str(tmp_path / "hf"))
    modules = [Transformer(str(tmp_path / "hf"), max_seq_length=512), Pooling(32, "mean"), Normalize()]
    SentenceTransformer(modules=modules, device="cpu").save(str(tmp_path / "mine"))

    assert supported_layout(tmp_path / "mine") == 512
    encoder = load_encoder(str(tmp_path / "mine"), str(tmp_path / "cache"), 8, "fp32")
    assert encoder.query_encoder is not None and encoder._model is None
    worst = max(float(np.abs(encoder.encode_query(q) - encoder._encode([q], False)[0]).max()) for q in _questions())
    assert worst <= 1e-6, worst


def _real_texts() -> list[str]:
    """Text of real files, zh and en: the sample corpus's and the shared corpus's plain ones."""
    files = sorted((REPO / "data" / "sample").rglob("*.md")) + sorted((REPO.parent / "shared" / "corpus").glob("*/*.txt"))
    texts = []
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        texts += [text[:4000], *text[:20000].split("\n\n")[:40]]
    return [t for t in texts if t] + ["", "  ", "tab\there\nnew line", "員工每年享有多少天帶薪年假？", "X-2000 E-45 " * 300]


def test_token_counts_without_the_model_are_the_models_own(tmp_path):
    """Chunking counts tokens through tokenizer.json alone while the model is not loaded: the same
    counts and the same passage limit as the model's own tokenizer, on real text of both languages."""
    folder = _copy_layout(tmp_path)
    encoder = load_encoder(str(folder), str(tmp_path / "cache"), 8, "fp32")
    texts = _real_texts()
    assert len(texts) > 50
    light = [encoder.count_tokens(t) for t in texts]
    light_limit = encoder.passage_token_limit
    assert encoder._model is None and encoder.token_counter is not None  # counted without the model
    assert max(light) > 512  # long texts are counted whole, not cut at the model's window
    model = encoder.model  # loads it: from now on its tokenizer counts
    assert encoder.token_counter is None
    assert [len(model.tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts] == light
    assert light_limit == encoder.passage_token_limit == model.max_seq_length - 2 - encoder.count_tokens(encoder.identity.passage_prompt)


def test_counting_tokens_imports_neither_torch_nor_sentence_transformers():
    code = (
        "import sys\n"
        "from rag_pipeline.chunking import TokenBudget\n"
        "from rag_pipeline.config import Settings\n"
        "from rag_pipeline.embedding.encoder import encoder_for\n"
        "budget = TokenBudget.for_encoder(encoder_for(Settings()))\n"
        "print(budget.count('员工每年享有十五天带薪年假。'), budget.model_limit, [m for m in "
        f"{HEAVY!r} if m in sys.modules])\n"
    )
    out = _run_fresh(code)
    count, limit, heavy = out.split(maxsplit=2)
    assert int(count) > 0 and int(limit) > 400 and heavy == "[]\n", out
