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


EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # the shell's convention for "stopped by Ctrl-C"
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a writer whose reader left
K_RANGE = {"ask": (1, 50), "search": (1, 500)}  # passages an answer reads; hits a search lists
MAX_QUERY_CHARS = 2000  # far beyond any question; what the embedding model reads is shorter still
LABEL_CHARS = 200  # --user, --group, --department values


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line on stderr (``rag: error: ...``) and exit 2,
    never the usage block; subparsers inherit the class, so every subcommand behaves alike."""

    def error(self, message: str):  # noqa: D401 - argparse's hook
        hint = f" (see {self.prog} --help)"
        self.exit(EXIT_USAGE, f"rag: error: {_one_line(message)}{hint}\n")


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _k_type(command: str):
    low, high = K_RANGE[command]

    def parse(value: str) -> int:
        try:
            k = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"k must be a whole number from {low} to {high}, got {value!r}") from None
        if not low <= k <= high:
            raise argparse.ArgumentTypeError(f"k must be from {low} to {high}, got {k}")
        return k

    return parse


def _text_type(what: str):
    def parse(value: str) -> str:
        if not value.strip():
            raise argparse.ArgumentTypeError(f"the {what} is empty: say what you are looking for")
        if len(value) > MAX_QUERY_CHARS:
            raise argparse.ArgumentTypeError(f"the {what} is {len(value)} characters long; at most {MAX_QUERY_CHARS}")
        if any(ord(c) < 32 and c not in "\t\n\r" for c in value):
            raise argparse.ArgumentTypeError(f"the {what} contains control characters")
        return value

    return parse


def _label_type(what: str, allow_empty: bool = False):
    """A principal field (user, group, department): a plain label, as the index stores them."""

    def parse(value: str) -> str:
        if not value and allow_empty:
            return value
        if not value.strip():
            raise argparse.ArgumentTypeError(f"{what} is empty")
        if value != value.strip() or len(value) > LABEL_CHARS or any(ord(c) < 32 or c in "'\"," for c in value):
            raise argparse.ArgumentTypeError(
                f"{what} {value!r} is not a label (no surrounding spaces, quotes, commas or control "
                f"characters, at most {LABEL_CHARS} characters); repeat the option for several"
            )
        return value

    return parse


def _count_type(what: str, low: int):
    def parse(value: str) -> int:
        try:
            n = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be a whole number, got {value!r}") from None
        if n < low:
            raise argparse.ArgumentTypeError(f"{what} must be at least {low}, got {n}")
        return n

    return parse


def _check_utf8(argv: list[str]) -> None:
    """Arguments the OS handed over as bytes that are not UTF-8 arrive as lone surrogates
    (PEP 383); they would reach the index, the lake path or the terminal garbled."""
    import os

    for n, arg in enumerate(argv, start=1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            try:
                shown = os.fsencode(arg)  # the bytes as given
            except UnicodeEncodeError:
                shown = arg.encode("utf-8", "backslashreplace")
            raise UserError(f"argument {n} is not valid UTF-8: {shown!r}; pass text in UTF-8") from None


def cmd_index(args) -> int:
    import uuid

    from rag_pipeline.store.lock import describe_holder, is_locked

    raw, lake = Path(args.raw).resolve(), Path(args.lake).resolve()
    if not raw.is_dir():
        raise UserError(f"raw folder {raw} does not exist: put documents there or pass --raw DIR")
    if args.ignore_file is not None and not Path(args.ignore_file).is_file():
        raise UserError(f"ignore file {Path(args.ignore_file).resolve()} does not exist")
    if is_locked(lake):
        print(f"rag: the lake {lake} is being written by {describe_holder(lake)}; nothing was changed", file=sys.stderr)
        return EXIT_LAKE_BUSY
    served_before = _served_generation(lake)
    run_id = str(uuid.uuid4())
    from rag_pipeline import progress  # decided before _RunInterrupts turns fd 2 into a pipe

    shown = progress.choose_mode(quiet=args.quiet, requested=args.progress)
    width = progress.terminal_width()
    with _RunInterrupts(run_id) as interrupts, progress.terminal(shown, ncols=width):
        try:
            results, check_names, up_to_date = _execute_index_job(args, raw, lake, run_id, interrupts)
        except BaseException as exc:  # a second signal, or one that landed outside a step
            if not isinstance(exc, KeyboardInterrupt) and type(exc).__name__ != "DagsterExecutionInterruptedError":
                raise
            interrupts.note(_signal_number("SIGINT"))
    if interrupts.signum is not None:
        interrupts.record_canceled()
        print(_interrupted_line(served_before, _served_generation(lake)), file=sys.stderr)
        return EXIT_INTERRUPTED
    return _report_index_run(args, results, check_names, raw, lake, up_to_date)


def _signal_number(name: str) -> int:
    import signal

    return int(getattr(signal, name))


RUN_ID_TAG = "rag/index_request"  # the id `rag index` gave a run that executes out of process


def _execute_index_job(args, raw: Path, lake: Path, run_id: str, interrupts):
    import dagster as dg

    from rag_pipeline.cluster.executors import executor_kind
    from rag_pipeline.definitions import build_definitions
    from rag_pipeline.defs.resources import RagSettingsResource

    ignore_file = str(Path(args.ignore_file).resolve()) if args.ignore_file else None  # else RAG_IGNORE_FILE
    rag = RagSettingsResource(raw_dir=str(raw), lake_dir=str(lake), allow_mass_deletion=args.allow_mass_deletion, ignore_file=ignore_file)
    job = build_definitions(rag).resolve_job_def("index_job")
    log_level = "DEBUG" if args.verbose else "WARNING"
    up_to_date: list[str] = []  # shards a fanned-out index found up to date and did not run
    with _dagster_instance() as instance:
        interrupts.attach(instance)
        if executor_kind() == "in_process":
            run_config = {"loggers": {"console": {"config": {"log_level": log_level}}}}
            result = job.execute_in_process(instance=instance, run_config=run_config, raise_on_error=False, run_id=run_id)
            results = [result]
        else:  # RAG_EXECUTOR=multiprocess|celery: this process orchestrates, the steps run elsewhere
            from rag_pipeline.cluster.fanout import run_fanned_out
            from rag_pipeline.cluster.jobs import index_job, run_config_for
            from rag_pipeline.config import shard_runs

            run_config = run_config_for(rag.settings(), log_level=log_level)
            tags, parallel = {RUN_ID_TAG: run_id}, shard_runs()
            if parallel:  # the shards side by side, each in a run of its own
                results, up_to_date = run_fanned_out(instance, run_config, tags, parallel, lake)
            else:
                results = [dg.execute_job(dg.reconstructable(index_job), instance, run_config=run_config, tags=tags)]
    return results, [key.name for key in job.asset_layer.asset_graph.asset_check_keys], up_to_date


def _dagster_instance():
    """The local Dagster instance, its SQLite storage created under a file lock.

    Two `rag` processes opening a fresh DAGSTER_HOME at once would both run the storage schema
    migrations and one would die ("table alembic_version already exists"); with the lock the
    second finds the tables made. Every storage is touched inside it, so none is created later.
    """
    import fcntl

    import dagster as dg

    home = ensure_dagster_home()
    with open(home / ".instance-init.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        instance = dg.DagsterInstance.get()
        instance.get_runs(limit=1)
        instance.get_asset_keys(limit=1)
        instance.all_instigator_state()
    return instance


def _served_generation(lake: Path) -> int | None:
    """The served generation, from the manifest alone (no LanceDB import)."""
    try:
        return json.loads((lake / "index_manifest.json").read_text(encoding="utf-8"))["generation"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _interrupted_line(before: int | None, after: int | None) -> str:
    if after != before and after is not None:
        return f"interrupted: generation {after} had already been promoted and is serving"
    if before is None:
        return "interrupted: nothing was promoted, no generation is served yet"
    return f"interrupted: nothing was promoted, generation {before} keeps serving"


class _RunInterrupts:
    """SIGINT/SIGTERM during `rag index`: the run is terminated through Dagster and recorded
    as canceled, its parse workers are stopped, and no traceback reaches the terminal.

    While a step runs, Dagster's own handler owns SIGINT (and maps SIGTERM onto it): it raises
    DagsterExecutionInterruptedError in the step, which stops the parse pool (its workers'
    process groups are killed) and unwinds the run. Dagster records such a run as canceled
    only if a termination was requested first, so a wake-up fd (written by the interpreter's
    C-level handler as the signal lands, whoever's Python handler then runs) wakes a thread
    that marks the run CANCELING at once; whatever the race, :meth:`record_canceled` leaves
    the run CANCELED. Outside Dagster's window our own handler raises KeyboardInterrupt.

    From the first signal on, stderr is muted: Dagster's log of the interrupted step is its
    traceback, and the operator gets one line instead. Ctrl-C reaches the whole foreground
    process group, including the helpers Dagster's compute-log capture starts (``tail -F`` and
    ``watch_orphans.py``, which die printing a KeyboardInterrupt traceback); so while the run
    lasts, file descriptor 2 of this process and of every child it starts is a pipe that a
    thread copies to the real stderr, and stops copying at the first signal.
    """

    SIGNALS = ("SIGINT", "SIGTERM")
    RELAY_DELAY_S = 0.25

    def __init__(self, run_id: str):
        self.run_id = run_id
        self.signum: int | None = None
        self.instance = None
        self._stderr = None
        self._active = False

    def __enter__(self):
        import os
        import signal
        import threading

        if threading.current_thread() is not threading.main_thread():
            return self  # signal handlers belong to the main thread; a caller elsewhere keeps its own
        self._signals = {getattr(signal, name) for name in self.SIGNALS}
        self._lock = threading.Lock()
        self._signalled = threading.Event()
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)
        self._previous_fd = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        self._previous = {s: signal.getsignal(s) for s in self._signals}
        for s in self._signals:
            signal.signal(s, self._handler)
        self._thread = threading.Thread(target=self._watch, name="rag-interrupts", daemon=True)
        self._thread.start()
        self._relay = None
        try:
            sys.stderr.flush()
            self._stderr_fd = os.dup(2)
            relay_read, relay_write = os.pipe()
            os.dup2(relay_write, 2)
            os.close(relay_write)
            self._relay = threading.Thread(target=self._copy_stderr, args=(relay_read,), name="rag-stderr", daemon=True)
            self._relay.start()
        except (OSError, ValueError):  # no usable fd 2 (embedded use): the Python-level mute still works
            pass
        self._active = True
        return self

    def _copy_stderr(self, relay_read: int) -> None:
        import os

        while True:
            try:
                chunk = os.read(relay_read, 65536)
                if not chunk:
                    break
                # held back a moment: a child's dying words may beat the watcher to the signal
                if not self._signalled.wait(self.RELAY_DELAY_S):
                    os.write(self._stderr_fd, chunk)
            except OSError:
                break
        os.close(relay_read)

    def __exit__(self, *exc):
        import os
        import signal

        if not self._active:
            return False
        signal.set_wakeup_fd(self._previous_fd)
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        os.close(self._write)  # the watcher reads EOF and ends
        self._thread.join(timeout=10)
        os.close(self._read)
        if self._stderr is not None:
            sys.stderr = self._stderr
        if self._relay is not None:
            try:
                sys.stderr.flush()
            except (OSError, ValueError):
                pass
            os.dup2(self._stderr_fd, 2)  # our end of the pipe closes; the copier ends once children let go
            self._relay.join(timeout=2)
            if not self._relay.is_alive():
                os.close(self._stderr_fd)
        return False

    def _handler(self, signum, frame):  # noqa: ARG002
        self.note(signum)
        raise KeyboardInterrupt

    def _watch(self) -> None:
        import os

        while True:
            try:
                data = os.read(self._read, 64)
            except OSError:
                return
            if not data:
                return
            for signum in data:
                if signum in self._signals:
                    self.note(signum)
                    self._request_cancel()

    def attach(self, instance) -> None:
        self.instance = instance

    def note(self, signum: int) -> None:
        import io

        lock = getattr(self, "_lock", None)
        if lock is None:
            self.signum = self.signum or signum
            return
        with lock:
            if self.signum is None:
                self.signum = signum
                self._signalled.set()
                self._stderr, sys.stderr = sys.stderr, io.StringIO()

    def _runs(self) -> list:
        if self.instance is None:
            return []
        import dagster as dg

        try:
            run = self.instance.get_run_by_id(self.run_id)
            if run is not None:
                return [run]
            # out of process, Dagster names the runs (one, or a fanned-out index's): ours carry our id as a tag
            return list(self.instance.get_runs(filters=dg.RunsFilter(tags={RUN_ID_TAG: self.run_id})))
        except Exception:  # noqa: BLE001 - the instance is being torn down: nothing to record
            return []

    def _request_cancel(self) -> None:
        runs = self._runs()
        if not runs:  # first: before an instance is attached, Dagster's first import may be what the signal cut short
            return
        from dagster import DagsterRunStatus

        for run in runs:
            if run.status in (DagsterRunStatus.NOT_STARTED, DagsterRunStatus.STARTING, DagsterRunStatus.STARTED):
                self.instance.report_run_canceling(run, message=f"rag index got {self._name()}: stopping the run")

    def record_canceled(self) -> None:
        """After the runs have unwound: a run the signal stopped ends CANCELED, whichever
        handler saw the signal first (a finished run is left as it is)."""
        runs = self._runs()
        if not runs:  # no instance yet: the signal may have cut Dagster's own first import short (a half-
            return  # registered module raises on the next import); no run can have started, nothing to record
        from dagster import DagsterRunStatus

        for run in runs:
            if run.status in (
                DagsterRunStatus.STARTING, DagsterRunStatus.STARTED, DagsterRunStatus.CANCELING, DagsterRunStatus.FAILURE,
            ) and not run.is_success:
                failure = run.status == DagsterRunStatus.FAILURE
                self.instance.report_run_canceled(
                    run, message=f"rag index was stopped by {self._name()}"
                    + ("" if not failure else " (Dagster saw the interrupt before the termination request)")
                    + "; nothing was promoted by this run",
                )

    def _name(self) -> str:
        import signal

        try:
            return signal.Signals(self.signum).name
        except ValueError:
            return f"signal {self.signum}"


def _step_workers(results) -> dict[str, str]:
    """Which Celery worker ran each step (RAG_EXECUTOR=celery), from dagster-celery's engine
    events; a shard run's steps are named with their shard (``embeddings[01of04]``)."""
    workers = {}
    for result in results:
        shard = result.dagster_run.tags.get("dagster/partition")
        for event in result.all_events:
            data = event.event_specific_data
            if event.event_type_value == "ENGINE_EVENT" and event.step_key and data is not None:
                worker = (getattr(data, "metadata", None) or {}).get("Celery worker")
                if worker is not None:
                    workers[event.step_key + (f"[{shard}]" if shard else "")] = worker.value
    return workers


