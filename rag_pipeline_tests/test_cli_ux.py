"""The `rag` command as operators use it every day (issue 19): input checks, interrupts,
the index summary, fast start. Real `rag` processes on a real lake built by a real Dagster run."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def rag(*args, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """One whole `rag` process, as a shell would start it (args may be bytes: not-UTF-8 input)."""
    return subprocess.run(
        [sys.executable, "-m", "rag_pipeline.cli", *args],
        capture_output=True, env={**os.environ, **(env or {})}, timeout=timeout, cwd=REPO,
    )


def _err(proc: subprocess.CompletedProcess) -> str:
    return proc.stderr.decode("utf-8", "replace")


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> dict:
    """A small lake built by a real `rag index` process (its own Dagster home; no golden gate)."""
    root = tmp_path_factory.mktemp("served")
    raw = root / "raw"
    raw.mkdir()
    (raw / "leave.md").write_text(
        "# Annual leave\n\nFull-time employees receive 25 days of annual leave per calendar year.\n", encoding="utf-8"
    )
    (raw / "errors.md").write_text(
        "# Error codes\n\nE-45 means the arm's payload sensor is disconnected; reseat the cable.\n", encoding="utf-8"
    )
    (raw / "blank.txt").write_text("  \n", encoding="utf-8")  # quarantined: `rag quarantine list` has a row
    (root / "home").mkdir()
    env = {"DAGSTER_HOME": str(root / "home"), "RAG_GOLDEN_FILE": "none"}
    proc = rag("index", "--raw", str(raw), "--lake", str(root / "lake"), env=env, timeout=900)
    assert proc.returncode == 0, _err(proc)[-3000:]
    return {"lake": str(root / "lake"), "raw": str(raw), "env": env}


# ---------------------------------------------------------------- item 3: input validation

BAD_INPUT = [
    pytest.param(["ask", ""], "question is empty", id="ask-empty"),
    pytest.param(["ask", " \t  "], "question is empty", id="ask-whitespace"),
    pytest.param(["search", "   "], "query is empty", id="search-whitespace"),
    pytest.param(["search", "E-45", "-k", "-3"], "k must be from 1", id="search-k-negative"),
    pytest.param(["search", "E-45", "-k", "0"], "k must be from 1", id="search-k-zero"),
    pytest.param(["search", "E-45", "-k", "10000000"], "k must be from 1", id="search-k-huge"),
    pytest.param(["ask", "annual leave", "-k", "1e9"], "k must be a whole number", id="ask-k-not-int"),
    pytest.param(["ask", "annual leave", "--role", "admin"], "unrecognized arguments: --role", id="unknown-principal-field"),
    pytest.param(["search", "E-45", "--groups", "hr"], "unrecognized arguments: --groups", id="misspelt-principal-field"),
    pytest.param(["ask", "annual leave", "--group", ""], "--group is empty", id="empty-group"),
    pytest.param(["search", "E-45", "--group", "hr,finance"], "is not a label", id="comma-list-group"),
    pytest.param(["search", "E-45", "--department", " it "], "is not a label", id="padded-department"),
    pytest.param(["ask", "annual leave", "--clearance", "top-secret"], "invalid choice", id="unknown-clearance"),
    pytest.param(["ask", "annual leave", "x" * 3000], "unrecognized arguments", id="extra-positional"),
    pytest.param(["ask", "x" * 3000], "at most 2000", id="question-too-long"),
    pytest.param(["ask", b"caf\xe9 opening hours"], "not valid UTF-8", id="ask-latin1"),
    pytest.param(["search", "E-45", "--user", b"\xff\xfe"], "not valid UTF-8", id="user-not-utf8"),
    pytest.param(["generations", "promote"], "say which generation", id="promote-without-n"),
    pytest.param(["generations", "promote", "-2"], "at least 1", id="promote-negative"),
    pytest.param(["generations", "rollback", "1"], "takes no generation", id="rollback-with-n"),
    pytest.param(["generations", "prune", "--keep", "0"], "at least 1", id="prune-keep-zero"),
    pytest.param(["quarantine", "list", "a.pdf"], "takes no file", id="quarantine-list-with-file"),
    pytest.param(["quarantine", "release", "  "], "say which file", id="release-blank"),
    pytest.param(["status", "--frobnicate"], "unrecognized arguments", id="status-unknown-option"),
    pytest.param(["eval", "--golden", "/nonexistent/golden.jsonl"], "no such file", id="eval-golden-missing"),
    pytest.param(["eval", "--golden", "-k", "0"], "-k must be at least 1", id="eval-k-zero"),
    pytest.param(["eval", "--dataset", "/nonexistent/beir"], "no such folder", id="eval-dataset-missing"),
    pytest.param(["calibrate", "--false-answer-cost", "-1"], "must be a positive number", id="calibrate-negative-cost"),
    pytest.param(["serve", "--port", "70000"], "--port must be from 1 to 65535", id="serve-port-out-of-range"),
    pytest.param(["frobnicate"], "invalid choice", id="unknown-subcommand"),
]


@pytest.mark.parametrize(("argv", "message"), BAD_INPUT)
def test_bad_input_is_one_line_exit_2_and_runs_nothing(served, argv, message):
    lake = served["lake"]
    before = sorted(p.name for p in Path(lake).rglob("*"))
    proc = rag(*argv, "--lake", lake, env=served["env"]) if argv[0] != "frobnicate" else rag(*argv)
    err = _err(proc)
    assert proc.returncode == 2, (proc.returncode, err, proc.stdout[-500:])
    assert proc.stdout == b"", "nothing may be printed on stdout: no retrieval ran"
    assert err.count("\n") == 1 and err.startswith("rag: "), err
    assert message in err and "Traceback" not in err
    assert sorted(p.name for p in Path(lake).rglob("*")) == before


@pytest.mark.parametrize(
    "argv",
    [
        ["ask", "How many days of annual leave do employees get?", "-k", "5"],
        ["search", "E-45", "-k", "50", "--group", "all-staff", "--department", "it", "--user", ""],
        ["search", "E-45", "-k", "500", "--mode", "keyword"],
        ["generations", "list"],
        ["quarantine", "list"],
    ],
    ids=["ask", "search-principal", "search-k-max", "generations", "quarantine"],
)
def test_the_same_commands_with_good_input_run(served, argv):
    """The control for the test above: on this lake, valid input runs and prints."""
    proc = rag(*argv, "--lake", served["lake"], "--json", env=served["env"])
    assert proc.returncode == 0, _err(proc)[-2000:]
    json.loads(proc.stdout)


@pytest.mark.parametrize("argv", [["status"], ["generations"], ["quarantine", "list"], ["--help"]])
def test_a_reader_that_leaves_early_gets_no_traceback(served, argv):
    """`rag status | head -1`: stdout is a pipe nobody reads any more (closed before rag writes,
    so the race of a real `head` is decided): no traceback, exit 141 as for any writer the shell
    sees killed by SIGPIPE (argparse's --help swallows the error itself: exit 0)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        extra = [] if argv == ["--help"] else ["--lake", served["lake"]]
        proc = subprocess.run(
            [sys.executable, "-m", "rag_pipeline.cli", *argv, *extra], stdout=write_end, stderr=subprocess.PIPE,
            env={**os.environ, **served["env"]}, timeout=300, cwd=REPO,
        )
    finally:
        os.close(write_end)
    assert proc.stderr == b"", proc.stderr.decode(errors="replace")[-2000:]
    assert proc.returncode == (0 if argv == ["--help"] else 141)


# ---------------------------------------------------------------- item 2: interrupts


def _start_index(work: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "DAGSTER_HOME": str(work / "home"), "RAG_GOLDEN_FILE": "none"}
    return subprocess.Popen(
        [sys.executable, "-m", "rag_pipeline.cli", "index", "--raw", str(work / "raw"), "--lake", str(work / "lake"), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True, cwd=REPO,
    )


def _cmdlines(pids) -> list[str]:
    out = []
    for pid in pids:
        try:
            out.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            pass
    return out


def _wait_for(predicate, proc: subprocess.Popen, what: str, timeout: float = 400) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, f"rag index ended before {what}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["ctrl-c-while-parsing", "sigterm-while-embedding"])
def test_an_interrupted_index_run_is_canceled_in_dagster_stops_its_workers_and_says_one_line(work, how):
    import dagster as dg
    from dagster._core.instance.ref import InstanceRef

    from rag_pipeline.store.lake import Lake
    from rag_pipeline_tests.reliability.test_crash_safety import _change_corpus, _session_processes

    (work / "home").mkdir()
    served = Lake(work / "lake").read_manifest()
    staged_runs = set((work / "lake" / "staging" / "runs").iterdir())
    _change_corpus(work / "raw")  # 12 new memos, an edit, a deletion: real parsing and embedding to do
    proc = _start_index(work)
    try:
        if how == "ctrl-c-while-parsing":
            # the parse pool's forkserver and workers are up: Ctrl-C reaches the whole foreground group
            _wait_for(lambda: any("forkserver" in c for c in _cmdlines(_session_processes(proc.pid))), proc, "parsing")
            os.killpg(proc.pid, signal.SIGINT)
        else:
            def chunked():
                new = set((work / "lake" / "staging" / "runs").iterdir()) - staged_runs
                return any(list((run / "chunks").glob("*.arrow")) for run in new)

            _wait_for(chunked, proc, "chunking to finish")
            proc.send_signal(signal.SIGTERM)  # `kill`, systemd, a CI timeout: to the process only
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, (proc.returncode, err[-3000:])
    assert err == f"interrupted: nothing was promoted, generation {served['generation']} keeps serving\n", err[-3000:]
    assert out == ""
    deadline = time.monotonic() + 20
    while _session_processes(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _session_processes(proc.pid), _cmdlines(_session_processes(proc.pid))
    assert Lake(work / "lake").read_manifest() == served
    instance = dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(work / "home")))
    runs = instance.get_runs()
    assert len(runs) == 1 and runs[0].status == dg.DagsterRunStatus.CANCELED, [r.status for r in runs]
    assert any("rag index" in (e.message or "") for e in instance.all_logs(runs[0].run_id) if e.dagster_event
               and e.dagster_event.event_type_value in ("PIPELINE_CANCELING", "PIPELINE_CANCELED"))
    # ... and `rag status` says so: the latest run on this lake was canceled, the served one stays
    _assert_status_names_the_canceled_run(work / "lake", work / "home", runs[0].run_id, served["generation"])


def _assert_status_names_the_canceled_run(lake: Path, home: Path, run_id: str, generation: int) -> None:
    env = {"DAGSTER_HOME": str(home)}
    as_json = rag("status", "--lake", str(lake), "--json", env=env)
    assert as_json.returncode == 0, _err(as_json)[-2000:]
    latest = json.loads(as_json.stdout)["latest_run"]
    assert latest["run_id"] == run_id and latest["job"] == "index_job", latest
    assert latest["status"] == "CANCELED" and latest["ended"] and not latest["writing_now"], latest
    human = rag("status", "--lake", str(lake), env=env)
    assert human.returncode == 0, _err(human)[-2000:]
    line = [x for x in human.stdout.decode().splitlines() if x.startswith("latest run")]
    assert line and f"index_job {run_id} was canceled" in line[0], human.stdout.decode()
    assert line[0].endswith(f"it promoted nothing, generation {generation} keeps serving"), line


def test_an_interrupt_on_a_lake_with_nothing_served_says_so(tmp_path):
    """Ctrl-C as soon as the run starts, on a fresh lake: one line, exit 130, nothing served."""
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "a.md").write_text("# A\n\nThe ZEBRA rule.\n", encoding="utf-8")
    (tmp_path / "home").mkdir()
    proc = _start_index(tmp_path)
    time.sleep(1.0)  # importing Dagster: our handler is in place, the run not yet started
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err[-3000:]
    assert err == "interrupted: nothing was promoted, no generation is served yet\n", err[-3000:]
    assert not (tmp_path / "lake" / "index_manifest.json").exists()


