"""The question's vector: numpy's layers vs the exported fp32 ONNX layers on 1 or 2 sleeping threads.

    .venv/bin/python bench/query_vector.py [--golden data/golden/sample_golden.jsonl] [--busy]

Per setup, the median and p95 ms of `QueryEncoder.encode` over the golden questions (prompt
included; tokenization, the memory-mapped word-embedding rows, pooling and normalization in every
row) and the largest difference of any vector component from the numpy layers'. Setups run
interleaved, three rounds, after a warm-up. `--busy`: two busy-looping processes keep both cores
occupied meanwhile (a shared machine under load). The choice of query_encoder.LAYER_THREADS rests
on both (bench/README.md, "The question's vector through ONNX Runtime").
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
from pathlib import Path
from time import perf_counter

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _spin() -> None:
    while True:
        pass


def main() -> int:
    from rag_pipeline.config import Settings
    from rag_pipeline.embedding import query_encoder
    from rag_pipeline.embedding.encoder import encoder_for, query_layers_export_path
    from rag_pipeline.eval.golden import DEFAULT_GOLDEN, load_golden

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--golden", default=str(DEFAULT_GOLDEN))
    parser.add_argument("--busy", action="store_true", help="both cores busy while measuring")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    settings = Settings()
    encoder = encoder_for(settings)
    layers = query_layers_export_path(settings.model_cache_dir, encoder.identity)
    if encoder.query_encoder is None or not layers.is_file():
        raise SystemExit("the configured model has no exported layers graph (scripts/install.sh makes it)")
    folder = encoder.query_encoder.folder
    setups = {"numpy layers": query_encoder.QueryEncoder(folder, 512)}
    for threads in (1, 2):
        query_encoder.LAYER_THREADS = threads
        setups[f"onnx layers, {threads} thread(s)"] = query_encoder.QueryEncoder(folder, 512, layers)
    texts = [encoder.identity.query_prompt + q["question"] for q in load_golden(Path(args.golden))]
    reference = [setups["numpy layers"].encode(t) for t in texts]
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(2 if args.busy else 0)]
    for p in spinners:
        p.start()
    times: dict[str, list[float]] = {name: [] for name in setups}
    worst: dict[str, float] = {name: 0.0 for name in setups}
    try:
        for _ in range(args.rounds):
            for name, enc in setups.items():
                for text, ref in zip(texts, reference):
                    started = perf_counter()
                    vector = enc.encode(text)
                    times[name].append((perf_counter() - started) * 1000)
                    worst[name] = max(worst[name], float(np.abs(vector - ref).max()))
    finally:
        for p in spinners:
            p.terminate()
    base = statistics.median(times["numpy layers"])
    print(f"{len(texts)} questions x {args.rounds} rounds{', both cores busy' if args.busy else ''}")
    print("| setup | p50 ms | p95 ms | x numpy (p50) | max abs diff to numpy |")
    print("|---|---:|---:|---:|---:|")
    for name, values in times.items():
        ordered = sorted(values)
        p95 = ordered[int(0.95 * (len(ordered) - 1))]
        print(f"| {name} | {statistics.median(values):.1f} | {p95:.1f} | {base / statistics.median(values):.2f} | {worst[name]:.1e} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