def _housekeeping_report(results) -> dict | None:
    """What the run's `lake_housekeeping` step removed (Lake.prune's report), or None if it did not run."""
    for result in reversed(results):
        for event in result.get_asset_materialization_events():
            materialization = event.event_specific_data.materialization
            if materialization.asset_key.path[-1] == "lake_housekeeping":
                return {k: v.value for k, v in materialization.metadata.items()}
    return None


def _run_metadata(results) -> dict:
    """The summary's figures from the runs' materializations. A fanned-out index (cluster.fanout)
    reports each shard's counts in its own run: those are added up; the scan's and the publish's
    figures are taken as they are, and the publish's come last (the generation's own counts)."""
    from rag_pipeline.cluster.fanout import PHASE_TAG

    summary: dict = {}
    for result in results:
        own = {}
        for event in result.get_asset_materialization_events():
            metadata = event.event_specific_data.materialization.metadata
            own.update({k: v.value for k, v in metadata.items() if k in _SUMMARY_KEYS})
        if result.dagster_run.tags.get(PHASE_TAG) != "shard":
            summary.update(own)
            continue
        for key, value in own.items():
            summable = isinstance(value, (int, float)) and not isinstance(value, bool)
            summary[key] = summary.get(key, 0) + value if summable else value
    return summary