# ---------------------------------------------------------------- item 4: the index summary


def test_index_summary_is_a_table_with_skipped_checks_and_json_is_unchanged(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    for i in range(3):
        (raw / f"note_{i}.md").write_text(f"# Note {i}\n\nThe OKAPI procedure, step {i}.\n", encoding="utf-8")
    (tmp_path / "home").mkdir()
    first = _start_index(tmp_path, "--progress")  # stderr is a pipe: plain progress lines (issue 19, item 1)
    out, err = first.communicate(timeout=600)
    assert first.returncode == 0, err[-3000:]
    assert "\r" not in err and "\x1b" not in err, "no bar drawing when stderr is not a terminal"
    done = {m.group(1): m.group(0) for m in re.finditer(r"^(\w+): (\d+)/\2 (\w+), .*done in \d.*$", err, re.M)}
    assert {"parse", "chunk", "fingerprint", "embed", "write"} <= set(done), err[-3000:]
    assert done["parse"].startswith("parse: 3/3 files, ") and done["chunk"].startswith("chunk: 3/3 documents, ")
    lines = out.splitlines()
    assert lines[0].startswith("rag index succeeded: run ")
    stage_rows = {line.split()[0]: line for line in lines if line.split()[:1] and line.split()[0] in
                  ("scan", "parse", "chunk", "embed", "stage", "publish", "housekeeping")}
    assert "3 files: 3 added" in stage_rows["scan"] and "3 documents" in stage_rows["chunk"]
    assert "promoted; serving generation 1" in stage_rows["publish"]
    assert "kept generations [1]; removed 0 generations" in stage_rows["housekeeping"], stage_rows
    checks = {line.split()[0]: line.split(None, 2)[1:] for line in lines if line.split()[:1] and line.split()[0].endswith(
        ("_truncated", "_consistent", "_accounted_for", "_matches", "_holds"))}
    assert checks["golden_quality_holds"] == ["skipped", "no golden set configured (RAG_GOLDEN_FILE=none)"], checks
    assert checks["scan_is_not_truncated"] == ["skipped", "no index is served yet, so no scan can be short of it"]
    assert checks["chunks_are_consistent"] == ["passed"] and checks["model_pin_matches"] == ["passed"]
    assert "{" not in out, "no Python dict in the human summary"
    # --json: the same keys and values as before the table existed (a no-op run here)
    second = _start_index(tmp_path, "--json")
    out2, err2 = second.communicate(timeout=600)
    assert second.returncode == 0, err2[-3000:]
    data = json.loads(out2)
    assert set(data) >= {"run_id", "success", "raw_dir", "lake_dir", "generation", "new_generation", "checks"}
    assert data["new_generation"] is False and data["success"] is True
    assert set(data["checks"].values()) <= {"passed", "FAILED"} and "golden_quality_holds" in data["checks"]
    # beside it, the verdicts the table shows: a skipped check says skipped, with its reason
    assert data["check_verdicts"]["golden_quality_holds"] == {
        "verdict": "skipped", "detail": "no golden set configured (RAG_GOLDEN_FILE=none)"}, data["check_verdicts"]
    assert data["check_verdicts"]["model_pin_matches"]["verdict"] == "passed"
    assert set(data["check_verdicts"]) == set(data["checks"])
    # what housekeeping kept and removed (the served generation stays)
    assert data["housekeeping"]["generations_kept"] == [data["generation"]], data["housekeeping"]
    assert data["housekeeping"]["lake_bytes_after"] > 0
    # a no-op: its housekeeping skipped the cache pruning the first run's already did, and says so
    assert data["housekeeping"]["caches"] == "unchanged since the last housekeeping", data["housekeeping"]
    from rag_pipeline.cli import format_prune_report

    assert format_prune_report(data["housekeeping"]).endswith("; caches unchanged since the last housekeeping")


# ---------------------------------------------------------------- item 6: fast start

HEAVY = {"lancedb", "lance", "pyarrow", "dagster", "torch", "sentence_transformers", "transformers", "polars", "onnxruntime"}


def _imported(*argv: str, env: dict | None = None) -> tuple[subprocess.CompletedProcess, set[str]]:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "rag_pipeline.cli", *argv],
        capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=300, cwd=REPO,
    )
    names = {line.rsplit("|", 1)[1].strip().split(".")[0] for line in proc.stderr.splitlines() if line.startswith("import time:")}
    return proc, names


