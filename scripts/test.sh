#!/usr/bin/env bash
# The test command: install (idempotent), then run the whole suite on real components.
set -euo pipefail
cd "$(dirname "$0")/.."
RAG_INSTALL_TEST_TOOLS=1 bash scripts/install.sh
# Two workers (RAG_TEST_WORKERS=0 runs in one process): most tests wait on subprocesses, servers
# and disk part of the time. Tests stay together by file, and the shared-corpus run's readers
# in one group, so each session fixture is built once per worker that needs it (conftest.py).
exec .venv/bin/python -m pytest -n "${RAG_TEST_WORKERS:-2}" --dist loadgroup "$@"
