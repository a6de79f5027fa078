"""The Celery app the workers run: `celery -A rag_pipeline.cluster.celery_app worker -Q dagster,embeddings`.

It is dagster-celery's app and step task, bound to this deployment's broker and result backend
(RAG_CELERY_BROKER, RAG_CELERY_BACKEND). Each task runs one step of a run: it reconstructs the
job from its code pointer, reads the run from the instance the run was started on (so workers
need that instance's storage: Postgres on a cluster), and executes the step in the worker.
Importing this module loads neither torch nor the model; a step that needs them loads them.
"""

from __future__ import annotations

import multiprocessing

from celery.signals import worker_process_init
from dagster_celery.make_app import make_app
from dagster_celery.tasks import create_task

from rag_pipeline.config import celery_visibility_timeout_s, env_str

broker = env_str("RAG_CELERY_BROKER")
if not broker:
    raise RuntimeError("RAG_CELERY_BROKER is not set (e.g. redis://127.0.0.1:6379/0): see `bash scripts/cluster.sh up`")
app = make_app({"broker": broker, "backend": env_str("RAG_CELERY_BACKEND") or broker})
app.conf.worker_prefetch_multiplier = 1  # a long step must not hold a second one back in its queue
app.conf.task_acks_late = True  # a task whose worker dies is delivered again, not lost
app.conf.task_reject_on_worker_lost = True
# A whole worker lost (its host gone, its main process killed) has no supervisor left to report
# it: the broker hands its task out again after the visibility timeout.
app.conf.broker_transport_options = {"visibility_timeout": celery_visibility_timeout_s()}
execute_plan = create_task(app)


@worker_process_init.connect
def _may_start_processes(**_: object) -> None:
    """Let a pool process start the parse workers a step needs.

    Workers run a prefork pool of one process (`scripts/cluster.sh`): the step runs in a child
    the worker's main process supervises, so a child killed mid-step (the OOM killer picks the
    process holding the model) is a `WorkerLostError` the supervisor turns into a redelivery
    (`task_reject_on_worker_lost`), not a task lost until the broker's visibility timeout. Pool
    children are marked daemonic, and Python refuses children to those; the parse pool reaps its
    own workers (`ingest/pool.py`), so the flag only gets in the way. The key billiard gave
    the child is billiard's type, which the standard library's forkserver cannot pass on.
    """
    me = multiprocessing.current_process()  # billiard's process object, in the standard library's seat
    me._config["daemon"] = False
    me._config["authkey"] = multiprocessing.process.AuthenticationString(bytes(me.authkey))

