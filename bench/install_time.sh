#!/usr/bin/env bash
# Python package install time, pip vs uv, each into a new virtualenv with no download cache (what a
# brand-new CI machine pays), then whether both installed the same packages. Network-bound: run
# it twice and read the medians. Usage: bash bench/install_time.sh [RUNS]   (~2 min a run)
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-1}"
PY="${PYTHON:-$(command -v python3.11 || command -v python3)}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
links=()
for link in ${PIP_FIND_LINKS:-} $(pip config get global.find-links 2>/dev/null || true); do
  if [ -e "$link" ]; then links+=(--find-links "$link"); fi
done

pip_install() {
  "$1/bin/pip" install -q --no-cache-dir --upgrade pip
  "$1/bin/pip" install -q --no-cache-dir torch==2.13.0
  "$1/bin/pip" install -q --no-cache-dir -c constraints.txt -e ".[dev]"
}
uv_install() {
  "$1/bin/pip" install -q --no-cache-dir uv==0.13.9
  "$1/bin/uv" pip install -q --no-cache --python "$1/bin/python" "${links[@]}" torch==2.13.0
  "$1/bin/uv" pip install -q --no-cache --python "$1/bin/python" "${links[@]}" -c constraints.txt -e ".[dev]"
}

echo "| run | installer | seconds | packages |"
echo "|---|---|---:|---:|"
for run in $(seq 1 "$runs"); do
  for tool in pip uv; do
    venv="$work/$tool-$run"
    "$PY" -m venv "$venv"
    SECONDS=0
    "${tool}_install" "$venv" 2>/dev/null
    took=$SECONDS
    "$venv/bin/pip" freeze | grep -v -e '^uv==' -e '^#' -e '^-e ' | sort > "$work/$tool.freeze"
    printf '| %s | %s | %s | %s |\n' "$run" "$tool" "$took" "$(wc -l < "$work/$tool.freeze")"
  done
  if diff -q "$work/pip.freeze" "$work/uv.freeze" >/dev/null; then
    echo "run $run: pip and uv installed the same versions"
  else
    echo "run $run: the installed versions differ:"; diff "$work/pip.freeze" "$work/uv.freeze" || true
  fi
  rm -rf "$work"/pip-"$run" "$work"/uv-"$run"
done