def test_help_imports_no_heavy_library():
    proc, names = _imported("--help")
    assert proc.returncode == 0 and "rag index" in proc.stdout
    assert "130 interrupted" in proc.stdout and "2 usage" in proc.stdout  # the exit codes a script can act on
    assert not names & HEAVY, names & HEAVY
    proc, names = _imported("search", "--help")
    assert proc.returncode == 0 and not names & HEAVY, names & HEAVY


def test_loading_the_definitions_imports_no_table_ocr_or_model_library():
    """What a code server, the daemon and every `dagster` CLI command load first: LanceDB and
    pytesseract (pandas) were 6.4 of its 7.4 s; the steps import them when they run."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import rag_pipeline.definitions as d; assert d.defs.resolve_job_def('index_job')"],
        capture_output=True, text=True, timeout=300, cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    names = {line.rsplit("|", 1)[1].strip().split(".")[0] for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "dagster" in names  # the check reads real import lines
    assert not names & {"lancedb", "lance", "pytesseract", "pandas", "torch", "sentence_transformers"}, names


def test_ask_encodes_the_question_without_torch_or_sentence_transformers(served):
    """A cold `rag ask` encodes its question with the numpy query encoder (embedding/query_encoder.py):
    importing sentence-transformers (scikit-learn, torch, transformers) was ~5 of its ~8 s."""
    proc, names = _imported("ask", "How many days of annual leave do employees get?", "--lake", served["lake"], env=served["env"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip(), proc.stderr[-2000:]  # an answer or a refusal, as before
    assert not names & {"torch", "sentence_transformers", "transformers", "sklearn"}, names


def test_status_answers_from_the_manifest_without_lancedb_and_says_the_same(served, tmp_path):
    import shutil

    lake = tmp_path / "lake"
    shutil.copytree(served["lake"], lake)
    (lake / "status_cache.json").unlink(missing_ok=True)
    slow, names = _imported("status", "--lake", str(lake), "--json")
    assert slow.returncode == 0, slow.stderr[-2000:]
    assert "lancedb" in names  # the first look reads the tables ...
    fast, names = _imported("status", "--lake", str(lake), "--json")
    assert fast.returncode == 0, fast.stderr[-2000:]
    assert not names & HEAVY, names & HEAVY  # ... the next ones only the manifest
    assert json.loads(fast.stdout) == json.loads(slow.stdout)
    assert json.loads(fast.stdout)["latest_run"] is None  # the served generation's own run was the last
    # a cache that does not match the served generation's tables is never believed
    cache = json.loads((lake / "status_cache.json").read_text(encoding="utf-8"))
    cache["key"]["table_versions"]["documents"] += 1
    cache["counts"]["documents_by_status"] = {"published": 999}
    (lake / "status_cache.json").write_text(json.dumps(cache), encoding="utf-8")
    again, names = _imported("status", "--lake", str(lake), "--json")
    assert "lancedb" in names and json.loads(again.stdout) == json.loads(slow.stdout)


def test_a_cluster_run_whose_process_raised_is_reported_in_one_line():
    """The instance's database restarted under a fanned-out run: `rag: error: ...`, not a traceback."""
    from concurrent.futures import Future

    from rag_pipeline.cli import _user_error_types
    from rag_pipeline.cluster.fanout import RunProcessError, _outcome

    future = Future()
    future.set_exception(ConnectionError("server closed the connection unexpectedly\n\tThis probably means ..."))
    with pytest.raises(RunProcessError, match=r"^the shard run failed: ConnectionError: server closed the connection unexpectedly — ") as raised:
        _outcome(None, future, "shard")
    assert "\n" not in str(raised.value) and isinstance(raised.value, _user_error_types())


