"""Text a file holds outside its body's runs: what two parser versions read of it, side by side.

A filled PDF form's values, text typed onto a PDF page, tracked insertions and deletions, Word
content controls, simple fields and list numbers, charts' figures, SmartArt boxes, percentage cells: each is
drawn or stored apart from the text a naive reader walks. For each file below, every block
``parse_file`` returns is recorded; ``--compare`` prints, per file, blocks and characters
before -> after and the lines only one version has.

    .venv/bin/python bench/hidden_content.py --out /tmp/after.json
    git worktree add /tmp/base <commit> && (cd /tmp/base && <repo>/.venv/bin/python <repo>/bench/hidden_content.py \\
        --root <repo> --out /tmp/before.json)              # the old parsers (it says which it imported) on the same files
    .venv/bin/python bench/hidden_content.py --compare /tmp/before.json /tmp/after.json

Files: this repository's ingest fixtures and the shared corpus's files that hold such content
(``--root`` says where the repository with the fixtures is, so an old checkout reads the new
fixtures). ~20 s; no OCR language but English is needed (``--ocr-lang``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = [
    "filled-form.pdf",
    "年假制度修订.docx", "年假制度修订.doc", "年假制度修订.rtf", "年假制度修订.odt",
    "smartart-chart.docx", "smartart-shapes.pptx", "差旅审批单.docx", "考勤制度.docx",
    "区域指标.xlsx", "区域指标.xls", "区域指标.ods", "经营数据.odp",
]
CORPUS = ["docx/docx_01.docx", "pptx/pptx_01.pptx", "pptx/ppt_example.pptx", "xlsx/xlsx_01.xlsx"]


def _record(root: Path, ocr_lang: str) -> dict[str, list[str] | str]:
    sys.path.insert(0, str(Path.cwd()))  # the checkout being measured, not necessarily this file's
    import rag_pipeline
    from rag_pipeline.ingest.parsers import parse_file

    print(f"parsers from {Path(rag_pipeline.__file__).parent}", file=sys.stderr)
    files = [root / "rag_pipeline_tests" / "ingest" / "files" / name for name in FIXTURES]
    files += [root.parent / "shared" / "corpus" / rel for rel in CORPUS]
    out: dict[str, list[str] | str] = {}
    for path in files:
        try:
            out[path.name] = [b.text for b in parse_file(path, ocr_lang=ocr_lang).blocks]
        except Exception as exc:  # an outcome too: a file quarantined before may be read now
            out[path.name] = f"{type(exc).__name__}: {exc}"[:200]
    return out


def _compare(before: dict, after: dict) -> None:
    print("| file | blocks before → after | characters before → after | lines only after (first) | lines only before (first) |")
    print("|---|---:|---:|---|---|")
    for name in after:
        a, b = before.get(name, []), after[name]
        if isinstance(a, str) or isinstance(b, str):
            print(f"| {name} | {a if isinstance(a, str) else len(a)} → {b if isinstance(b, str) else len(b)} | | | |")
            continue
        added = [t for t in b if t not in set(a)]
        removed = [t for t in a if t not in set(b)]
        first = lambda lines: (f"{len(lines)}: `{lines[0][:70]}`" if lines else "0")  # noqa: E731
        print(f"| {name} | {len(a)} → {len(b)} | {sum(map(len, a)):,} → {sum(map(len, b)):,} | {first(added)} | {first(removed)} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=REPO, help="repository holding the fixtures")
    parser.add_argument("--out", type=Path, help="write each file's blocks here")
    parser.add_argument("--ocr-lang", default="eng")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args()
    if args.compare:
        _compare(*(json.loads(p.read_text(encoding="utf-8")) for p in args.compare))
        return
    record = _record(args.root.resolve(), args.ocr_lang)
    text = json.dumps(record, ensure_ascii=False, indent=1)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    else:
        print(text)


if __name__ == "__main__":
    main()
