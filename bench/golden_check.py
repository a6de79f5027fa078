"""Check the golden question sets against the documents they are about.

For every question: the fields ``rag_pipeline/eval/golden.py`` needs are there, ids are unique,
``kind`` is a known kind, ``split`` is the deterministic one (``report`` if
sha256("golden-split-1:" + id) is odd, else ``fit``: no half is hand-picked), an unanswerable
question names no source and no answer string. For every answerable question: each expected
source exists under the set's corpus root and its text, as the pipeline's own parsers extract it
(OCR included), contains at least one of the ``answer_contains`` strings, compared the way
``golden.contains_any`` judges answers (NFKC, case and whitespace folded); where
``expected_page`` is set, the primary (first) source has such a string on that page.

Sets and their corpus roots (relative paths in ``expected_sources`` are taken from the root):
  data/golden/sample_golden.jsonl  ->  data/sample
  data/golden/corpus_golden.jsonl  ->  ../shared/corpus   (RAG_GOLDEN_CORPUS or --corpus-root)

A set whose corpus root is missing is skipped with a notice (CI has no ../shared), unless
--strict. Prints counts per lang / kind / split / answerable and every failure; exits 1 on any.

    .venv/bin/python bench/golden_check.py [--strict] [--corpus-root DIR] [FILE=ROOT ...]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from rag_pipeline.eval.golden import REQUIRED, contains_any  # noqa: E402
from rag_pipeline.ingest.parsers import parse_file  # noqa: E402

KINDS = {
    # the kinds of issue 14's sets
    "fact", "table", "scan", "slide", "exact-code", "paraphrase", "cross-lingual", "traditional",
    # the kinds the first 52 sample questions already used
    "exact-term", "ocr", "hard-negative", "off-topic", "access-control",
}
LANGS = {"en", "zh"}
SPLIT_SALT = "golden-split-1:"


def split_of(qid: str) -> str:
    return "report" if int(hashlib.sha256((SPLIT_SALT + qid).encode()).hexdigest(), 16) % 2 else "fit"


def default_sets(corpus_root: Path) -> list[tuple[Path, Path]]:
    return [
        (REPO / "data" / "golden" / "sample_golden.jsonl", REPO / "data" / "sample"),
        (REPO / "data" / "golden" / "corpus_golden.jsonl", corpus_root),
    ]


class Texts:
    """Parsed text of each source, whole and per page, parsed once."""

    def __init__(self, root: Path):
        self.root = root
        self._cache: dict[str, tuple[str, dict[int | None, str]] | Exception] = {}

    def get(self, rel: str) -> tuple[str, dict[int | None, str]]:
        if rel not in self._cache:
            try:
                doc = parse_file(self.root / rel)
                pages: dict[int | None, list[str]] = defaultdict(list)
                for b in doc.blocks:
                    pages[b.page].append(b.text)
                self._cache[rel] = (doc.text, {p: "\n".join(t) for p, t in pages.items()})
            except Exception as exc:  # reported as a failure of the question that needs it
                self._cache[rel] = exc
        hit = self._cache[rel]
        if isinstance(hit, Exception):
            raise hit
        return hit


def check_schema(q: dict, where: str) -> list[str]:
    bad = [f"{where}: lacks {k}" for k in REQUIRED if k not in q]
    if bad:
        return bad
    if q["lang"] not in LANGS:
        bad.append(f"{where}: lang {q['lang']!r}")
    if q.get("kind") not in KINDS:
        bad.append(f"{where}: kind {q.get('kind')!r} not in {sorted(KINDS)}")
    if q.get("split") != split_of(q["id"]):
        bad.append(f"{where}: split {q.get('split')!r}, the rule gives {split_of(q['id'])!r}")
    if not isinstance(q["answerable"], bool):
        bad.append(f"{where}: answerable must be true/false")
    if q["expected_page"] is not None and not isinstance(q["expected_page"], int):
        bad.append(f"{where}: expected_page must be an int or null")
    if not q["question"].strip():
        bad.append(f"{where}: empty question")
    if q["answerable"]:
        if not q["expected_sources"] or not q["answer_contains"]:
            bad.append(f"{where}: answerable but no expected_sources / answer_contains")
        if any(not a.strip() for a in q["answer_contains"]):
            bad.append(f"{where}: empty answer string")
        primary = q["expected_sources"][0] if q["expected_sources"] else ""
        if primary.lower().endswith(".pdf") and q["expected_page"] is None:
            bad.append(f"{where}: PDF source without expected_page")
    elif q["expected_sources"] or q["answer_contains"] or q["expected_page"] is not None:
        bad.append(f"{where}: unanswerable but names sources / answers / page")
    return bad


def check_sources(q: dict, texts: Texts, where: str) -> list[str]:
    bad = []
    for n, rel in enumerate(q["expected_sources"]):
        path = texts.root / rel
        if not path.is_file():
            bad.append(f"{where}: source {rel} does not exist under {texts.root}")
            continue
        try:
            whole, pages = texts.get(rel)
        except Exception as exc:
            bad.append(f"{where}: source {rel} does not parse: {exc}")
            continue
        if not contains_any(whole, q["answer_contains"]):
            bad.append(f"{where}: none of {q['answer_contains']} in {rel}")
            continue
        if n == 0 and q["expected_page"] is not None:
            page_text = pages.get(q["expected_page"], "")
            if not contains_any(page_text, q["answer_contains"]):
                found = sorted(p for p, t in pages.items() if p is not None and contains_any(t, q["answer_contains"]))
                bad.append(f"{where}: answer not on page {q['expected_page']} of {rel} (found on {found})")
    return bad


def table(title: str, rows: dict[str, Counter]) -> list[str]:
    out = [f"\n{title:<16} {'answerable':>10} {'unanswer.':>10} {'total':>7}"]
    for key in sorted(rows):
        c = rows[key]
        out.append(f"{key:<16} {c[True]:>10} {c[False]:>10} {c[True] + c[False]:>7}")
    return out


def report_set(path: Path, questions: list[dict]) -> list[str]:
    lines = [f"\n== {path.relative_to(REPO) if path.is_relative_to(REPO) else path}: {len(questions)} questions"]
    for field in ("lang", "kind", "split"):
        rows: dict[str, Counter] = defaultdict(Counter)
        for q in questions:
            rows[str(q.get(field))][q["answerable"]] += 1
        lines += table(field, rows)
    rows = defaultdict(Counter)
    for q in questions:
        rows[f"{q.get('split')}/{q['lang']}"][q["answerable"]] += 1
    lines += table("split/lang", rows)
    n = len(questions) or 1
    zh = sum(q["lang"] == "zh" for q in questions)
    pos = sum(q["answerable"] for q in questions)
    lines.append(f"\nzh share {zh / n:.2f}; answerable share {pos / n:.2f}")
    return lines


def check_file(path: Path, root: Path) -> tuple[list[dict], list[str]]:
    failures: list[str] = []
    questions: list[dict] = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            questions.append(json.loads(line))
        except json.JSONDecodeError as exc:
            failures.append(f"{path.name}:{n}: not JSON: {exc}")
            continue
        questions[-1]["_line"] = n
    ids = Counter(q.get("id") for q in questions)
    failures += [f"{path.name}: duplicate id {i!r}" for i, c in ids.items() if c > 1]
    texts = Texts(root)
    for q in questions:
        where = f"{path.name}:{q['_line']} {q.get('id')}"
        schema = check_schema(q, where)
        failures += schema
        if not schema and q["answerable"]:
            failures += check_sources(q, texts, where)
    for q in questions:
        q.pop("_line", None)
    return questions, failures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sets", nargs="*", help="FILE=ROOT pairs (default: the two golden sets)")
    ap.add_argument("--corpus-root", type=Path,
                    default=Path(os.environ.get("RAG_GOLDEN_CORPUS", REPO.parent / "shared" / "corpus")))
    ap.add_argument("--strict", action="store_true", help="fail when a set or its corpus root is missing")
    args = ap.parse_args()
    sets = [(Path(f), Path(r)) for f, r in (s.split("=", 1) for s in args.sets)] if args.sets \
        else default_sets(args.corpus_root)

    failures: list[str] = []
    for path, root in sets:
        path = path if path.is_absolute() else (Path.cwd() / path).resolve()
        if not path.is_file() or not root.is_dir():
            msg = f"{path}: missing" if not path.is_file() else f"{path}: corpus root {root} missing, skipped"
            (failures.append(msg) if args.strict else print(f"\nnotice: {msg}"))
            continue
        questions, bad = check_file(path, root)
        print("\n".join(report_set(path, questions)))
        print(f"\nchecked against {root}: {sum(q['answerable'] for q in questions)} answerable questions, "
              f"{len(bad)} failures")
        failures += bad
    if failures:
        print(f"\nFAILURES ({len(failures)}):")
        print("\n".join(f"  {f}" for f in failures))
        return 1
    print("\nall checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
