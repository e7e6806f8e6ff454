# shellcheck shell=bash
# Shared by start-cluster.sh, stop-cluster.sh and sluice-daemon.sh (sourced,
# not run): where the binary, the configuration, the pid files and the .out
# files are, how conf/masters and conf/workers are read, and how a command
# reaches another host. The counterpart of Flink's bin/config.sh.
#
# Environment (each optional):
#   SLUICE_BIN       the sluice executable   (default <repo>/build/release/sluice)
#   SLUICE_CONF_DIR  directory of config.yaml, masters, workers (default <repo>/conf)
#   SLUICE_PID_DIR   directory of the pid files              (default /tmp)
#   SLUICE_LOG_DIR   directory of the processes' .out files  (default <repo>/log);
#                    when set, also passed to the processes as -D env.log.dir
#   SLUICE_SSH_OPTS  extra options for ssh to other hosts    (default none)
#   SLUICE_STOP_TIMEOUT  seconds stop-cluster.sh waits after SIGTERM (default 30)

# The repository (install) root: the parent of this scripts/ directory. Other
# hosts are expected to have Sluice at the same path.
SLUICE_HOME="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"

sluice_die() {
  echo "$(basename "$0"): error: $*" >&2
  exit 1
}

sluice_warn() {
  echo "$(basename "$0"): warning: $*" >&2
}

