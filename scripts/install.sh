#!/usr/bin/env bash
# Install everything rag_pipeline needs, idempotently: Debian packages (tesseract with English,
# Simplified Chinese and the vertical Chinese models, poppler), a virtualenv in .venv with the project, and the default
# embedding model built offline into data/models. Safe to re-run; a second run takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
export DO_NOT_TRACK=1 PIP_DISABLE_PIP_VERSION_CHECK=1

need_apt=()
command -v tesseract >/dev/null || need_apt+=(tesseract-ocr)
command -v pdftoppm >/dev/null || need_apt+=(poppler-utils)
if command -v tesseract >/dev/null; then
  langs="$(tesseract --list-langs 2>/dev/null || true)"
  grep -qx eng <<<"$langs" || need_apt+=(tesseract-ocr-eng)
  grep -qx chi_sim <<<"$langs" || need_apt+=(tesseract-ocr-chi-sim)
  grep -qx chi_sim_vert <<<"$langs" || need_apt+=(tesseract-ocr-chi-sim-vert)
  grep -qx chi_tra_vert <<<"$langs" || need_apt+=(tesseract-ocr-chi-tra-vert)
else
  need_apt+=(tesseract-ocr-eng tesseract-ocr-chi-sim tesseract-ocr-chi-sim-vert tesseract-ocr-chi-tra-vert)
fi
# The browser test of the Dagster UI needs Chromium; only the test command asks for it.
if [ "${RAG_INSTALL_TEST_TOOLS:-0}" = 1 ] && ! command -v chromium >/dev/null; then
  need_apt+=(chromium)
fi
# The cluster tests start PostgreSQL and Redis (scripts/cluster.sh, which also installs them on demand).
if [ "${RAG_INSTALL_TEST_TOOLS:-0}" = 1 ]; then
  command -v redis-server >/dev/null || need_apt+=(redis-server)
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_apt+=(postgresql)
fi
if ((${#need_apt[@]})); then
  echo "==> installing Debian packages: ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

PY="${PYTHON:-$(command -v python3.11 || command -v python3)}"
if [ ! -x .venv/bin/python ]; then
  echo "==> creating .venv with $PY"
  "$PY" -m venv .venv
fi
stamp=".venv/.rag-installed-$(cat pyproject.toml constraints.txt | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  echo "==> installing Python packages into .venv (first time: a few minutes)"
  # uv installs the same pinned set as pip ~5x faster on a fresh machine (bench/README.md, "Install
  # time"); it reads no pip.conf, so pip's local wheel folders and indexes are handed over. pip is
  # the fallback wherever uv cannot be had.
  uv_sources=()
  for link in ${PIP_FIND_LINKS:-} $(.venv/bin/pip config get global.find-links 2>/dev/null || true); do
    if [ -e "$link" ]; then uv_sources+=(--find-links "$link"); fi
  done
  for index in $(.venv/bin/pip config get global.extra-index-url 2>/dev/null || true); do
    if [ -e "${index#file://}" ]; then uv_sources+=(--extra-index-url "$index"); fi
  done
  # several indexes: take the best version from any of them, as pip does
  if printf '%s\n' "${uv_sources[@]}" | grep -qx -- --extra-index-url; then uv_sources+=(--index-strategy unsafe-best-match); fi
  uv_install() { .venv/bin/uv pip install -q --python .venv/bin/python "${uv_sources[@]}" "$@"; }
  if .venv/bin/pip install -q uv==0.13.9 && uv_install torch==2.13.0 && uv_install -c constraints.txt -e ".[dev]"; then
    :
  else
    echo "==> uv unavailable or failed: installing with pip"
    .venv/bin/pip install -q --upgrade pip
    .venv/bin/pip install -q torch==2.13.0            # the CPU wheel; anything else pulls CUDA
    .venv/bin/pip install -q -c constraints.txt -e ".[dev]"
  fi
  # torchvision breaks `import sentence_transformers` beside the CPU torch build.
  .venv/bin/pip uninstall -q -y torchvision 2>/dev/null || true
  rm -f .venv/.rag-installed-*; touch "$stamp"
fi

echo "==> building the embedding model (offline, once)"
.venv/bin/python -m rag_pipeline.embedding.e5_build "${RAG_MODEL_CACHE:-data/models}/multilingual-e5-small" >/dev/null
echo "==> exporting its query-time ONNX graphs: int8 token states, fp32 layers (offline, once, ~1.5 min)"
.venv/bin/python -c "from rag_pipeline.embedding.encoder import export_query_graphs; export_query_graphs()"
echo "==> install complete"