def _report_index_run(args, results, check_names, raw: Path, lake: Path, up_to_date=()) -> int:
    from rag_pipeline.cluster.fanout import PHASE_TAG

    last = results[-1]
    summary = {"run_id": last.run_id, "success": all(r.success for r in results), "raw_dir": str(raw), "lake_dir": str(lake)}
    summary.update(_run_metadata(results))
    if len(results) > 1:
        summary["runs"] = [
            {"run_id": r.run_id, "phase": r.dagster_run.tags.get(PHASE_TAG), "shard": r.dagster_run.tags.get("dagster/partition"),
             "success": r.success}
            for r in results
        ]
        summary["success"] &= results[-1].dagster_run.tags.get(PHASE_TAG) == "publish"
        summary["shards_up_to_date"] = list(up_to_date)
    housekeeping = _housekeeping_report(results)
    if housekeeping:
        summary["housekeeping"] = housekeeping
    events = [event for r in results for event in r.all_events]
    checks = [e.event_specific_data for e in events if e.event_type_value == "ASSET_CHECK_EVALUATION"]
    summary["checks"] = {c.check_name: "passed" if c.passed else "FAILED" for c in checks}
    workers = _step_workers(results)
    if workers:
        summary["step_workers"] = workers
    busy = False
    for event in events:
        if event.event_type_value == "STEP_FAILURE":
            error = event.event_specific_data.error
            cause = error.cause or error
            busy |= cause.cls_name == "LakeBusyError"
            print(f"rag: step {event.step_key} failed: {cause.cls_name}: {_one_line(cause.message)}", file=sys.stderr)
        elif event.event_type_value == "ENGINE_EVENT" and event.event_specific_data.error:
            error = event.event_specific_data.error  # resource init: the lake is taken or unwritable
            while error.cls_name.startswith("Dagster") and error.cause is not None:
                error = error.cause
            busy |= error.cls_name == "LakeBusyError"
            print(f"rag: run failed: {error.cls_name}: {_one_line(error.message)}", file=sys.stderr)
    failed = [c for c in checks if not c.passed]
    for check in failed:
        print(f"rag: check {check.check_name} failed: {check.description or check.metadata}", file=sys.stderr)
    ok = summary["success"] and all(c.passed for c in checks)
    if ok:
        _refresh_quietly(lake)
    rows = check_rows(checks, check_names)
    # `checks` stays as it always was (passed | FAILED); the verdicts the table shows are added beside it
    summary["check_verdicts"] = {name: {"verdict": verdict, "detail": detail} for name, verdict, detail in rows}
    _print(summary, args.json, lambda d: format_index_summary(d, rows))
    if busy:
        return EXIT_LAKE_BUSY
    return 0 if ok else 1


