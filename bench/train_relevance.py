"""Train the answerability cross-encoder (bench/relevance_model.py) from the bundled e5.

    .venv/bin/python bench/train_relevance.py --epochs 2 --lr 1e-4 --out /tmp/relevance.safetensors   # ~21 min, 2 cores
    .venv/bin/python bench/train_relevance.py --pairs 400 --out /tmp/r.safetensors   # a smoke run

Data (../shared/bench only, seeded): nothing the refusal gate is fitted or reported on.
* XQuAD zh passages with their zh questions and the parallel English questions (cross-lingual),
  from the articles no question of bench/answerability.py's gate cases asks about (the gate uses 6
  of 48 articles; 4 more are kept aside as this script's dev set). Per question, each a
  window of whole sentences the model reads without cutting (WINDOW_CHARS): the sentences around
  the answer, and the answer's sentence with its neighbours (positives); the same paragraph with
  every sentence holding the answer removed — on topic, fact absent, the gate's hard case — and
  a window of two other paragraphs of the same article (negatives). Whole paragraphs (250-450
  tokens) would be cut at the model's length and hide the answer of a "positive": the first run
  trained on them did not learn (loss flat at the class prior for 350 steps).
* SciFact-train claims outside the gate's SciFact subset (and none of that subset's abstracts):
  the gold abstract (positive) and the two best BM25 abstracts that are not gold (negatives).

Loss: per question group, the softmax share of its positives (listwise), plus half a
class-balanced binary cross-entropy so the log-odds keep an absolute meaning for the gate. Only the transformer layers and the head train;
e5's embeddings stay frozen, so only those ship (fp16).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

from rag_pipeline.eval.beir import read_jsonl  # noqa: E402
from relevance_model import RelevanceSpec, best_per_passage, build_network, encode_pairs  # noqa: E402

from fusion_sweep import half  # noqa: E402

SHARED = REPO.parent / "shared" / "bench"
GATE_QUESTIONS = 80  # per half: bench/answerability.py --limit 160
GATE_SCIFACT = 160  # bench/answerability.py --scifact 160
DEV_ARTICLES = 4
_SENTENCE_END = re.compile(r"(?<=[。！？!?；])")


def gate_ids(ids: list[str], per_half: int) -> set[str]:
    """The question ids bench/answerability.py takes: the first `per_half` of each half."""
    ids = sorted(ids)
    return set([q for q in ids if half(q) == "fit"][:per_half] + [q for q in ids if half(q) == "report"][:per_half])


def article(doc_id: str) -> str:
    return doc_id.rsplit("-", 1)[0]


def sentences(text: str) -> list[str]:
    return [s for s in (p.strip() for p in _SENTENCE_END.split(text)) if s]


WINDOW_CHARS = 220  # ~ what the model reads beside a question (RelevanceSpec.max_length tokens)


def window(parts: list[str], centre: int, budget: int = WINDOW_CHARS) -> str:
    """Sentences around `centre`, grown alternately after and before it while they fit `budget`
    characters: a passage the model reads whole, so a positive's answer is never cut off."""
    lo, hi = centre, centre + 1
    size = len(parts[centre])
    while True:
        grown = False
        for candidate in (hi, lo - 1):
            if 0 <= candidate < len(parts) and size + len(parts[candidate]) <= budget:
                size += len(parts[candidate])
                lo, hi = min(lo, candidate), max(hi, candidate + 1)
                grown = True
        if not grown:
            return "".join(parts[lo:hi])