def test_the_instance_database_failing_under_the_cli_is_reported_in_one_line(monkeypatch, capsys):
    """Postgres restarted while the CLI process itself read the instance (between the runs it
    fans out): one `rag: error:` line with the driver's first line, not a traceback."""
    import sqlalchemy.exc

    from rag_pipeline import cli

    def index(args):
        raise sqlalchemy.exc.OperationalError("SELECT runs.id FROM runs", {}, ConnectionError(
            "server closed the connection unexpectedly\n\tThis probably means the server terminated abnormally"))

    monkeypatch.setattr(cli, "cmd_index", index)
    assert cli.main(["index", "-q"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err == ("rag: error: the Dagster instance's database failed: server closed the connection unexpectedly — "
                   "the served generation is unchanged unless a publish had completed; run the command again once "
                   "the database is reachable\n"), err



def test_an_interrupt_that_cut_dagsters_first_import_short_records_nothing_and_raises_nothing(monkeypatch):
    """Ctrl-C inside `import dagster` leaves half-registered modules: the next import raises (seen in
    CI: "Multiple deserializers registered for storage name DagsterEvent"). No run can have started
    then, so recording the cancel must do nothing rather than turn exit 130 into a traceback."""
    import sys

    from rag_pipeline.cli import _RunInterrupts

    monkeypatch.setitem(sys.modules, "dagster", None)  # any import of it now raises ImportError
    interrupts = _RunInterrupts("run-1")
    interrupts.signum = 2
    assert interrupts._request_cancel() is None  # the watcher thread's path, as the signal lands
    assert interrupts.record_canceled() is None
