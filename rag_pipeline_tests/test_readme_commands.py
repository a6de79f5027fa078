"""README commands work as written (issue 19, item 5).

Every command of README.md's ```bash blocks, and every inline `.venv/bin/...` / `bash scripts/...`
code span, is either run here for real or listed in SKIPPED with the reason; a README command that
is neither fails `test_every_readme_command_is_run_or_skipped`, so the README stays honest.

The commands run literally as written (bash -c) from a scratch copy of the project root (`.venv`,
`scripts`, `notebooks`, `workspace.yaml`, `dagster.yaml` linked in, an empty `data/`), so a relative
path such as `data/tokens.json` lands in the scratch folder; `RAG_LAKE_DIR` and `DAGSTER_HOME` point
at copies of the session's indexed sample (`indexed_sample`), never at the repo's data/. Each must
exit 0 with no traceback, no DagsterHomeNotSetError and no "Found a dagster instance configuration"
warning. The ```python blocks run too, with "data/lake" pointed at the copy. `rag generations
rollback` / `promote N` run on a lake of their own that serves a second generation made by a real
`rag index` after one file changed (`generations_env`), and must leave served what they say.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rag_pipeline_tests.test_dagster_ui import _free_port, _graphql

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"

# Commands run for real (matched by prefix on the comment-stripped, whitespace-normalized command).
RUN = (
    ".venv/bin/rag ask ",
    ".venv/bin/rag search ",
    ".venv/bin/rag status",
    ".venv/bin/rag generations",  # bare: the list (exact match, see _classify)
    ".venv/bin/rag generations rollback",  # on a lake with two real generations (GENERATION_CHANGES)
    ".venv/bin/rag generations promote ",
    ".venv/bin/rag generations prune ",
    ".venv/bin/python -m rag_pipeline.serve.tokens add ",
    "bash scripts/dagster.sh schedule list ",
    "bash scripts/dagster.sh schedule start ",
    "bash scripts/dagster.sh sensor start ",
    "bash scripts/dagster.sh job list ",
    "bash scripts/dagster.sh instance concurrency set ",
)

# Commands not run here, with the reason (and where they are covered instead).
SKIPPED = {
    "bash scripts/quickstart.sh": "installs Debian packages and the venv, then indexes data/raw (install-time, "
    "needs package registries); its steps are what the other tests run",
    "bash scripts/test.sh": "runs the whole test suite, this file included (it is what CI runs)",
    "bash scripts/cluster.sh ": "starts PostgreSQL, Redis and Celery workers; test_distributed.py runs up, index and down "
    "on a scratch folder",
    "source data/cluster/cluster.env": "the environment `scripts/cluster.sh up` wrote; test_distributed.py reads it",
    ".venv/bin/rag serve ": "a long-running HTTP server; rag_pipeline_tests/serve/ starts it and queries it",
    "curl ": "needs a running `rag serve` and a $TOKEN; rag_pipeline_tests/serve/ sends these requests",
    "bash scripts/dagster_ui.sh": "a long-running server; test_dagster_ui_starts_without_instance_warning "
    "starts it until it serves",
    ".venv/bin/jupyter notebook ": "starts a notebook server and a browser; test_jupyter_notebook_is_installed "
    "checks the command, test_notebook.py runs the notebook on a real kernel",
    ".venv/bin/python bench/suite.py": "the benchmarks (minutes to hours); test_bench_smoke.py runs --smoke",
}

# Commands that change the served generation: run on their own lake holding two generations, each
# made by a real `rag index` (the indexed sample, then one edited file), never on `readme_env`'s.
GENERATION_CHANGES = (".venv/bin/rag generations rollback", ".venv/bin/rag generations promote ")

BAD_OUTPUT = (
    "Traceback (most recent call last)",
    "Found a dagster instance configuration",
    "DagsterHomeNotSetError",
    "$DAGSTER_HOME is not set",
)


def readme_commands(text: str | None = None) -> list[str]:
    """The shell commands of README: ```bash blocks (continuations joined) and runnable inline spans."""
    text = README.read_text(encoding="utf-8") if text is None else text
    commands: list[str] = []
    for block in re.findall(r"^```bash\n(.*?)^```", text, flags=re.S | re.M):
        pending = ""
        for line in block.splitlines():
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            command = (pending + line).strip()
            pending = ""
            if command and not command.startswith("#"):
                commands.append(command)
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    for span in re.findall(r"`([^`\n]+)`", prose):
        if span.startswith((".venv/bin/", "bash scripts/")):
            commands.append(span)
    return commands


def normalize(command: str) -> str:
    return " ".join(shlex.split(command, comments=True))


def _classify(command: str) -> tuple[str, str | None]:
    """('run', None), ('skip', reason) or ('unknown', None)."""
    norm = normalize(command)
    for prefix, reason in SKIPPED.items():
        if norm == prefix.strip() or norm.startswith(prefix):
            return "skip", reason
    for prefix in RUN:
        if norm == prefix.strip() or (prefix.endswith(" ") and norm.startswith(prefix)):
            return "run", None
    return "unknown", None


COMMANDS = readme_commands()


def test_readme_has_commands_and_parsing_is_sane():
    assert len(COMMANDS) >= 15, COMMANDS
    # a continuation line is one command
    assert any("--group all-staff --department IT" in c and "serve.tokens add" in c for c in COMMANDS)


def test_every_readme_command_is_run_or_skipped():
    unknown = [c for c in COMMANDS if _classify(c)[0] == "unknown"]
    assert not unknown, (
        "README commands neither run by this test nor listed in SKIPPED with a reason "
        f"(add them to RUN or SKIPPED in {Path(__file__).name}): {unknown}"
    )
    norms = [normalize(c) for c in COMMANDS]
    stale = [p for p in (*RUN, *SKIPPED) if not any(n == p.strip() or n.startswith(p) for n in norms)]
    assert not stale, f"entries that match no README command any more: {stale}"


@pytest.fixture(scope="module")
def readme_env(indexed_sample, tmp_path_factory) -> dict:
    """A scratch project root and an environment pointing at copies of the indexed sample."""
    assert indexed_sample["exit_code"] == 0
    root = _scratch_root(tmp_path_factory.mktemp("readme_root"))
    lake = root / "lake"
    shutil.copytree(indexed_sample["lake"], lake, symlinks=True)
    home = root / "dagster_home"
    shutil.copytree(indexed_sample["dagster_home"], home, symlinks=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    env.update(
        RAG_LAKE_DIR=str(lake),
        RAG_RAW_DIR=str(indexed_sample["raw"]),
        DAGSTER_HOME=str(home),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        DO_NOT_TRACK="1",
    )
    return {"root": root, "env": env, "lake": lake, "home": home}


def _repo_data_snapshot() -> set[str]:
    data = REPO / "data"
    names = {p.name for p in data.iterdir()} if data.is_dir() else set()
    home = data / "dagster_home"
    if home.is_dir():
        names |= {f"dagster_home/{p.name}" for p in home.iterdir()}
    return names


@pytest.fixture(scope="module")
def generations_env(indexed_sample, tmp_path_factory) -> dict:
    """Like `readme_env`, but its lake serves generation 2 and generation 1 was served before it:
    the indexed sample's lake, raw folder and Dagster home copied, one file edited, and a real
    `rag index` process run on the copy (golden set off: only the edited file is parsed and
    embedded, ~15 s). So `rag generations rollback` / `promote N` have something to act on."""
    assert indexed_sample["exit_code"] == 0
    root = _scratch_root(tmp_path_factory.mktemp("readme_generations"))
    lake, home, raw = root / "lake", root / "dagster_home", root / "raw"
    shutil.copytree(indexed_sample["lake"], lake, symlinks=True)
    shutil.copytree(indexed_sample["dagster_home"], home, symlinks=True)
    shutil.copytree(indexed_sample["raw"], raw, symlinks=True)
    with open(raw / "handbook" / "notes.txt", "a", encoding="utf-8") as fh:
        fh.write("\nQ: When does the canteen close on Fridays?\nA: At 15:00.\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    env.update(
        RAG_LAKE_DIR=str(lake), RAG_RAW_DIR=str(raw), DAGSTER_HOME=str(home),
        HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", DO_NOT_TRACK="1",
    )
    proc = subprocess.run(
        [str(REPO / ".venv" / "bin" / "rag"), "index", "--json"], cwd=root, capture_output=True, text=True, timeout=900,
        env={**env, "RAG_GOLDEN_FILE": "none"},
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(proc.stdout)
    assert report["updated"] == 1 and report["new_generation"] and report["served_generation"] == 2, report
    return {"root": root, "env": env, "lake": lake, "home": home}


def _served(lake: Path) -> int:
    return json.loads((lake / "index_manifest.json").read_text(encoding="utf-8"))["generation"]


def _generations(lake: Path) -> list[int]:
    return sorted(int(p.name[:-5]) for p in (lake / "generations").glob("[0-9]*[0-9].json"))


@pytest.mark.parametrize("command", COMMANDS, ids=[normalize(c)[:60] for c in COMMANDS])
def test_readme_command_works_as_written(command, readme_env, request):
    kind, reason = _classify(command)
    if kind == "skip":
        pytest.skip(f"not run here: {reason}")
    assert kind == "run", f"unclassified README command: {command}"
    norm = normalize(command)
    changes_generation = norm.startswith(tuple(p.strip() for p in GENERATION_CHANGES))
    if changes_generation:
        readme_env = request.getfixturevalue("generations_env")
        served_before, known = _served(readme_env["lake"]), _generations(readme_env["lake"])
        assert known == [1, 2], known
        if norm.startswith(GENERATION_CHANGES[1]) and int(norm.split()[3]) not in known:
            pytest.skip(
                f"README promotes generation {norm.split()[3]}; the test lake has generations {known} "
                "(write `promote 2` in README, after the rollback line, and it runs)"
            )
    before = _repo_data_snapshot()
    proc = subprocess.run(
        ["bash", "-c", command],
        cwd=readme_env["root"],
        env=readme_env["env"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{command}\nexit {proc.returncode}\n{output[-4000:]}"
    for bad in BAD_OUTPUT:
        assert bad not in output, f"{command} printed {bad!r}:\n{output[-4000:]}"
    assert proc.stdout.strip(), f"{command} printed nothing on stdout"
    assert _repo_data_snapshot() == before, f"{command} wrote into the repo's data/"
    if changes_generation:
        _assert_generation_changed(norm, readme_env, served_before, proc.stdout)
    if norm.startswith((".venv/bin/rag generations", ".venv/bin/rag status")) and "--json" not in norm:
        assert "{'" not in proc.stdout, f"a Python dict in the human output:\n{proc.stdout}"
    if "serve.tokens add" in norm:
        words = norm.split()
        name = words[words.index("--name") + 1]
        tokens = json.loads((readme_env["root"] / "data" / "tokens.json").read_text())["tokens"]
        assert name in [t["name"] for t in tokens]
    if norm.startswith(".venv/bin/rag ask ") and "--json" in norm:
        reply = json.loads(proc.stdout)
        assert set(reply) >= {"answer", "refused", "citations"}


def _assert_generation_changed(norm: str, env: dict, served_before: int, stdout: str) -> None:
    """The command served what it says, and the Dagster instance recorded the change."""
    import dagster as dg
    from dagster._core.instance.ref import InstanceRef

    served = _served(env["lake"])
    if norm.startswith(GENERATION_CHANGES[0]):  # rollback: the other of the two, served before
        assert served == 3 - served_before, (served_before, served)
    else:
        assert served == int(norm.split()[3]), served
    assert f"now serving generation {served} " in stdout, stdout
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(env["home"]))) as instance:
        latest = instance.fetch_materializations(dg.AssetKey("published_index"), limit=1).records[0]
    metadata = {k: v.value for k, v in latest.asset_materialization.metadata.items()}
    assert metadata["served_generation"] == served and metadata["previous_generation"] == served_before, metadata
    assert metadata["action"] == f"rag generations {norm.split()[2]}", metadata


def _scratch_root(root: Path) -> Path:
    """A scratch project root: the repo's venv, scripts, notebooks and configs linked in, empty data/."""
    for name in (".venv", "scripts", "notebooks", "workspace.yaml", "dagster.yaml"):
        (root / name).symlink_to(REPO / name)
    (root / "data").mkdir()
    return root


def test_readme_python_blocks_run(readme_env):
    """The ```python blocks (notebook snippets) run against the indexed sample ("data/lake" -> its copy)."""
    blocks = re.findall(r"^```python\n(.*?)^```", README.read_text(encoding="utf-8"), flags=re.S | re.M)
    assert len(blocks) >= 2
    for block in blocks:
        assert '"data/lake"' in block
        code = block.replace('"data/lake"', repr(str(readme_env["lake"])))
        proc = subprocess.run(
            [str(REPO / ".venv" / "bin" / "python"), "-c", code],
            cwd=readme_env["root"], env=readme_env["env"], capture_output=True, text=True, timeout=300,
        )
        assert proc.returncode == 0, f"{block}\n{(proc.stdout + proc.stderr)[-4000:]}"


def test_dagster_commands_use_the_project_instance_by_default(tmp_path):
    """scripts/dagster.sh sets DAGSTER_HOME itself (<project>/data/dagster_home unless already set)."""
    root = _scratch_root(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    command = "bash scripts/dagster.sh schedule start nightly_reindex_schedule -w workspace.yaml"
    proc = subprocess.run(["bash", "-c", command], cwd=root, env=env, capture_output=True, text=True, timeout=300)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    assert "Started schedule nightly_reindex_schedule" in proc.stdout
    for bad in BAD_OUTPUT:
        assert bad not in output, output[-4000:]
    home = root / "data" / "dagster_home"
    assert (home / "dagster.yaml").resolve() == (REPO / "dagster.yaml").resolve()
    assert (home / "schedules").is_dir()  # the instance that recorded the started schedule


def test_dagster_ui_starts_without_instance_warning(tmp_path):
    """`bash scripts/dagster_ui.sh` serves the workspace with no instance-config warning."""
    port = _free_port()
    log = tmp_path / "dagster_ui.log"
    env = dict(os.environ, DAGSTER_HOME=str(tmp_path / "home"), PORT=str(port), DO_NOT_TRACK="1")
    with open(log, "w") as out:
        proc = subprocess.Popen(
            ["bash", "scripts/dagster_ui.sh"], cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 240
        loaded = None
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(2)
            if "Serving dagster-webserver" not in log.read_text():
                continue
            try:
                reply = _graphql(
                    port,
                    "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus "
                    "locationOrLoadError { __typename } } } } }",
                )
            except OSError:
                continue
            entries = reply["data"]["workspaceOrError"]["locationEntries"]
            if entries and all(e["loadStatus"] == "LOADED" for e in entries):
                loaded = entries
                break
        output = log.read_text()
        assert loaded, f"the UI did not serve a loaded workspace in time:\n{output[-4000:]}"
        assert [e["locationOrLoadError"]["__typename"] for e in loaded] == ["RepositoryLocation"], loaded
        for bad in BAD_OUTPUT:
            assert bad not in output, output[-4000:]
        assert (tmp_path / "home" / "dagster.yaml").exists()  # the repo's instance config, linked in
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def test_jupyter_notebook_is_installed():
    """The README's way to open the analysts' notebook: `notebook` comes with the dev extra."""
    assert (REPO / "notebooks" / "query_the_index.ipynb").is_file()
    assert '"notebook"' in (REPO / "pyproject.toml").read_text()
    proc = subprocess.run(
        [str(REPO / ".venv" / "bin" / "jupyter"), "notebook", "--version"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.match(r"\d+\.", proc.stdout.strip()), proc.stdout


if __name__ == "__main__":  # list what runs and what is skipped
    for c in COMMANDS:
        kind, reason = _classify(c)
        print(f"{kind:8} {normalize(c)}" + (f"   ({reason})" if reason else ""), file=sys.stdout)
