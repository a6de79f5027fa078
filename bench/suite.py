"""The benchmark suite: every table of bench/README.md from one command.

    .venv/bin/python bench/suite.py                 # everything but the precision × quality sweep, ~60 min on 2 cores
    .venv/bin/python bench/suite.py --with-quality  # + nDCG@10 per embedding precision (re-embeds SciFact twice, +40 min)
    .venv/bin/python bench/suite.py --smoke         # tiny versions of the scripts, ~2 min (run by the test suite)

Runs each script in its own process, in this order, prints its tables under a heading, and writes
the whole report to bench/results/suite.md (the --smoke report to a temporary file). Run it on an
idle machine: the scripts report medians and same-run ratios, but two cores shared with anything
else still move absolute numbers by 2x.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench"

FULL = [
    ("Full build by stage", ["build_stages.py"]),
    ("Embedding precision: speed, embed stage vs. bare encode", ["embedding_precision.py"]),
    ("Scale: latency, ANN recall, build memory", ["scale.py"]),
    ("Incremental re-indexing", ["incremental.py"]),
    ("Retrieval quality per mode", ["retrieval_benchmarks.py"]),
    ("Parsing and OCR", ["ingest.py"]),
]
SMOKE = [
    ("Full build by stage (sample)", ["build_stages.py", "--corpora", "sample"]),
    ("Scale (2k chunks)", ["scale.py", "--sizes", "2000", "--queries", "20"]),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny versions, to check the suite runs")
    parser.add_argument("--with-quality", action="store_true", help="add nDCG@10 per embedding precision")
    parser.add_argument("--out", type=Path, help="report file (default bench/results/suite.md)")
    args = parser.parse_args()
    plan = SMOKE if args.smoke else list(FULL)
    if args.with_quality and not args.smoke:
        plan[1] = (plan[1][0] + " and nDCG@10", ["embedding_precision.py", "--quality", "all"])
    out = args.out or (Path(tempfile.mkdtemp()) / "suite.md" if args.smoke else BENCH / "results" / "suite.md")
    report = [f"# Benchmark suite ({'smoke' if args.smoke else 'full'}), {time.strftime('%Y-%m-%d %H:%M')}\n"]
    failed = []
    for title, argv in plan:
        started = time.perf_counter()
        print(f"## {title}\n\n$ bench/{' '.join(argv)}", flush=True)
        proc = subprocess.run([sys.executable, str(BENCH / argv[0]), *argv[1:]], cwd=REPO,
                              capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - started
        body = proc.stdout.strip() if proc.returncode == 0 else f"FAILED (exit {proc.returncode}):\n{proc.stderr[-2000:]}"
        if proc.returncode:
            failed.append(title)
        section = f"## {title}\n\n`bench/{' '.join(argv)}` ({seconds:.0f} s)\n\n{body}\n"
        print(body + "\n", flush=True)
        report.append(section)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(report), encoding="utf-8")
    print(f"report: {out}" + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