def check_rows(checks, check_names) -> list[tuple[str, str, str]]:
    """(check, passed | FAILED | skipped | not run, why) for every check of the job.

    A check that had nothing to judge says so in its metadata (``skipped``: the reason) and
    is shown as skipped, not passed; one that never ran (a blocking check upstream failed,
    or its step did) is shown as not run."""
    rows, seen = [], set()
    for c in checks:
        seen.add(c.check_name)
        metadata = {k: getattr(v, "value", v) for k, v in (c.metadata or {}).items()}
        if c.passed and metadata.get("skipped"):
            rows.append((c.check_name, "skipped", _one_line(metadata["skipped"])))
        elif c.passed:
            rows.append((c.check_name, "passed", _one_line(c.description or "")))
        else:
            detail = c.description or ", ".join(f"{k}={v}" for k, v in metadata.items())
            rows.append((c.check_name, "FAILED", _one_line(detail)))
    for name in check_names:
        if name not in seen:
            rows.append((name, "not run", "its asset was not built: an earlier step or blocking check failed"))
    return rows


def _table(header: tuple[str, ...], rows: list[tuple]) -> list[str]:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip()  # noqa: E731
    return [line(header), line(tuple("-" * w for w in widths)), *(line(r) for r in rows)]


def format_index_summary(d: dict, check_rows_: list[tuple[str, str, str]]) -> str:
    """The human summary of `rag index`: what each stage did, then every check's verdict."""

    def have(*keys):
        return any(k in d for k in keys)

    def n(key):
        return d.get(key, "?")

    stages = []
    if have("scanned_files", "added", "updated", "unchanged", "deleted"):
        stages.append(("scan", f"{n('scanned_files')} files: {n('added')} added, {n('updated')} updated, "
                       f"{n('unchanged')} unchanged, {n('deleted')} deleted"
                       + (f"; {d['ignored']} ignored (.ragignore rules)" if d.get("ignored") else "")))
    if have("parsed_now", "reused_from_parse_cache", "quarantined"):
        stages.append(("parse", f"{n('parsed_now')} parsed, {n('reused_from_parse_cache')} from the parse cache, "
                       f"{n('quarantined')} quarantined"))
    if have("documents", "chunks"):
        stages.append(("chunk", f"{n('documents')} documents, {n('chunks')} chunks"))
    if have("embedded", "reused_from_cache"):
        stages.append(("embed", f"{n('embedded')} embedded, {n('reused_from_cache')} from the embedding cache"
                       + (f" ({d['model']})" if "model" in d else "")))
    if have("generation", "new_generation"):
        staged = "staged" if d.get("new_generation") else "unchanged, nothing staged"
        stages.append(("stage", f"generation {n('generation')} ({staged})"))
    if have("promoted", "served_generation"):
        promoted = "promoted" if d.get("promoted") else "not promoted"
        stages.append(("publish", f"{promoted}; serving generation {n('served_generation')}"))
    if d.get("housekeeping"):
        stages.append(("housekeeping", format_prune_report(d["housekeeping"])))
    verdict = "succeeded" if d["success"] and all(r[1] in ("passed", "skipped") for r in check_rows_) else "FAILED"
    lines = [f"rag index {verdict}: run {d['run_id']}", f"  raw  {d['raw_dir']}", f"  lake {d['lake_dir']}", ""]
    if d.get("step_workers"):
        lines[-1:-1] = [f"  steps on {', '.join(sorted(set(d['step_workers'].values())))}"]
    lines += _table(("stage", "result"), stages or [("-", "no stage reported (see the errors above)")])
    lines.append("")
    lines += _table(("check", "verdict", "detail"), check_rows_ or [("-", "none ran", "")])
    return "\n".join(lines)


