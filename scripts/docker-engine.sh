#!/usr/bin/env bash
# Make a Docker engine available for `make image` and the container tests, if
# this machine allows one, and say clearly which happened.
#
#   scripts/docker-engine.sh start   # use a running engine, or install and start dockerd
#   scripts/docker-engine.sh status  # exit 0 when an engine answers
#   scripts/docker-engine.sh stop    # stop the dockerd that `start` launched (by its pidfile)
#
# The dockerd started here has its default bridge network (docker0), which the
# container tests use (QuireContainer publishes the services' ports), but no
# iptables rules (`--iptables=false --ip-forward=false`): sandboxed machines and
# CI runners often cannot change the firewall, and published ports still work
# through docker-proxy, Docker's userland proxy. Where not even a bridge can be
# created it falls back to `--bridge=none`, says so, and only host networking is
# left. Exit status of `start`: 0 when an engine is running afterwards, 1 when
# none could be started.
set -uo pipefail

PIDFILE="${QUIRE_DOCKERD_PIDFILE:-/run/quire-dockerd.pid}"
LOG="${QUIRE_DOCKERD_LOG:-/var/log/quire-dockerd.log}"
# A loaded machine can take minutes to bring dockerd up (over 180 s seen while
# three virtualenvs were being built).
WAIT_SECONDS="${QUIRE_DOCKERD_WAIT_SECONDS:-300}"

say() { echo "docker engine: $*"; }

engine_up() { docker info >/dev/null 2>&1; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo "$@"; else
    return 1; fi
}

install_engine() {
  # Debian's docker.io brings dockerd, containerd and runc (and a docker CLI).
  command -v apt-get >/dev/null || return 1
  say "dockerd not installed; installing Debian's docker.io"
  as_root apt-get update -qq || return 1
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null || return 1
}

start() {
  if engine_up; then
    say "RUNNING (already up: server $(docker version --format '{{.Server.Version}}' 2>/dev/null))"
    return 0
  fi
  if ! command -v dockerd >/dev/null && ! [ -x /usr/sbin/dockerd ]; then
    if ! install_engine; then
      say "NOT AVAILABLE (dockerd is not installed and could not be installed)"
      return 1
    fi
  fi
  if ! command -v docker >/dev/null; then
    say "NOT AVAILABLE (no docker CLI)"
    return 1
  fi
  local dockerd
  dockerd="$(command -v dockerd || echo /usr/sbin/dockerd)"
  if launch "$dockerd"; then return 0; fi
  say "dockerd did not start with a bridge network; trying again without one (--bridge=none)"
  say "WARNING: without a bridge only host networking is left: the container tests need a bridge"
  launch "$dockerd" --bridge=none
}

# dockerd_in_pidfile: whether the pidfile names a living dockerd. A pid alone is not enough: after
# a restart of the machine the pid of a killed dockerd is soon another process's (once this very
# script's), and dockerd then refuses to start ("pid file found, ensure docker is not running").
dockerd_in_pidfile() {
  local pid
  pid="$(cat "$PIDFILE" 2>/dev/null)" || return 1
  [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = dockerd ]
}

# launch DOCKERD [FLAGS...]: start dockerd and wait until it answers (0) or exits or times out (1).
launch() {
  local dockerd="$1"
  shift
  # A pidfile left by a dockerd that was killed (not stopped) would stop the new one from
  # starting, and read below as "started and gone": remove it unless a dockerd holds that pid.
  if [ -f "$PIDFILE" ] && ! dockerd_in_pidfile; then
    say "removing $PIDFILE left by a dockerd that is gone"
    as_root rm -f "$PIDFILE"
  fi
  say "starting $dockerd $* (log: $LOG)"
  as_root bash -c "nohup '$dockerd' --pidfile '$PIDFILE' --iptables=false --ip-forward=false $* \
    >>'$LOG' 2>&1 </dev/null &" || { say "NOT AVAILABLE (need root to start dockerd)"; return 1; }
  local waited=0
  while [ "$waited" -lt "$WAIT_SECONDS" ]; do
    if engine_up; then
      say "RUNNING (started here, pid $(cat "$PIDFILE" 2>/dev/null), server $(docker version --format '{{.Server.Version}}'))"
      return 0
    fi
    # dockerd writes its pidfile early; once it is there and the process is gone, it failed.
    if [ -f "$PIDFILE" ] && ! dockerd_in_pidfile; then break; fi
    sleep 1
    waited=$((waited + 1))
  done
  say "NOT AVAILABLE (dockerd did not come up within ${WAIT_SECONDS}s); last lines of $LOG:"
  tail -n 15 "$LOG" 2>/dev/null | sed 's/^/  /'
  return 1
}

stop() {
  if [ ! -f "$PIDFILE" ]; then
    say "no dockerd started by this script (no $PIDFILE)"
    return 0
  fi
  local pid
  pid="$(cat "$PIDFILE")"
  if dockerd_in_pidfile; then
    say "stopping dockerd pid $pid"
    as_root kill -TERM "$pid"
    for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  fi
  # dockerd removes its pidfile on a clean exit; clear a stale one.
  as_root rm -f "$PIDFILE"
  say "stopped"
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  status)
    if engine_up; then say "RUNNING"; else say "NOT RUNNING"; exit 1; fi ;;
  *) echo "usage: $0 start|status|stop" >&2; exit 2 ;;
esac
