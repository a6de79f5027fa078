"""Full-build throughput by stage: files/s and chunks/s of every index_job step, and the no-op re-run.

    .venv/bin/python bench/build_stages.py                          # shared corpus + 500 SciFact abstracts, ~6 min
    .venv/bin/python bench/build_stages.py --scifact-docs 5183      # all of SciFact-train (~20 min on 2 cores)
    .venv/bin/python bench/build_stages.py --corpora sample         # the bundled sample only (~1 min)

Each corpus is built from scratch (fresh lake: no parse or embedding cache) by a real Dagster run
of index_job in a child process that has already loaded the model, so process start-up and model
loading are outside every timing. Step durations come from Dagster's own step statistics; the
child's peak RSS (getrusage) is reported with it. Then the same child re-runs the job on the
unchanged folder: the no-op re-run, as a share of the full build.
Corpora: `shared` = ../shared/corpus (81 files of 11 formats, OCR included), `scifact` = N
SciFact-train abstracts written as .txt files, `sample` = data/sample.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SHARED = REPO.parent / "shared"
STAGES = ["raw_documents", "parse_documents", "chunks", "chunk_fingerprints", "embeddings", "lancedb_index",
          "golden_eval", "published_index"]


def make_corpus(name: str, dest: Path, scifact_docs: int) -> Path:
    if name == "sample":
        shutil.copytree(REPO / "data" / "sample", dest)
    elif name == "shared":
        shutil.copytree(SHARED / "corpus", dest, ignore=shutil.ignore_patterns("manifest.tsv"))
    else:
        dest.mkdir(parents=True)
        with (SHARED / "bench" / "scifact-train" / "corpus.jsonl").open(encoding="utf-8") as fh:
            for _, line in zip(range(scifact_docs), fh):
                doc = json.loads(line)
                (dest / f"{doc['_id']}.txt").write_text(f"{doc['title']}\n\n{doc['text']}\n", encoding="utf-8")
    return dest


def run_job(raw: Path, lake: Path) -> dict:
    """One real index_job run; per-step seconds from the instance's step stats, plus asset metadata."""
    import dagster as dg

    from rag_pipeline.definitions import build_definitions
    from rag_pipeline.defs.resources import RagSettingsResource

    defs = build_definitions(RagSettingsResource(raw_dir=str(raw), lake_dir=str(lake)))
    with dg.DagsterInstance.ephemeral() as instance:
        started = time.perf_counter()
        result = defs.resolve_job_def("index_job").execute_in_process(instance=instance, raise_on_error=False)
        wall = time.perf_counter() - started
        steps = {s.step_key: s.end_time - s.start_time for s in instance.get_run_step_stats(result.run_id)
                 if s.end_time and s.start_time}
    assert result.success, "the benchmark run failed"
    metadata = {}
    for event in result.get_asset_materialization_events():
        mat = event.event_specific_data.materialization
        metadata[mat.asset_key.to_user_string()] = {k: v.value for k, v in mat.metadata.items()}
    return {"wall": wall, "steps": steps, "metadata": metadata}


def child(name: str, scifact_docs: int) -> None:
    from rag_pipeline.config import Settings
    from rag_pipeline.embedding.encoder import encoder_for

    encoder_for(Settings())  # model loaded before any timing
    with tempfile.TemporaryDirectory() as tmp:
        raw = make_corpus(name, Path(tmp) / "raw", scifact_docs)
        full = run_job(raw, Path(tmp) / "lake")
        noop = run_job(raw, Path(tmp) / "lake")
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"full": full, "noop": noop, "peak_rss_mb": peak_mb}, default=str))


def table(name: str, report: dict) -> str:
    full, noop = report["full"], report["noop"]
    meta = full["metadata"]
    files = meta["raw_documents"]["files"]
    chunks = meta["chunks"]["chunks"]
    lines = [f"### {name}: {files} files → {meta['lancedb_index']['documents']} indexed, "
             f"{meta['lancedb_index']['quarantined']} quarantined, {chunks} chunks; peak RSS {report['peak_rss_mb']:.0f} MB\n",
             "| stage | s | files/s | chunks/s | share of build |", "|---|---|---|---|---|"]
    checks = sum(v for k, v in full["steps"].items() if k not in STAGES)
    for stage in [*STAGES, "checks"]:
        seconds = checks if stage == "checks" else full["steps"].get(stage, 0.0)
        rate = lambda n: f"{n / seconds:,.1f}" if seconds > 0.05 else "-"  # noqa: E731
        lines.append(f"| {stage} | {seconds:.2f} | {rate(files)} | {rate(chunks)} | {100 * seconds / full['wall']:.1f} % |")
    lines.append(f"| **full build (wall)** | **{full['wall']:.1f}** | {files / full['wall']:.2f} | {chunks / full['wall']:.2f} | 100 % |")
    lines.append(f"| no-op re-run (wall) | {noop['wall']:.1f} | | | {100 * noop['wall'] / full['wall']:.1f} % |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpora", default="shared,scifact", help="comma list of shared, scifact, sample")
    parser.add_argument("--scifact-docs", type=int, default=500)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.scifact_docs)
        return 0
    for name in args.corpora.split(","):
        proc = subprocess.run([sys.executable, __file__, "--child", name, "--scifact-docs", str(args.scifact_docs)],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            print(proc.stderr[-3000:], file=sys.stderr)
            return proc.returncode
        label = f"scifact ({args.scifact_docs} abstracts)" if name == "scifact" else name
        print(table(label, json.loads(proc.stdout.strip().splitlines()[-1])) + "\n", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
