"""Which fusion rule? Fit on one half of the queries, report on the other.

    .venv/bin/python bench/fusion_sweep.py [--only xquad] [--analyzers]

Every query of XQuAD (zh→zh, en→zh) and SciFact-train falls in a fixed half, `fit` or `report`,
by a seeded hash of its id (`half()`: the zh and en forms of an XQuAD question share their half).
Each arm is retrieved once per query (100 chunks, as `rag eval`) from the cached eval lakes
(`rag eval --dataset DIR` builds them); every candidate rule is then scored offline (nDCG@10) on
both halves. The rule is chosen on the fit halves only (highest mean over the three sets among
the rules at or above every single arm and plain RRF on each fit half), and the report halves
say what it is worth. `--analyzers` adds the same table for the keyword arm as the product
tokenized it before stemming and Chinese folding (rag_pipeline.text ANALYZER_VERSION 1), from
throw-away full-text indexes over the same chunks. The "dense z/…" rules also weight each dense
hit by how many spreads its cosine stands above the query's background sample (bench/README.md,
"A dense hit's say by its standing").

The report halves are also written as queries files (bench/results/splits/), so the product's
own harness reproduces a reported number:

    .venv/bin/rag eval --dataset ../shared/bench/scifact-train \
        --queries bench/results/splits/scifact-train.report.jsonl --mode all

Per-query retrievals are cached in bench/results/fusion_cache/ (keyed by lake), so a second
run only re-scores rules. First run: ~3,200 queries, ~5-10 min on 2 cores with the eval cache.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pickle
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rag_pipeline.eval.beir import load_beir  # noqa: E402
from rag_pipeline.eval.metrics import doc_ranking, per_query  # noqa: E402
from rag_pipeline.eval.retrieval import open_benchmark_index  # noqa: E402
from rag_pipeline.ingest.language import detect_language  # noqa: E402
from rag_pipeline.query.filters import search_filter  # noqa: E402
from rag_pipeline.query.fusion import Background, coverage_weight, rrf, same_language, standing_weights  # noqa: E402
from rag_pipeline.query.retrieve import dense_arm, keyword_arm, lexical_coverage, terms_coverage  # noqa: E402
from rag_pipeline.store import schema as s  # noqa: E402
from rag_pipeline.text import is_code_term, search_tokens  # noqa: E402

BENCH = REPO.parent / "shared" / "bench"
RESULTS = REPO / "bench" / "results"
SETS = [
    ("xquad zh→zh", BENCH / "xquad-zh", None),
    ("xquad en→zh", BENCH / "xquad-zh", BENCH / "xquad-zh" / "queries_en.jsonl"),
    ("scifact-train", BENCH / "scifact-train", None),
]
DEPTH = 100
SEED = "rag-fusion-split-1"  # never change it once numbers are reported: the halves would mix
HALVES = ("fit", "report")


def half(qid: str) -> str:
    """The query's fixed half: first byte of sha256(seed:id), even -> fit, odd -> report."""
    return HALVES[hashlib.sha256(f"{SEED}:{qid}".encode()).digest()[0] % 2]


def write_splits(folder: Path, queries_file: Path | None) -> dict[str, Path]:
    """The queries file cut into its two halves (for `rag eval --queries`)."""
    source = queries_file or folder / "queries.jsonl"
    out = {}
    lines = source.read_text(encoding="utf-8").splitlines()
    for h in HALVES:
        path = RESULTS / "splits" / f"{folder.name}{'' if queries_file is None else '-' + source.stem}.{h}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        kept = [line for line in lines if line.strip() and half(json.loads(line)["_id"]) == h]
        path.write_text("\n".join(kept) + "\n", encoding="utf-8")
        out[h] = path
    return out


# --- the keyword arm as ANALYZER_VERSION 1 (no stemming, no folding) tokenized it --------------


def v1_tokens(text: str) -> list[str]:
    return search_tokens(text, stemming=False, fold=False)