def format_prune_report(report: dict) -> str:
    """One line of what `Lake.prune` kept and removed (`rag generations prune`, `rag index`)."""
    freed = (report["lake_bytes_before"] - report["lake_bytes_after"]) / 1e6
    return (
        f"kept generations {report['generations_kept']}; removed {report['generations_removed']} generations, "
        f"{report['table_versions_removed']} table versions, {sum(report['cache_rows_removed'].values())} unused cache "
        f"entries, {report['staging_runs_removed']} staging runs ({freed:.1f} MB freed)"
        + ("; caches unchanged since the last housekeeping" if report.get("caches", "").startswith("unchanged") else "")
    )


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
    "ignored",
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
    lake_dir = Path(args.lake)
    st = _status_from_cache(lake_dir)
    if st is None:  # first look at this generation: read its tables (imports LanceDB)
        st = _refresh_status_cache(lake_dir)
    st["latest_run"] = _latest_lake_run(lake_dir, st["run_id"])

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
        if st["latest_run"]:
            lines.append(f"latest run        {_describe_run(st['latest_run'], st['served_generation'])}")
        return "\n".join(lines)

    _print(st, args.json, fmt)
    return 0


def _latest_lake_run(lake_dir: Path, served_run_id: str | None) -> dict | None:
    """The run that last took this lake's writer lock, when it is not the run that built what is
    served: a run interrupted or canceled (from the CLI or the UI), one that failed or was held
    back by a check, one still running, or an operator job. None when the served generation's own
    run was the last.

    Every run of index_job (and the promote/rollback jobs) takes the lock before its first step,
    and the lock file keeps its holder's run id after release; the run's job and status are read
    from the Dagster instance's run storage (DAGSTER_HOME's SQLite history, read-only with
    sqlite3: no Dagster import, `rag status` stays fast).
    """
    from rag_pipeline.store.lock import LOCK_NAME, is_locked

    try:
        holder = json.loads((lake_dir / LOCK_NAME).read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return None
    run_id = holder.get("run_id") if isinstance(holder, dict) else None
    if not run_id or run_id == served_run_id:
        return None
    try:
        writing = is_locked(lake_dir)
    except OSError:  # a read-only lake: nobody can be writing it
        writing = False
    record = {"run_id": run_id, "job": None, "status": "STARTED" if writing else None,
              "started": holder.get("since"), "ended": None, "writing_now": writing}
    found = _dagster_run_row(run_id)
    if found:
        record.update(found)
        if writing and record["status"] in ("CANCELED", "FAILURE", "SUCCESS"):
            record["writing_now"] = False  # the lock is someone else's since (a CLI promote)
    return record


def _dagster_run_row(run_id: str) -> dict | None:
    import sqlite3
    from datetime import datetime, timezone

    from rag_pipeline.config import PROJECT_ROOT, env_str

    home = Path(env_str("DAGSTER_HOME") or PROJECT_ROOT / "data" / "dagster_home")
    db = home / "history" / "runs.db"
    if not db.is_file():
        return None  # no local instance, or run storage elsewhere (Postgres): the lock's word only
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=2) as con:
            row = con.execute(
                "SELECT pipeline_name, status, start_time, end_time FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone()
    except sqlite3.Error:
        return None
    if row is None:
        return None

    def when(epoch):
        return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="seconds") if epoch else None

    found = {"job": row[0], "status": row[1], "ended": when(row[3])}
    return found | ({"started": when(row[2])} if row[2] else {})


