"""Embedding speed per precision against retrieval quality, and the embed stage against bare encode.

    .venv/bin/python bench/embedding_precision.py                    # speed only, ~3 min
    .venv/bin/python bench/embedding_precision.py --quality xquad    # + nDCG@10 on XQuAD zh→zh, en→zh
    .venv/bin/python bench/embedding_precision.py --quality all      # + SciFact-train (embeds 8.7k chunks per precision)
    .venv/bin/python bench/embedding_precision.py --skip-speed --quality all --precisions int8-onnx   # one precision's nDCG

Speed: the first N SciFact abstracts chunked as the pipeline chunks them, encoded by (a) the bare
sentence-transformers `model.encode` and (b) the pipeline's embed stage (`embed_with_cache`: cache
lookup, longest-first batches, cache write, into a throw-away lake), for each precision, in
interleaved rounds; medians of docs/s and the ratios to fp32 and to bare encode in the same run.
Quality: `rag eval` (hybrid and vector) with RAG_EMBEDDING_PRECISION set; each precision has its
own model key, so its vectors are cached apart and never mix with fp32 ones.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rag_pipeline.chunking import TokenBudget  # noqa: E402
from rag_pipeline.config import Settings  # noqa: E402
from rag_pipeline.embedding.encoder import PRECISIONS, encoder_for  # noqa: E402
from rag_pipeline.eval.beir import load_beir  # noqa: E402
from rag_pipeline.eval.build import chunk_corpus, embed_with_cache  # noqa: E402
from rag_pipeline.store.lake import Lake  # noqa: E402

BENCH = REPO.parent / "shared" / "bench"


def encoders(precisions: list[str]) -> dict:
    out = {}
    for precision in precisions:
        os.environ["RAG_EMBEDDING_PRECISION"] = precision
        out[precision] = encoder_for(Settings())
    os.environ.pop("RAG_EMBEDDING_PRECISION")
    return out


def speed(n_docs: int, rounds: int, precisions: list[str]) -> list[dict]:
    dataset = load_beir(BENCH / "scifact-train")
    dataset.corpus = dict(list(dataset.corpus.items())[:n_docs])
    encs = encoders(["fp32", *(p for p in precisions if p != "fp32")])
    _, _, chunks = chunk_corpus(dataset, Settings().chunking, TokenBudget.for_encoder(encs["fp32"]))
    texts = {c.fingerprint: c.embed_text for c in chunks}
    prompted = [encs["fp32"].identity.passage_prompt + t for t in texts.values()]
    timings: dict[tuple[str, str], list[float]] = {}
    for _ in range(rounds):
        for precision, enc in encs.items():
            started = time.perf_counter()
            if enc.backend is not None:  # int8-onnx: the ONNX Runtime session is the bare model
                enc.backend.encode(prompted)
            else:
                enc.model.encode(prompted, batch_size=enc.batch_size, normalize_embeddings=True, convert_to_numpy=True)
            timings.setdefault((precision, "bare encode"), []).append(time.perf_counter() - started)
            with tempfile.TemporaryDirectory() as tmp:
                started = time.perf_counter()
                embed_with_cache(Lake(Path(tmp)), enc, texts, progress=False)
                timings.setdefault((precision, "embed stage"), []).append(time.perf_counter() - started)
    rows = []
    for (precision, path), seconds in timings.items():
        rows.append({"precision": precision, "path": path, "docs_per_s": n_docs / statistics.median(seconds),
                     "chunks_per_s": len(texts) / statistics.median(seconds)})
    fp32_bare = next(r["docs_per_s"] for r in rows if r["precision"] == "fp32" and r["path"] == "bare encode")
    for r in rows:
        bare = next(x["docs_per_s"] for x in rows if x["precision"] == r["precision"] and x["path"] == "bare encode")
        r["vs_fp32_bare"] = r["docs_per_s"] / fp32_bare
        r["vs_own_bare"] = r["docs_per_s"] / bare
    print(f"{n_docs} SciFact abstracts → {len(texts)} chunks, {rounds} rounds, median", file=sys.stderr)
    return rows


def quality(which: str, precisions: list[str]) -> list[dict]:
    from rag_pipeline.eval.retrieval import evaluate_beir

    sets = [("xquad zh→zh", BENCH / "xquad-zh", None), ("xquad en→zh", BENCH / "xquad-zh", BENCH / "xquad-zh" / "queries_en.jsonl")]
    if which == "all":
        sets.append(("scifact-train", BENCH / "scifact-train", None))
    rows = []
    for precision in precisions:
        os.environ["RAG_EMBEDDING_PRECISION"] = precision
        for name, folder, queries in sets:
            for r in evaluate_beir(load_beir(folder, queries_file=queries), ("hybrid", "vector"), progress=False):
                rows.append({"precision": precision, "set": name, "mode": r["mode"], "ndcg@10": r["ndcg@10"]})
    os.environ.pop("RAG_EMBEDDING_PRECISION", None)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=128, help="SciFact abstracts for the speed table (default 128)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quality", choices=["none", "xquad", "all"], default="none")
    parser.add_argument("--precisions", default=",".join(PRECISIONS), help=f"comma list of {PRECISIONS}")
    parser.add_argument("--skip-speed", action="store_true")
    args = parser.parse_args()
    precisions = args.precisions.split(",")
    print("| precision | path | docs/s | chunks/s | × fp32 bare | × own bare encode |\n|---|---|---|---|---|---|")
    for r in [] if args.skip_speed else speed(args.docs, args.rounds, precisions):
        print(f"| {r['precision']} | {r['path']} | {r['docs_per_s']:.2f} | {r['chunks_per_s']:.2f} | "
              f"{r['vs_fp32_bare']:.2f} | {r['vs_own_bare']:.2f} |", flush=True)
    if args.quality != "none":
        rows = quality(args.quality, precisions)
        sets = list(dict.fromkeys(r["set"] for r in rows))
        print("\n| precision | mode | " + " | ".join(sets) + " |\n|---|---|" + "---|" * len(sets))
        for precision in precisions:
            for mode in ("hybrid", "vector"):
                cells = [next(r["ndcg@10"] for r in rows if r["precision"] == precision and r["mode"] == mode and r["set"] == s) for s in sets]
                print(f"| {precision} | {mode} | " + " | ".join(f"{c:.3f}" for c in cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
