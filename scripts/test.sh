#!/usr/bin/env bash
# The test command: install (idempotent), then run the whole suite on real components.
set -euo pipefail
cd "$(dirname "$0")/.."
RAG_INSTALL_TEST_TOOLS=1 bash scripts/install.sh
exec .venv/bin/python -m pytest "$@"
