"""Which refusal gate? Fit on the fit halves of benchmark and golden questions, report on the rest.

    .venv/bin/python bench/answerability.py --limit 160      # benchmark evidence, ~30 min once
    .venv/bin/rag index --raw data/sample --lake /tmp/sample_lake          # and ../shared/corpus likewise
    .venv/bin/python bench/refusal_gate.py --golden data/golden/sample_golden.jsonl=/tmp/sample_lake \
        --holdout data/golden/corpus_golden.jsonl=/tmp/corpus_lake

Gates compared, each replayed on recorded evidence (no retrieval at scoring time):

* `or-thresholds (old default)`: answer if keyword coverage >= 0.45 OR dense margin >= 0.10
  (set by hand on the sample corpus; the gate the review measured);
* `or-thresholds (refit)`: the same rule with both thresholds fitted on the same fit halves;
* `logistic (shipped)`: `RefusalPolicy()`'s defaults, the logistic gate over scale-free features;
* `logistic (refit)`: the logistic gate fitted here (shown only when it differs from the shipped
  default, which it must equal).

Fitting uses the fit halves only: of the benchmark sets and of each `--golden` set (its `split`
field, a seeded hash of the id). bench/answerability.py's answer-removed cases (on topic, the
asked fact cut out) are reported, not fitted on, unless `--fit-answer-removed`. Everything is reported on both halves; only the report halves
count. A `--holdout` golden set (another corpus) is never fitted on and reported whole: the
cross-corpus check of what the review will see on documents nobody here has read. A golden file is given as FILE=LAKE (a lake indexed from that golden set's corpus); its
evidence is recorded with every answer composed (`ALWAYS_ANSWER`), so each gate's refusals and
the answer's content are judged offline.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rag_pipeline.eval.calibrate import fit  # noqa: E402
from rag_pipeline.eval.golden import evaluate_question, handled_right, load_golden  # noqa: E402
from rag_pipeline.query.answer import RefusalPolicy, refusal_reason  # noqa: E402

from answerability import ALWAYS_ANSWER, OUT  # noqa: E402

GOLDEN_SEED = "golden-split-1"


def golden_half(qid: str) -> str:
    return "report" if int(hashlib.sha256(f"{GOLDEN_SEED}:{qid}".encode()).hexdigest(), 16) % 2 else "fit"


class OrThresholds:
    """The previous gate: keyword coverage OR dense margin over fixed thresholds."""

    def __init__(self, coverage: float, margin: float):
        self.coverage, self.margin = coverage, margin

    def refuses(self, evidence: dict) -> bool:
        if evidence["candidates"] == 0 or evidence.get("unknown_identifiers"):
            return True
        return evidence["lexical_coverage"] < self.coverage and evidence["dense_margin"] < self.margin

    @classmethod
    def fitted(cls, samples: list[dict]) -> "OrThresholds":
        """Grid search, class-balanced error (as the logistic fit weighs its classes)."""
        pos = sum(s["answerable"] for s in samples) or 1
        neg = (len(samples) - pos) or 1
        best = None
        for c in [x / 20 for x in range(2, 21)] + [1.01]:
            for m in [x / 200 for x in range(0, 41)] + [1.0]:
                gate = cls(c, m)
                fr = sum(gate.refuses(s["evidence"]) for s in samples if s["answerable"]) / pos
                fa = sum(not gate.refuses(s["evidence"]) for s in samples if not s["answerable"]) / neg
                if best is None or fr + fa < best[0]:
                    best = (fr + fa, gate)
        return best[1]


class Logistic:
    def __init__(self, policy: RefusalPolicy):
        self.policy = policy

    def refuses(self, evidence: dict) -> bool:
        return refusal_reason(evidence, self.policy) is not None


def load_benchmark() -> list[dict]:
    samples = []
    for path in sorted(OUT.glob("*.jsonl")):
        if not path.name.startswith("golden"):
            samples += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return samples


def _evidence_fingerprint(lake: Path) -> str:
    """What a golden question's recorded evidence depends on: the lake's served generation and
    the code that answers (rag_pipeline/query, text.py, and rag_pipeline/embedding: the token
    states token recall reads)."""
    digest = hashlib.sha256(str(lake.resolve()).encode())
    digest.update((lake / "index_manifest.json").read_bytes() if (lake / "index_manifest.json").exists() else b"")
    code = REPO / "rag_pipeline"
    for source in sorted([*(code / "query").glob("*.py"), *(code / "embedding").glob("*.py"), code / "text.py"]):
        digest.update(source.read_bytes())
    return digest.hexdigest()[:12]


def collect_golden(golden: Path, lake: Path) -> list[dict]:
    """Per question: the golden judgement of an always-composed answer, and its evidence.

    Cached per (lake and its served generation, the code that answers, question), so a grown
    golden file only runs its new questions, and a re-indexed lake or a changed answering path
    records afresh (a cache keyed by the lake's path alone once replayed the old code's evidence).
    """
    from rag_pipeline.query import RagIndex

    cache_path = OUT / f"golden_{golden.stem}_{_evidence_fingerprint(lake)}.json"
    cache = json.loads(cache_path.read_text()) if cache_path.exists() else {}
    index = None
    rows = []
    for q in load_golden(golden):
        key = hashlib.sha256(json.dumps(q, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
        if key not in cache:
            if index is None:
                index = RagIndex.open(lake)
                index.policy = ALWAYS_ANSWER
            cache[key] = evaluate_question(index, q)
            cache_path.write_text(json.dumps(cache, ensure_ascii=False))
        rows.append({**cache[key], "set": golden.stem, "half": q.get("split") or golden_half(q["id"])})
    return rows


def rates(rows: list[dict], gate, contains_key: str | None) -> dict:
    pos = [r for r in rows if r["answerable"]]
    neg = [r for r in rows if not r["answerable"]]
    refused = {id(r): gate.refuses(r["evidence"]) for r in rows}
    out = {
        "n": f"{len(pos)}+{len(neg)}",
        "false_refusal": sum(refused[id(r)] for r in pos) / len(pos) if pos else None,
        "false_answer": sum(not refused[id(r)] for r in neg) / len(neg) if neg else None,
    }
    if contains_key:
        out["answer_contains"] = sum(r[contains_key] and not refused[id(r)] for r in pos) / len(pos) if pos else None
        # the review's "answered correctly", as `rag eval` counts it
        right = sum(
            handled_right({"answerable": r["answerable"], "answer_contains": r[contains_key], "refused": refused[id(r)]})
            for r in rows
        )
        out["right"] = right / len(rows) if rows else None
    return out


def table(title: str, groups: dict[str, list[dict]], gates: dict, contains_key: str | None) -> None:
    metrics = ["false_refusal", "false_answer"] + (["answer_contains", "right"] if contains_key else [])
    print(f"\n### {title}\n")
    print("| set | n (ans+unans) | gate | " + " | ".join(metrics) + " |")
    print("|---|---|---|" + "---|" * len(metrics))
    for name, rows in groups.items():
        for label, gate in gates.items():
            r = rates(rows, gate, contains_key)
            cells = ["-" if r[m] is None else f"{r[m]:.3f}" for m in metrics]
            print(f"| {name} | {r['n']} | {label} | " + " | ".join(cells) + " |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--golden", action="append", default=[], help="GOLDEN_FILE=LAKE (repeatable): fit half fitted, report half reported")
    parser.add_argument("--holdout", action="append", default=[], help="GOLDEN_FILE=LAKE (repeatable): never fitted on, reported whole")
    parser.add_argument("--fit-answer-removed", action="store_true",
                        help="fit on the answer-removed cases too (tried, not shipped: bench/README.md); else they are only reported")
    args = parser.parse_args()
    bench = load_benchmark()
    golden, holdout = {}, {}
    for specs, into in ((args.golden, golden), (args.holdout, holdout)):
        for spec in specs:
            file, lake = spec.split("=", 1)
            into[Path(file).stem] = collect_golden(Path(file), Path(lake))
    fitted_bench = [r for r in bench if r["half"] == "fit" and (args.fit_answer_removed or r.get("case") != "answer_removed")]
    fit_rows = fitted_bench + [r for rows in golden.values() for r in rows if r["half"] == "fit"]
    refit = fit(fit_rows)
    shipped = RefusalPolicy()
    print(f"fitted on {len(fit_rows)} cases: the fit halves of {sorted({r['set'] for r in fit_rows})}")
    print(f"logistic refit: weights {refit.weights}, intercept {refit.intercept}")
    recalls = [r["evidence"]["token_recall"] for r in fit_rows if r["evidence"].get("candidates") and not r["evidence"].get("unknown_identifiers")
               and r["evidence"].get("token_recall") is not None]
    if recalls:
        print(f"mean token_recall of the fitted cases (answer.TOKEN_RECALL_WHEN_MISSING): {sum(recalls) / len(recalls):.4f}")
    if (refit.weights, refit.intercept) != (shipped.weights, shipped.intercept):
        print(f"NOTE: the shipped default differs: {shipped.weights}, {shipped.intercept}")
    gates = {
        "or-thresholds (old default)": OrThresholds(0.45, 0.10),
        "or-thresholds (refit)": OrThresholds.fitted(fit_rows),
        "logistic (shipped)": Logistic(shipped),
    }
    if (refit.weights, refit.intercept) != (shipped.weights, shipped.intercept):
        gates["logistic (refit)"] = Logistic(refit)
    groups = {}
    for name in sorted({r["set"] for r in bench}):
        for half in ("fit", "report"):
            rows = [r for r in bench if r["set"] == name and r["half"] == half]
            groups[f"{name} · {half}"] = [r for r in rows if r.get("case") != "answer_removed"]
            if any(r.get("case") == "answer_removed" for r in rows):
                groups[f"{name} · {half} · answer removed"] = [r for r in rows if r.get("case") == "answer_removed"]
    table("benchmark questions (unanswerable = gold hidden; answer removed: its sentences cut from the gold paragraph)",
          groups, gates, "contains")
    for name, rows in golden.items():
        report = [r for r in rows if r["half"] == "report"]
        groups = {"fit half (fitted on)": [r for r in rows if r["half"] == "fit"], "report half": report}
        for lang in sorted({r["lang"] for r in report}):
            groups[f"report · {lang}"] = [r for r in report if r["lang"] == lang]
        table(f"golden set {name}", groups, gates, "answer_contains")
        kinds = {f"report · {kind}": [r for r in report if r["kind"] == kind] for kind in sorted({r["kind"] for r in report})}
        table(f"golden set {name}, report half by kind", kinds, {"logistic (shipped)": gates["logistic (shipped)"]}, "answer_contains")
    for name, rows in holdout.items():  # another corpus, never fitted on: the cross-corpus check
        groups = {"all (held out)": rows} | {f"{lang}": [r for r in rows if r["lang"] == lang] for lang in sorted({r["lang"] for r in rows})}
        table(f"held-out golden set {name} (never fitted on)", groups, gates, "answer_contains")
        kinds = {kind: [r for r in rows if r["kind"] == kind] for kind in sorted({r["kind"] for r in rows})}
        table(f"held-out golden set {name}, by kind", kinds, {"logistic (shipped)": gates["logistic (shipped)"]}, "answer_contains")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
