#!/usr/bin/env bash
# A one-machine cluster for index_job: PostgreSQL (Dagster's run, event-log and schedule storage),
# Redis (the Celery broker), N Celery workers and the Dagster daemon (run queue, schedules,
# sensors), all on 127.0.0.1, ports chosen free, data under one folder. The production shape on
# one box; on several hosts the same pieces point at shared servers (README, "Running on a cluster").
#
#   bash scripts/cluster.sh up [--workers 2] [--dir data/cluster]   # start; writes <dir>/cluster.env
#   source data/cluster/cluster.env                                  # RAG_EXECUTOR=celery, DAGSTER_HOME, broker
#   bash scripts/cluster.sh index --raw data/sample --lake data/lake # = rag index with cluster.env: steps on the workers
#   bash scripts/cluster.sh restart-postgres                         # fault drill: stop and start the database
#   bash scripts/cluster.sh restart-redis                            # fault drill: stop and start the broker
#   bash scripts/cluster.sh down [--dir data/cluster]                # stop everything it started
#
# Each worker runs one step at a time in a pool process its main process supervises (`--pool
# prefork --concurrency 1`): a step process killed mid-step (OOM) is reported as lost and its
# task delivered again at once, to whichever worker is free (rag_pipeline/cluster/celery_app.py).
# Debian packages (postgresql, redis-server) are installed if missing. As root, PostgreSQL runs
# as the `postgres` user (it refuses root); its data folder is made theirs.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
cmd="${1:-}"; shift || true
dir="${RAG_CLUSTER_DIR:-data/cluster}"; workers=2; rest=()
while (($#)); do
  case "$1" in
    --dir) dir="$2"; shift 2 ;;
    --workers) workers="$2"; shift 2 ;;
    *) rest+=("$1"); shift ;;
  esac
done
mkdir -p "$dir"; dir="$(cd "$dir" && pwd)"
PY="$ROOT/.venv/bin/python"

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
# PostgreSQL's data folder: <dir>/pg, or, as root when the postgres user cannot reach <dir>
# (e.g. under a 0700 temp folder), one of its own in /tmp named after <dir>.
pg_data() {
  if [ "$(id -u)" -ne 0 ] || runuser -u postgres -- test -x "$dir"; then echo "$dir/pg"
  else echo "/tmp/rag-cluster-pg-$(printf %s "$dir" | sha256sum | cut -c1-12)"; fi
}

