"""Query vectors for the built-in model without torch, transformers or sentence-transformers.

A cold `rag ask` spent most of its ~8 s importing sentence-transformers (which pulls in
scikit-learn, scipy.optimize, torch's dynamo and transformers' model zoo) to encode one short
question (issue 19). This module runs the same computation on numpy instead: the model folder's
``tokenizer.json`` through the ``tokenizers`` library (what ``PreTrainedTokenizerFast`` runs),
the BERT encoder from ``model.safetensors`` (memory-mapped, so only the token rows of the
250k-row embedding table are read), mean pooling over every token and L2 normalization — the
Transformer -> Pooling(mean) -> Normalize pipeline sentence-transformers runs for this folder.
The 12 layers run in onnxruntime when their fp32 graph was exported (scripts/install.sh does it:
`onnx_backend.export_onnx_fp32_layers`), ~2.7x faster than numpy's; numpy's otherwise.

It is not bit-identical to ``SentenceTransformer.encode`` (numpy's and torch's matrix products sum
in different orders) but within float32 rounding: max abs difference 1.3e-7 on 394 real questions
(both golden sets, a truncated 3,000-character text, whitespace edges); the tests hold it to 1e-6.
Used for queries only, and only for a folder whose files say it is exactly that pipeline
(`load_query_encoder` returns None otherwise); passages (indexing) still go through
sentence-transformers, batched and padded as before.
"""

from __future__ import annotations

import json
import logging
import math
import struct
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

_MODULES = (  # as sentence-transformers < 6 names them, then as 6 does
    (
        "sentence_transformers.models.Transformer",
        "sentence_transformers.models.Pooling",
        "sentence_transformers.models.Normalize",
    ),
    (
        "sentence_transformers.base.modules.transformer.Transformer",
        "sentence_transformers.sentence_transformer.modules.pooling.Pooling",
        "sentence_transformers.base.modules.normalize.Normalize",
    ),
)
FAST_TOKENIZER_CLASSES = ("PreTrainedTokenizerFast", "TokenizersBackend")
_POOLING_MODES = (
    "pooling_mode_cls_token",
    "pooling_mode_max_tokens",
    "pooling_mode_mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens",
    "pooling_mode_lasttoken",
)


def _read_json(path: Path) -> dict | list:
    return json.loads(path.read_text(encoding="utf-8"))


def supported_layout(folder: Path) -> int | None:
    """The truncation length if `folder` is a plain BERT + mean pooling + normalize
    sentence-transformers folder with a fast tokenizer and fp32 safetensors, else None."""
    try:
        config = _read_json(folder / "config.json")
        modules = _read_json(folder / "modules.json")
        pooling = _read_json(folder / "1_Pooling" / "config.json")
        st_config = _read_json(folder / "sentence_bert_config.json")
        tok_config = _read_json(folder / "tokenizer_config.json")
    except (OSError, ValueError):
        return None
    plain_bert = (
        config.get("model_type") == "bert"
        and config.get("hidden_act") == "gelu"
        and config.get("position_embedding_type", "absolute") == "absolute"
        and config.get("hidden_size", 0) % max(1, config.get("num_attention_heads", 0)) == 0
        and (config.get("torch_dtype") or config.get("dtype") or "float32") == "float32"  # "dtype" since transformers 5
    )
    mean_pooling = (  # sentence-transformers < 6: one flag per mode; 6: "pooling_mode"
        pooling.get("pooling_mode_mean_tokens") is True and not any(pooling.get(mode) for mode in _POOLING_MODES)
        or pooling.get("pooling_mode") == "mean"
    )
    pipeline = (
        tuple(m.get("type") for m in modules) in _MODULES
        and modules[0].get("path", "") == ""
        and modules[1].get("path") == "1_Pooling"
        and mean_pooling
        and pooling.get("include_prompt", True) is True
        and pooling.get("word_embedding_dimension", pooling.get("embedding_dimension")) == config.get("hidden_size")
        and not st_config.get("do_lower_case", False)
        and st_config.get("transformer_task", "feature-extraction") == "feature-extraction"
        and st_config.get("module_output_name", "token_embeddings") == "token_embeddings"
    )
    # the generic fast tokenizer: tokenizer.json is all it runs (transformers 5 renamed the class TokenizersBackend)
    tokenizer = tok_config.get("tokenizer_class") in FAST_TOKENIZER_CLASSES and (folder / "tokenizer.json").is_file()
    if not (plain_bert and pipeline and tokenizer and (folder / "model.safetensors").is_file()):
        return None
    limits = [st_config.get("max_seq_length"), config.get("max_position_embeddings"), tok_config.get("model_max_length")]
    limits = [int(v) for v in limits if isinstance(v, int) and v > 0]
    return min(limits) if limits else None


