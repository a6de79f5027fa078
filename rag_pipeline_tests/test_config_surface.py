"""One configuration surface: only rag_pipeline/config.py reads or writes the process environment.

Every other module calls config's readers (env_str, hub_offline, eval_cache_dir, ...) and
`apply_offline_environment`, so what the package reads from the environment, and which library
switches it sets, is in one file.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rag_pipeline import config
from rag_pipeline.config import OFFLINE_ENVIRONMENT, apply_offline_environment

PACKAGE = Path(__file__).resolve().parents[1] / "rag_pipeline"
ALLOWED = {PACKAGE / "config.py"}
ENV_NAMES = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}
SWITCHES = sorted({*OFFLINE_ENVIRONMENT, "DO_NOT_TRACK"})


def environment_uses(source: str, filename: str = "<source>") -> list[str]:
    """`os.environ`, `os.getenv`, ... (under any alias of os) and `from os import environ` in code."""
    tree = ast.parse(source, filename)
    aliases = {"os"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases |= {a.asname or a.name for a in node.names if a.name == "os"}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "os":
            found += [f"{filename}:{node.lineno}: from os import {a.name}" for a in node.names if a.name in ENV_NAMES]
        elif (
            isinstance(node, ast.Attribute)
            and node.attr in ENV_NAMES
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
        ):
            found.append(f"{filename}:{node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_only_config_touches_the_environment():
    files = sorted(p for p in PACKAGE.rglob("*.py") if p not in ALLOWED)
    assert len(files) > 20  # the scan sees the package
    offenders = [hit for p in files for hit in environment_uses(p.read_text(encoding="utf-8"), str(p.relative_to(PACKAGE.parent)))]
    assert not offenders, "read settings through rag_pipeline/config.py instead:\n" + "\n".join(offenders)


def test_the_scan_finds_each_way_of_reaching_the_environment():
    assert environment_uses('"""os.environ in a docstring is prose."""\nimport os\nos.cpu_count()\n') == []
    for code in (
        "import os\nos.environ.get('X')",
        "import os as _os\n_os.environ.setdefault('X', '1')",
        "import os\nenv = dict(os.environ)",
        "import os\nos.getenv('X')",
        "from os import environ",
        "from os import getenv as g",
    ):
        assert len(environment_uses(code)) == 1, code
    assert environment_uses((PACKAGE / "config.py").read_text(encoding="utf-8"))  # the scan would see config's own


@pytest.fixture
def bare_switches(monkeypatch):
    """The offline switches unset, restored to the test process's values afterwards."""
    for name in SWITCHES:
        monkeypatch.setenv(name, "placeholder")  # records the original value (or its absence) for undo
        monkeypatch.delenv(name)
    return monkeypatch


def test_apply_offline_environment_sets_unset_switches_and_keeps_the_operators(bare_switches):
    apply_offline_environment()
    assert os.environ["HF_HUB_OFFLINE"] == "1" and os.environ["TRANSFORMERS_OFFLINE"] == "1"
    assert {name: os.environ[name] for name in OFFLINE_ENVIRONMENT} == OFFLINE_ENVIRONMENT
    assert os.environ["DO_NOT_TRACK"] == "1"
    apply_offline_environment()  # idempotent
    assert {name: os.environ[name] for name in OFFLINE_ENVIRONMENT} == OFFLINE_ENVIRONMENT

    bare_switches.setenv("HF_HUB_OFFLINE", "0")
    bare_switches.setenv("LANCEDB_LOG", "info")
    bare_switches.setenv("DO_NOT_TRACK", "true")
    apply_offline_environment()
    assert os.environ["HF_HUB_OFFLINE"] == "0" and os.environ["LANCEDB_LOG"] == "info"
    assert os.environ["DO_NOT_TRACK"] == "true"
    assert not config.hub_offline()

    bare_switches.setenv("DO_NOT_TRACK", "  ")  # empty opts nobody out: unstructured would still ping
    apply_offline_environment()
    assert os.environ["DO_NOT_TRACK"] == "1"