def v1_keyword_table(index, tmp: str):
    """A throw-away FTS table over the lake's chunks, search_text re-tokenized the v1 way."""
    import lancedb
    import pyarrow as pa
    from lancedb.index import FTS

    from rag_pipeline.chunking import HEADING_SEPARATOR, _embed_text

    rows = index.chunks.to_lance().to_table(columns=["chunk_id", "doc_id", "language", "heading_path", "text", s.SEARCH_TEXT_COLUMN])
    d = rows.to_pydict()
    embed = [_embed_text(tuple(h.split(HEADING_SEPARATOR)) if h else (), t) for h, t in zip(d["heading_path"], d["text"])]
    current = [" ".join(search_tokens(e)) for e in embed[:50]]
    if current != d[s.SEARCH_TEXT_COLUMN][:50]:
        raise RuntimeError("cannot rebuild the chunks' embed text: search_text does not match")
    v1 = [" ".join(v1_tokens(e)) for e in embed]
    df = Counter(t for text in v1 for t in set(text.split()))
    table = lancedb.connect(tmp).create_table(
        "v1", data=pa.table({"chunk_id": d["chunk_id"], "doc_id": d["doc_id"], "language": d["language"], s.SEARCH_TEXT_COLUMN: v1})
    )
    table.create_index(
        s.SEARCH_TEXT_COLUMN,
        config=FTS(base_tokenizer="whitespace", lower_case=True, stem=False, remove_stop_words=False,
                   ascii_folding=False, with_position=False),
    )
    return table, df


def v1_coverage(query: str, search_text: str, df: Counter, n_docs: int, only=None) -> float:
    """retrieve.lexical_coverage with v1 tokens and v1 document frequencies."""
    return terms_coverage(frozenset(v1_tokens(query)), search_text, df, n_docs, only)


# --- retrieval, once per query ----------------------------------------------------------------


def collect(index, dataset, analyzers: bool) -> list[dict]:
    """Per query: each arm's (chunk_id, score) list plus what the rules need about each chunk."""
    predicate = search_filter(None, None)
    n_docs = index.manifest["counts"]["chunks"]
    # idf over every chunk: the default principal may read all of an eval lake (= api's permitted counts)
    texts = index.chunks.to_lance().to_table(columns=[s.SEARCH_TEXT_COLUMN]).column(0).to_pylist()
    all_df = Counter(t for text in texts for t in set(text.split()))
    background = index._scope(predicate)["background"]  # the asker's background sample, as api uses it
    tmp = tempfile.TemporaryDirectory()
    v1_table, v1_df = v1_keyword_table(index, tmp.name) if analyzers else (None, None)
    out = []
    for qid, query in dataset.queries.items():
        doc_freq = {t: all_df[t] for t in search_tokens(query) if t in all_df}
        vec = index.encoder.encode_query(query)
        dense = dense_arm(index.chunks, vec, predicate, DEPTH)
        keyword = keyword_arm(index.chunks, query, predicate, DEPTH)
        rows = {r["chunk_id"]: r for r in dense + keyword}
        sims = background @ vec
        q = {
            "qid": qid,
            "background": (float(sims.mean()), float(sims.std())),
            "lang": detect_language(query),
            "dense": [(r["chunk_id"], r["score"]) for r in dense],
            "keyword": [(r["chunk_id"], r["score"]) for r in keyword],
            "coverage": {r["chunk_id"]: lexical_coverage(query, r[s.SEARCH_TEXT_COLUMN], doc_freq, n_docs) for r in keyword},
            "code_coverage": {
                r["chunk_id"]: lexical_coverage(query, r[s.SEARCH_TEXT_COLUMN], doc_freq, n_docs, only=is_code_term)
                for r in keyword
            },
        }
        if v1_table is not None:
            tokens = v1_tokens(query)
            v1 = (
                v1_table.search(" ".join(tokens), query_type="fts", fts_columns=s.SEARCH_TEXT_COLUMN)
                .select(["chunk_id", "doc_id", "language", s.SEARCH_TEXT_COLUMN, "_score"]).limit(DEPTH).to_list()
                if tokens else []
            )
            rows.update((r["chunk_id"], r) for r in v1 if r["chunk_id"] not in rows)
            q["keyword_v1"] = [(r["chunk_id"], float(r["_score"])) for r in v1]
            q["coverage_v1"] = {r["chunk_id"]: v1_coverage(query, r[s.SEARCH_TEXT_COLUMN], v1_df, n_docs) for r in v1}
            q["code_coverage_v1"] = {
                r["chunk_id"]: v1_coverage(query, r[s.SEARCH_TEXT_COLUMN], v1_df, n_docs, only=is_code_term) for r in v1
            }
        q["doc"] = {cid: r["doc_id"] for cid, r in rows.items()}
        q["chunk_lang"] = {cid: r["language"] for cid, r in rows.items()}
        out.append(q)
    tmp.cleanup()
    return out