def _load_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of an fp32 safetensors file as a read-only view of one memory map."""
    with open(path, "rb") as fh:
        (header_len,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(header_len))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + header_len)
    tensors = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        if meta["dtype"] != "F32":
            raise ValueError(f"{path.name}: tensor {name} is {meta['dtype']}, not F32")
        start, end = meta["data_offsets"]
        tensors[name.removeprefix("bert.")] = data[start:end].view("<f4").reshape(meta["shape"])
    return tensors


def _erf(x: np.ndarray) -> np.ndarray:
    from scipy.special import erf  # numpy has no erf; scipy.special alone is cheap (no scipy.optimize)

    return erf(x)


def one_blas_thread():
    """A context that runs numpy's matrix products on one thread. On this project's shared 2-core
    machines OpenBLAS's spinning worker threads made one query take 0.5-2 s under load instead of
    ~18 ms; a query's products are small, so one thread loses nothing when the machine is idle.
    (threadpoolctl comes with scikit-learn; without it the products run as numpy configures them.)"""
    import contextlib

    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return contextlib.nullcontext
    controller = ThreadpoolController()
    return lambda: controller.limit(limits=1, user_api="blas")


# Threads of the layers graph's run for one question, at most RAG_COMPUTE_THREADS, sleeping when
# idle (as the token states': token_states.TOKEN_STATE_THREADS): 13.9 -> 10.6 ms a question idle,
# 25.6 -> 20.1 ms with both cores busy (p50, bench/query_vector.py; numpy's layers: 28.6 and 55.2).
LAYER_THREADS = 2


class QueryEncoder:
    """``encode(text)``: the normalized mean-pooled BERT vector of one text (prompt included).

    With `layers` (an ONNX file of the encoder layers, `onnx_backend.export_onnx_fp32_layers`) the
    layers run in onnxruntime, ~2.7x faster than the numpy ones below (bench/README.md, "The
    question's vector through ONNX Runtime"), within float32 rounding of them; tokenization, the
    word-embedding rows (memory-mapped), pooling and normalization stay here either way."""

    def __init__(self, folder: Path, max_length: int, layers: Path | None = None):
        from tokenizers import Tokenizer

        self.folder = folder
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=max_length)  # longest_first, as sentence-transformers asks
        config = _read_json(folder / "config.json")
        self.layers = int(config["num_hidden_layers"])
        self.heads = int(config["num_attention_heads"])
        self.eps = np.float32(config["layer_norm_eps"])
        self.w = _load_safetensors(folder / "model.safetensors")
        missing = [n for n in self._names() if n not in self.w]
        if missing:
            raise ValueError(f"model.safetensors lacks {missing[0]} (and {len(missing) - 1} more)")
        self.dimension = int(self.w["embeddings.word_embeddings.weight"].shape[1])
        self._blas = one_blas_thread()
        self._layers = _layers_session(layers) if layers is not None and layers.is_file() else None

    def _names(self):
        yield from ("embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
                    "embeddings.token_type_embeddings.weight", "embeddings.LayerNorm.weight", "embeddings.LayerNorm.bias")
        for i in range(self.layers):
            for part in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
                         "attention.output.LayerNorm", "intermediate.dense", "output.dense", "output.LayerNorm"):
                yield f"encoder.layer.{i}.{part}.weight"
                yield f"encoder.layer.{i}.{part}.bias"

    def _layer_norm(self, x: np.ndarray, name: str) -> np.ndarray:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + self.eps) * self.w[name + ".weight"] + self.w[name + ".bias"]

    def _linear(self, x: np.ndarray, name: str) -> np.ndarray:
        return x @ self.w[name + ".weight"].T + self.w[name + ".bias"]

    def encode(self, text: str) -> np.ndarray:
        with self._blas():
            return self._encode(text)

    def _encode(self, text: str) -> np.ndarray:
        pooled = self._hidden(np.asarray(self.tokenizer.encode(text).ids, dtype=np.int64)).mean(0)
        return (pooled / max(float(np.linalg.norm(pooled)), 1e-12)).astype(np.float32)

    def hidden_states(self, ids: np.ndarray) -> np.ndarray:
        """The last layer's state of each token id (query.token_recall reads them)."""
        with self._blas():
            return self._hidden(np.asarray(ids, dtype=np.int64))

    def _hidden(self, ids: np.ndarray) -> np.ndarray:
        if self._layers is not None:
            rows = np.ascontiguousarray(self.w["embeddings.word_embeddings.weight"][ids], dtype=np.float32)[None]
            mask = np.ones((1, len(ids)), dtype=np.int64)
            return self._layers.run(None, {"inputs_embeds": rows, "attention_mask": mask})[0][0]
        n = len(ids)
        w = self.w
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.token_type_embeddings.weight"][0]
        x = x + w["embeddings.position_embeddings.weight"][:n]
        x = self._layer_norm(x, "embeddings.LayerNorm")
        head = x.shape[1] // self.heads
        scale = np.float32(1.0 / math.sqrt(head))
        for i in range(self.layers):
            p = f"encoder.layer.{i}."

            def split(t):
                return t.reshape(n, self.heads, head).transpose(1, 0, 2)

            q = split(self._linear(x, p + "attention.self.query"))
            k = split(self._linear(x, p + "attention.self.key"))
            v = split(self._linear(x, p + "attention.self.value"))
            scores = (q @ k.transpose(0, 2, 1)) * scale  # one unpadded text: no attention mask
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(1, 0, 2).reshape(n, -1)
            x = self._layer_norm(self._linear(context, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
            hidden = self._linear(x, p + "intermediate.dense")
            hidden = 0.5 * hidden * (1.0 + _erf(hidden / np.float32(math.sqrt(2.0))))  # exact (erf) GELU
            x = self._layer_norm(self._linear(hidden, p + "output.dense") + x, p + "output.LayerNorm")
        return x


def _layers_session(path: Path):
    """An onnxruntime session of the exported layers, or None (with a warning) when the file does
    not load: numpy's layers give the same vector, slower, so a damaged export never stops a query."""
    import onnxruntime as ort

    from rag_pipeline.config import compute_threads
    from rag_pipeline.embedding.onnx_backend import session_options

    options = session_options(min(compute_threads(), LAYER_THREADS), spin=False)
    try:
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own types for a truncated or foreign file
        log.warning("the question's vector runs on numpy's layers (same vector, slower): %s does not load (%s); "
                    "delete it and run encoder.export_query_graphs() to export it again", path, str(exc).splitlines()[0])
        return None


class TokenCounter:
    """Token counts and the passage sequence limit of a `supported_layout` folder, read off its
    ``tokenizer.json`` and configs alone: chunking sizes chunks in the model's tokens, and a step
    that only chunks need not import torch and load the weights to count them (measured: 1.1 s and
    335 MB against 6.4-7.6 s and 794 MB, per process). The counts are those of the model's own fast
    tokenizer (it runs the same ``tokenizer.json``); the tests hold them equal on real text."""

    def __init__(self, folder: Path):
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()  # a count is of the whole text, as the model's tokenizer gives it
        self.max_seq_length = _sentence_transformers_limit(folder)

    def count(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)


def _sentence_transformers_limit(folder: Path) -> int:
    """`SentenceTransformer.max_seq_length` for the folder: sentence_bert_config.json's, else the
    smaller of the model's position embeddings and the tokenizer's model_max_length."""
    configured = _read_json(folder / "sentence_bert_config.json").get("max_seq_length")
    if isinstance(configured, int) and configured > 0:
        return configured
    positions = _read_json(folder / "config.json").get("max_position_embeddings")
    tokenizer_limit = _read_json(folder / "tokenizer_config.json").get("model_max_length")
    return min(int(v) for v in (positions, tokenizer_limit) if isinstance(v, int) and v > 0)


def load_query_encoder(folder: str | Path, layers: Path | None = None) -> QueryEncoder | None:
    """A query encoder for `folder` (its layers in onnxruntime when the `layers` file exists),
    or None when the folder's layout is not the one it reproduces."""
    folder = Path(folder)
    max_length = supported_layout(folder)
    return QueryEncoder(folder, max_length, layers) if max_length else None
