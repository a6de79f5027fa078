"""The same documents saved in their other formats: does each reader get what the OOXML one gets?

Every .docx, .pptx and .xlsx of data/sample and ../shared/corpus is saved by LibreOffice as
the formats a team also keeps (Word/PowerPoint/Excel 97-2003, OpenDocument, RTF, EPUB); each
copy is parsed by ``parse_file`` and compared with the OOXML original's parse:

- text recall: share of the original's characters (character-trigram multiset, whitespace
  squeezed) that the copy's parse holds; precision the other way round;
- rows: share of the original's table_row blocks found verbatim among the copy's;
- headings: share of the original's headings found as headings in the copy;
- ms: median parse time per file, and the ratio to the original's parse (same files, same run).

LibreOffice is the only writer of these formats here, so its export choices are measured with
the readers (a heading style it keeps or drops, a table it writes as cells). Needs ``soffice``
(Debian: libreoffice-writer-nogui, -calc-nogui, -impress-nogui); not part of the product.

    .venv/bin/python bench/other_formats.py [--out bench/results/other_formats.json]   # ~2 min
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rag_pipeline.ingest.document import UnreadableDocument  # noqa: E402
from rag_pipeline.ingest.parsers import parse_file  # noqa: E402

CORPUS = ROOT.parent / "shared" / "corpus"
# original extension -> the formats it is saved as ("extension:LibreOffice filter" where the extension
# alone does not name the filter). Not Excel 2003 XML: LibreOffice 7.4's XSLT export of these
# workbooks (and of their .xls copies) stops on "infinite template recursion" over their repeated
# empty columns and writes nothing; ingest/test_more_formats.py reads one it could write.
TARGETS = {
    ".docx": ["doc", "odt", "rtf", "epub", "xml:MS Word 2003 XML"],
    ".pptx": ["ppt", "odp"],
    ".xlsx": ["xls", "ods"],
}


def _trigrams(text: str) -> Counter:
    text = re.sub(r"\s+", " ", text).strip()
    return Counter(text[i:i + 3] for i in range(max(0, len(text) - 2)))


def _share(part: Counter, whole: Counter) -> float:
    total = sum(whole.values())
    return sum((part & whole).values()) / total if total else 1.0


def _timed_parse(path: Path):
    start = time.perf_counter()
    try:
        doc = parse_file(path)
    except UnreadableDocument as exc:
        return exc, (time.perf_counter() - start) * 1000
    return doc, (time.perf_counter() - start) * 1000


def _originals() -> list[Path]:
    folders = [ROOT / "data" / "sample"] + ([CORPUS] if CORPUS.is_dir() else [])
    return sorted(p for folder in folders for p in folder.rglob("*") if p.suffix in TARGETS and "bad" not in p.parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="write the per-file results as JSON")
    args = ap.parse_args()
    if not shutil.which("soffice"):
        sys.exit("needs LibreOffice's soffice (apt-get install libreoffice-writer-nogui libreoffice-calc-nogui "
                 "libreoffice-impress-nogui)")
    rows, per_format = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for original in _originals():
            base, base_ms = _timed_parse(original)
            if isinstance(base, UnreadableDocument):
                continue
            for fmt in TARGETS[original.suffix]:
                out = Path(tmp) / fmt
                subprocess.run(["soffice", "--headless", "--convert-to", fmt, "--outdir", str(out), str(original)],
                               capture_output=True, timeout=300, check=False)
                ext, _, writer = fmt.partition(":")
                label = f"{ext} ({writer})" if writer else ext
                copy = out / f"{original.stem}.{ext}"
                if not copy.exists():
                    rows.append({"file": original.name, "format": label, "error": "LibreOffice wrote nothing"})
                    continue
                doc, ms = _timed_parse(copy)
                row = {"file": original.name, "format": label, "ms": ms, "base_ms": base_ms}
                if isinstance(doc, UnreadableDocument):
                    row["error"] = f"{doc.reason}: {doc.detail[:80]}"
                else:
                    want, got = _trigrams(base.text), _trigrams(doc.text)
                    base_rows = [b.text for b in base.blocks if b.kind == "table_row"]
                    copy_rows = {b.text for b in doc.blocks if b.kind == "table_row"}
                    base_heads = [b.text for b in base.blocks if b.kind == "heading"]
                    copy_heads = {b.text for b in doc.blocks if b.kind == "heading"}
                    row |= {"recall": _share(got, want), "precision": _share(want, got),
                            "rows": (sum(r in copy_rows for r in base_rows), len(base_rows)),
                            "headings": (sum(h in copy_heads for h in base_heads), len(base_heads))}
                rows.append(row)
                per_format.setdefault(label, []).append(row)
    print(f"{len(_originals())} originals (.docx/.pptx/.xlsx of data/sample and ../shared/corpus), "
          "each saved by LibreOffice in the formats below and parsed; compared with the original's parse\n")
    print("| format | files | unreadable | text recall (median / min) | precision (median) | table rows kept | headings kept | parse ms (median) | × original |")
    print("|---|---:|---:|---|---:|---|---|---:|---:|")
    for fmt, items in per_format.items():
        ok = [r for r in items if "error" not in r]
        recall = [r["recall"] for r in ok]
        rows_kept = [sum(r["rows"][i] for r in ok) for i in (0, 1)]
        heads_kept = [sum(r["headings"][i] for r in ok) for i in (0, 1)]
        ratio = statistics.median(r["ms"] / r["base_ms"] for r in ok) if ok else float("nan")
        print(f"| {fmt} | {len(items)} | {len(items) - len(ok)} | "
              f"{statistics.median(recall):.3f} / {min(recall):.3f} | {statistics.median(r['precision'] for r in ok):.3f} | "
              f"{rows_kept[0]}/{rows_kept[1]} | {heads_kept[0]}/{heads_kept[1]} | "
              f"{statistics.median(r['ms'] for r in ok):.1f} | {ratio:.2f} |")
    worst = sorted((r for r in rows if "recall" in r), key=lambda r: r["recall"])[:6]
    print("\nlowest recall: " + "; ".join(f"{r['file']} as {r['format']} {r['recall']:.3f}" for r in worst))
    errors = [r for r in rows if "error" in r]
    if errors:
        print("unreadable: " + "; ".join(f"{r['file']} as {r['format']}: {r['error']}" for r in errors))
    if args.out:
        args.out.write_text(json.dumps(rows, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
