#!/usr/bin/env bash
# The dagster CLI with the project's instance: DAGSTER_HOME defaults to data/dagster_home (as for
# `rag`), and the repo's dagster.yaml is linked in there. E.g.
#   bash scripts/dagster.sh schedule start nightly_reindex_schedule -w workspace.yaml
set -euo pipefail
cd "$(dirname "$0")/.."
export DAGSTER_HOME="${DAGSTER_HOME:-$PWD/data/dagster_home}" DO_NOT_TRACK=1
mkdir -p "$DAGSTER_HOME"
[ -e "$DAGSTER_HOME/dagster.yaml" ] || ln -s "$PWD/dagster.yaml" "$DAGSTER_HOME/dagster.yaml"
exec .venv/bin/dagster "$@"
