"""Settings shared by the Dagster assets, the CLI and the query API.

One frozen dataclass so pure functions take plain values; defaults come from environment
variables so an operator can repoint a deployment without touching code.

This module is the one place the process environment is read or written
(rag_pipeline_tests/test_config_surface.py holds the rest of the package to that): other modules
call the readers below, and `apply_offline_environment` sets the libraries' offline switches.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rag_pipeline.store.ann import DEFAULT_MIN_ROWS as DEFAULT_ANN_MIN_ROWS

PROJECT_ROOT = Path(__file__).resolve().parent.parent
BUILTIN_MODEL = "builtin:multilingual-e5-small"


_TRUE = frozenset({"1", "true", "yes", "on"})

# Process-wide switches read by the libraries themselves, most of them when they are imported.
# `apply_offline_environment` sets each one the operator has not set.
OFFLINE_ENVIRONMENT = {
    "HF_HUB_OFFLINE": "1",  # nothing downloads at run time: models are local folders or already cached
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",  # no fork warnings from the Rust tokenizers in worker processes
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "LANCEDB_LOG": "error",  # lance's Rust logger warns on every table creation
    "UNSTRUCTURED_DISABLE_NOTICE": "1",
}


def apply_offline_environment() -> None:
    """Set the libraries' offline and quiet switches, keeping any value the operator set.

    Idempotent. It must run before the library that reads a switch is imported (huggingface_hub,
    transformers and unstructured read theirs at import, lance when it first logs), so the package
    calls it when it is imported (rag_pipeline/__init__.py) and the modules that import those
    libraries call it again before they do. ``DO_NOT_TRACK`` (unstructured's telemetry, which
    pings analytics at import and on every partition call) is also set when it is empty.
    """
    for name, value in OFFLINE_ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    if not os.environ.get("DO_NOT_TRACK", "").strip():
        os.environ["DO_NOT_TRACK"] = "1"


def env_str(name: str, default: str = "", environ: Mapping[str, str] | None = None) -> str:
    """The value of one environment variable (`default` when unset), from `environ` if given."""
    return (os.environ if environ is None else environ).get(name, default)


def env_number(name: str, default: float, kind: type = int, *, minimum: float = 0, what: str = "") -> float:
    """A numeric variable (`default` when unset or blank), at least `minimum`. A value that is not
    one says which variable and what it takes, instead of a bare int()/float() error."""
    raw = env_str(name).strip()
    if not raw:
        return default
    noun = what or ("a whole number" if kind is int else "a number")
    try:
        value = kind(raw)
    except ValueError:
        raise ValueError(f"{name} must be {noun}, got {raw!r}") from None
    if value < minimum:
        raise ValueError(f"{name} must be {noun} of at least {minimum:g}, got {raw!r}")
    return value


def env_flag(name: str) -> bool:
    """A yes/no variable: 1, true, yes or on (any case, spaces ignored) mean yes."""
    return env_str(name).strip().lower() in _TRUE


def hub_offline() -> bool:
    """HF_HUB_OFFLINE is on (the default, see OFFLINE_ENVIRONMENT): models load from local files only."""
    return env_flag("HF_HUB_OFFLINE")


def child_process_env(defaults: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of this process's environment for a child process, with `defaults` where unset."""
    env = dict(os.environ)
    for name, value in (defaults or {}).items():
        env.setdefault(name, value)
    return env


def eval_cache_dir() -> Path:
    """RAG_EVAL_CACHE: root of the benchmark index and embedding caches (eval/build.py)."""
    return Path(env_str("RAG_EVAL_CACHE", str(PROJECT_ROOT / "data" / "eval_cache"))).expanduser()


def serve_tokens_file() -> str | None:
    """RAG_SERVE_TOKENS: the bearer tokens file `rag serve` uses when none is given."""
    return env_str("RAG_SERVE_TOKENS") or None


def shard_runs() -> int:
    """RAG_SHARD_RUNS: out of process (RAG_EXECUTOR=multiprocess|celery), how many shard runs
    `rag index` keeps going at once (cluster.fanout); default one per core; 0 = one whole run
    whose steps work the shards in turn."""
    return env_number("RAG_SHARD_RUNS", os.cpu_count() or 1, what="a whole number (0 = one whole run)")


def celery_visibility_timeout_s() -> float:
    """RAG_CELERY_VISIBILITY_TIMEOUT_S: seconds before the broker hands out again the task of a
    worker that vanished without a word (default 3600); it must exceed the longest step."""
    return env_number("RAG_CELERY_VISIBILITY_TIMEOUT_S", 3600.0, float, minimum=1, what="a number of seconds")


