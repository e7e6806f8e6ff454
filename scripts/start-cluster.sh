#!/usr/bin/env bash
# Starts a standalone Sluice cluster, as Flink's bin/start-cluster.sh: the
# JobManager on the host in conf/masters, then one TaskManager per line of
# conf/workers. Hosts other than this one are reached with ssh and must have
# Sluice at the same path (see docs/deployment.md).
#
#   scripts/start-cluster.sh [-D key=value]...
#
# Every -D goes to every process (after conf/config.yaml, so it wins). The
# settings (SLUICE_BIN, SLUICE_CONF_DIR, SLUICE_PID_DIR, SLUICE_LOG_DIR,
# SLUICE_SSH_OPTS) are described in scripts/sluice-config.sh; stop the
# cluster with scripts/stop-cluster.sh.
set -euo pipefail

# shellcheck source=scripts/sluice-config.sh
. "$(dirname "${BASH_SOURCE[0]}")/sluice-config.sh"

case "${1:-}" in
  -h | --help)
    sed -n '2,12s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
    exit 0
    ;;
esac
sluice_check_extra_args "$@"
sluice_resolve_env
sluice_check_install

sluice_read_hosts "$SLUICE_CONF_DIR/masters" localhost
if [ ${#SLUICE_HOSTS[@]} -ne 1 ]; then
  sluice_die "'$SLUICE_CONF_DIR/masters' lists ${#SLUICE_HOSTS[@]} hosts; Sluice has no JobManager high availability, so list exactly one"
fi
master="${SLUICE_HOSTS[0]}"
sluice_read_hosts "$SLUICE_CONF_DIR/workers" localhost
if [ ${#SLUICE_HOSTS[@]} -eq 0 ]; then
  sluice_die "'$SLUICE_CONF_DIR/workers' lists no host: a cluster without TaskManagers cannot run a job"
fi
workers=("${SLUICE_HOSTS[@]}")

echo "Starting cluster: JobManager on $master, ${#workers[@]} TaskManager(s) on ${workers[*]}."
sluice_on_host "$master" start jobmanager "$@" ||
  sluice_die "the JobManager on $master did not start; no TaskManager was started"

failed=0
for worker in "${workers[@]}"; do
  if ! sluice_on_host "$worker" start taskmanager "$@"; then
    sluice_warn "the TaskManager on $worker did not start"
    failed=$((failed + 1))
  fi
done
if [ "$failed" -gt 0 ]; then
  sluice_die "$failed of ${#workers[@]} TaskManager(s) did not start (the rest are running; scripts/stop-cluster.sh stops them)"
fi
