"""Which executor runs the index job's steps, chosen by configuration, not code.

`RAG_EXECUTOR` (read when the code location loads, like RAG_SHARDS):
- ``in_process`` (default): one process runs every step; the model loads once and the lake's
  writer lock is held from the first step to the last.
- ``multiprocess``: each step in its own process on this machine.
- ``celery``: each step is a task on a Celery broker (``RAG_CELERY_BROKER``, results on
  ``RAG_CELERY_BACKEND``), run by whichever worker takes it; the embedding step goes to its own
  queue (``RAG_EMBED_QUEUE``, default ``embeddings``) so machines with GPUs can take only those.
- ``k8s``: each step a Kubernetes Job (dagster-k8s), launched from the run's own pod with the
  image, environment and volumes of the instance's K8sRunLauncher (``deploy/k8s/``); the
  embedding step's pod asks for the resources in ``RAG_K8S_EMBED_RESOURCES`` (JSON, e.g. a GPU).

Out of process, every step takes the writer lock for itself (and waits up to RAG_LOCK_WAIT_S for
it), and stage outputs reach the next step through the lake's staging folder, which every worker
must see at the same path.
"""

from __future__ import annotations

import json

import dagster as dg

from rag_pipeline.config import env_str

EXECUTORS = ("in_process", "multiprocess", "celery", "k8s")
CELERY_POLL_S = 0.1


def executor_kind() -> str:
    kind = env_str("RAG_EXECUTOR").strip().lower().replace("-", "_") or "in_process"
    if kind not in EXECUTORS:
        raise ValueError(f"RAG_EXECUTOR must be one of {', '.join(EXECUTORS)}, got {kind!r}")
    return kind


def embed_queue() -> str:
    return env_str("RAG_EMBED_QUEUE").strip() or "embeddings"


def index_executor() -> dg.ExecutorDefinition:
    kind = executor_kind()
    if kind == "in_process":
        return dg.in_process_executor
    if kind == "multiprocess":
        return dg.multiprocess_executor
    if kind == "k8s":
        from dagster_k8s import k8s_job_executor

        return k8s_job_executor
    import warnings

    from dagster_celery import celery_executor, core_execution_loop

    # The run's loop polls its steps' results once a tick and only then submits the steps they
    # unblock: dagster-celery's 1 s tick added ~0.5 s to every step of a chain (bench/README.md,
    # "Celery hand-off"). A poll is one Redis GET per running step, so 0.1 s costs nothing.
    core_execution_loop.TICK_SECONDS = CELERY_POLL_S

    # dagster-celery registers the same step task again for every step it sends: harmless
    # (the first registration serves), but Celery warns on stderr each time
    warnings.filterwarnings("ignore", message=r"Task name 'execute_plan' is already registered")

    # StringSource: the broker URL is read from the environment when a run starts, never baked in
    return celery_executor.configured(
        {"broker": {"env": "RAG_CELERY_BROKER"}, "backend": {"env": "RAG_CELERY_BACKEND"}}, name="celery"
    )


def embed_pod_resources() -> dict:
    """RAG_K8S_EMBED_RESOURCES: the embedding step pod's resource requests and limits as JSON,
    e.g. {"limits": {"nvidia.com/gpu": "1"}}; default 2 CPUs and 4 GiB requested."""
    raw = env_str("RAG_K8S_EMBED_RESOURCES").strip()
    if not raw:
        return {"requests": {"cpu": "2", "memory": "4Gi"}}
    try:
        resources = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"RAG_K8S_EMBED_RESOURCES must be JSON like {{\"limits\": {{\"nvidia.com/gpu\": \"1\"}}}}: {exc}") from None
    if not isinstance(resources, dict) or not set(resources) <= {"requests", "limits"}:
        raise ValueError(f"RAG_K8S_EMBED_RESOURCES must hold only requests and limits, got {raw!r}")
    return resources


def embedding_op_tags() -> dict[str, object]:
    """Where the embedding step runs: its Celery queue, or its Kubernetes pod's resources. Only
    the configured executor's tag is set, so RAG_K8S_EMBED_RESOURCES is read (and checked) only
    when it can matter."""
    kind = executor_kind()
    if kind == "celery":
        return {"dagster-celery/queue": embed_queue()}
    if kind == "k8s":
        return {"dagster-k8s/config": {"container_config": {"resources": embed_pod_resources()}}}
    return {}
