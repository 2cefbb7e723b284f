#!/usr/bin/env bash
# Start what E31 Network needs when it is not running (dockerd, Redis, PostgreSQL), and stop
# only what this script started. Daemons write to var/log/, never to the terminal.
#   scripts/services.sh start   # records what it started in var/run/started
#   scripts/services.sh stop    # stops those, and nothing else
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p var/log var/run
STARTED=${E31_SERVICES_RECORD:-var/run/started}

log() { echo "services: $*"; }

docker_up() { timeout 5 docker info >/dev/null 2>&1; }
redis_up() { timeout 3 redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; }
pg_up() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }

wait_for() {  # wait_for NAME CHECK SECONDS
  local name=$1 check=$2 seconds=$3
  for _ in $(seq 1 $((seconds * 4))); do $check && return 0; sleep 0.25; done
  log "$name did not come up; see var/log/"; return 1
}

# gVisor (Debian's runsc) as a second runtime of dockerd, for jobs with isolation=strong
# (docs/isolation.md): its ptrace platform works in a VM without nested virtualisation, and
# --network=none keeps its own network stack off (the job has only a loopback, as under runc).
RUNSC_CONFIG='{"path": "/usr/bin/runsc", "runtimeArgs": ["--platform=ptrace", "--network=none"]}'
DAEMON_JSON=${E31_DOCKERD_CONFIG:-/etc/docker/daemon.json}

runsc_registered() { timeout 5 docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'; }

register_runsc() {  # merged into dockerd's configuration file, whatever else it holds
  if ! command -v runsc >/dev/null; then log "runsc is not installed: jobs with isolation=strong cannot run"; return 0; fi
  if [ "$(id -u)" != 0 ]; then log "not root: $DAEMON_JSON not changed (runsc may not be registered)"; return 0; fi
  RUNSC_CONFIG=$RUNSC_CONFIG DAEMON_JSON=$DAEMON_JSON python3 - <<'PY'
import json, os, pathlib
path = pathlib.Path(os.environ["DAEMON_JSON"])
text = path.read_text() if path.exists() else ""
config = json.loads(text) if text.strip() else {}
wanted = json.loads(os.environ["RUNSC_CONFIG"])
if config.get("runtimes", {}).get("runsc") != wanted:
    config.setdefault("runtimes", {})["runsc"] = wanted
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2) + "\n")
PY
}

start_docker() {
  register_runsc
  if docker_up; then
    if command -v runsc >/dev/null && ! runsc_registered && [ -f /var/run/docker.pid ]; then
      # A running engine reads its runtimes again on SIGHUP, without stopping any container.
      kill -HUP "$(cat /var/run/docker.pid)" 2>/dev/null || true
      wait_for "dockerd's runsc runtime" runsc_registered 10 && log "runsc registered with the running dockerd"
    fi
    return 0
  fi
  # A stale pid file left by a killed engine stops dockerd from starting.
  if [ -f /var/run/docker.pid ] && ! kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then rm -f /var/run/docker.pid; fi
  # No bridge, no iptables: job containers can never be given a network.
  local config=()
  if [ -f "$DAEMON_JSON" ]; then config=(--config-file "$DAEMON_JSON"); fi
  setsid dockerd --bridge=none --iptables=false --ip-masq=false "${config[@]}" </dev/null >var/log/dockerd.log 2>&1 &
  echo "docker $!" >>"$STARTED"
  wait_for dockerd docker_up 60 && log "dockerd started (var/log/dockerd.log)"
}

start_redis() {
  redis_up && return 0
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
    --dir "$PWD/var/run" --logfile "$PWD/var/log/redis.log" --pidfile "$PWD/var/run/redis.pid"
  wait_for redis redis_up 20
  echo "redis $(cat var/run/redis.pid)" >>"$STARTED"
  log "redis started (var/log/redis.log)"
}

start_postgres() {
  pg_up && return 0
  local version
  version=$(ls /etc/postgresql 2>/dev/null | sort -n | tail -1)
  if [ -z "$version" ]; then log "PostgreSQL is not installed"; return 1; fi
  pg_ctlcluster --skip-systemctl-redirect "$version" main start >var/log/postgres-start.log 2>&1
  echo "postgres $version" >>"$STARTED"
  wait_for postgres pg_up 30 && log "PostgreSQL $version started"
}

stop_started() {
  [ -f "$STARTED" ] || return 0
  tac "$STARTED" | while read -r what id; do
    case "$what" in
      docker) kill "$id" 2>/dev/null || true; for _ in $(seq 1 40); do kill -0 "$id" 2>/dev/null || break; sleep 0.25; done ;;
      redis) kill "$id" 2>/dev/null || true ;;
      postgres) pg_ctlcluster --skip-systemctl-redirect "$id" main stop >/dev/null 2>&1 || true ;;
    esac
    log "stopped $what"
  done
  rm -f "$STARTED"
}

case "${1:-}" in
  start) shift; for s in "${@:-docker redis postgres}"; do for one in $s; do "start_$one"; done; done ;;
  stop) stop_started ;;
  *) echo "usage: $0 start [docker|redis|postgres]... | stop" >&2; exit 2 ;;
esac
