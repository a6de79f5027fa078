"""Shared fixtures: the sample corpus indexed once per session through the real Dagster job."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("LANCEDB_LOG", "error")

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "sample"
SHARED = REPO.parent / "shared"


@pytest.fixture(scope="session")
def shared_corpus() -> Path:
    path = SHARED / "corpus"
    if not path.is_dir():
        pytest.skip(f"shared corpus not found at {path} (it lives beside the checkout in CI)")
    return path


CORPUS_META = {"manifest.tsv", "SOURCES.md"}  # describe the corpus; not corpus documents


@pytest.fixture(scope="session")
def shared_corpus_run(shared_corpus, tmp_path_factory) -> dict:
    """The whole shared corpus through one real Dagster run of index_job, once per session:
    test_ingest_corpus.py checks what it indexed and quarantined and reads each file's parse
    outcome from its parse cache (the pipeline's parse, not a second one); keep its users in that
    one file, or `--dist loadfile` may build it on both workers (~5 min of both cores).

    The embedding model runs at int8-onnx precision (2.6x fp32's speed on VNNI CPUs, ~1.6x on AVX2 alone; what these tests check
    does not depend on the vectors, and fp32 builds run in every other indexing test), so the
    int8 path gets a whole run too."""
    from rag_pipeline_tests.indexing import run_index

    root = tmp_path_factory.mktemp("shared_corpus_run")
    raw, lake = root / "corpus", root / "lake"
    shutil.copytree(shared_corpus, raw, ignore=lambda d, names: [n for n in names if n in CORPUS_META])
    report = run_index(raw, lake, embedding_precision="int8-onnx")
    return {"raw": raw, "lake": lake, "report": report}


@pytest.fixture(scope="session")
def sample_raw(tmp_path_factory) -> Path:
    """A private copy of data/sample, so tests may edit files without touching the repo."""
    raw = tmp_path_factory.mktemp("raw") / "sample"
    shutil.copytree(SAMPLE, raw)
    return raw


@pytest.fixture(scope="session")
def indexed_sample(tmp_path_factory, sample_raw) -> dict:
    """Run `rag index` (index_job through Dagster, persistent instance) on the sample corpus.

    ``pristine`` is a copy of its raw folder and lake taken right after the run, before any test
    touched them: `base` hands it out, so a worker builds the sample index once, not twice."""
    from rag_pipeline import cli

    home = tmp_path_factory.mktemp("dagster_home")
    lake = tmp_path_factory.mktemp("lake")
    old_home = os.environ.get("DAGSTER_HOME")
    os.environ["DAGSTER_HOME"] = str(home)
    try:
        code = cli.main(["index", "--raw", str(sample_raw), "--lake", str(lake)])
    finally:
        if old_home is None:
            os.environ.pop("DAGSTER_HOME", None)
        else:
            os.environ["DAGSTER_HOME"] = old_home
    pristine = tmp_path_factory.mktemp("pristine_sample")
    shutil.copytree(sample_raw, pristine / "raw")
    shutil.copytree(lake, pristine / "lake")
    return {"exit_code": code, "lake": lake, "raw": sample_raw, "dagster_home": home, "pristine": pristine}


@pytest.fixture(scope="session")
def sample_index(indexed_sample):
    from rag_pipeline.query import RagIndex

    assert indexed_sample["exit_code"] == 0
    return RagIndex.open(indexed_sample["lake"])


@pytest.fixture(scope="session")
def base(indexed_sample) -> Path:
    """The sample corpus indexed once (`rag index`, a real Dagster run) as it was right after the
    run: a folder holding ``raw`` and ``lake``; tests that change it work on a copy (`work`)."""
    assert indexed_sample["exit_code"] == 0
    return indexed_sample["pristine"]


@pytest.fixture
def work(base, tmp_path):
    """A private copy of the indexed base: its raw folder and its lake."""
    shutil.copytree(base / "raw", tmp_path / "raw")
    shutil.copytree(base / "lake", tmp_path / "lake")
    return tmp_path


def pytest_report_header(config) -> str:
    """Free disk in the header: the suite builds many lakes, and a full disk fails it in confusing ways."""
    free = shutil.disk_usage(config.rootpath).free / 2**30
    tmp = shutil.disk_usage(os.environ.get("TMPDIR", "/tmp")).free / 2**30
    return f"free disk: {free:.1f} GiB at the checkout, {tmp:.1f} GiB at the temp dir"