def cached_collect(name: str, index, dataset, analyzers: bool) -> list[dict]:
    lake_key = Path(index.lake.lake_dir).name
    # "-bg": records hold the background statistics (the dense-standing rules need them)
    path = RESULTS / "fusion_cache" / f"{lake_key}-{hashlib.sha1(dataset.queries_file.encode()).hexdigest()[:8]}-{int(analyzers)}-bg.pkl"
    if path.exists():
        return pickle.loads(path.read_bytes())
    started = time.perf_counter()
    queries = collect(index, dataset, analyzers)
    print(f"{name}: {len(queries)} queries retrieved in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(queries))
    return queries


# --- the rules --------------------------------------------------------------------------------


def rules():
    """(name, k, keyword arm weight, hit weight function | None, arm-only[, dense full-trust z]).

    A hit weight function gets (query record, chunk id, suffix) where suffix picks the analyzer's
    coverage ("" current, "_v1" before stemming/folding).
    """
    yield "vector only", None, None, None, "dense"
    yield "keyword only", None, None, None, "keyword"
    for k in (10, 20, 30, 60, 100):
        yield f"plain RRF k={k}", k, 1.0, None, None
    for w in (0.5, 0.7, 1.5):
        yield f"RRF k=60, keyword arm × {w}", 60, w, None, None
    for k in (20, 60):
        for t in (0.0, 0.3, 0.5, 0.7, 1.0):
            same = "weight 1" if t == 0 else f"coverage/{t}"
            yield f"k={k}, same language {same}, across languages as same", k, 1.0, _hit_weight(t, "same"), None
            yield f"k={k}, same language {same}, across languages codes only", k, 1.0, _hit_weight(t, "codes"), None
            yield f"k={k}, same language {same}, across languages 0", k, 1.0, _hit_weight(t, "zero"), None
    for z in DENSE_STANDING:  # the default's keyword rule, plus each dense hit weighted by its standing
        yield f"k=20, coverage/0.5, codes only across; dense z/{z:g}", 20, 1.0, _hit_weight(0.5, "codes"), None, z


DENSE_STANDING = (2.0, 3.0, 4.0, 6.0)  # full-trust z values of the dense-standing rules (z/4 ships)


def _hit_weight(t: float, cross: str):
    def weight(q, cid, sfx):
        if same_language(q["lang"], q["chunk_lang"][cid]) or cross == "same":
            return coverage_weight(q["coverage" + sfx][cid], t)
        if cross == "zero":
            return 0.0
        return coverage_weight(q["code_coverage" + sfx][cid], t if t > 0 else 1.0)

    return weight


CURRENT_DEFAULT = "k=60, same language coverage/1.0, across languages codes only"  # api.py before issue 14
PLAIN = "plain RRF k=60"


def per_query_ndcg(queries, qrels, rule, sfx: str) -> dict[str, float]:
    name, k, arm_weight, hit_weight, arm, *dense_z = rule
    keyword = "keyword" + sfx
    rankings = {}
    for q in queries:
        if arm:
            ranked = [cid for cid, _ in q[arm if arm == "dense" else keyword]]
        else:
            hw = {"keyword": {cid: hit_weight(q, cid, sfx) for cid, _ in q[keyword]}} if hit_weight else None
            if dense_z:  # standing_weights gives full say where the spread is 0
                hw["dense"] = standing_weights(q["dense"], Background(*q["background"]), dense_z[0])
            fused = rrf({"dense": q["dense"], "keyword": q[keyword]}, k=k, weights={"keyword": arm_weight}, hit_weights=hw)
            ranked = [h.chunk_id for h in fused]
        rankings[q["qid"]] = doc_ranking(q["doc"][cid] for cid in ranked)
    return {qid: m["ndcg@10"] for qid, m in per_query(qrels, rankings).items()}


def score_all(data: dict, sfx: str) -> dict[str, dict[str, dict[str, float]]]:
    """{rule: {set: {half: nDCG@10}}}."""
    table: dict = {}
    for rule in rules():
        for name, (queries, qrels) in data.items():
            scores = per_query_ndcg(queries, qrels, rule, sfx)
            table.setdefault(rule[0], {})[name] = {
                h: sum(v for q, v in scores.items() if half(q) == h) / max(1, sum(half(q) == h for q in scores)) for h in HALVES
            }
    return table


def choose(table: dict, names: list[str]) -> str:
    """On the fit halves only: the best mean among rules never below an arm or plain RRF."""
    baselines = ["vector only", "keyword only", PLAIN]
    fused = [r for r in table if r not in baselines[:2]]

    def mean(rule):
        return sum(table[rule][n]["fit"] for n in names) / len(names)

    safe = [r for r in fused if all(table[r][n]["fit"] >= max(table[b][n]["fit"] for b in baselines) for n in names)]
    return max(safe or fused, key=mean)


def print_table(title: str, table: dict, names: list[str], chosen: str, n: dict) -> None:
    print(f"\n### {title}\n")
    print("| rule | " + " | ".join(f"{name} fit ({n[name]['fit']}) | {name} report ({n[name]['report']})" for name in names) + " |")
    print("|---|" + "---|---|" * len(names))
    for rule, row in table.items():
        mark = " **(chosen on fit)**" if rule == chosen else (" (default before)" if rule == CURRENT_DEFAULT else "")
        print(f"| {rule}{mark} | " + " | ".join(f"{row[name]['fit']:.3f} | {row[name]['report']:.3f}" for name in names) + " |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run only the sets whose name contains this (e.g. xquad)")
    parser.add_argument("--analyzers", action="store_true", help="also score the keyword arm as tokenized before stemming/folding")
    parser.add_argument("--json", help="write {analyzer: {rule: {set: {half: nDCG@10}}}} here")
    args = parser.parse_args()
    sets = [t for t in SETS if not args.only or args.only in t[0]]
    data = {}
    n = {}
    for name, folder, queries_file in sets:
        write_splits(folder, queries_file)
        dataset = load_beir(folder, queries_file=queries_file)
        index = open_benchmark_index(dataset, progress=False)
        queries = cached_collect(name, index, dataset, args.analyzers)
        data[name] = (queries, {q: dataset.qrels[q] for q in dataset.queries})
        n[name] = {h: sum(half(q) == h for q in dataset.queries) for h in HALVES}
    names = [name for name, _, _ in sets]
    results = {}
    for label, sfx in (("current analyzer (stemming + zh folding)", ""), ("analyzer v1 (no stemming, no folding)", "_v1")):
        if sfx and not args.analyzers:
            continue
        table = score_all(data, sfx)
        chosen = choose(table, names)
        print_table(f"nDCG@10, {label}; chosen on the fit halves: {chosen}", table, names, chosen, n)
        results[label] = {"chosen": chosen, "table": table}
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