def _describe_run(run: dict, served_generation: int) -> str:
    job = run["job"] or "a run"
    status = run["status"]
    if run["writing_now"]:
        return f"{job} {run['run_id']} is running (writing the lake since {run['started']})"
    if status in ("STARTED", "STARTING", "NOT_STARTED", "QUEUED"):  # yet nobody holds the lake
        return (f"{job} {run['run_id']} ended without a verdict (started {run['started']}; its process is gone, "
                f"killed?): it promoted nothing, generation {served_generation} keeps serving")
    if status in ("CANCELED", "CANCELING", "FAILURE"):
        word = {"CANCELED": "was canceled", "CANCELING": "is being canceled", "FAILURE": "failed"}[status]
        return (f"{job} {run['run_id']} {word} ({run['ended'] or run['started']}): it promoted nothing, "
                f"generation {served_generation} keeps serving")
    if status == "SUCCESS":
        return f"{job} {run['run_id']} succeeded ({run['ended']})"
    return f"{job} {run['run_id']} (started {run['started']}; not found in this Dagster instance)"


# `rag status` answers from the manifest plus the served generation's row counts by status,
# format and quarantine reason. Those counts are a pure function of the table versions the
# manifest pins, so they are kept beside it, keyed by them: a status that finds them current
# needs neither LanceDB nor pyarrow (~0.1 s instead of ~1.5 s of imports). A stale or missing
# cache (a run from the UI, a promote, a hand-edited lake) is simply recomputed.
STATUS_CACHE = "status_cache.json"
_CACHED = ("documents_by_status", "documents_by_format", "quarantine_by_reason")


def _status_key(manifest: dict) -> dict:
    return {k: manifest.get(k) for k in ("generation", "run_id", "table_versions")}


def _latest_generation(lake_dir: Path) -> int | None:
    numbers = [int(p.name[:-5]) for p in (lake_dir / "generations").glob("[0-9]*[0-9].json") if p.name[:-5].isdigit()]
    return max(numbers) if numbers else None


def _status_from_cache(lake_dir: Path) -> dict | None:
    try:
        manifest = json.loads((lake_dir / "index_manifest.json").read_text(encoding="utf-8"))
        cache = json.loads((lake_dir / STATUS_CACHE).read_text(encoding="utf-8"))
        if cache.get("key") != _status_key(manifest):
            return None
        latest = _latest_generation(lake_dir)
        if latest is None:
            return None
        return {
            "lake": str(lake_dir),
            "served_generation": manifest["generation"],
            "promoted_at": manifest.get("promoted_at"),
            "run_id": manifest["run_id"],
            "latest_generation": latest,
            "model": {k: manifest["model"][k] for k in ("name", "dimension", "key", "weights_sha256")},
            **{k: cache["counts"][k] for k in _CACHED[:2]},
            "chunks": manifest["counts"]["chunks"],
            "quarantine_by_reason": cache["counts"][_CACHED[2]],
            "last_run_changes": dict(manifest.get("stats", {})),
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _refresh_status_cache(lake_dir: Path) -> dict:
    """The full status from the served generation's tables; remembered for the next `rag status`
    (best effort: a read-only lake is still readable, just not faster)."""
    import os
    import tempfile

    from rag_pipeline.store.lake import Lake
    from rag_pipeline.store.summary import index_status

    lake = Lake(lake_dir)
    st = index_status(lake)
    manifest = lake.read_manifest()
    record = {"key": _status_key(manifest), "counts": {k: st[k] for k in _CACHED}}
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{STATUS_CACHE}.", dir=lake_dir)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(record, fh, ensure_ascii=False)
        os.replace(tmp, lake_dir / STATUS_CACHE)
    except OSError:
        pass
    return st


def _counts(counts: dict) -> str:
    return ", ".join(f"{v} {k}" for k, v in counts.items())


def cmd_quarantine(args) -> int:
    from rag_pipeline.store.lake import Lake
    from rag_pipeline.store.summary import quarantine_rows

    if args.action == "release":  # the same checked release as the UI's release_quarantined_file_job
        from rag_pipeline.ingest.release import release_quarantined

        try:
            done = release_quarantined(Path(args.lake), Path(args.raw), args.source)
        except (FileNotFoundError, ValueError) as exc:
            raise UserError(str(exc)) from exc
        result = {"released": args.source, "sidecar": done["sidecar"], "next": "it is indexed on the next run (rag index)"}
        _print(result, args.json, lambda d: f"released {d['released']} ({d['sidecar']}); {d['next']}")
        return 0
    rows = quarantine_rows(Lake(Path(args.lake)))

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
            {k: g.get(k) for k in ("generation", "current", "staged_at", "run_id", "counts")}
            | {"model": g["model"]["name"], "build": g.get("build") or {"kind": "full"}}
            for g in lake.list_generations()
        ]
    if isinstance(result, dict) and "generation" in result:
        result = {"served_generation": result["generation"], "model": result["model"]["name"], "counts": result["counts"]}

    def fmt(data):
        if isinstance(data, dict) and "generations_kept" in data:
            return format_prune_report(data)
        if isinstance(data, dict):
            return f"now serving generation {data['served_generation']} ({data['model']}: {_counts(data['counts'])})"
        lines = [f"{'':2}{'gen':>4}  {'staged at':<26} {'model':<24} counts"]
        for g in data:
            lines.append(
                f"{'*' if g['current'] else ' ':2}{g['generation']:>4}  {g['staged_at']:<26} {g['model']:<24} {_counts(g['counts'])}"
                + _built_from(g["build"])
            )
        return "\n".join(lines)

    _print(result, args.json, fmt)
    return 0


