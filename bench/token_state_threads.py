"""One token-state run on 1 or 2 onnxruntime threads, spinning or sleeping when idle: median ms and
whether the states are identical, for the longest passages of a lake and the golden questions.

    .venv/bin/python bench/token_state_threads.py --lake <lake> [--golden data/golden/sample_golden.jsonl]

Run it on an idle machine and again with both cores busy (e.g. two `python3 -c "while True: pass"`):
the choice of token_states.TOKEN_STATE_THREADS rests on both (bench/README.md, "Token states on two
threads").
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SETUPS = ((1, True), (2, True), (2, False))  # (threads, spinning)


def main() -> int:
    import onnxruntime as ort

    from rag_pipeline.embedding.onnx_backend import session_options
    from rag_pipeline.eval.golden import DEFAULT_GOLDEN, load_golden
    from rag_pipeline.query import RagIndex

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lake", required=True)
    parser.add_argument("--golden", default=str(DEFAULT_GOLDEN))
    parser.add_argument("--passages", type=int, default=40, help="the N longest chunks")
    args = parser.parse_args()
    index = RagIndex.open(args.lake)
    states, identity = index.encoder.token_states, index.encoder.identity
    if states is None or states._session is None:
        raise SystemExit("this model has no int8 token-state export")
    path = states._session._model_path
    chunks = index.chunks.to_lance().to_table(columns=["text"]).column("text").to_pylist()
    inputs = {
        "passages": [identity.passage_prompt + t for t in sorted(chunks, key=len)[-args.passages:]],
        "questions": [identity.query_prompt + q["question"] for q in load_golden(Path(args.golden))],
    }
    print("| input | n | tokens (median) | " + " | ".join(f"{n} thread(s){'' if spin else ', sleeping'} ms" for n, spin in SETUPS) + " | identical |")
    print("|---|---:|---:|" + "---:|" * len(SETUPS) + "---|")
    for name, texts in inputs.items():
        feeds = [np.asarray([states.tokenizer.encode(t).ids], dtype=np.int64) for t in texts]
        medians, outputs = [], []
        for threads, spin in SETUPS:
            session = ort.InferenceSession(path, session_options(threads, spin=spin), providers=["CPUExecutionProvider"])
            times, outs = [], []
            for ids in feeds:
                started = time.perf_counter()
                outs.append(session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})[0])
                times.append((time.perf_counter() - started) * 1000)
            medians.append(statistics.median(times))
            outputs.append(outs)
        same = all(np.array_equal(a, b) for outs in outputs[1:] for a, b in zip(outs, outputs[0]))
        tokens = statistics.median(ids.shape[1] for ids in feeds)
        print(f"| {name} | {len(feeds)} | {tokens:.0f} | " + " | ".join(f"{m:.1f}" for m in medians) + f" | {'yes' if same else 'NO'} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
