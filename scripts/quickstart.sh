#!/usr/bin/env bash
# One command for a fresh machine: install, index the bundled sample corpus through Dagster,
# and answer one example question with citations.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
if [ ! -d data/raw ]; then
  echo "==> seeding data/raw with the sample corpus (data/sample)"
  cp -r data/sample data/raw
fi
echo "==> indexing data/raw through Dagster (index_job)"
.venv/bin/rag index
echo
question="${1:-How many days of paid annual leave do employees get?}"
echo "==> rag ask \"$question\""
.venv/bin/rag ask "$question"
