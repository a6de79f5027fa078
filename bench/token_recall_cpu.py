"""Token recall by arithmetic: fp32 against the int8 ONNX states as shipped and as they were.

    .venv/bin/python bench/token_recall_cpu.py --golden data/golden/corpus_golden.jsonl=<corpus lake> \
        --golden data/golden/sample_golden.jsonl=<sample lake>

For each golden question, the passage `ask` reads token recall from (the first context passage)
is scored three ways: the fp32 numpy states (the reference), the int8 ONNX session as shipped
(`onnx_backend.session_options`: u8 x u8 products where the CPU lacks VNNI) and a plain int8
session (u8 x s8, which saturates without VNNI). On a VNNI CPU the two int8 columns are equal; on
one without, the plain session is what the product computed before. Prints the CPU's VNNI flag
and each int8 column's distance to fp32; then what the option costs the `int8-onnx` passage
encoder: 48 SciFact abstracts encoded three times each way, interleaved, one thread.
bench/README.md, "The same evidence on every CPU".
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rag_pipeline.config import apply_offline_environment  # noqa: E402


def cpu_has_vnni() -> bool:
    flags = Path("/proc/cpuinfo").read_text(errors="replace") if Path("/proc/cpuinfo").exists() else ""
    return "vnni" in flags


def plain_session(onnx_path: Path):
    """The int8 graph on one thread as the product ran it before: without `session.x64quantprecision`
    (graph optimizations are onnxruntime's default, all, as in the product's sessions)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    return ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])


def first_passages(lake: Path, golden: Path) -> list[tuple[str, str, str]]:
    """(id, query, first context passage) per question, as `ask` hands them to token recall."""
    from rag_pipeline.query import RagIndex

    index = RagIndex.open(lake)
    seen: list[tuple[str, str]] = []
    score = index._token_recall

    def capture(query, top):
        seen.append((query, top[0]["text"] if top else ""))
        return score(query, top)

    index._token_recall = capture
    out = []
    for line in golden.read_text(encoding="utf-8").splitlines():
        if line.strip():
            q = json.loads(line)
            seen.clear()
            index.ask(q["question"])
            out.append((q["id"], *seen[0]))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--golden", action="append", required=True, help="GOLDEN_FILE=LAKE (repeatable)")
    args = parser.parse_args()
    apply_offline_environment()
    from rag_pipeline.config import Settings
    from rag_pipeline.embedding.encoder import _resolve_or_fail, encoder_for, export_query_graphs
    from rag_pipeline.embedding.query_encoder import supported_layout
    from rag_pipeline.embedding.token_states import TokenStates
    from rag_pipeline.query.token_recall import token_recall

    settings = Settings()
    exported = export_query_graphs(settings)
    if exported is None:
        print("the configured model has no int8 token-state export: nothing to compare")
        return 1
    onnx_path = exported[0]
    folder = Path(_resolve_or_fail(settings.embedding_model, str(settings.model_cache_dir))[0])
    identity = encoder_for(settings).identity
    layout = supported_layout(folder)
    shipped = TokenStates(folder, layout, onnx_path)
    plain = TokenStates(folder, layout, onnx_path)
    plain._session = plain_session(onnx_path)
    states = {"fp32": TokenStates(folder, layout, None), "int8 (shipped)": shipped, "int8 (plain session)": plain}

    rows = []
    for spec in args.golden:
        golden, lake = spec.split("=", 1)
        for qid, query, passage in first_passages(Path(lake), Path(golden)):
            rows.append([token_recall(s, query, passage, identity.query_prompt, identity.passage_prompt) if passage else 0.0
                         for s in states.values()])
    values = np.array(rows)
    print(f"CPU has VNNI: {cpu_has_vnni()}; {len(values)} questions\n")
    print("| token recall against fp32 | mean abs diff | p50 | p95 | max | mean signed |")
    print("|---|---:|---:|---:|---:|---:|")
    names = list(states)
    for i in (1, 2):
        d = values[:, i] - values[:, 0]
        a = np.abs(d)
        print(f"| {names[i]} | {a.mean():.4f} | {np.median(a):.4f} | {np.percentile(a, 95):.4f} | {a.max():.4f} | {d.mean():+.4f} |")
    between = np.abs(values[:, 1] - values[:, 2])
    print(f"\nshipped vs plain session: mean abs diff {between.mean():.4f}, max {between.max():.4f}, "
          f"{int((between > 0).sum())} of {len(values)} questions differ")
    encoding_cost(folder, onnx_path)
    return 0


def encoding_cost(folder: Path, onnx_path: Path) -> None:
    """Seconds to encode 48 SciFact abstracts with the int8-onnx passage encoder, option on and off."""
    import statistics
    import time

    from rag_pipeline.embedding.onnx_backend import OnnxPassageEncoder

    corpus = Path(__file__).resolve().parents[2] / "shared" / "bench" / "scifact-train" / "corpus.jsonl"
    if not corpus.is_file():
        return
    with corpus.open(encoding="utf-8") as fh:
        texts = [json.loads(line)["text"][:1200] for line, _ in zip(fh, range(48))]
    shipped, plain = OnnxPassageEncoder(folder, onnx_path, num_threads=1), OnnxPassageEncoder(folder, onnx_path, num_threads=1)
    plain.session = plain_session(onnx_path)
    seconds: dict[str, list[float]] = {"plain session": [], "shipped": []}
    for _ in range(3):
        for name, encoder in (("plain session", plain), ("shipped", shipped)):
            start = time.perf_counter()
            encoder.encode(texts)
            seconds[name].append(time.perf_counter() - start)
    medians = {name: statistics.median(v) for name, v in seconds.items()}
    print(f"\nint8-onnx passage encoder, 48 abstracts, median of 3: plain {medians['plain session']:.2f} s, "
          f"shipped {medians['shipped']:.2f} s (x{medians['shipped'] / medians['plain session']:.2f})")


if __name__ == "__main__":
    raise SystemExit(main())
