"""`rag` — index a folder through Dagster, search and ask the published index.

Exit codes: 0 ok, 1 the job or a check failed, 2 usage or environment error (message on stderr).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rag_pipeline.config import default_lake_dir, default_raw_dir, ensure_dagster_home

EXIT_LAKE_BUSY = 3


class UserError(Exception):
    """A mistake the user can fix; printed without a traceback."""


def cmd_index(args) -> int:
    import dagster as dg

    from rag_pipeline.definitions import build_definitions
    from rag_pipeline.defs.resources import RagSettingsResource

    from rag_pipeline.store.lock import describe_holder, is_locked

    raw, lake = Path(args.raw).resolve(), Path(args.lake).resolve()
    if not raw.is_dir():
        raise UserError(f"raw folder {raw} does not exist: put documents there or pass --raw DIR")
    if is_locked(lake):
        print(f"rag: the lake {lake} is being written by {describe_holder(lake)}; nothing was changed", file=sys.stderr)
        return EXIT_LAKE_BUSY
    ensure_dagster_home()
    defs = build_definitions(
        RagSettingsResource(raw_dir=str(raw), lake_dir=str(lake), allow_mass_deletion=args.allow_mass_deletion)
    )
    job = defs.resolve_job_def("index_job")
    with dg.DagsterInstance.get() as instance:
        log_level = "DEBUG" if args.verbose else "WARNING"
        run_config = {"loggers": {"console": {"config": {"log_level": log_level}}}}
        result = job.execute_in_process(instance=instance, run_config=run_config, raise_on_error=False)
    summary = {"run_id": result.run_id, "success": result.success, "raw_dir": str(raw), "lake_dir": str(lake)}
    for event in result.get_asset_materialization_events():
        metadata = event.event_specific_data.materialization.metadata
        summary.update({k: v.value for k, v in metadata.items() if k in _SUMMARY_KEYS})
    checks = [e.event_specific_data for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"]
    summary["checks"] = {c.check_name: "passed" if c.passed else "FAILED" for c in checks}
    busy = False
    for event in result.all_events:
        if event.event_type_value == "STEP_FAILURE":
            error = event.event_specific_data.error
            cause = error.cause or error
            busy |= cause.cls_name == "LakeBusyError"
            print(f"rag: step {event.step_key} failed: {cause.cls_name}: {cause.message.strip()}", file=sys.stderr)
        elif event.event_type_value == "ENGINE_EVENT" and event.event_specific_data.error:
            error = event.event_specific_data.error  # resource init: the lake is taken or unwritable
            while error.cls_name.startswith("Dagster") and error.cause is not None:
                error = error.cause
            busy |= error.cls_name == "LakeBusyError"
            print(f"rag: run failed: {error.cls_name}: {error.message.strip()}", file=sys.stderr)
    failed = [c for c in checks if not c.passed]
    for check in failed:
        print(f"rag: check {check.check_name} failed: {check.description or check.metadata}", file=sys.stderr)
    ok = result.success and all(c.passed for c in checks)
    _print(summary, args.json, lambda d: "\n".join(f"{k:>18}: {v}" for k, v in d.items()))
    if busy:
        return EXIT_LAKE_BUSY
    return 0 if ok else 1


_SUMMARY_KEYS = {
    "generation",
    "documents",
    "chunks",
    "quarantined",
    "scanned_files",
    "parsed_now",
    "reused_from_parse_cache",
    "added",
    "updated",
    "unchanged",
    "deleted",
    "embedded",
    "reused_from_cache",
    "model",
    "promoted",
    "served_generation",
    "new_generation",
}


def _open_index(lake: str):
    from rag_pipeline.query import RagIndex

    return RagIndex.open(lake)


def _principal(args):
    from rag_pipeline.query.filters import Principal

    return Principal(
        user=args.user,
        groups=tuple(args.group or ("all-staff",)),
        clearance=args.clearance,
        departments=tuple(args.department or ()),
    )


def cmd_ask(args) -> int:
    answer = _open_index(args.lake).ask(args.question, k=args.k, principal=_principal(args))
    _print(answer.to_dict(), args.json, _format_answer)
    return 0


def _format_answer(d: dict) -> str:
    if d["refused"]:
        return f"I can't answer that from the indexed documents.\n  reason: {d['reason']}"
    lines = [d["answer"], "", "Sources:"]
    for n, c in enumerate(d["citations"], start=1):
        page = f", page {c['page']}" if c["page"] else ""
        lines.append(f"  [{n}] {c['title']} — {c['source']}{page} (chunk {c['chunk_id']})")
    return "\n".join(lines)


def cmd_search(args) -> int:
    result = _open_index(args.lake).search(
        args.query, mode=args.mode, k=args.k, principal=_principal(args), rerank=True if args.rerank else None
    )
    if result.rerank_status != "off" or args.rerank:
        print(f"rerank: {result.rerank_status} — {result.rerank_note}", file=sys.stderr)
    hits = result.to_dicts()

    def fmt(rows):
        out = []
        for n, h in enumerate(rows, start=1):
            page = f" p.{h['page']}" if h["page"] else ""
            reranked = f", rerank #{h['rerank_rank']} (fused #{h['fused_rank']})" if h["rerank_rank"] else ""
            out.append(
                f"{n:>2}. {h['score']:.4f} {h['source']}{page}  [dense #{h['dense_rank']}, keyword #{h['keyword_rank']}{reranked}]\n"
                f"    {h['text'][:160].replace(chr(10), ' ')}"
            )
        return "\n".join(out) or "no hits"

    _print(hits, args.json, fmt)
    return 0


def cmd_status(args) -> int:
    from rag_pipeline.store.lake import Lake
    from rag_pipeline.store.summary import index_status

    def fmt(st):
        lines = [
            f"lake              {st['lake']}",
            f"serving           generation {st['served_generation']} (latest {st['latest_generation']}), "
            f"promoted {st['promoted_at']}, run {st['run_id']}",
            f"model             {st['model']['name']} ({st['model']['dimension']}-d, key {st['model']['key']})",
            f"documents         {_counts(st['documents_by_status'])}",
            f"formats           {_counts(st['documents_by_format'])}",
            f"chunks            {st['chunks']}",
            f"quarantined       {_counts(st['quarantine_by_reason']) or 'none'}",
            f"last run          {_counts(st['last_run_changes'])}",
        ]
        return "\n".join(lines)

    _print(index_status(Lake(Path(args.lake))), args.json, fmt)
    return 0


def _counts(counts: dict) -> str:
    return ", ".join(f"{v} {k}" for k, v in counts.items())


def cmd_quarantine(args) -> int:
    from rag_pipeline.ingest.release import RELEASABLE_REASONS, release
    from rag_pipeline.store.lake import Lake
    from rag_pipeline.store.summary import quarantine_rows

    rows = quarantine_rows(Lake(Path(args.lake)))
    if args.action == "release":
        if not args.source:
            raise UserError("say which file: rag quarantine release SOURCE (a path relative to the raw folder)")
        row = next((r for r in rows if r["source"] == args.source), None)
        if row is None:
            raise UserError(f"{args.source} is not in the quarantine of the served index (see rag quarantine list)")
        if row["reason"] not in RELEASABLE_REASONS:
            raise UserError(f"{args.source} is quarantined as {row['reason']}, which a release cannot override; fix the file")
        try:
            sidecar = release(Path(args.raw), args.source)
        except (FileNotFoundError, ValueError) as exc:
            raise UserError(str(exc)) from exc
        result = {"released": args.source, "sidecar": str(sidecar), "next": "it is indexed on the next run (rag index)"}
        _print(result, args.json, lambda d: f"released {d['released']} ({d['sidecar']}); {d['next']}")
        return 0

    def fmt(data):
        if not data:
            return "quarantine is empty"
        return "\n".join(f"{r['reason']:<20} {r['source']}\n{'':<20} {r['detail']}" for r in data)

    _print(rows, args.json, fmt)
    return 0


def cmd_generations(args) -> int:
    from rag_pipeline.store.lake import Lake

    lake = Lake(Path(args.lake))
    if args.action in ("promote", "rollback", "prune"):
        result = _change_generations(lake, args)
    else:
        result = [
            {k: g.get(k) for k in ("generation", "current", "staged_at", "run_id", "counts")} | {"model": g["model"]["name"]}
            for g in lake.list_generations()
        ]
    if isinstance(result, dict) and "generation" in result:
        result = {"served_generation": result["generation"], "model": result["model"]["name"], "counts": result["counts"]}

    def fmt(data):
        if isinstance(data, dict) and "generations_kept" in data:
            freed = (data["lake_bytes_before"] - data["lake_bytes_after"]) / 1e6
            return (
                f"kept generations {data['generations_kept']}; removed {data['generations_removed']} generations, "
                f"{data['table_versions_removed']} table versions, {data['staging_runs_removed']} staging runs ({freed:.1f} MB freed)"
            )
        if isinstance(data, dict):
            return f"now serving generation {data['served_generation']} ({data['model']}, {data['counts']})"
        lines = [f"{'':2}{'gen':>4}  {'staged at':<26} {'model':<24} counts"]
        for g in data:
            lines.append(f"{'*' if g['current'] else ' ':2}{g['generation']:>4}  {g['staged_at']:<26} {g['model']:<24} {g['counts']}")
        return "\n".join(lines)

    _print(result, args.json, fmt)
    return 0


def _change_generations(lake, args) -> dict:
    """Promote, roll back or prune under the lake's writer lock; a served-generation change is
    recorded as a materialization of published_index in the Dagster instance (the UI shows it)."""
    from rag_pipeline.store.lock import LakeBusyError, lake_writer_lock

    try:
        with lake_writer_lock(lake.lake_dir, what=f"rag generations {args.action}"):
            if args.action == "prune":
                return lake.prune(keep=args.keep)
            previous = lake.read_manifest(missing_ok=True)
            if args.action == "promote":
                if args.generation is None:
                    raise UserError("say which generation: rag generations promote N")
                manifest = lake.promote(args.generation)
            else:
                manifest = lake.rollback()
    except LakeBusyError as exc:
        raise UserError(str(exc)) from exc
    _record_served(manifest, previous, action=f"rag generations {args.action}")
    return manifest


def _record_served(manifest: dict, previous: dict | None, action: str) -> None:
    import dagster as dg

    from rag_pipeline.defs.assets import served_metadata

    ensure_dagster_home()
    with dg.DagsterInstance.get() as instance:
        instance.report_runless_asset_event(
            dg.AssetMaterialization("published_index", metadata=served_metadata(manifest, previous=previous, action=action))
        )


def _print(data, as_json: bool, formatter) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=2, default=str) if as_json else formatter(data))


EPILOG = """examples:
  rag index --raw data/raw                 index a folder (through Dagster's index_job)
  rag ask "How many days of annual leave?" answer with citations, or refuse
  rag search "E-45" --mode keyword -k 5    ranked passages with each arm's rank
  rag status                               what is served: generation, model, counts
  rag quarantine list                      files kept out, with reasons
  rag generations rollback                 serve the previous generation again

  rag generations prune --keep 2           drop old generations and LanceDB versions

exit codes: 0 ok, 1 the job or a quality check failed, 2 usage or environment error,
            3 another run is writing the lake (nothing was changed)
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rag",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG,
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def lake_arg(p):
        p.add_argument("--lake", default=str(default_lake_dir()), help="lake folder (env RAG_LAKE_DIR, default data/lake)")
        p.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("index", help="run index_job through Dagster on a folder of documents")
    p.add_argument("--raw", default=str(default_raw_dir()), help="documents folder (env RAG_RAW_DIR, default data/raw)")
    p.add_argument("-v", "--verbose", action="store_true", help="show Dagster's step-by-step log")
    p.add_argument(
        "--allow-mass-deletion", action="store_true",
        help="proceed even if the scan sees less than half the files the served index knows",
    )
    lake_arg(p)
    p.set_defaults(func=cmd_index)

    def principal_args(p):
        p.add_argument("--user", default="", help="who is asking (sees documents they own)")
        p.add_argument("--group", action="append", help="access group, repeatable (default all-staff)")
        p.add_argument("--department", action="append", help="department the asker belongs to, repeatable")
        p.add_argument(
            "--clearance", default="internal", choices=["public", "internal", "confidential", "secret"],
            help="highest security level the asker may read (default internal)",
        )

    p = sub.add_parser("ask", help="answer a question with citations, or refuse")
    p.add_argument("question")
    principal_args(p)
    p.add_argument("-k", type=int, default=5, help="passages to consider (default 5)")
    lake_arg(p)
    p.set_defaults(func=cmd_ask)

    p = sub.add_parser("search", help="show ranked passages with per-arm ranks")
    p.add_argument("query")
    principal_args(p)
    p.add_argument(
        "--mode", choices=["hybrid", "hybrid-rrf", "vector", "keyword"], default="hybrid",
        help="hybrid: query-aware fusion (default); hybrid-rrf: plain RRF",
    )
    p.add_argument(
        "--rerank", action="store_true",
        help="rerank the fused top-N with the cross-encoder in RAG_RERANK_MODEL (on by default when it is set)",
    )
    p.add_argument("-k", type=int, default=10, help="hits to return (default 10)")
    lake_arg(p)
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("generations", help="list index generations, promote one, roll back, or prune old ones")
    p.add_argument("action", choices=["list", "promote", "rollback", "prune"], nargs="?", default="list")
    p.add_argument("generation", type=int, nargs="?", help="generation number (for promote)")
    p.add_argument(
        "--keep", type=int, default=2,
        help="prune: previously served generations to keep for rollback, besides the served one (default 2)",
    )
    lake_arg(p)
    p.set_defaults(func=cmd_generations)

    p = sub.add_parser("quarantine", help="list files kept out of the index, or release one (low OCR confidence, no text)")
    p.add_argument("action", choices=["list", "release"], nargs="?", default="list")
    p.add_argument("source", nargs="?", help="file to release (path relative to the raw folder)")
    p.add_argument("--raw", default=str(default_raw_dir()), help="documents folder (env RAG_RAW_DIR, default data/raw)")
    lake_arg(p)
    p.set_defaults(func=cmd_quarantine)

    p = sub.add_parser("status", help="summarize the served index: documents, chunks, quarantine, model, generation")
    lake_arg(p)
    p.set_defaults(func=cmd_status)

    from rag_pipeline.eval.cli import register as register_eval

    register_eval(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from rag_pipeline.embedding.encoder import ModelLoadError, ModelMismatchError
    from rag_pipeline.store.lake import IndexNotFoundError, IndexUnreadableError, LakeWriteError

    try:
        return args.func(args)
    except (UserError, IndexNotFoundError, IndexUnreadableError, LakeWriteError, ModelLoadError, ModelMismatchError, ValueError) as exc:
        print(f"rag: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
