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
from rag_pipeline.embedding.encoder import load_encoder
from rag_pipeline.embedding.query_encoder import supported_layout

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
    encoder = _encoder()
    assert encoder.query_encoder is not None  # the built-in fp32 model takes the numpy path
    worst = 0.0
    for question in _questions():
        fast = encoder.encode_query(question)
        reference = encoder._encode([encoder.identity.query_prompt + question], False)[0]  # SentenceTransformer.encode
        assert fast.dtype == np.float32 and fast.shape == reference.shape == (encoder.identity.dimension,)
        worst = max(worst, float(np.abs(fast - reference).max()))
    assert worst <= 1e-6, worst


def test_a_cold_query_imports_neither_torch_nor_sentence_transformers():
    code = (
        "import sys\n"
        "from rag_pipeline.config import Settings\n"
        "from rag_pipeline.embedding.encoder import encoder_for\n"
        "encoder = encoder_for(Settings())\n"
        "vector = encoder.encode_query('How many days of annual leave do employees get?')\n"
        f"print(vector.shape[0], [m for m in {HEAVY!r} if m in sys.modules])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split(maxsplit=1) == ["384", "[]\n"], proc.stdout


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
