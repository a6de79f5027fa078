#!/usr/bin/env bash
# Start the Dagster UI (webserver + daemon) on http://127.0.0.1:3000 with the local instance
# (DAGSTER_HOME, default data/dagster_home). dagster dev runs from inside DAGSTER_HOME, so the
# repo-root dagster.yaml (linked in there) is read as the instance config and not warned about.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
export DAGSTER_HOME="${DAGSTER_HOME:-$root/data/dagster_home}" DO_NOT_TRACK=1
mkdir -p "$DAGSTER_HOME"
[ -e "$DAGSTER_HOME/dagster.yaml" ] || ln -s "$root/dagster.yaml" "$DAGSTER_HOME/dagster.yaml"
cd -P "$DAGSTER_HOME"
export DAGSTER_HOME="$(pwd -P)"  # dagster dev compares it with its working directory
exec "$root/.venv/bin/dagster" dev -w "$root/workspace.yaml" -h 127.0.0.1 -p "${PORT:-3000}"
