"""Memory of the scan step (`raw_documents`) by folder size: what one file costs while a folder is scanned.

    .venv/bin/python bench/scan_memory.py [--sizes 10000 100000] [--work /tmp/scan_memory]
    # against an older commit, in the same run:
    git archive <commit> rag_pipeline | tar -x -C /tmp/old
    .venv/bin/python bench/scan_memory.py --code /tmp/old --code .

Each (code, size) runs in a fresh interpreter over a folder of bench/pipeline_scale.py's
generated documents (made once under --work): the real `raw_documents` asset materialized twice
with the project's own resources (`build_definitions`: settings, writer lock, the lake's Arrow IO
manager) into a new lake — a first scan (every file hashed) and a re-scan of the unchanged folder
(every hash reused, as in a no-op run). "above start" = the process's VmHWM during the
materialization (reset through /proc/self/clear_refs) minus its VmRSS just before; "peak" = VmHWM.
Runs from --work, so that `--code` (PYTHONPATH) decides which rag_pipeline is imported. Medians of --repeat runs. The whole run's memory at scale is bench/pipeline_scale.py's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBE = r"""
import gc, json, sys, tempfile, time
import dagster as dg
from rag_pipeline.definitions import build_definitions
from rag_pipeline.defs.assets import raw_documents
from rag_pipeline.defs.resources import RagSettingsResource

def kb(field):
    for line in open('/proc/self/status'):
        if line.startswith(field):
            return int(line.split()[1])

raw, work = sys.argv[1], sys.argv[2]
defs = build_definitions(RagSettingsResource(raw_dir=raw, lake_dir=tempfile.mkdtemp(dir=work)))
instance = dg.DagsterInstance.ephemeral()
out = []
for name in ("first scan", "re-scan"):
    gc.collect()
    with open('/proc/self/clear_refs', 'w') as fh:
        fh.write('5')  # VmHWM := VmRSS
    before, started = kb('VmRSS'), time.perf_counter()
    result = dg.materialize([raw_documents], resources=defs.resources, instance=instance, raise_on_error=True)
    files = result.asset_materializations_for_node("raw_documents")[0].metadata["files"].value
    out.append({"scan": name, "files": files, "seconds": time.perf_counter() - started, "start_kb": before, "peak_kb": kb('VmHWM')})
print(json.dumps(out))
"""


def folder(work: Path, size: int) -> Path:
    raw = work / f"docs_{size}"
    if not (raw / ".complete").exists():
        sys.path.insert(0, str(ROOT / "bench"))
        from pipeline_scale import generate_corpus

        generate_corpus(raw, size, seed=16)
        (raw / ".complete").touch()  # hidden: the scan skips it
    return raw


def probe(code: Path, raw: Path, work: Path) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": str(code.resolve())}
    done = subprocess.run([sys.executable, "-c", PROBE, str(raw), str(work)], env=env, cwd=work, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--code", type=Path, action="append", help="a folder holding rag_pipeline/ (default: this checkout)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/scan_memory"))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    codes = args.code or [ROOT]
    print("| code | files | scan | start MB | above start MB | peak MB | wall s |\n|---|---:|---|---:|---:|---:|---:|")
    for size in args.sizes:
        raw = folder(args.work, size)
        for code in codes:
            runs = [probe(code, raw, args.work) for _ in range(args.repeat)]
            for i, name in enumerate(("first scan", "re-scan")):
                start, peak = (statistics.median(r[i][key] for r in runs) / 1024 for key in ("start_kb", "peak_kb"))
                seconds = statistics.median(r[i]["seconds"] for r in runs)
                print(f"| {code} | {size:,} | {name} | {start:,.0f} | {peak - start:,.0f} | {peak:,.0f} | {seconds:.1f} |", flush=True)


if __name__ == "__main__":
    main()