def _built_from(build: dict) -> str:
    """How a generation was written: whole (nothing said) or from another one's rows."""
    if build.get("kind") != "changes":
        return ""
    return f"  (from gen {build['base_generation']}: {build['documents_replaced']} documents' rows replaced)"


def _change_generations(lake, args) -> dict:
    """Promote, roll back or prune under the lake's writer lock; a served-generation change is
    recorded as a materialization of published_index in the Dagster instance (the UI shows it)."""
    from rag_pipeline.config import Settings
    from rag_pipeline.ingest.serialize import parse_key_of
    from rag_pipeline.store.lock import LakeBusyError, lake_writer_lock

    try:
        with lake_writer_lock(lake.lake_dir, what=f"rag generations {args.action}"):
            if args.action == "prune":
                return lake.prune(keep=args.keep, parse_key=parse_key_of(Settings().ocr_lang))
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
    _refresh_quietly(lake.lake_dir)
    return manifest


def _refresh_quietly(lake_dir: Path) -> None:
    """Keep `rag status` fast after this command changed what is served; never fail for it."""
    try:
        _refresh_status_cache(Path(lake_dir))
    except Exception:  # noqa: BLE001 - a cache; status recomputes it when it must
        pass


def _record_served(manifest: dict, previous: dict | None, action: str) -> None:
    import dagster as dg

    from rag_pipeline.defs.assets import served_metadata

    with _dagster_instance() as instance:
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
            3 another run is writing the lake (nothing was changed),
            130 interrupted (Ctrl-C or SIGTERM; an index run is recorded as canceled in Dagster)
