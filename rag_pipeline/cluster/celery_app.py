"""The Celery app the workers run: `celery -A rag_pipeline.cluster.celery_app worker -Q dagster,embeddings`.

It is dagster-celery's app and step task, bound to this deployment's broker and result backend
(RAG_CELERY_BROKER, RAG_CELERY_BACKEND). Each task runs one step of a run: it reconstructs the
job from its code pointer, reads the run from the instance the run was started on (so workers
need that instance's storage: Postgres on a cluster), and executes the step in the worker.
Importing this module loads neither torch nor the model; a step that needs them loads them.
"""

from __future__ import annotations

from dagster_celery.make_app import make_app
from dagster_celery.tasks import create_task

from rag_pipeline.config import env_str

broker = env_str("RAG_CELERY_BROKER")
if not broker:
    raise RuntimeError("RAG_CELERY_BROKER is not set (e.g. redis://127.0.0.1:6379/0): see `bash scripts/cluster.sh up`")
app = make_app({"broker": broker, "backend": env_str("RAG_CELERY_BACKEND") or broker})
app.conf.worker_prefetch_multiplier = 1  # a long step must not hold a second one back in its queue
app.conf.task_acks_late = True  # a task whose worker dies is delivered again, not lost
app.conf.task_reject_on_worker_lost = True
execute_plan = create_task(app)
