"""ONNX Runtime backends: int8 encoding (RAG_EMBEDDING_PRECISION=int8-onnx, see encoder.load_encoder),
the int8 graph's token states and the fp32 layers of the query vector (export_onnx_fp32_layers).

Why int8: on a 2-core AVX-512 VNNI CPU, the sentence-transformers model exported to ONNX with eager
attention, fused by onnxruntime's transformer optimizer (Attention, EmbedLayerNormalization,
SkipLayerNormalization, BiasGelu) and dynamically quantized to per-channel QInt8, encoded SciFact
chunks about 2.5x faster than torch fp32 `model.encode`. Its vectors had cosine >= 0.996 to the
fp32 ones (mean 0.997). Quantized vectors are a different model: never mix them with fp32 vectors
in one cache or index.

Needs `onnx` (for the export and quantization) and `onnxruntime`; torch and sentence-transformers
are needed only to export.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np

from rag_pipeline.config import apply_offline_environment, compute_threads


def session_options(threads: int, spin: bool = True):
    """onnxruntime session options for the project's graphs: an int8 one's numbers do not depend
    on the CPU (the setting below; an fp32 graph has no int8 products for it to change).

    `spin=False`: idle pool threads sleep instead of spinning (one query's short runs, between
    which a spinning thread would only take a shared core from the rest of the query).

    On x86 CPUs without VNNI (AVX2, AVX-512 before VNNI) onnxruntime computes u8 x s8 products
    with VPMADDUBSW, whose 16-bit pair sums saturate; a VNNI CPU's VPDPBUSD does not. The same
    graph then gives other numbers on other machines: token recall (the refusal gate's heaviest
    evidence) moved by up to 0.016, and one held-out answer with it (bench/README.md, "The same
    evidence on every CPU"). `session.x64quantprecision` has onnxruntime compute those products
    as u8 x u8 where the CPU lacks VNNI, so the results are a VNNI CPU's; a VNNI CPU is unaffected.
    """
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.x64quantprecision", "1")
    if not spin:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


def export_onnx_int8(model_dir: Path, out_path: Path) -> Path:
    """Export `model_dir` (a sentence-transformers folder) to an int8 ONNX file at `out_path`.

    Does nothing if `out_path` exists. Steps, each chosen because it measured faster or safer:
    - eager attention, not SDPA: only the eager graph lets the optimizer fuse Attention
      (SDPA export: 1.88x; eager + fused: 2.47x over torch fp32);
    - the legacy TorchScript exporter (`dynamo=False`), opset 17, dynamic batch and sequence axes;
      the graph outputs `last_hidden_state` (pooling and normalization are done in numpy);
    - per-channel QInt8 weights: the same speed as per-tensor QInt8 with closer vectors
      (min cosine 0.996 against 0.980); QUInt8 was slower.
    Intermediate files go to a temporary folder beside `out_path`, and the result is moved into
    place last, so an interrupted export leaves no partial file.
    """
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    def quantized(fused: Path) -> Path:
        quant = fused.with_name("int8.onnx")
        quantize_dynamic(
            str(fused), str(quant), per_channel=True, weight_type=QuantType.QInt8,
            # fused ops are in the com.microsoft domain, where shape inference gives no types
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )
        return quant

    return _export_fused(model_dir, out_path, "input_ids", quantized)


def export_onnx_fp32_layers(model_dir: Path, out_path: Path) -> Path:
    """Export the encoder layers of `model_dir` (fp32, no word-embedding table) to `out_path`.

    For the query vector (query_encoder.QueryEncoder): the same fp32 computation as its numpy
    layers, in onnxruntime's kernels, ~2.7x faster for a question (28.6 -> 10.6 ms p50 on an AVX2
    machine, two threads: bench/README.md, "The question's vector through ONNX Runtime"). Its input
    is the tokens' word embeddings (`inputs_embeds`), which the caller reads off the memory-mapped
    weights file: the 250k-row table (384 MB of the model's 470) stays out of every query process's
    memory. Exported and fused as the int8 graph is; not quantized. Does nothing if `out_path` exists.
    """
    return _export_fused(model_dir, out_path, "inputs_embeds", lambda fused: fused)


def _export_fused(model_dir: Path, out_path: Path, first_input: str, finish) -> Path:
    """The model's BERT as an ONNX graph of (`first_input`, attention_mask) -> last_hidden_state,
    fused by onnxruntime's transformer optimizer (Attention, SkipLayerNormalization, BiasGelu, and
    EmbedLayerNormalization when it starts from input_ids), then `finish(fused path) -> path`, moved
    to `out_path` last (an interrupted export leaves no partial file). Nothing if `out_path` exists."""
    model_dir, out_path = Path(model_dir), Path(out_path)
    if out_path.exists():
        return out_path
    import torch
    from onnxruntime.transformers import optimizer
    from sentence_transformers import SentenceTransformer

    apply_offline_environment()
    model = SentenceTransformer(str(model_dir), device="cpu")
    hf = model[0].auto_model.eval()
    hf.set_attn_implementation("eager")

    class _LastHidden(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, first, attention_mask):
            return self.m(**{first_input: first, "attention_mask": attention_mask}).last_hidden_state

    sample = model.tokenizer(["passage: hello world", "passage: a slightly longer sample"], padding=True, return_tensors="pt")
    first = sample["input_ids"]
    if first_input == "inputs_embeds":
        first = hf.get_input_embeddings()(first).detach()
    axes = {0: "batch", 1: "sequence"}
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_path.parent) as tmp:
        raw, fused = Path(tmp) / "fp32.onnx", Path(tmp) / "fused.onnx"
        with torch.no_grad():
            torch.onnx.export(
                _LastHidden(hf), (first, sample["attention_mask"]), str(raw),
                input_names=[first_input, "attention_mask"], output_names=["last_hidden_state"],
                dynamic_axes={first_input: axes, "attention_mask": axes, "last_hidden_state": axes},
                opset_version=17, do_constant_folding=True, dynamo=False,
            )
        optimizer.optimize_model(
            str(raw), model_type="bert", num_heads=hf.config.num_attention_heads,
            hidden_size=hf.config.hidden_size, opt_level=1,
        ).save_model_to_file(str(fused))
        os.replace(finish(fused), out_path)
    return out_path


class OnnxPassageEncoder:
    """Encode texts with an ONNX file from `export_onnx_int8`: mean pooling, then L2 normalization.

    Like `SentenceTransformer.encode`, it encodes texts as given: the caller adds the passage
    prompt ("passage: " for e5). Texts are sorted longest-first by token count and padded per batch
    so short texts do not pay for long ones. Tokens beyond `max_seq_length` are cut.

    Dynamic quantization scales activations per batch, so a text's vector shifts slightly with
    its batch partners (cosine about 0.998 between the same text in two different batches); the
    torch int8 path behaves the same way. Vectors are thus not bit-reproducible across batchings.
    """

    def __init__(self, model_dir: Path, onnx_path: Path, max_seq_length: int = 512, batch_size: int = 32,
                 num_threads: int | None = None):
        import onnxruntime as ort
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        self.max_seq_length = max_seq_length
        self.batch_size = batch_size
        self.dimension = int(json.loads((Path(model_dir) / "config.json").read_text())["hidden_size"])
        options = session_options(num_threads or compute_threads())
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])

    def encode(self, texts: list[str]) -> np.ndarray:
        """Float32 unit vectors, one row per text, in the order given."""
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        ids = self.tokenizer(list(texts), truncation=True, max_length=self.max_seq_length)["input_ids"]
        order = sorted(range(len(texts)), key=lambda i: -len(ids[i]))
        pad = self.tokenizer.pad_token_id
        for start in range(0, len(order), self.batch_size):
            rows = order[start:start + self.batch_size]
            width = max(len(ids[i]) for i in rows)
            input_ids = np.full((len(rows), width), pad, dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                input_ids[r, :len(ids[i])] = ids[i]
                mask[r, :len(ids[i])] = 1
            hidden = self.session.run(None, {"input_ids": input_ids, "attention_mask": mask})[0]
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            out[rows] = pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return out
