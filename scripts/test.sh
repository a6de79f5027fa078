#!/usr/bin/env bash
# The test command: install (idempotent), then run the whole suite on real components.
set -euo pipefail
cd "$(dirname "$0")/.."
RAG_INSTALL_TEST_TOOLS=1 bash scripts/install.sh
# Two workers (RAG_TEST_WORKERS=0 runs in one process): most tests wait on subprocesses, servers
# and disk part of the time. A file's tests run on one worker, so its module fixtures (a cluster,
# a server) start once; session fixtures are built by each worker that needs them. (Not
# `--dist loadgroup`: with pytest 9.2 its groups are silently ignored, pytest-xdist issue #1386.)
exec .venv/bin/python -m pytest -n "${RAG_TEST_WORKERS:-2}" --dist loadfile "$@"
