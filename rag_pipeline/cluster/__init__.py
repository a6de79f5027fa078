"""Running index_job on a cluster: the executor choice, the Celery app workers load, and the
job as a reconstructable pointer (README, "Running on a cluster")."""