install_servers() {
  local need=()
  command -v redis-server >/dev/null || need+=(redis-server)
  [ -n "$(pg_bin)" ] || need+=(postgresql)
  if ((${#need[@]})); then
    echo "==> installing Debian packages: ${need[*]}"
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
  fi
}

start_postgres() {  # port
  as_pg "$(pg_bin)/pg_ctl" -D "$(pg_data)" -l "$(pg_data)/postgres.log" -w \
    -o "-p $1 -k $(pg_data) -c listen_addresses=127.0.0.1" start >/dev/null
}

# The broker's queues and results survive a restart (append-only file, fsync every second): a
# task queued or a result not yet read is not lost with the process.
start_redis() {  # port
  redis-server --port "$1" --bind 127.0.0.1 --dir "$dir/run" --daemonize yes \
    --pidfile "$dir/run/redis.pid" --logfile "$dir/logs/redis.log" --save "" --appendonly yes --appendfsync everysec
  for _ in $(seq 1 50); do redis-cli -p "$1" ping >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "redis did not start on port $1 (see $dir/logs/redis.log)" >&2; return 1
}

up() {
  [ -f "$dir/cluster.env" ] && { echo "cluster already up in $dir (bash scripts/cluster.sh down --dir $dir)" >&2; exit 1; }
  install_servers
  local bin pg_port redis_port
  bin="$(pg_bin)"; pg_port="$(free_port)"; redis_port="$(free_port)"
  mkdir -p "$dir/run" "$dir/dagster_home" "$dir/logs"
  pgdata="$(pg_data)"; mkdir -p "$pgdata"
  [ "$(id -u)" -eq 0 ] && chown postgres "$pgdata" && chmod 700 "$pgdata"
  echo "==> postgres on 127.0.0.1:$pg_port ($pgdata)"
  [ -f "$pgdata/PG_VERSION" ] || as_pg "$bin/initdb" -D "$pgdata" -U dagster --auth=trust -E UTF8 >/dev/null
  start_postgres "$pg_port"
  as_pg "$bin/createdb" -h 127.0.0.1 -p "$pg_port" -U dagster dagster 2>/dev/null || true
  echo "==> redis on 127.0.0.1:$redis_port"
  start_redis "$redis_port"
  sed -e "s/@PG_PORT@/$pg_port/" "$ROOT/deploy/cluster/dagster.yaml" > "$dir/dagster_home/dagster.yaml"
  # one plain `export NAME="value"` a line: the shell sources it, rag_pipeline.cluster.env reads it.
  # RAG_SHARDS is part of the code location: the submitter and every worker must agree on it.
  cat > "$dir/cluster.env" <<ENV
export DAGSTER_HOME="$dir/dagster_home"
export RAG_EXECUTOR="celery"
export RAG_CELERY_BROKER="redis://127.0.0.1:$redis_port/0"
export RAG_CELERY_BACKEND="redis://127.0.0.1:$redis_port/1"
export RAG_SHARDS="${RAG_SHARDS:-4}"
export RAG_LOCK_WAIT_S="${RAG_LOCK_WAIT_S:-600}"
export RAG_CLUSTER_PG_PORT="$pg_port"
export RAG_CLUSTER_REDIS_PORT="$redis_port"
ENV
  # shellcheck disable=SC1091
  source "$dir/cluster.env"
  for i in $(seq 1 "$workers"); do
    "$ROOT/.venv/bin/celery" -A rag_pipeline.cluster.celery_app worker -Q "dagster,${RAG_EMBED_QUEUE:-embeddings}" \
      --pool prefork --concurrency 1 -n "rag$i@%h" --pidfile "$dir/run/worker$i.pid" --logfile "$dir/logs/worker$i.log" \
      --loglevel INFO --detach
  done
  # the daemon takes queued runs (UI, `dagster job launch`, schedules, sensors) off the queue,
  # one index run at a time (deploy/cluster/dagster.yaml), and launches them with this environment
  (cd "$dir/dagster_home" && exec "$ROOT/.venv/bin/dagster-daemon" run -w "$ROOT/workspace.yaml") \
    > "$dir/logs/daemon.log" 2>&1 < /dev/null &
  echo $! > "$dir/run/daemon.pid"
  "$PY" -m rag_pipeline.cluster.wait --workers "$workers" --timeout 120
  echo "==> up: $workers workers. source $dir/cluster.env"
}

down() {
  local bin; bin="$(pg_bin)"
  for pidfile in "$dir"/run/worker*.pid; do
    [ -f "$pidfile" ] || continue
    kill -TERM "$(cat "$pidfile")" 2>/dev/null || true
  done
  for _ in $(seq 1 100); do ls "$dir"/run/worker*.pid >/dev/null 2>&1 || break; sleep 0.2; done
  for pidfile in "$dir"/run/worker*.pid; do [ -f "$pidfile" ] && kill -KILL "$(cat "$pidfile")" 2>/dev/null; rm -f "$pidfile"; done
  if [ -f "$dir/run/daemon.pid" ]; then
    kill -TERM "$(cat "$dir/run/daemon.pid")" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$(cat "$dir/run/daemon.pid")" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$(cat "$dir/run/daemon.pid")" 2>/dev/null || true; rm -f "$dir/run/daemon.pid"
  fi
  [ -f "$dir/run/redis.pid" ] && kill -TERM "$(cat "$dir/run/redis.pid")" 2>/dev/null || true
  pgdata="$(pg_data)"
  [ -f "$pgdata/postmaster.pid" ] && as_pg "$bin/pg_ctl" -D "$pgdata" -m fast -w stop >/dev/null || true
  [ "$pgdata" = "$dir/pg" ] || rm -rf "$pgdata"  # the /tmp one belongs to this cluster folder only
  rm -f "$dir/cluster.env"
  echo "==> down ($dir)"
}

case "$cmd" in
  up) up ;;
  down) down ;;
  restart-postgres)  # a fault drill: the instance's database goes away and comes back
    # shellcheck disable=SC1091
    source "$dir/cluster.env"
    as_pg "$(pg_bin)/pg_ctl" -D "$(pg_data)" -m fast -w stop >/dev/null
    start_postgres "$RAG_CLUSTER_PG_PORT"
    echo "==> postgres restarted" ;;
  restart-redis)  # a fault drill: the broker goes away and comes back with what it had written
    # shellcheck disable=SC1091
    source "$dir/cluster.env"
    redis-cli -p "$RAG_CLUSTER_REDIS_PORT" shutdown >/dev/null 2>&1 || true
    for _ in $(seq 1 50); do [ -f "$dir/run/redis.pid" ] || break; sleep 0.1; done
    start_redis "$RAG_CLUSTER_REDIS_PORT"
    echo "==> redis restarted" ;;
  index)
    # shellcheck disable=SC1091
    source "$dir/cluster.env"
    exec "$ROOT/.venv/bin/rag" index "${rest[@]}" ;;
  *) echo "usage: bash scripts/cluster.sh up|down|index|restart-postgres|restart-redis [--dir DIR] [--workers N] [index: rag index's options]" >&2; exit 2 ;;
esac
