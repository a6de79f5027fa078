"""Load a BEIR-layout benchmark folder: corpus.jsonl, queries.jsonl, qrels/<split>.tsv.

Only queries that have judgments are kept (as BEIR's own evaluator does), in file order, so
``--limit-queries N`` always means the same N queries.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path


@dataclass
class BeirDataset:
    name: str
    split: str
    corpus_path: Path
    corpus: dict[str, tuple[str, str]]  # _id -> (title, text)
    queries: dict[str, str]  # _id -> text, judged queries only, file order
    qrels: dict[str, dict[str, int]]  # query id -> {corpus id: relevance}
    queries_file: str


def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def default_split(folder: Path) -> str:
    """The qrels file to use when none is named: 'test' if present, else the first by name."""
    splits = sorted(p.stem for p in (folder / "qrels").glob("*.tsv"))
    if not splits:
        raise ValueError(f"{folder / 'qrels'} holds no <split>.tsv file: is {folder} a BEIR folder?")
    return "test" if "test" in splits else splits[0]


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh, delimiter="\t")
        header = next(reader, None)
        if header and header[0].strip().lower() not in ("query-id", "query_id", "qid"):
            reader = iter([header, *reader])  # a header-less file: the first line is data
        for row in reader:
            if len(row) >= 3 and row[0]:
                qrels.setdefault(row[0], {})[row[1]] = int(float(row[2]))
    return qrels


def load_beir(folder: str | Path, split: str | None = None, queries_file: str | Path | None = None) -> BeirDataset:
    folder = Path(folder)
    corpus_path = folder / "corpus.jsonl"
    if not corpus_path.is_file():
        raise ValueError(f"{corpus_path} not found: --dataset must be a BEIR folder (corpus.jsonl, queries.jsonl, qrels/)")
    split = split or default_split(folder)
    qrels_path = folder / "qrels" / f"{split}.tsv"
    if not qrels_path.is_file():
        raise ValueError(f"no qrels for split {split!r}: {qrels_path} does not exist")
    qpath = Path(queries_file) if queries_file else folder / "queries.jsonl"
    if not qpath.is_file():
        raise ValueError(f"queries file {qpath} not found")
    corpus = {str(d["_id"]): (d.get("title") or "", d.get("text") or "") for d in read_jsonl(corpus_path)}
    qrels = read_qrels(qrels_path)
    queries = {str(q["_id"]): q["text"] for q in read_jsonl(qpath) if str(q["_id"]) in qrels}
    qrels = {q: rel for q, rel in qrels.items() if q in queries}
    return BeirDataset(folder.name, split, corpus_path, corpus, queries, qrels, qpath.name)

