"""The shipped refusal gate and quoting on XQuAD questions nothing was fitted on.

    .venv/bin/python bench/gate_unseen.py [--n 200]            # ~3 min warm on 2 cores

bench/answerability.py records the first 80 questions of each seeded half for the gate's fit and
report halves; this takes the next `--n` of the report half, which no fit and no report has read.
Each question is asked as is (answerable) and with its gold passages filtered out inside the
search (close but unanswerable), through the product's own `RagIndex.ask` with the shipped policy;
and, one question per paragraph, against a copy of the corpus whose gold paragraph lost the
sentences holding the answer (bench/answerability.py's "answer removed" case: on topic, fact absent).
To compare with an older commit: `git archive <commit> rag_pipeline | tar -x -C /tmp/old` and run
with `PYTHONPATH=/tmp/old RAG_EVAL_CACHE=data/eval_cache RAG_MODEL_CACHE=data/models`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from answerability import answer_removed_corpus, answers_of, without  # noqa: E402
from fusion_sweep import BENCH, half  # noqa: E402

from rag_pipeline.eval.beir import load_beir  # noqa: E402
from rag_pipeline.eval.retrieval import open_benchmark_index  # noqa: E402

SETS = [("XQuAD zh→zh", None), ("XQuAD en→zh", BENCH / "xquad-zh" / "queries_en.jsonl")]
RECORDED = 80  # per half, by bench/answerability.py --limit 160


def measure(queries_file: Path | None, n: int) -> dict:
    folder = BENCH / "xquad-zh"
    dataset = load_beir(folder, queries_file=queries_file)
    index = open_benchmark_index(dataset, progress=False)
    answers = answers_of(folder, queries_file)
    ids = [q for q in sorted(q for q in dataset.queries if dataset.qrels.get(q)) if half(q) == "report"][RECORDED:RECORDED + n]
    refused = contained = answered_hidden = 0
    for qid in ids:
        gold = [d for d, rel in dataset.qrels[qid].items() if rel > 0]
        answer = index.ask(dataset.queries[qid])
        refused += answer.refused
        contained += not answer.refused and any(a in answer.answer for a in answers.get(qid) or [])
        answered_hidden += not index.ask(dataset.queries[qid], where=without(gold)).refused
    removed_folder, removed_ids = answer_removed_corpus(folder, ids, f"unseen-{n}")
    removed = open_benchmark_index(load_beir(removed_folder, queries_file=queries_file and removed_folder / queries_file.name), progress=False)
    answered_removed = sum(not removed.ask(dataset.queries[qid]).refused for qid in sorted(removed_ids))
    k = len(ids)
    return {"questions": k, "false_refusal": refused / k, "false_answer": answered_hidden / k,
            "answer_contains": contained / k, "right": (contained + k - answered_hidden) / (2 * k),
            "answer_removed": len(removed_ids), "false_answer_removed": answered_removed / max(1, len(removed_ids))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="unseen questions per set")
    args = parser.parse_args()
    print("| set | questions (×2 cases) | false refusal | false answer | answer contains | right | answer removed: n, false answer |\n|---|---|---|---|---|---|---|")
    results = {}
    for name, queries_file in SETS:
        r = results[name] = measure(queries_file, args.n)
        print(f"| {name} | {r['questions']} | {r['false_refusal']:.3f} | {r['false_answer']:.3f} | {r['answer_contains']:.3f} | {r['right']:.3f} | {r['answer_removed']}, {r['false_answer_removed']:.3f} |", flush=True)
    print(json.dumps(results, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
