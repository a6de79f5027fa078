"""The golden set after every build, and the blocking check that keeps a worse index unserved.

golden_eval answers the golden questions from the *staged* generation (not the served one) and
stores the report beside the generation's manifest; golden_quality_holds compares it with the
served generation's report on the questions both could be judged on (eval.gate). published_index depends on golden_eval, so a failed check stops the
promotion and the last good generation keeps serving.
"""


import dagster as dg

from rag_pipeline.defs.assets import OWNERS, _md_table
from rag_pipeline.defs.resources import LakeWriterResource, RagSettingsResource
from rag_pipeline.eval.gate import GATED_METRICS, compact, compare, eligible, scores
from rag_pipeline.eval.golden import failures, load_golden, run_golden
from rag_pipeline.query.api import RagIndex, stored_policy
from rag_pipeline.query.filters import SERVED_STATUS
from rag_pipeline.store import schema as s
from rag_pipeline.store.lake import Lake

REPORTED = (*GATED_METRICS, "false_refusal", "false_answer", "answer_contains", "answered_correctly")


@dg.asset(group_name="index", kinds={"python"}, owners=OWNERS)
def golden_eval(
    context: dg.AssetExecutionContext, rag: RagSettingsResource, lake_writer: LakeWriterResource, lancedb_index: dict
) -> dict:
    """Golden-set quality of the staged generation (skipped when no golden set fits the corpus)."""
    settings = rag.settings()
    lake = Lake(settings.lake_dir)
    generation = lancedb_index["generation"]
    stored = lake.read_generation_eval(generation) if lancedb_index.get("unchanged") else None
    if stored is not None:  # no generation was staged: the served one's report stands as it is
        context.add_output_metadata({"status": "unchanged", "generation": generation})
        return stored
    questions, skipped = _questions(settings.golden_file, lake, lancedb_index)
    if skipped:
        context.add_output_metadata({"status": "skipped", "reason": skipped})
        return {"status": "skipped", "reason": skipped, "generation": generation}
    summary = _reused(lake, lancedb_index, settings.golden_file)
    if summary is None:
        index = RagIndex(lake, lancedb_index, rag.encoder(), stored_policy(lake, lancedb_index))
        report = run_golden(index, questions)
        rag.encoder().unload()  # the answers opened the token states' ONNX session (Encoder.unload)
        summary = {
            "status": "evaluated",
            "generation": generation,
            "golden_file": str(settings.golden_file),
            "questions": report["questions"],
            "policy": report["policy"],
            "wrong": failures(report),
            **{m: v for m, v in scores(report["details"]).items() if m in REPORTED},
            "details": compact(report["details"]),
        }
    else:
        summary = {**summary, "generation": generation}
    lake.write_generation_eval(generation, summary)
    context.add_output_metadata(
        {
            "status": summary["status"],
            "questions": summary["questions"],
            **{m: summary[m] for m in REPORTED if summary.get(m) is not None},  # a report stored before a metric existed lacks it
            "wrong": _md_table(["question: problem"], [[w.strip()] for w in summary["wrong"]] or [["none"]]),
        }
    )
    return summary


def _questions(golden_file, lake: Lake, manifest: dict) -> tuple[list[dict], str | None]:
    """The golden questions this generation can be judged on, or why there are none."""
    if golden_file is None:
        return [], "no golden set configured (RAG_GOLDEN_FILE=none)"
    if not golden_file.exists():
        return [], f"golden set {golden_file} not found"
    docs = lake.published_arrow(s.DOCUMENTS, manifest).select(["source", "status"]).to_pylist()
    served = {d["source"] for d in docs if d["status"] == SERVED_STATUS}
    questions = eligible(load_golden(golden_file), served)
    if not any(q["answerable"] for q in questions):
        return [], "the golden set describes another corpus: none of its expected sources is served here"
    return questions, None


def _reused(lake: Lake, staged: dict, golden_file) -> dict | None:
    """The served generation's report, when nothing that could change an answer changed since."""
    served = lake.read_manifest(missing_ok=True)
    if not served or served["model"]["key"] != staged["model"]["key"]:
        return None
    stats = staged.get("stats", {})
    if any(stats.get(k, 1) for k in ("added", "updated", "deleted")):
        return None
    report = lake.read_generation_eval(served["generation"])
    policy = stored_policy(lake, staged)
    if not report or report.get("status") == "skipped" or report.get("golden_file") != str(golden_file):
        return None
    if report.get("policy") != policy.to_record():
        return None
    return {**report, "status": f"reused from generation {served['generation']} (no document changed)"}


@dg.asset_check(asset="golden_eval", blocking=True)
def golden_quality_holds(rag: RagSettingsResource, golden_eval: dict) -> dg.AssetCheckResult:
    """No gated metric falls below the served generation's by more than the tolerance."""
    settings = rag.settings()
    if golden_eval["status"] == "skipped":
        return dg.AssetCheckResult(passed=True, metadata={"skipped": golden_eval["reason"]})
    lake = Lake(settings.lake_dir)
    served = lake.read_manifest(missing_ok=True)
    baseline = lake.read_generation_eval(served["generation"]) if served else None
    if not baseline or baseline.get("status") == "skipped":
        return dg.AssetCheckResult(
            passed=True, metadata={"baseline": "none yet: this generation's report becomes the baseline once served"}
        )
    problems, now, before = compare(golden_eval["details"], baseline["details"], settings.eval_tolerance)
    return dg.AssetCheckResult(
        passed=not problems,
        description="; ".join(problems) or None,
        metadata={
            "baseline_generation": served["generation"],
            "questions_compared": now["questions"],
            "tolerance": settings.eval_tolerance,
            "regressions": ", ".join(problems) or "none",
            **{f"{m} (baseline)": before[m] for m in GATED_METRICS if before.get(m) is not None},
            **{m: now[m] for m in GATED_METRICS if now.get(m) is not None},
        },
    )