"""


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
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
    p.add_argument(
        "--ignore-file", default=None,
        help="ignore rules kept outside the folder, read after its own .ragignore (env RAG_IGNORE_FILE)",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="show Dagster's step-by-step log")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr (bars on a terminal by default)")
    p.add_argument(
        "--progress", action="store_true", help="progress lines on stderr even when it is not a terminal (env RAG_PROGRESS=1)"
    )
    p.add_argument(
        "--allow-mass-deletion", action="store_true",
        help="proceed even if the scan sees less than half the files the served index knows",
    )
    lake_arg(p)
    p.set_defaults(func=cmd_index)

    def principal_args(p):
        p.add_argument("--user", default="", type=_label_type("--user", allow_empty=True), help="who is asking (sees documents they own)")
        p.add_argument("--group", action="append", type=_label_type("--group"), help="access group, repeatable (default all-staff)")
        p.add_argument(
            "--department", action="append", type=_label_type("--department"), help="department the asker belongs to, repeatable"
        )
        p.add_argument(
            "--clearance", default="internal", choices=["public", "internal", "confidential", "secret"],
            help="highest security level the asker may read (default internal)",
        )

    p = sub.add_parser("ask", help="answer a question with citations, or refuse")
    p.add_argument("question", type=_text_type("question"))
    principal_args(p)
    p.add_argument("-k", type=_k_type("ask"), default=5, help=f"passages to consider, {K_RANGE['ask'][0]}-{K_RANGE['ask'][1]} (default 5)")
    lake_arg(p)
    p.set_defaults(func=cmd_ask)

    p = sub.add_parser("search", help="show ranked passages with per-arm ranks")
    p.add_argument("query", type=_text_type("query"))
    principal_args(p)
    p.add_argument(
        "--mode", choices=["hybrid", "hybrid-rrf", "vector", "keyword"], default="hybrid",
        help="hybrid: query-aware fusion (default); hybrid-rrf: plain RRF",
    )
    p.add_argument(
        "--rerank", action="store_true",
        help="rerank the fused top-N with the cross-encoder in RAG_RERANK_MODEL (on by default when it is set)",
    )
    p.add_argument("-k", type=_k_type("search"), default=10, help=f"hits to return, {K_RANGE['search'][0]}-{K_RANGE['search'][1]} (default 10)")
    lake_arg(p)
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("generations", help="list index generations, promote one, roll back, or prune old ones")
    p.add_argument("action", choices=["list", "promote", "rollback", "prune"], nargs="?", default="list")
    p.add_argument("generation", type=_count_type("generation", 1), nargs="?", help="generation number (for promote)")
    p.add_argument(
        "--keep", type=_count_type("--keep", 1), default=2,
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
    from rag_pipeline.serve.cli import register as register_serve

    register_eval(sub)
    register_serve(sub)
    return parser


def _check_args(args) -> None:
    """Combinations argparse cannot express; checked before anything is opened or run."""
    if args.command == "generations":
        if args.action == "promote" and args.generation is None:
            raise UserError("say which generation: rag generations promote N (see rag generations list)")
        if args.action != "promote" and args.generation is not None:
            raise UserError(f"rag generations {args.action} takes no generation number (only promote does)")
    if args.command == "quarantine":
        if args.action == "release" and not (args.source or "").strip():
            raise UserError("say which file: rag quarantine release SOURCE (a path relative to the raw folder)")
        if args.action == "list" and args.source:
            raise UserError("rag quarantine list takes no file; to release one: rag quarantine release SOURCE")
    _check_eval_and_serve_args(args)
    for name in ("lake", "raw"):
        value = getattr(args, name, None)
        if value is not None and not str(value).strip():
            raise UserError(f"--{name} is empty")
        if value is not None and Path(value).exists() and not Path(value).is_dir():
            raise UserError(f"--{name} {value} is a file, not a folder")


def _check_eval_and_serve_args(args) -> None:
    """The numbers and files of `rag eval`, `rag calibrate` and `rag serve` (their parsers are
    registered by rag_pipeline.eval.cli / serve.cli), checked before a model or an index loads."""
    import math

    command = args.command
    if command in ("eval", "calibrate"):
        golden = getattr(args, "golden", None)
        if golden is not None and not Path(golden).is_file():
            raise UserError(f"--golden {golden}: no such file (a JSONL golden question set)")
    if command == "eval":
        if args.dataset is not None and not Path(args.dataset).is_dir():
            raise UserError(f"--dataset {args.dataset}: no such folder (a BEIR folder: corpus.jsonl, queries.jsonl, qrels/)")
        if args.queries is not None and not Path(args.queries).is_file():
            raise UserError(f"--queries {args.queries}: no such file")
        if args.k < 1:
            raise UserError(f"-k must be at least 1, got {args.k}")
        if args.limit_queries is not None and args.limit_queries < 1:
            raise UserError(f"--limit-queries must be at least 1, got {args.limit_queries}")
    if command == "calibrate":
        cost = args.false_answer_cost
        if not math.isfinite(cost) or cost <= 0:
            raise UserError(f"--false-answer-cost must be a positive number (1 weighs both errors alike), got {cost}")
    if command == "serve":
        if not 0 < args.port < 65536:
            raise UserError(f"--port must be from 1 to 65535, got {args.port}")
        if args.workers < 1:
            raise UserError(f"--workers must be at least 1, got {args.workers}")


# Errors a user can fix, by module: matched only when their module is already imported (an
# exception cannot be of a class that was never loaded), so that `rag --help` and `rag status`
# do not import LanceDB or torch just to name the exceptions they might catch.
_USER_ERRORS = {
    "rag_pipeline.store.lake": ("IndexNotFoundError", "IndexUnreadableError", "LakeWriteError"),
    "rag_pipeline.embedding.encoder": ("ModelLoadError", "ModelMismatchError"),
    "rag_pipeline.cluster.fanout": ("RunProcessError",),
    "sqlalchemy.exc": ("DBAPIError",),  # the instance's Postgres restarted under the CLI's own calls
}


def _user_error_types() -> tuple[type[BaseException], ...]:
    types: list[type[BaseException]] = [UserError, ValueError]
    for module, names in _USER_ERRORS.items():
        if module in sys.modules:
            types += [getattr(sys.modules[module], n) for n in names]
    return tuple(types)


def _sigterm_as_interrupt():
    """SIGTERM (systemd, `kill`, a CI timeout) stops a command the way Ctrl-C does; returns
    what puts the previous handler back (main() may be called in-process, e.g. by tests)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        return lambda: None
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    return lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _quiet_stdout() -> None:
    """Point fd 1 at /dev/null, so that flushing stdout at exit does not fail a second time."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:  # `rag status | head -3`, `rag --help | head`: the reader has what it wanted
        _quiet_stdout()
        return EXIT_BROKEN_PIPE


def _main(argv: list[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        _check_utf8(argv)
        args = build_parser().parse_args(argv)
        _check_args(args)
    except UserError as exc:
        print(f"rag: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    restore_sigterm = _sigterm_as_interrupt()
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("rag: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if not isinstance(exc, _user_error_types()):
            raise
        print(f"rag: error: {_one_line(_error_message(exc))}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        restore_sigterm()


def _error_message(exc: Exception) -> str:
    """A database error's own first line: its SQL statement, parameters and link would follow."""
    if type(exc).__module__ != "sqlalchemy.exc":
        return str(exc)
    from rag_pipeline.text import first_line

    first = first_line(str(getattr(exc, "orig", None) or exc))
    return (f"the Dagster instance's database failed: {first} — the served generation is unchanged unless "
            "a publish had completed; run the command again once the database is reachable")


if __name__ == "__main__":
    raise SystemExit(main())
