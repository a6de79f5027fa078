"""What a step's memory is made of (issue 16): glibc heap in use / free, Arrow pool, Python blocks.

    .venv/bin/python bench/pipeline_scale.py --docs 10000 --keep      # prints its temp folder
    RAG_SHARDS=40 .venv/bin/python bench/step_heap.py /tmp/pipeline_scale_100000_XXXX /tmp/pipeline_scale_model_XXXX/tiny-bert-h32 [--seed 11]

Appends a paragraph to 1 % of the kept corpus's .txt/.md files (seeded, as publish_pages.py; none with
`--noop`; with `--first` the kept lake is deleted instead: a first build), then
runs the real `rag index` in a process that also records, after each step's memory hook
(`defs/memory.release_freed_memory`) and at the step's peak VmRSS (sampled every 0.2 s):
`mallinfo2()` (bytes malloc has in use, free-but-held, in own mappings), the Arrow pool's bytes,
and `sys.getallocatedblocks()`. A kept N-shard lake needs `RAG_SHARDS=N` (or every shard re-runs).
Extra environment (e.g. `MALLOC_ARENA_MAX=2`) passes through to the run. In-process runs only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from publish_pages import change_one_percent  # noqa: E402


def _status_mb() -> dict[str, int]:
    return {k: int(v.split()[0]) // 1024 for k, v in (line.split(":", 1) for line in open("/proc/self/status"))
            if k in ("VmRSS", "RssAnon", "RssFile")}


def _record(out: Path) -> None:
    """Inside the run process: wrap the step hook's release, sample peaks, then run the CLI."""
    import pyarrow as pa

    import rag_pipeline.defs.memory as memory
    from rag_pipeline.cli import main as rag_main

    release, peak = memory.release_freed_memory, {}

    def snapshot() -> dict:
        heap = memory.heap_bytes()
        return {**_status_mb(), "arrow": pa.total_allocated_bytes() >> 20, "heap_used": heap["in_use"] >> 20,
                "heap_free": heap["free"] >> 20, "mapped": heap["mapped"] >> 20, "py_blocks_k": sys.getallocatedblocks() // 1000}

    def sample() -> None:
        nonlocal peak
        while True:
            if _status_mb()["VmRSS"] > peak.get("VmRSS", 0):
                peak = snapshot()
            time.sleep(0.2)

    def released() -> None:
        nonlocal peak
        at_peak, peak = peak, {}
        release()
        step = getattr(sys._getframe(1).f_locals.get("context"), "step_key", "?")  # the hook's HookContext
        with open(out, "a") as f:
            f.write(json.dumps({"step": step, "after": snapshot(), "peak": at_peak}) + "\n")

    memory.release_freed_memory = released
    threading.Thread(target=sample, daemon=True).start()
    sys.exit(rag_main())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("work", type=Path, help="a folder `pipeline_scale.py --keep` left (raw/, lake/, dagster_home/)")
    ap.add_argument("model", help="the tiny model folder of that run")
    ap.add_argument("--seed", type=int, default=11)
    run = ap.add_mutually_exclusive_group()
    run.add_argument("--noop", action="store_true", help="change no file: probe a no-op run")
    run.add_argument("--first", action="store_true", help="delete the kept lake, change no file: probe a first build")
    args = ap.parse_args()
    raw, lake = args.work / "raw", args.work / "lake"
    if args.first:
        shutil.rmtree(lake, ignore_errors=True)
    env = change_one_percent(args.work, args.model, args.seed, "step_heap.py", change=not (args.noop or args.first))
    # a PYTHONPATH of one's own (an older commit's code, unpacked) stays first
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(ROOT)) if p)
    out = args.work / f"step_heap_{args.seed}.jsonl"
    out.unlink(missing_ok=True)
    started = time.perf_counter()
    run = subprocess.run([sys.executable, __file__, "--record", str(out), "index", "--raw", str(raw), "--lake", str(lake), "--json", "-q"],
                         cwd=str(ROOT), env=env, capture_output=True, text=True)
    if run.returncode:
        sys.exit(f"rag index failed ({run.returncode}): {run.stderr[-1500:]}")
    kind = "first build" if args.first else "no-op" if args.noop else "1 % change"
    print(f"{kind}, {time.perf_counter() - started:.1f} s; MB after the step's release | at its peak VmRSS")
    print("| step | VmRSS | anon | heap used | heap free | Python blocks (k) | peak VmRSS | anon | file | heap used | heap free | mapped | Arrow |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for line in open(out):
        r = json.loads(line)
        a, p = r["after"], r["peak"] or {}
        print(f"| {r['step']} | {a['VmRSS']} | {a['RssAnon']} | {a['heap_used']} | {a['heap_free']} | {a['py_blocks_k']} | "
              + " | ".join(str(p.get(k, "-")) for k in ("VmRSS", "RssAnon", "RssFile", "heap_used", "heap_free", "mapped", "arrow")) + " |")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--record"]:
        out = Path(sys.argv[2])
        del sys.argv[1:3]
        _record(out)
    else:
        main()
