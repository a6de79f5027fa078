"""The Kubernetes deployment (deploy/k8s) as far as it can be checked without a cluster: the
instance config passes Dagster's own schema and the run launcher's, the code location loads with
RAG_EXECUTOR=k8s and gives every job the Kubernetes executor, the embedding step's pod asks for
what the ConfigMap says, and the Helm values, the instance config and the ConfigMap agree on the
volume, the environment and the one-run-at-a-time queue."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
K8S = REPO / "deploy" / "k8s"


def _manifests() -> dict[str, dict]:
    return {doc["kind"]: doc for doc in yaml.safe_load_all((K8S / "rag-pipeline.yaml").read_text(encoding="utf-8"))}


def test_the_instance_config_passes_dagsters_schema_and_the_run_launchers(monkeypatch):
    from dagster._config import process_config
    from dagster._core.instance.config import dagster_instance_config
    from dagster_k8s import K8sRunLauncher
    from dagster_postgres.storage import DagsterPostgresStorage

    for name in ("DAGSTER_PG_HOST", "DAGSTER_PG_USER", "DAGSTER_PG_PASSWORD", "DAGSTER_PG_DB", "RAG_K8S_NAMESPACE", "RAG_IMAGE"):
        monkeypatch.setenv(name, f"x-{name.lower()}")
    config, _ = dagster_instance_config(str(K8S))
    launcher = config["run_launcher"]
    assert (launcher["module"], launcher["class"]) == ("dagster_k8s", "K8sRunLauncher")
    processed = process_config(K8sRunLauncher.config_type(), launcher["config"])
    assert processed.success, processed.errors
    assert processed.value["job_image"] == "x-rag_image" and processed.value["env_config_maps"] == ["rag-pipeline-env"]
    storage = process_config(DagsterPostgresStorage.config_type(), config["storage"]["postgres"])
    assert storage.success, storage.errors
    assert config["run_coordinator"]["class"] == "QueuedRunCoordinator" and config["concurrency"]["runs"]["max_concurrent_runs"] == 1


def test_the_code_location_loads_with_the_kubernetes_executor():
    env = {**os.environ, **_manifests()["ConfigMap"]["data"]}
    probe = (
        "import json\n"
        "from dagster_k8s.job import get_user_defined_k8s_config\n"
        "from rag_pipeline.definitions import defs\n"
        "dg_defs = defs\n"
        "jobs = {name: dg_defs.resolve_job_def(name) for name in ('index_job', 'index_shard_job')}\n"
        "step = jobs['index_job'].graph.node_dict['embeddings']\n"
        "k8s = get_user_defined_k8s_config(step.tags)\n"
        "print(json.dumps({'executors': {n: j.executor_def.name for n, j in jobs.items()},\n"
        "                  'resources': k8s.container_config.get('resources')}))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["executors"] == {"index_job": "k8s", "index_shard_job": "k8s"}
    assert seen["resources"] == json.loads(env["RAG_K8S_EMBED_RESOURCES"])


def test_the_helm_values_the_instance_and_the_configmap_agree():
    values = yaml.safe_load((K8S / "values.yaml").read_text(encoding="utf-8"))
    instance = yaml.safe_load((K8S / "dagster.yaml").read_text(encoding="utf-8"))["run_launcher"]["config"]
    manifests = _manifests()
    env = manifests["ConfigMap"]["data"]
    claim = manifests["PersistentVolumeClaim"]
    assert "ReadWriteMany" in claim["spec"]["accessModes"]  # every pod writes the one lake

    [location] = values["dagster-user-deployments"]["deployments"]
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    assert location["dagsterApiGrpcArgs"] == ["--module-name", "rag_pipeline.definitions"]
    for pod in (location, launcher):
        assert [m["name"] for m in pod["envConfigMaps"]] == [manifests["ConfigMap"]["metadata"]["name"]]
        assert [v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]] == [claim["metadata"]["name"]]
        assert pod["volumeMounts"] == instance["volume_mounts"]
    assert instance["env_config_maps"] == [manifests["ConfigMap"]["metadata"]["name"]]
    assert [v["persistentVolumeClaim"]["claimName"] for v in instance["volumes"]] == [claim["metadata"]["name"]]
    mount = instance["volume_mounts"][0]["mountPath"]
    assert all(Path(env[name]).is_relative_to(mount) for name in ("RAG_RAW_DIR", "RAG_LAKE_DIR"))
    assert values["dagsterDaemon"]["runCoordinator"]["config"]["queuedRunCoordinator"]["maxConcurrentRuns"] == 1

    from rag_pipeline.cluster.executors import EXECUTORS

    assert env["RAG_EXECUTOR"] in EXECUTORS
    unknown = {name for name in env if name not in _settings_the_code_reads()}
    assert not unknown, f"the ConfigMap sets variables nothing reads: {sorted(unknown)}"


def _settings_the_code_reads() -> set[str]:
    import re

    names = set()
    for path in (REPO / "rag_pipeline").rglob("*.py"):
        names |= set(re.findall(r"\"(RAG_[A-Z0-9_]+)\"", path.read_text(encoding="utf-8")))
    return names


@pytest.mark.parametrize("bad", ["{not json", '{"cpu": "2"}'])
def test_a_wrong_embedding_pod_resources_setting_is_a_clear_error(monkeypatch, bad):
    from rag_pipeline.cluster.executors import embed_pod_resources

    monkeypatch.setenv("RAG_K8S_EMBED_RESOURCES", bad)
    with pytest.raises(ValueError, match="RAG_K8S_EMBED_RESOURCES must"):
        embed_pod_resources()
