#!/usr/bin/env bash
# Start the Dagster UI (webserver + daemon) on http://127.0.0.1:3000 with the local instance.
set -euo pipefail
cd "$(dirname "$0")/.."
export DAGSTER_HOME="$PWD/data/dagster_home" DO_NOT_TRACK=1
exec .venv/bin/dagster dev -w workspace.yaml -h 127.0.0.1 -p "${PORT:-3000}"
