"""Why does the keyword arm differ from plain BM25? Ablate stemming, chunking and the title.

    .venv/bin/python bench/keyword_ablation.py ../shared/bench/scifact-train [--queries FILE]

Reads the benchmark's cached eval lake (build it first with `rag eval --dataset DIR`), builds
throw-away LanceDB full-text indexes in a temp folder over the same pre-tokenized text
(rag_pipeline.text.search_tokens) with only one setting changed at a time, and scores the
keyword ranking alone. No embedding is involved: ~1 minute per variant on SciFact, 2 cores.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import lancedb  # noqa: E402
import pyarrow as pa  # noqa: E402
from lancedb.index import FTS  # noqa: E402

from rag_pipeline.config import Settings  # noqa: E402
from rag_pipeline.eval.beir import load_beir  # noqa: E402
from rag_pipeline.eval.build import cache_key, default_cache_root  # noqa: E402
from rag_pipeline.eval.metrics import aggregate, doc_ranking  # noqa: E402
from rag_pipeline.ingest.scan import file_sha256  # noqa: E402
from rag_pipeline.store.lake import Lake  # noqa: E402
from rag_pipeline.text import search_tokens  # noqa: E402


def fts_table(db, name: str, ids: list[str], texts: list[str], stem: bool):
    table = db.create_table(name, data=pa.table({"doc_id": ids, "search_text": texts}), mode="overwrite")
    table.create_index(
        "search_text",
        config=FTS(base_tokenizer="whitespace", lower_case=True, stem=stem, language="English",
                   remove_stop_words=False, ascii_folding=False, with_position=False),
        replace=True,
    )
    return table


def score(table, dataset, depth: int = 100) -> dict:
    rankings = {}
    for qid, text in dataset.queries.items():
        tokens = search_tokens(text)
        rows = table.search(" ".join(tokens), query_type="fts", fts_columns="search_text").limit(depth).to_list() if tokens else []
        rankings[qid] = doc_ranking(r["doc_id"] for r in rows)
    return aggregate(dataset.qrels, rankings)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("--queries")
    args = parser.parse_args()
    dataset = load_beir(args.dataset, queries_file=args.queries)
    settings = Settings()
    lakes = sorted(default_cache_root().glob(f"{dataset.name}-*"))
    from rag_pipeline.embedding.encoder import load_encoder

    key = cache_key(file_sha256(dataset.corpus_path), settings.chunking,
                    load_encoder(settings.embedding_model, str(settings.model_cache_dir)).identity.key)
    lake_dir = default_cache_root() / f"{dataset.name}-{key}"
    if not lake_dir.is_dir():
        raise SystemExit(f"no eval lake at {lake_dir} (found {lakes}); run `rag eval --dataset {args.dataset}` first")
    chunks = Lake(lake_dir).published_arrow("chunks").select(["doc_id", "search_text"]).to_pydict()
    doc_ids = list(dataset.corpus)
    doc_texts = [" ".join(search_tokens(f"{t}\n{x}")) for t, x in dataset.corpus.values()]
    body_texts = [" ".join(search_tokens(x)) for _, x in dataset.corpus.values()]
    print("| variant | nDCG@10 | recall@10 | recall@100 | MRR@10 |\n|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        db = lancedb.connect(tmp)
        for label, ids, texts, stem in (
            ("chunks, no stemming (as the product indexes)", chunks["doc_id"], chunks["search_text"], False),
            ("chunks, English stemming", chunks["doc_id"], chunks["search_text"], True),
            ("whole documents, no stemming", doc_ids, doc_texts, False),
            ("whole documents, English stemming", doc_ids, doc_texts, True),
            ("whole documents without the title, no stemming", doc_ids, body_texts, False),
        ):
            m = score(fts_table(db, "t", ids, texts, stem), dataset)
            print(f"| {label} | {m['ndcg@10']:.3f} | {m['recall@10']:.3f} | {m['recall@100']:.3f} | {m['mrr@10']:.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
