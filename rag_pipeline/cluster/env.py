"""The variables `scripts/cluster.sh up` writes to <dir>/cluster.env, for Python callers.

The shell sources the file; tests and benchmarks read it here. cluster.sh writes one plain
``export NAME="value"`` a line (no expansions), so reading it needs no shell.
"""

from __future__ import annotations

from pathlib import Path


def read_cluster_env(where: Path) -> dict[str, str]:
    """cluster.env's variables by name."""
    variables = {}
    for line in (Path(where) / "cluster.env").read_text(encoding="utf-8").splitlines():
        name, sep, value = line.removeprefix("export ").partition("=")
        if sep and name.strip() and not name.lstrip().startswith("#"):
            variables[name.strip()] = value.strip().strip('"')
    return variables
