#!/usr/bin/env bash
# Starts or stops Sluice cluster processes on this host; start-cluster.sh and
# stop-cluster.sh run it here or, through ssh, on the hosts in conf/masters
# and conf/workers. The counterpart of Flink's bin/flink-daemon.sh (and, with
# "start taskmanager", of bin/taskmanager.sh: it adds one TaskManager).
#
#   sluice-daemon.sh start    jobmanager|taskmanager [-D key=value]...
#   sluice-daemon.sh stop     jobmanager|taskmanager   # the newest one
#   sluice-daemon.sh stop-all jobmanager|taskmanager   # every one on this host
#
# start runs `$SLUICE_BIN <role> [-D ...]` with SLUICE_CONF_DIR exported in the
# background (nohup, working directory the repository, stdout and stderr to
# $SLUICE_LOG_DIR/sluice-<user>-<role>-<n>-<host>.out) and appends its pid to
# $SLUICE_PID_DIR/sluice-<user>-<role>.pid. Only one JobManager may run per
# host and user; TaskManagers may be started several times.
#
# stop sends SIGTERM only to pids from that pid file, and only when the pid
# is still a sluice process of that role (a pid the system reused is left
# alone). It waits up to $SLUICE_STOP_TIMEOUT seconds, then names the pids
# still alive, keeps them in the pid file and exits 1. It never sends SIGKILL.
set -euo pipefail

# shellcheck source=scripts/sluice-config.sh
. "$(dirname "${BASH_SOURCE[0]}")/sluice-config.sh"

usage() {
  echo "usage: $(basename "$0") start|stop|stop-all jobmanager|taskmanager [-D key=value]..." >&2
  exit 2
}

[ $# -ge 2 ] || usage
action="$1"
role="$2"
shift 2
case "$action" in start | stop | stop-all) ;; *) usage ;; esac
case "$role" in jobmanager | taskmanager) ;; *) usage ;; esac
if [ "$action" != start ] && [ $# -gt 0 ]; then usage; fi
sluice_check_extra_args "$@"
sluice_resolve_env

host="$(hostname 2>/dev/null || echo localhost)"
pid_file="$SLUICE_PID_DIR/sluice-$SLUICE_USER-$role.pid"

# True when the pid is alive (not a zombie) and runs `<something> <role> ...`.
is_our_process() {
  local pid="$1" state arg
  kill -0 "$pid" 2>/dev/null || return 1
  if [ -r "/proc/$pid/stat" ]; then
    state="$(sed -e 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)" || return 1
    [ "$state" != Z ] || return 1
  fi
  if [ -r "/proc/$pid/cmdline" ]; then
    while IFS= read -r -d '' arg; do
      [ "$arg" = "$role" ] && return 0
    done <"/proc/$pid/cmdline"
    return 1
  fi
  # No /proc (not Linux): ask ps.
  local args
  args="$(ps -p "$pid" -o args= 2>/dev/null)" || return 1
  case " $args " in *" $role "*) return 0 ;; esac
  return 1
}

# Reads the pid file into the array pids (numbers only; other lines dropped).
read_pids() {
  pids=()
  [ -f "$pid_file" ] || return 0
  [ -r "$pid_file" ] || sluice_die "cannot read pid file '$pid_file'"
  local line
  while IFS= read -r line || [ -n "$line" ]; do
    case "$line" in '' | *[!0-9]*) continue ;; esac
    pids+=("$line")
  done <"$pid_file"
}

# Writes the given pids back, or removes the pid file when there are none.
write_pids() {
  if [ $# -eq 0 ]; then
    rm -f -- "$pid_file"
  else
    printf '%s\n' "$@" >"$pid_file"
  fi
}

start() {
  sluice_check_install
  mkdir -p -- "$SLUICE_PID_DIR" || sluice_die "cannot create pid directory '$SLUICE_PID_DIR'"
  mkdir -p -- "$SLUICE_LOG_DIR" || sluice_die "cannot create log directory '$SLUICE_LOG_DIR'"
  read_pids
  local -a live=()
  local pid
  for pid in "${pids[@]}"; do
    if is_our_process "$pid"; then live+=("$pid"); fi
  done
  if [ "$role" = jobmanager ] && [ ${#live[@]} -gt 0 ]; then
    sluice_die "a jobmanager is already running on $host (pid ${live[0]}, from $pid_file)"
  fi
  local out="$SLUICE_LOG_DIR/sluice-$SLUICE_USER-$role-${#live[@]}-$host.out"
  # The configuration reaches the process through the exported
  # SLUICE_CONF_DIR alone, which every verb reads.
  local -a args=("$role")
  if [ "$SLUICE_LOG_DIR_SET" = 1 ]; then args+=(-D "env.log.dir=$SLUICE_LOG_DIR"); fi
  args+=("$@")

  cd -- "$SLUICE_HOME"
  nohup "$SLUICE_BIN" "${args[@]}" >"$out" 2>&1 </dev/null &
  pid=$!
  live+=("$pid")
  write_pids "${live[@]}"

  # A process that cannot start (bad config, port in use) exits at once:
  # say so here instead of leaving a pid file for a dead process.
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid" 2>/dev/null || true
      unset 'live[${#live[@]}-1]'
      write_pids "${live[@]}"
      echo "$(basename "$0"): error: the $role on $host exited at once; the end of $out:" >&2
      tail -n 20 -- "$out" >&2 || true
      exit 1
    fi
    sleep 0.1 || true
  done
  echo "Started $role on $host (pid $pid, output $out)."
}

stop() {
  read_pids
  if [ ${#pids[@]} -eq 0 ]; then
    echo "No $role to stop on $host (no pids in $pid_file)."
    return 0
  fi
  local -a keep=() signalled=()
  local pid
  # "stop" takes the newest pid (the last line), "stop-all" every one.
  local first=0
  if [ "$action" = stop ]; then first=$((${#pids[@]} - 1)); fi
  local i
  for ((i = 0; i < ${#pids[@]}; i++)); do
    pid="${pids[$i]}"
    if ! is_our_process "$pid"; then
      if kill -0 "$pid" 2>/dev/null; then
        sluice_warn "pid $pid in $pid_file is not a sluice $role any more; not signalled"
      fi
      continue
    fi
    if [ "$i" -lt "$first" ]; then
      keep+=("$pid")
      continue
    fi
    if kill -TERM "$pid" 2>/dev/null; then
      echo "Stopping $role on $host (pid $pid)."
      signalled+=("$pid")
    fi
  done

  local deadline=$((SLUICE_STOP_TIMEOUT * 10)) tick=0 alive
  local -a still=()
  while :; do
    still=()
    for pid in "${signalled[@]}"; do
      if is_our_process "$pid"; then still+=("$pid"); fi
    done
    if [ ${#still[@]} -eq 0 ] || [ "$tick" -ge "$deadline" ]; then break; fi
    sleep 0.1 || true
    tick=$((tick + 1))
  done
  write_pids "${keep[@]}" "${still[@]}"
  if [ ${#still[@]} -gt 0 ]; then
    for alive in "${still[@]}"; do
      echo "$(basename "$0"): $role on $host (pid $alive) is still running" \
        "${SLUICE_STOP_TIMEOUT} s after SIGTERM; not killed (kill -9 $alive to force)" >&2
    done
    exit 1
  fi
}

case "$action" in
  start) start "$@" ;;
  stop | stop-all) stop ;;
esac