# Resolves the settings above, makes relative paths absolute (the processes
# run with the repository as working directory) and exports them, so that
# the sluice binary finds its configuration through SLUICE_CONF_DIR too.
sluice_resolve_env() {
  SLUICE_BIN="${SLUICE_BIN:-$SLUICE_HOME/build/release/sluice}"
  SLUICE_CONF_DIR="${SLUICE_CONF_DIR:-$SLUICE_HOME/conf}"
  SLUICE_PID_DIR="${SLUICE_PID_DIR:-/tmp}"
  SLUICE_STOP_TIMEOUT="${SLUICE_STOP_TIMEOUT:-30}"
  SLUICE_LOG_DIR_SET=0
  if [ -n "${SLUICE_LOG_DIR:-}" ]; then SLUICE_LOG_DIR_SET=1; fi
  SLUICE_LOG_DIR="${SLUICE_LOG_DIR:-$SLUICE_HOME/log}"
  case "$SLUICE_BIN" in /*) ;; */*) SLUICE_BIN="$PWD/$SLUICE_BIN" ;; esac
  case "$SLUICE_CONF_DIR" in /*) ;; *) SLUICE_CONF_DIR="$PWD/$SLUICE_CONF_DIR" ;; esac
  case "$SLUICE_PID_DIR" in /*) ;; *) SLUICE_PID_DIR="$PWD/$SLUICE_PID_DIR" ;; esac
  case "$SLUICE_LOG_DIR" in /*) ;; *) SLUICE_LOG_DIR="$PWD/$SLUICE_LOG_DIR" ;; esac
  case "$SLUICE_STOP_TIMEOUT" in
    '' | *[!0-9]*) sluice_die "SLUICE_STOP_TIMEOUT must be a number of seconds, got '$SLUICE_STOP_TIMEOUT'" ;;
  esac
  # Used by the scripts that source this file, in pid file names.
  # shellcheck disable=SC2034
  SLUICE_USER="${USER:-$(id -un)}"
  export SLUICE_BIN SLUICE_CONF_DIR SLUICE_PID_DIR SLUICE_STOP_TIMEOUT
}

# Fails unless the binary can be run and the configuration can be read.
sluice_check_install() {
  if [ ! -e "$SLUICE_BIN" ]; then
    sluice_die "no sluice binary at '$SLUICE_BIN': build it with 'make release' or set SLUICE_BIN"
  fi
  if [ ! -f "$SLUICE_BIN" ] || [ ! -x "$SLUICE_BIN" ]; then
    sluice_die "'$SLUICE_BIN' is not an executable file (SLUICE_BIN)"
  fi
  if [ ! -d "$SLUICE_CONF_DIR" ]; then
    sluice_die "configuration directory '$SLUICE_CONF_DIR' does not exist (SLUICE_CONF_DIR)"
  fi
  if [ -e "$SLUICE_CONF_DIR/config.yaml" ] && [ ! -r "$SLUICE_CONF_DIR/config.yaml" ]; then
    sluice_die "cannot read '$SLUICE_CONF_DIR/config.yaml'"
  fi
}

# Reads a host list (conf/masters, conf/workers) into the array SLUICE_HOSTS:
# one host per line; '#' starts a comment; blank lines are skipped; a
# ':port' suffix (Flink's masters file names the web UI port) is dropped.
# A missing file gives the default host, when one is given; an unreadable
# one is an error.
sluice_read_hosts() {
  local file="$1" default="${2:-}" line host
  SLUICE_HOSTS=()
  if [ ! -e "$file" ]; then
    if [ -n "$default" ]; then
      SLUICE_HOSTS=("$default")
      return 0
    fi
    sluice_die "'$file' does not exist: list one host per line"
  fi
  if [ ! -f "$file" ] || [ ! -r "$file" ]; then
    sluice_die "cannot read '$file'"
  fi
  while IFS= read -r line || [ -n "$line" ]; do
    line="${line%%#*}"
    # Trim surrounding white space.
    line="${line#"${line%%[![:space:]]*}"}"
    line="${line%"${line##*[![:space:]]}"}"
    [ -n "$line" ] || continue
    case "$line" in
      *[[:space:]]*) sluice_die "'$file': one host per line, got '$line'" ;;
    esac
    host="$line"
    case "$host" in
      \[*\]:*) host="${host%:*}" ;;    # [::1]:8081
      *:*:*) ;;                        # a bare IPv6 address
      *:*) host="${host%%:*}" ;;       # host:8081
    esac
    SLUICE_HOSTS+=("$host")
  done <"$file"
}

# True when the host is this machine, so the process is started without ssh.
sluice_is_local() {
  case "$1" in
    localhost | 127.0.0.1 | ::1 | '[::1]') return 0 ;;
  esac
  local me
  me="$(hostname 2>/dev/null || true)"
  [ -n "$me" ] && { [ "$1" = "$me" ] || [ "$1" = "${me%%.*}" ]; }
}

# Only -D key=value (or -Dkey=value) may follow the scripts' own arguments:
# they go to every process started.
sluice_check_extra_args() {
  while [ $# -gt 0 ]; do
    case "$1" in
      -D)
        [ $# -ge 2 ] || sluice_die "-D expects key=value"
        case "$2" in *=*) ;; *) sluice_die "-D expects key=value, got '$2'" ;; esac
        shift 2
        ;;
      -D*=*) shift ;;
      *) sluice_die "unexpected argument '$1': only -D key=value is passed to the processes" ;;
    esac
  done
}

# Runs scripts/sluice-daemon.sh with the given arguments on a host: directly
# for this machine, else through ssh with the same install path and the same
# SLUICE_* settings.
sluice_on_host() {
  local host="$1"
  shift
  if sluice_is_local "$host"; then
    bash "$SLUICE_HOME/scripts/sluice-daemon.sh" "$@"
    return
  fi
  local -a envs=(
    "SLUICE_BIN=$SLUICE_BIN" "SLUICE_CONF_DIR=$SLUICE_CONF_DIR"
    "SLUICE_PID_DIR=$SLUICE_PID_DIR" "SLUICE_STOP_TIMEOUT=$SLUICE_STOP_TIMEOUT"
  )
  if [ "$SLUICE_LOG_DIR_SET" = 1 ]; then envs+=("SLUICE_LOG_DIR=$SLUICE_LOG_DIR"); fi
  local remote
  remote="$(printf '%q ' env "${envs[@]}" bash "$SLUICE_HOME/scripts/sluice-daemon.sh" "$@")"
  local -a ssh_opts=()
  # SLUICE_SSH_OPTS is split on white space on purpose, like Flink's env.ssh.opts.
  # shellcheck disable=SC2206
  if [ -n "${SLUICE_SSH_OPTS:-}" ]; then ssh_opts=($SLUICE_SSH_OPTS); fi
  ssh -n "${ssh_opts[@]}" "$host" -- "$remote"
}
