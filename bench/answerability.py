"""Refusal evidence on benchmark questions, answerable and made unanswerable by hiding the gold.

    .venv/bin/python bench/answerability.py [--only xquad] [--limit 300]

A golden set of a few dozen questions cannot fit a refusal gate that generalizes: the review saw
every dev number green and 35 % right on unseen documents. The retrieval benchmarks give
hundreds of real questions with known gold passages, and each yields two cases through the
product's own `RagIndex.ask`:

* answerable: the question against the whole corpus;
* close-but-unanswerable: the same question with its gold documents filtered out of the search
  (an extra `where`, applied inside the search as permissions are), so what remains is on topic
  (XQuAD's other paragraphs of the same article, SciFact's neighbouring abstracts) but lacks
  the asked fact.

The evidence of each case (the dict `ask` returns) is written to
bench/results/answerability/<set>.jsonl with the question's fit/report half (the seeded halves
of bench/fusion_sweep.py). `rag_pipeline.eval.calibrate` fits the gate on the fit halves of
these files; the golden sets are only ever reported on.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rag_pipeline.eval.beir import load_beir, read_jsonl  # noqa: E402
from rag_pipeline.eval.retrieval import open_benchmark_index  # noqa: E402
from rag_pipeline.query.answer import RefusalPolicy  # noqa: E402

from fusion_sweep import SETS, half  # noqa: E402

OUT = REPO / "bench" / "results" / "answerability"
ALWAYS_ANSWER = RefusalPolicy(min_score=float("-inf"))


def answers_of(folder: Path, queries_file: Path | None) -> dict[str, list[str]]:
    """Answer strings per query id where the benchmark has them (XQuAD does, SciFact does not)."""
    path = queries_file or folder / "queries.jsonl"
    return {q["_id"]: (q.get("metadata") or {}).get("answers", []) for q in read_jsonl(path)}


def without(doc_ids) -> str:
    quoted = ", ".join("'" + d.replace("'", "''") + "'" for d in sorted(doc_ids))
    return f"doc_id NOT IN ({quoted})"


def collect(name: str, folder: Path, queries_file: Path | None, limit: int | None) -> Path:
    dataset = load_beir(folder, queries_file=queries_file)
    index = open_benchmark_index(dataset, progress=False)
    index.policy = ALWAYS_ANSWER  # record every answer: gates are replayed on the evidence afterwards
    answers = answers_of(folder, queries_file)
    ids = sorted(q for q in dataset.queries if dataset.qrels.get(q))
    if limit:
        ids = [q for q in ids if half(q) == "fit"][: limit // 2] + [q for q in ids if half(q) == "report"][: limit // 2]
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name.replace(' ', '_').replace('→', '-')}.jsonl"
    done = {json.loads(line)["id"] for line in path.read_text(encoding="utf-8").splitlines()} if path.exists() else set()
    started = time.perf_counter()
    with path.open("a", encoding="utf-8") as out:  # resumes: questions already recorded are skipped
        for n, qid in enumerate(ids, 1):
            if qid in done:
                continue
            question = dataset.queries[qid]
            gold = [d for d, rel in dataset.qrels[qid].items() if rel > 0]
            for answerable, where in ((True, None), (False, without(gold))):
                answer = index.ask(question, where=where)
                expected = answers.get(qid) or []
                record = {
                    "id": qid,
                    "set": name,
                    "half": half(qid),
                    "question": question,
                    "answerable": answerable,
                    "refused": answer.refused,  # only by the gate's fixed rules (no candidates, unknown codes)
                    "gold_cited": any(c.doc_id in gold for c in answer.citations),
                    "contains": bool(expected) and any(a in answer.answer for a in expected),
                    "evidence": answer.evidence,
                }
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
            if n % 50 == 0:
                print(f"  {name}: {n}/{len(ids)} questions, {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return path


SUBSET_DISTRACTORS = 1200  # SciFact abstracts beside the gold ones: a 5k-abstract first build costs ~25 min


def scifact_subset(queries: int) -> tuple[str, Path, None]:
    """A BEIR folder holding `queries` SciFact-train claims, their gold abstracts and a fixed
    sample of other abstracts: English same-language evidence at a fraction of the build."""
    source = REPO.parent / "shared" / "bench" / "scifact-train"
    dataset = load_beir(source)
    ids = sorted(dataset.queries)
    ids = [q for q in ids if half(q) == "fit"][: queries // 2] + [q for q in ids if half(q) == "report"][: queries // 2]
    gold = {d for q in ids for d in dataset.qrels[q]}
    others = sorted((d for d in dataset.corpus if d not in gold), key=lambda d: hashlib.sha256(d.encode()).hexdigest())
    keep = gold | set(others[:SUBSET_DISTRACTORS])
    folder = REPO / "bench" / "results" / f"scifact-subset-{queries}"
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as out:
        for doc in read_jsonl(source / "corpus.jsonl"):
            if str(doc["_id"]) in keep:
                out.write(json.dumps(doc, ensure_ascii=False) + "\n")
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as out:
        for q in ids:
            out.write(json.dumps({"_id": q, "text": dataset.queries[q]}, ensure_ascii=False) + "\n")
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{r}" for q in ids for d, r in dataset.qrels[q].items()]
    (folder / "qrels" / "train.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return "scifact-subset", folder, None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="only the sets whose name contains this")
    parser.add_argument("--limit", type=int, help="questions per set (half from each split half)")
    parser.add_argument("--scifact", type=int, default=0, help="also a SciFact-train subset with this many claims")
    args = parser.parse_args()
    sets = list(SETS[:2]) + ([scifact_subset(args.scifact)] if args.scifact else [])
    for name, folder, queries_file in sets:
        if args.only and args.only not in name:
            continue
        print(f"wrote {collect(name, folder, queries_file, args.limit)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
