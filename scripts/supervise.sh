#!/usr/bin/env bash
# Keep a process running, as systemd's Restart=always does on a real deployment (docs/deploy.md):
# start it again whenever it exits, until this script is stopped (TERM or INT), which stops it too.
#   scripts/supervise.sh NAME COMMAND [ARGS...]     (from the project's folder, as `make run` does)
# The process logs to var/log/NAME.log (with a line for each restart); this script's pid is in
# var/run/NAME.pid (what `make stop` signals). A process that keeps dying waits longer each time
# (1 s, doubling up to 30 s; back to 1 s once it has run a minute).
set -u
name=$1
shift
mkdir -p var/log var/run
log=var/log/$name.log
echo $$ >"var/run/$name.pid"
child=""
sleeper=""
stopping=""

stop() {
  stopping=1
  for pid in $child $sleeper; do kill -TERM "$pid" 2>/dev/null || true; done
}
trap stop TERM INT

delay=1
while [ -z "$stopping" ]; do
  started=$SECONDS
  "$@" </dev/null >>"$log" 2>&1 &
  child=$!
  # `wait` returns early when a trapped signal arrives: wait again until the process has ended.
  while :; do
    wait "$child"
    status=$?
    kill -0 "$child" 2>/dev/null || break
  done
  child=""
  [ -n "$stopping" ] && break
  if [ $((SECONDS - started)) -ge 60 ]; then delay=1; fi
  echo "[supervise] $name exited with status $status at $(date -Is); starting it again in ${delay}s" >>"$log"
  sleep "$delay" &
  sleeper=$!
  wait "$sleeper" || true
  sleeper=""
  delay=$((delay * 2 > 30 ? 30 : delay * 2))
done
rm -f "var/run/$name.pid"
