"""Which mapped files a 1 % change's steps hold resident (issue 16): VmRSS split by mapping, per step.

    .venv/bin/python bench/pipeline_scale.py --docs 10000 --keep      # prints its temp folder
    .venv/bin/python bench/publish_pages.py /tmp/pipeline_scale_10000_XXXX /tmp/pipeline_scale_model_XXXX/tiny-bert-h32 [--seed 101]

Appends a paragraph to 1 % of the kept corpus's .txt/.md files (seeded), runs the real
`rag index` on the kept lake and DAGSTER_HOME with the kept tiny model, reads
/proc/<pid>/smaps every 0.3 s, and prints per Dagster step: its peak VmRSS, the anonymous and
file-backed parts at that moment, how much of it was the lake's own files (stage Arrow maps),
and the largest resident size each lake file reached during the step. In-process runs only
(the steps share the `rag` process).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def smaps_by_path(pid: int) -> collections.Counter:
    """Resident kB per mapped path ('[anon]', '[heap]', ... for the unnamed ones)."""
    resident, path = collections.Counter(), None
    for line in open(f"/proc/{pid}/smaps"):
        fields = line.split()
        if fields and "-" in fields[0] and not fields[0].endswith(":"):
            path = fields[5] if len(fields) > 5 else "[anon]"
        elif fields[:1] == ["Rss:"]:
            resident[path] += int(fields[1])
    return resident


def status_kb(pid: int) -> dict[str, int]:
    return {k: int(v.split()[0]) for k, v in (line.split(":", 1) for line in open(f"/proc/{pid}/status")) if k in ("VmRSS", "RssAnon", "RssFile")}


def change_one_percent(work: Path, model: str, seed: int, by: str, change: bool = True) -> dict[str, str]:
    """Append a paragraph to 1 % of a kept corpus's .txt/.md files (seeded; none when not
    `change`: a no-op run); the environment of a `rag index` on its kept lake, DAGSTER_HOME and tiny model."""
    files = sorted(p for p in (work / "raw").rglob("*") if p.suffix in (".txt", ".md"))
    random.Random(seed).shuffle(files)
    for path in files[: max(1, len(files) // 100) if change else 0]:
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"\n\nA paragraph added by {by} (seed {seed}) to {path.name}.\n")
    return dict(os.environ, DAGSTER_HOME=str(work / "dagster_home"), RAG_GOLDEN_FILE="none", RAG_EMBEDDING_MODEL=model,
                HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", RAG_PROGRESS="0")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("work", type=Path, help="a folder `pipeline_scale.py --keep` left (raw/, lake/, dagster_home/)")
    ap.add_argument("model", help="the tiny model folder of that run")
    ap.add_argument("--seed", type=int, default=101)
    args = ap.parse_args()
    raw, lake = args.work / "raw", args.work / "lake"
    env = change_one_percent(args.work, args.model, args.seed, "publish_pages.py")
    proc = subprocess.Popen([str(ROOT / ".venv" / "bin" / "rag"), "index", "--raw", str(raw), "--lake", str(lake), "--json", "-q"],
                            cwd=str(ROOT), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    samples: list[tuple[float, dict, collections.Counter]] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            try:
                samples.append((time.time(), status_kb(proc.pid), smaps_by_path(proc.pid)))
            except (OSError, ValueError):
                pass
            done.wait(0.3)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    done.set()
    sampler.join()
    if proc.returncode:
        sys.exit(f"rag index failed ({proc.returncode}): {err[-1500:]}")
    summary = json.loads(out)

    import dagster as dg

    os.environ["DAGSTER_HOME"] = env["DAGSTER_HOME"]
    print("| step | s | peak VmRSS MB | anonymous | file-backed | lake files | largest lake files during the step (MB) | other files at the peak (MB) |")
    print("|---|---:|---:|---:|---:|---:|---|---|")
    for step in dg.DagsterInstance.get().get_run_step_stats(summary["run_id"]):
        window = [x for x in samples if step.start_time and step.end_time and step.start_time <= x[0] <= step.end_time]
        if not window:
            continue
        _, status, mapped = max(window, key=lambda x: x[1]["VmRSS"])
        in_lake = sum(v for k, v in mapped.items() if k.startswith(str(lake)))
        largest = collections.Counter()
        for _, _, m in window:
            for k, v in m.items():
                if k.startswith(str(lake)):
                    name = k[len(str(lake)) + 1:].split("/", 3)[-1]  # staging/runs/<run>/ dropped
                    largest[name] = max(largest[name], v // 1024)
        top = ", ".join(f"{k} {v}" for k, v in largest.most_common(4) if v)
        others = collections.Counter({k: v // 1024 for k, v in mapped.items() if k.startswith("/") and not k.startswith(str(lake))})
        other = ", ".join(f"{Path(k).name} {v}" for k, v in others.most_common(4) if v)
        print(f"| {step.step_key} | {step.end_time - step.start_time:.1f} | {status['VmRSS'] // 1024} | {status['RssAnon'] // 1024} | "
              f"{status['RssFile'] // 1024} | {in_lake // 1024} | {top or '-'} | {other or '-'} |")


if __name__ == "__main__":
    main()
