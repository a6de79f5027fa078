"""The evaluation harness: metric arithmetic, a tiny real BEIR run, and the golden set on the sample."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_pipeline.eval.metrics import aggregate, doc_ranking, per_query

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
XQUAD = SHARED / "bench" / "xquad-zh"
RESULT_KEYS = {
    "dataset", "split", "mode", "queries", "ndcg@10", "recall@10", "recall@100", "mrr@10",
    "latency_ms_p50", "latency_ms_p95",
}


def test_metrics_match_hand_checked_example():
    # q1: chunks of A, A, B, C -> documents A, B, C; relevant B and C sit at document ranks 2 and 3
    #     (chunk ranks 3 and 4: scoring chunks instead of documents would give MRR 1/3).
    # q2: nothing relevant retrieved.
    qrels = {"q1": {"B": 1, "C": 1}, "q2": {"Z": 1}}
    chunk_docs = {"q1": ["A", "A", "B", "C", "B"], "q2": ["X", "Y", "X"]}
    rankings = {q: doc_ranking(docs) for q, docs in chunk_docs.items()}
    assert rankings == {"q1": ["A", "B", "C"], "q2": ["X", "Y"]}

    scores = per_query(qrels, rankings)
    assert scores["q1"]["mrr@10"] == pytest.approx(0.5)
    assert scores["q1"]["recall@10"] == pytest.approx(1.0)
    # DCG = 1/log2(3) + 1/log2(4); ideal = 1 + 1/log2(3)
    assert scores["q1"]["ndcg@10"] == pytest.approx((0.63093 + 0.5) / 1.63093, abs=1e-4)
    assert scores["q2"] == {"ndcg@10": 0.0, "recall@10": 0.0, "recall@100": 0.0, "mrr@10": 0.0}

    means = aggregate(qrels, rankings)
    assert means["mrr@10"] == pytest.approx(0.25)
    assert means["recall@10"] == pytest.approx(0.5)
    assert means["recall@100"] == pytest.approx(0.5)

    # a judged query the run never answered counts as 0, not as "skipped"
    qrels["q3"] = {"C": 1}
    assert aggregate(qrels, rankings)["mrr@10"] == pytest.approx(0.5 / 3)


def test_relevant_beyond_ten_counts_for_recall_at_100_only():
    ranking = [f"d{i}" for i in range(30)]
    scores = per_query({"q": {"d20": 1}}, {"q": ranking})["q"]
    assert scores["mrr@10"] == 0.0 and scores["recall@10"] == 0.0
    assert scores["recall@100"] == 1.0


def _tiny_xquad(dest: Path, n_docs: int = 30, n_queries: int = 20) -> Path:
    """The first n_docs passages and, for n_queries of them, one question each."""
    from rag_pipeline.eval.beir import read_jsonl, read_qrels

    corpus = read_jsonl(XQUAD / "corpus.jsonl")[:n_docs]
    keep = {d["_id"] for d in corpus}
    qrels = read_qrels(XQUAD / "qrels" / "test.tsv")
    chosen: dict[str, str] = {}  # passage -> its first question
    for qid, rels in qrels.items():
        doc = next(iter(rels))
        if doc in keep and doc not in chosen.values() and len(chosen) < n_queries:
            chosen[qid] = doc
    queries = [q for q in read_jsonl(XQUAD / "queries.jsonl") if q["_id"] in chosen]
    (dest / "qrels").mkdir(parents=True)
    (dest / "corpus.jsonl").write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in corpus), encoding="utf-8")
    (dest / "queries.jsonl").write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in queries), encoding="utf-8")
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t1" for q, d in chosen.items()]
    (dest / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return dest


def test_answered_correctly_counts_right_answers_and_right_refusals_with_its_interval():
    from rag_pipeline.eval.golden import summarize, wilson_interval

    def judged(answerable, refused, contains):
        return {"answerable": answerable, "refused": refused, "answer_contains": contains, "hit@5": True,
                "page_hit@5": None, "first_expected_rank": 1, "cited_expected": not refused}

    details = [
        judged(True, False, True),  # answered with the fact: right
        judged(True, False, False),  # answered without it: wrong
        judged(True, True, False),  # refused although answerable: wrong
        judged(False, True, False),  # refused where nothing answers: right
        judged(False, False, False),  # answered where nothing answers: wrong
    ]
    summary = summarize(details)
    assert summary["answered_correctly"] == 0.4
    low, high = summary["answered_correctly_95"]
    assert low < 0.4 < high
    # textbook Wilson 95 % intervals (Newcombe 1998): 0/10 and 5/10
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    wide, narrow = wilson_interval(5, 10), wilson_interval(50, 100)
    assert narrow[1] - narrow[0] < wide[1] - wide[0]
    assert wilson_interval(0, 0) is None


def test_smoke_eval_on_tiny_xquad_subset(tmp_path, capsys):
    if not XQUAD.is_dir():
        pytest.skip(f"benchmark data not found at {XQUAD} (it lives beside the checkout in CI)")
    from rag_pipeline import cli
    from rag_pipeline.eval.beir import load_beir
    from rag_pipeline.eval.build import build_index
    from rag_pipeline.store.lake import Lake

    data = _tiny_xquad(tmp_path / "tiny-xquad")
    cache = tmp_path / "cache"
    code = cli.main(["eval", "--dataset", str(data), "--mode", "all", "--json", "--cache-dir", str(cache)])
    assert code == 0
    results = json.loads(capsys.readouterr().out)
    assert [r["mode"] for r in results] == ["hybrid", "hybrid-rrf", "vector", "keyword"]
    for r in results:
        assert RESULT_KEYS <= set(r)
        assert r["split"] == "test" and r["queries"] == 20 and r["documents"] == 30
        for m in ("ndcg@10", "recall@10", "recall@100", "mrr@10"):
            assert 0.0 <= r[m] <= 1.0
        assert 0 < r["latency_ms_p50"] <= r["latency_ms_p95"]
    assert results[0]["ndcg@10"] > 0.8

    # the second run finds the cached lake: same folder, no new generation
    from rag_pipeline.config import Settings
    from rag_pipeline.embedding.encoder import encoder_for

    s = Settings()
    encoder = encoder_for(s)
    lake_dir = build_index(load_beir(data), encoder, s, cache, progress=False)
    assert str(lake_dir) == results[0]["lake"]
    assert len(Lake(lake_dir).list_generations()) == 1


def test_eval_modes_follow_the_product():
    from rag_pipeline.eval.cli import MODE_CHOICES
    from rag_pipeline.query.api import MODES

    assert set(MODE_CHOICES) == set(MODES)


def test_golden_file_is_balanced_and_well_formed():
    from rag_pipeline.eval.golden import load_golden

    questions = load_golden()
    sample = Path(__file__).resolve().parents[2] / "data" / "sample"
    answerable = [q for q in questions if q["answerable"]]
    assert len(questions) >= 44
    assert abs(len(answerable) - len(questions) / 2) <= 1
    assert {q["lang"] for q in questions} == {"en", "zh"}
    for q in answerable:
        assert q["answer_contains"], q["id"]
        for source in q["expected_sources"]:
            assert (sample / source).is_file(), f"{q['id']}: {source} is not in data/sample"


def test_golden_set_on_sample_index(indexed_sample, capsys):
    from rag_pipeline import cli
    from rag_pipeline.eval.golden import METRICS

    assert indexed_sample["exit_code"] == 0
    assert cli.main(["eval", "--golden", "--lake", str(indexed_sample["lake"]), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    for m in METRICS:
        assert report[m] is not None and 0.0 <= report[m] <= 1.0, m
    assert len(report["details"]) == report["questions"] >= 44
    assert report["hit@5"] >= 0.8
