#!/usr/bin/env bash
# Stops the standalone Sluice cluster that start-cluster.sh started, as
# Flink's bin/stop-cluster.sh: every TaskManager on the hosts in conf/workers,
# then the JobManager on the host in conf/masters.
#
#   scripts/stop-cluster.sh
#
# Each process gets SIGTERM, and only processes whose pids are in this user's
# pid files ($SLUICE_PID_DIR/sluice-<user>-<role>.pid on each host) are
# signalled. The script waits up to $SLUICE_STOP_TIMEOUT seconds (default 30)
# for them to exit, then names the pids still alive and exits 1; it never
# sends SIGKILL.
set -euo pipefail

# shellcheck source=scripts/sluice-config.sh
. "$(dirname "${BASH_SOURCE[0]}")/sluice-config.sh"

case "${1:-}" in
  -h | --help)
    sed -n '2,12s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
    exit 0
    ;;
  ?*) sluice_die "unexpected argument '$1' (stop-cluster.sh takes none)" ;;
esac
sluice_resolve_env

# Every host once: "localhost" and this host's name are the same pid files.
unique_hosts() {
  local host key seen=" "
  SLUICE_UNIQUE=()
  for host in "$@"; do
    key="$host"
    if sluice_is_local "$host"; then key=localhost; fi
    case "$seen" in *" $key "*) continue ;; esac
    seen="$seen$key "
    SLUICE_UNIQUE+=("$host")
  done
}

sluice_read_hosts "$SLUICE_CONF_DIR/workers" localhost
unique_hosts "${SLUICE_HOSTS[@]}"
workers=("${SLUICE_UNIQUE[@]}")
sluice_read_hosts "$SLUICE_CONF_DIR/masters" localhost
unique_hosts "${SLUICE_HOSTS[@]}"
masters=("${SLUICE_UNIQUE[@]}")

failed=0
for worker in "${workers[@]}"; do
  sluice_on_host "$worker" stop-all taskmanager || failed=1
done
for master in "${masters[@]}"; do
  sluice_on_host "$master" stop-all jobmanager || failed=1
done
exit "$failed"