def xquad_pairs(rng: random.Random) -> tuple[list, list]:
    folder = SHARED / "xquad-zh"
    corpus = {d["_id"]: d["text"] for d in read_jsonl(folder / "corpus.jsonl")}
    zh = {q["_id"]: q for q in read_jsonl(folder / "queries.jsonl")}
    en = {q["_id"]: q for q in read_jsonl(folder / "queries_en.jsonl")}
    gold = {}
    for line in (folder / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        qid, doc, _ = line.split("\t")
        gold[qid] = doc
    gate_articles = {article(gold[q]) for q in gate_ids(list(gold), GATE_QUESTIONS)}
    by_article = defaultdict(list)
    for doc in sorted(corpus):
        by_article[article(doc)].append(doc)
    free = sorted(a for a in by_article if a not in gate_articles)
    rng.shuffle(free)
    dev_articles = set(free[:DEV_ARTICLES])
    train, dev = [], []
    for qid in sorted(gold):
        doc = gold[qid]
        if article(doc) in gate_articles:
            continue
        paragraph = corpus[doc]
        answers = [a for a in (zh[qid].get("metadata") or {}).get("answers", []) if a]
        parts = sentences(paragraph)
        holding = [i for i, s in enumerate(parts) if any(a in s for a in answers)]
        if not holding:
            continue
        i = holding[0]
        rest = [s for j, s in enumerate(parts) if j not in holding]
        removed = window(rest, min(i, len(rest) - 1)) if rest else ""
        others = [d for d in by_article[article(doc)] if d != doc and not any(a in corpus[d] for a in answers)]
        other_windows = []
        for other in rng.sample(others, min(2, len(others))):
            other_parts = sentences(corpus[other])
            other_windows.append(window(other_parts, rng.randrange(len(other_parts))))
        groups = []
        for question in (zh[qid]["text"], en[qid]["text"]):
            groups.append((question, window(parts, i), 1))
            groups.append((question, "".join(parts[max(i - 1, 0): i + 2]), 1))
            if removed and not any(a in removed for a in answers):
                groups.append((question, removed, 0))
            groups += [(question, w, 0) for w in other_windows]
        (dev if article(doc) in dev_articles else train).extend(groups)
    return train, dev


_WORD = re.compile(r"[a-z0-9]+")


def _terms(text: str) -> list[str]:
    import snowballstemmer

    return snowballstemmer.stemmer("english").stemWords(_WORD.findall(text.lower()))


def scifact_pairs(rng: random.Random, dev_share: float = 0.1) -> tuple[list, list]:
    folder = SHARED / "scifact-train"
    corpus = {str(d["_id"]): f"{d.get('title', '')}. {d['text']}" for d in read_jsonl(folder / "corpus.jsonl")}
    queries = {q["_id"]: q["text"] for q in read_jsonl(folder / "queries.jsonl")}
    qrels = defaultdict(set)
    for line in (folder / "qrels" / "train.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        qid, doc, score = line.split("\t")
        if int(score) > 0:
            qrels[qid].add(doc)
    gate = gate_ids(list(qrels), GATE_SCIFACT // 2)
    gate_docs = {d for q in gate for d in qrels[q]}
    subset = REPO / "bench" / "results" / f"scifact-subset-{GATE_SCIFACT}" / "corpus.jsonl"
    if subset.exists():  # the gate's distractor abstracts too
        gate_docs |= {str(d["_id"]) for d in read_jsonl(subset)}
    docs = sorted(d for d in corpus if d not in gate_docs)
    tokens = {d: _terms(corpus[d]) for d in docs}
    df = Counter(t for d in docs for t in set(tokens[d]))
    avg = sum(len(t) for t in tokens.values()) / len(docs)
    tf = {d: Counter(tokens[d]) for d in docs}
    idf = {t: math.log(1 + (len(docs) - n + 0.5) / (n + 0.5)) for t, n in df.items()}

    def bm25(query: str) -> list[str]:
        terms = [t for t in set(_terms(query)) if t in idf]
        scored = []
        for d in docs:
            counts, length = tf[d], len(tokens[d])
            s = sum(idf[t] * counts[t] * 2.2 / (counts[t] + 1.2 * (0.25 + 0.75 * length / avg)) for t in terms if counts[t])
            if s:
                scored.append((s, d))
        return [d for _, d in sorted(scored, reverse=True)[:20]]

    train, dev = [], []
    claims = [q for q in sorted(qrels) if q not in gate and qrels[q] and not qrels[q] & gate_docs]
    for qid in claims:
        groups = [(queries[qid], corpus[d], 1) for d in sorted(qrels[qid])]
        groups += [(queries[qid], corpus[d], 0) for d in [d for d in bm25(queries[qid]) if d not in qrels[qid]][:2]]
        (dev if rng.random() < dev_share else train).extend(groups)
    return train, dev


def auc(labels: list[int], scores: list[float]) -> float:
    pos = [s for s, y in zip(scores, labels) if y]
    neg = [s for s, y in zip(scores, labels) if not y]
    if not pos or not neg:
        return float("nan")
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def predict(network, tokenizer, pairs, spec, batch: int = 32) -> list[float]:
    network.eval()
    out = []
    with torch.inference_mode():
        for question, group in _by_question(pairs):
            for i in range(0, len(group), batch):
                passages = [p for p, _ in group[i: i + batch]]
                ids, mask, owners = encode_pairs(tokenizer, question, passages, spec.max_length, windows=True)
                out.extend(best_per_passage(network(ids, mask).tolist(), owners, len(passages)))
    return out


def _by_question(pairs):
    """Consecutive pairs of one question, in order (predict keeps the input order)."""
    current, group = None, []
    for question, passage, label in pairs:
        if question != current and group:
            yield current, group
            group = []
        current = question
        group.append((passage, label))
    if group:
        yield current, group


def listwise(logits, labels, sizes: list[int]):
    """Per question group: -log(share of the softmax mass on its positives). The same question
    against its own on-topic negatives gives the model the difference to learn; pointwise BCE over
    mixed batches stayed at the class prior for 350 steps."""
    out, start = [], 0
    for size in sizes:
        g, y = logits[start: start + size], labels[start: start + size]
        out.append(torch.logsumexp(g, 0) - torch.logsumexp(g[y > 0], 0))
        start += size
    return torch.stack(out).mean()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=RelevanceSpec.layers)
    parser.add_argument("--max-length", type=int, default=RelevanceSpec.max_length)
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--head-lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--pointwise", type=float, default=0.5, help="weight of the pointwise BCE beside the listwise loss "
                        "(it keeps the scores' absolute level meaningful for the gate)")
    parser.add_argument("--pairs", type=int, help="train on this many pairs only (smoke runs)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    rng = random.Random(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(2)
    xq_train, xq_dev = xquad_pairs(rng)
    sf_train, sf_dev = scifact_pairs(rng)
    train = xq_train + sf_train
    groups = [(q, [(p, y) for p, y in group]) for q, group in _by_question(train)]
    groups = [g for g in groups if any(y for _, y in g[1]) and not all(y for _, y in g[1])]
    rng.shuffle(groups)
    if args.pairs:
        groups = groups[: max(1, args.pairs // 5)]
    train = [(q, p, y) for q, group in groups for p, y in group]
    print(f"pairs: train {len(train)} in {len(groups)} question groups (xquad {len(xq_train)}, scifact {len(sf_train)}, "
          f"positives {sum(y for *_, y in train)}); dev xquad {len(xq_dev)}, scifact {len(sf_dev)}", flush=True)

    from relevance_model import builtin_e5_dir
    from tokenizers import Tokenizer

    e5_dir = builtin_e5_dir()
    spec = RelevanceSpec(layers=args.layers, max_length=args.max_length)
    network = build_network(e5_dir, spec)
    for p in network.encoder.embeddings.parameters():
        p.requires_grad_(False)
    tokenizer = Tokenizer.from_file(str(e5_dir / "tokenizer.json"))
    head_params = list(network.head.parameters())
    layer_params = [p for p in network.parameters_to_train() if all(p is not h for h in head_params)]
    optimizer = torch.optim.AdamW([{"params": layer_params, "lr": args.lr}, {"params": head_params, "lr": args.head_lr}], weight_decay=0.01)
    per_step = max(1, round(args.batch / (len(train) / len(groups))))  # question groups per step (~batch pairs)
    steps = max(1, int(len(groups) * args.epochs / per_step))
    warmup = max(1, steps // 20)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / (steps - warmup + 1))))
    positives = sum(y for *_, y in train)
    pos_weight = torch.tensor((len(train) - positives) / max(positives, 1))
    pointwise = torch.nn.BCEWithLogitsLoss(pos_weight=pos_weight)

    started, losses = time.perf_counter(), []
    network.train()
    for step in range(steps):
        batch = [groups[(step * per_step + i) % len(groups)] for i in range(per_step)]
        rows = [encode_pairs(tokenizer, q, [p], spec.max_length)[:2] for q, group in batch for p, _ in group]
        width = max(r[0].shape[1] for r in rows)
        ids = torch.ones((len(rows), width), dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, (row_ids, row_mask) in enumerate(rows):
            ids[i, : row_ids.shape[1]], mask[i, : row_mask.shape[1]] = row_ids[0], row_mask[0]
        labels = torch.tensor([float(y) for _, group in batch for _, y in group])
        logits = network(ids, mask)
        loss = args.pointwise * pointwise(logits, labels) + listwise(logits, labels, [len(g) for _, g in batch])
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(network.parameters_to_train(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
        if (step + 1) % 50 == 0 or step + 1 == steps:
            print(f"step {step + 1}/{steps} loss {np.mean(losses[-50:]):.4f} {time.perf_counter() - started:.0f} s", flush=True)
    train_seconds = time.perf_counter() - started

    report = {"spec": spec.__dict__, "seed": args.seed, "epochs": args.epochs, "batch": args.batch, "lr": args.lr,
              "head_lr": args.head_lr, "pointwise": args.pointwise, "train_pairs": len(train), "train_seconds": round(train_seconds)}
    for name, pairs in (("xquad_dev", xq_dev), ("scifact_dev", sf_dev)):
        scores = predict(network, tokenizer, pairs, spec)
        labels = [y for *_, y in pairs]
        report[f"{name}_auc"] = round(auc(labels, scores), 4)
        report[f"{name}_accuracy"] = round(float(np.mean([(s > 0) == bool(y) for s, y in zip(scores, labels)])), 4)
    print(json.dumps(report), flush=True)
    state = {k: v.detach().to(torch.float16).contiguous() for k, v in network.trained_state().items()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save_file(state, str(args.out), metadata={**spec.to_metadata(), "training": json.dumps(report)})
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
