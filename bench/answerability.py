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
  the asked fact;
* answer removed (XQuAD): the same question against a copy of the corpus whose gold paragraph
  lost the sentences holding the answer. The paragraph that ranks first is still the right one
  (the entity, the other facts): the "on topic, the asked fact absent" case that held-out golden
  questions fail on and that hiding whole paragraphs never shows the gate.

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


def chosen_ids(dataset, limit: int | None) -> list[str]:
    ids = sorted(q for q in dataset.queries if dataset.qrels.get(q))
    if limit:
        ids = [q for q in ids if half(q) == "fit"][: limit // 2] + [q for q in ids if half(q) == "report"][: limit // 2]
    return ids


def strip_answer(text: str, answers: list[str]) -> str | None:
    """`text` without its sentences that hold an answer string; None when nothing or all of it goes."""
    from rag_pipeline.text import split_sentences

    hit = [s for s in split_sentences(text) if any(a in s for a in answers)]
    kept = text
    for sentence in hit:
        kept = kept.replace(sentence, "")
    if not hit or not kept.strip() or any(a in kept for a in answers):
        return None
    return kept


def answer_removed_corpus(folder: Path, candidates: list[str], name: str, caps: dict[str, int] | None = None) -> tuple[Path, set[str]]:
    """A BEIR copy of `folder` whose gold paragraphs lost their answer sentences, one question per
    paragraph, taken from `candidates` in order (at most `caps[half]` per half): (folder, ids of
    the questions it serves).

    Answers are read from the corpus language's queries (XQuAD zh: Chinese strings), so the zh and
    en questions of one id share the copy. A question is skipped when its answer also sits in
    another paragraph of the same article (it may still be answerable) or cannot be cut out."""
    dataset = load_beir(folder)
    answers = answers_of(folder, None)
    corpus = dict(dataset.corpus)
    served: set[str] = set()
    for qid in candidates:
        if caps and sum(half(q) == half(qid) for q in served) >= caps[half(qid)]:
            continue
        gold = [d for d, rel in dataset.qrels[qid].items() if rel > 0]
        strings = [a for a in answers.get(qid, []) if len(a) >= 2]
        if len(gold) != 1 or not strings or corpus[gold[0]] != dataset.corpus[gold[0]]:
            continue  # one gold paragraph, answer strings, and not already cut for another question
        title, text = corpus[gold[0]]
        siblings = [t for d, (ti, t) in dataset.corpus.items() if ti == title and d != gold[0]]
        kept = strip_answer(text, strings)
        if kept is None or any(a in t for a in strings for t in siblings):
            continue
        corpus[gold[0]] = (title, kept)
        served.add(qid)
    out = REPO / "bench" / "results" / f"{folder.name}-answer-removed-{name}"
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    with (out / "corpus.jsonl").open("w", encoding="utf-8") as f:
        for doc_id, (title, text) in corpus.items():
            f.write(json.dumps({"_id": doc_id, "title": title, "text": text}, ensure_ascii=False) + "\n")
    for source in folder.glob("queries*.jsonl"):
        (out / source.name).write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    (out / "qrels" / f"{dataset.split}.tsv").write_text(
        (folder / "qrels" / f"{dataset.split}.tsv").read_text(encoding="utf-8"), encoding="utf-8")
    return out, served


def gate_answer_removed(limit: int | None) -> tuple[Path, set[str]]:
    """The gate's answer-removed cases: the report half's chosen questions first (never fitted
    on), then any fit-half question, as many as the fit half's chosen questions (fitting material)."""
    folder = SETS[0][1]
    dataset = load_beir(folder)
    report = [q for q in chosen_ids(dataset, limit) if half(q) == "report"]
    fit_half = [q for q in sorted(dataset.queries) if half(q) == "fit" and dataset.qrels.get(q)]
    caps = {"report": len(report), "fit": limit // 2 if limit else len(fit_half)}
    return answer_removed_corpus(folder, report + fit_half, str(limit or "all"), caps)


def record(qid: str, name: str, question: str, case: str, answer, gold: list[str], expected: list[str]) -> dict:
    return {
        "id": qid,
        "set": name,
        "half": half(qid),
        "case": case,
        "question": question,
        "answerable": case == "answerable",
        "refused": answer.refused,  # only by the gate's fixed rules (no candidates, unknown codes)
        "gold_cited": any(c.doc_id in gold for c in answer.citations),
        "contains": bool(expected) and any(a in answer.answer for a in expected),
        "evidence": answer.evidence,
    }


def collect(name: str, folder: Path, queries_file: Path | None, limit: int | None, removed: tuple[Path, set[str]] | None) -> Path:
    dataset = load_beir(folder, queries_file=queries_file)
    index = open_benchmark_index(dataset, progress=False)
    index.policy = ALWAYS_ANSWER  # record every answer: gates are replayed on the evidence afterwards
    answers = answers_of(folder, queries_file)
    removed_index = None
    if removed:
        removed_index = open_benchmark_index(load_beir(removed[0], queries_file=queries_file and removed[0] / queries_file.name), progress=False)
        removed_index.policy = ALWAYS_ANSWER
    chosen = chosen_ids(dataset, limit)
    ids = chosen + (sorted(removed[1] - set(chosen)) if removed else [])  # fit-half questions asked only with the answer removed
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name.replace(' ', '_').replace('→', '-')}.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    done = {(r["id"], r.get("case", "answerable" if r["answerable"] else "gold_hidden")) for r in map(json.loads, lines)}
    started = time.perf_counter()
    with path.open("a", encoding="utf-8") as out:  # resumes: cases already recorded are skipped
        for n, qid in enumerate(ids, 1):
            question = dataset.queries[qid]
            gold = [d for d, rel in dataset.qrels[qid].items() if rel > 0]
            cases = [("answerable", index, None), ("gold_hidden", index, without(gold))] if qid in chosen else []
            if removed_index is not None and qid in removed[1]:
                cases.append(("answer_removed", removed_index, None))
            for case, where_index, where in cases:
                if (qid, case) in done:
                    continue
                answer = where_index.ask(question, where=where)
                out.write(json.dumps(record(qid, name, question, case, answer, gold, answers.get(qid) or []), ensure_ascii=False) + "\n")
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
    parser.add_argument("--no-answer-removed", action="store_true", help="without the answer-removed XQuAD cases")
    args = parser.parse_args()
    sets = list(SETS[:2]) + ([scifact_subset(args.scifact)] if args.scifact else [])
    removed = None if args.no_answer_removed else gate_answer_removed(args.limit)
    for name, folder, queries_file in sets:
        if args.only and args.only not in name:
            continue
        print(f"wrote {collect(name, folder, queries_file, args.limit, removed if folder == SETS[0][1] else None)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