def test_readers(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", " True ")
    assert config.hub_offline()
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    assert not config.hub_offline()
    monkeypatch.delenv("RAG_SERVE_TOKENS", raising=False)
    assert config.serve_tokens_file() is None
    monkeypatch.setenv("RAG_SERVE_TOKENS", "/etc/rag/tokens.json")
    assert config.serve_tokens_file() == "/etc/rag/tokens.json"
    monkeypatch.delenv("RAG_EVAL_CACHE", raising=False)
    assert config.eval_cache_dir() == config.PROJECT_ROOT / "data" / "eval_cache"
    monkeypatch.setenv("RAG_EVAL_CACHE", "~/cache")
    assert config.eval_cache_dir() == Path("~/cache").expanduser()
    assert config.env_str("RAG_X_UNSET_FOR_TEST", "d") == "d"
    assert config.env_str("A", environ={"A": "b"}) == "b"
    monkeypatch.setenv("OMP_THREAD_LIMIT", "3")
    assert config.child_process_env({"OMP_THREAD_LIMIT": "1", "RAG_X_UNSET_FOR_TEST": "y"})["OMP_THREAD_LIMIT"] == "3"
    monkeypatch.delenv("OMP_THREAD_LIMIT")
    child = config.child_process_env({"OMP_THREAD_LIMIT": "1"})
    assert child["OMP_THREAD_LIMIT"] == "1" and "OMP_THREAD_LIMIT" not in os.environ



def test_numeric_settings_name_the_variable_when_a_value_is_wrong(monkeypatch):
    monkeypatch.setenv("RAG_PARSE_TIMEOUT_S", "2 min")
    with pytest.raises(ValueError, match=r"RAG_PARSE_TIMEOUT_S must be a number, got '2 min'"):
        config.Settings()
    monkeypatch.setenv("RAG_PARSE_TIMEOUT_S", "30")
    monkeypatch.setenv("RAG_EMBED_BATCH_SIZE", "0")
    with pytest.raises(ValueError, match="RAG_EMBED_BATCH_SIZE must be a whole number of at least 1"):
        config.Settings()
    monkeypatch.setenv("RAG_EMBED_BATCH_SIZE", " ")  # blank: the default
    monkeypatch.setenv("RAG_PARSE_MEMORY_MB", "0")  # 0 means no cap (README), not the default
    monkeypatch.setenv("RAG_MAX_FILE_MB", "250")
    settings = config.Settings()
    assert (settings.parse_timeout_s, settings.embed_batch_size, settings.parse_memory_mb) == (30.0, 32, 0)
    assert (settings.max_file_bytes, settings.parse_max_s) == (250 << 20, 14400.0)
    monkeypatch.setenv("RAG_KEEP_GENERATIONS", "0")  # rollback needs one: refused here, not by housekeeping
    with pytest.raises(ValueError, match="RAG_KEEP_GENERATIONS must be a whole number of at least 1"):
        config.Settings()
    monkeypatch.setenv("RAG_SHARD_RUNS", "-1")
    with pytest.raises(ValueError, match=r"RAG_SHARD_RUNS must be a whole number \(0 = one whole run\) of at least 0"):
        config.shard_runs()
    monkeypatch.setenv("RAG_CELERY_VISIBILITY_TIMEOUT_S", "soon")
    with pytest.raises(ValueError, match="RAG_CELERY_VISIBILITY_TIMEOUT_S must be a number of seconds, got 'soon'"):
        config.celery_visibility_timeout_s()


def test_serve_workers_get_a_share_of_the_cores_unless_the_operator_set_one(monkeypatch):
    for name in ("RAG_COMPUTE_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", config.SERVE_WORKER_OPTIONS):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    assert config.compute_threads() == 8
    monkeypatch.setenv("MKL_NUM_THREADS", "3")  # the operator's choice stays
    config.export_serve_worker_options({"lake": "/l"}, processes=4)
    assert config.serve_worker_options() == {"lake": "/l"}
    assert [os.environ[n] for n in ("RAG_COMPUTE_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")] == ["2", "2", "2", "3"]
    assert config.compute_threads() == 2
    monkeypatch.setenv("RAG_COMPUTE_THREADS", "0")
    assert config.compute_threads() == 1  # never zero threads


def _fresh_process(code: str, **env: str) -> dict:
    base = {k: v for k, v in os.environ.items() if k not in SWITCHES}
    done = subprocess.run(
        [sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True, timeout=120,
        cwd=PACKAGE.parent,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_importing_the_package_switches_the_libraries_offline_before_they_load():
    """Nothing downloads and unstructured stays quiet in a process that set none of the switches."""
    seen = _fresh_process(
        "import json, os, rag_pipeline.ingest.email_message, rag_pipeline.query.rerank\n"
        "import huggingface_hub.constants as hub\n"
        f"print(json.dumps({{**{{n: os.environ.get(n) for n in {SWITCHES!r}}}, 'hub': hub.HF_HUB_OFFLINE}}))"
    )
    assert seen.pop("hub") is True
    assert seen == {**OFFLINE_ENVIRONMENT, "DO_NOT_TRACK": "1"}

    kept = _fresh_process(
        "import json, os, rag_pipeline\n"
        "print(json.dumps({n: os.environ.get(n) for n in ('HF_HUB_OFFLINE', 'LANCEDB_LOG', 'DO_NOT_TRACK')}))",
        HF_HUB_OFFLINE="0", LANCEDB_LOG="warn", DO_NOT_TRACK="yes",
    )
    assert kept == {"HF_HUB_OFFLINE": "0", "LANCEDB_LOG": "warn", "DO_NOT_TRACK": "yes"}