SERVE_WORKER_OPTIONS = "RAG_SERVE_WORKER_OPTIONS"  # set by `rag serve --processes N` for its worker processes


COMPUTE_THREADS = "RAG_COMPUTE_THREADS"
# The native thread pools a process's model math runs on, each read once when its library loads.
_THREAD_POOL_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def compute_threads() -> int:
    """RAG_COMPUTE_THREADS: threads one process's model math may use (torch, ONNX Runtime);
    default every core. `rag serve --processes N` gives each worker process cores // N."""
    raw = env_str(COMPUTE_THREADS).strip()
    return max(1, int(raw)) if raw else max(1, os.cpu_count() or 1)


def export_serve_worker_options(options: dict, processes: int) -> None:
    """Hand `rag serve`'s options to the uvicorn worker processes it starts (they inherit the
    environment and build their app from it: serve.app.app_from_worker_options).

    Each worker also gets its share of the cores for model math (RAG_COMPUTE_THREADS and the
    BLAS/OpenMP pools, unless the operator set them): N processes whose pools each spin on every
    core took turns instead of running side by side (bench/README.md, "Server processes").
    """
    import json

    os.environ[SERVE_WORKER_OPTIONS] = json.dumps(options)
    share = str(max(1, (os.cpu_count() or 1) // max(1, processes)))
    for name in (COMPUTE_THREADS, *_THREAD_POOL_VARIABLES):
        os.environ.setdefault(name, share)


def serve_worker_options() -> dict:
    import json

    raw = env_str(SERVE_WORKER_OPTIONS)
    if not raw:
        raise RuntimeError(f"{SERVE_WORKER_OPTIONS} is not set: worker processes are started by `rag serve --processes N`")
    return json.loads(raw)


def _env_path(name: str, default: str) -> Path:
    """A path setting; a relative one is taken relative to the project root (not the cwd), so
    the CLI, `dagster dev`, the daemon and tests started from anywhere agree on it."""
    path = Path(os.environ.get(name, default)).expanduser()
    return path if path.is_absolute() else PROJECT_ROOT / path


def default_raw_dir() -> Path:
    return _env_path("RAG_RAW_DIR", "data/raw")


def default_lake_dir() -> Path:
    return _env_path("RAG_LAKE_DIR", "data/lake")


def default_model_cache_dir() -> Path:
    return _env_path("RAG_MODEL_CACHE", str(PROJECT_ROOT / "data" / "models"))


def ensure_dagster_home() -> Path:
    """DAGSTER_HOME, defaulting to data/dagster_home with the repo's dagster.yaml linked in.

    Every entry point (`rag`, the scripts) calls this, so runs from the CLI and from
    `dagster dev` share one instance.
    """
    home = Path(os.environ.setdefault("DAGSTER_HOME", str(PROJECT_ROOT / "data" / "dagster_home")))
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists() and not config.is_symlink():
        config.symlink_to(PROJECT_ROOT / "dagster.yaml")  # the repo's instance config, one copy
    return home


def default_ignore_file() -> Path | None:
    """RAG_IGNORE_FILE: .ragignore rules kept outside the raw folder (a read-only share), read after
    the folder's own (ingest.ignore)."""
    return _env_path("RAG_IGNORE_FILE", "") if env_str("RAG_IGNORE_FILE") else None


def default_golden_file() -> Path | None:
    value = os.environ.get("RAG_GOLDEN_FILE", str(PROJECT_ROOT / "data" / "golden" / "sample_golden.jsonl"))
    return None if value.strip().lower() in ("", "none", "off") else Path(value).expanduser()


def progress_requested() -> bool:
    """RAG_PROGRESS=1: plain progress lines on stderr even when it is not a terminal (progress.py)."""
    return env_flag("RAG_PROGRESS")


@dataclass(frozen=True)
class ChunkingSettings:
    """Chunk sizes in the embedding model's tokens (RAG_CHUNK_MAX_TOKENS, RAG_CHUNK_OVERLAP_TOKENS).

    Whatever the setting, no chunk exceeds what the model reads (chunking.TokenBudget).
    """

    max_tokens: int = field(default_factory=lambda: env_number("RAG_CHUNK_MAX_TOKENS", 300, minimum=1))
    overlap_tokens: int = field(default_factory=lambda: env_number("RAG_CHUNK_OVERLAP_TOKENS", 40))


@dataclass(frozen=True)
class Settings:
    raw_dir: Path = field(default_factory=default_raw_dir)
    lake_dir: Path = field(default_factory=default_lake_dir)
    embedding_model: str = field(
        default_factory=lambda: os.environ.get("RAG_EMBEDDING_MODEL", BUILTIN_MODEL)
    )
    model_cache_dir: Path = field(default_factory=default_model_cache_dir)
    # fp32 | bf16 | int8 (RAG_EMBEDDING_PRECISION): bench/embedding_precision.py measures speed vs nDCG
    embedding_precision: str = field(default_factory=lambda: os.environ.get("RAG_EMBEDDING_PRECISION", "fp32"))
    ocr_lang: str = "chi_sim+eng"  # this order read mixed zh/en scans better, English equally
    ocr_min_confidence: float = field(
        default_factory=lambda: env_number("RAG_OCR_MIN_CONFIDENCE", 60.0, float)
    )
    # Larger files are quarantined too_large without being read (RAG_MAX_FILE_MB; not cached).
    max_file_bytes: int = field(default_factory=lambda: env_number("RAG_MAX_FILE_MB", 100, minimum=1) << 20)
    # Files are parsed in this many worker processes (RAG_PARSE_WORKERS; 0 or unset = one per CPU),
    # each file killed and quarantined as `timeout` after parse_timeout_s seconds without progress
    # (RAG_PARSE_TIMEOUT_S; a page read is progress) or parse_max_s in all (RAG_PARSE_MAX_S).
    parse_workers: int = field(
        default_factory=lambda: env_number("RAG_PARSE_WORKERS", 0) or os.cpu_count() or 1
    )
    parse_timeout_s: float = field(default_factory=lambda: env_number("RAG_PARSE_TIMEOUT_S", 120.0, float, minimum=1))
    parse_max_s: float = field(default_factory=lambda: env_number("RAG_PARSE_MAX_S", 14400.0, float, minimum=1))
    # A parse worker's address space is capped (RAG_PARSE_MEMORY_MB, 0 = no cap): a file that needs
    # more (a PDF stream that inflates to gigabytes) is quarantined as too_large, not OOM-killing the host.
    parse_memory_mb: int = field(default_factory=lambda: env_number("RAG_PARSE_MEMORY_MB", 4096))
    ignore_file: Path | None = field(default_factory=default_ignore_file)  # RAG_IGNORE_FILE (ingest.ignore)
    max_deletion_fraction: float = 0.5  # a scan missing more than this share of known files stops the run
    allow_mass_deletion: bool = False
    chunking: ChunkingSettings = field(default_factory=ChunkingSettings)
    # Where and how many at a time passages are embedded (RAG_EMBEDDING_DEVICE: cpu, cuda, cuda:N,
    # or auto = cuda when torch sees one; RAG_EMBED_BATCH_SIZE). Machine-local like parse_workers:
    # a GPU worker and a CPU worker of one cluster each keep their own (never in a run's config).
    embedding_device: str = field(default_factory=lambda: os.environ.get("RAG_EMBEDDING_DEVICE") or "cpu")
    embed_batch_size: int = field(default_factory=lambda: env_number("RAG_EMBED_BATCH_SIZE", 32, minimum=1))
    # The golden question set run on every staged generation (RAG_GOLDEN_FILE; "none" turns it off),
    # and how far a metric may fall below the served generation's before promotion is blocked.
    golden_file: Path | None = field(default_factory=default_golden_file)
    eval_tolerance: float = field(default_factory=lambda: env_number("RAG_EVAL_TOLERANCE", 0.05, float))
    # Chunks tables this large get an ANN vector index, smaller ones stay exact (store.ann, RAG_ANN_MIN_ROWS)
    ann_min_rows: int = field(default_factory=lambda: env_number("RAG_ANN_MIN_ROWS", DEFAULT_ANN_MIN_ROWS))
    # Generations kept by housekeeping besides the served one (RAG_KEEP_GENERATIONS): rollback needs >= 1
    keep_generations: int = field(default_factory=lambda: env_number("RAG_KEEP_GENERATIONS", 2, minimum=1))
    # How long a second writer waits for the lake's writer lock before giving up (RAG_LOCK_WAIT_S)
    lock_wait_s: float = field(default_factory=lambda: env_number("RAG_LOCK_WAIT_S", 0.0, float))
