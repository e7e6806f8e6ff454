#!/usr/bin/env bash
# Checks that every public header under include/sluice/ is self-contained: a
# translation unit holding nothing but `#include <sluice/...>` must compile with
# warnings as errors. Run from anywhere; exits non-zero if any header fails.
#
# Environment:
#   CXX        compiler to use (default: g++)
#   JOBS       headers compiled in parallel (default: 2)
#   CXXFLAGS_EXTRA  extra flags appended to every compile (default: none)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

export CXX="${CXX:-g++}"
export CXXFLAGS_EXTRA="${CXXFLAGS_EXTRA:-}"
jobs="${JOBS:-2}"

if [ ! -d include/sluice ]; then
  echo "check_headers: no include/sluice/ under $root" >&2
  exit 1
fi

logdir="$(mktemp -d)"
trap 'rm -rf "$logdir"' EXIT
export logdir

# Compiles one header (path relative to include/); on failure leaves its
# compiler output in $logdir.
check_one() {
  local header="$1"
  local log
  log="$logdir/$(printf '%s' "$header" | tr '/' '%').log"
  # shellcheck disable=SC2086 # CXXFLAGS_EXTRA is a list of flags
  if ! printf '#include <%s>\n' "$header" |
      "$CXX" -std=c++20 -fsyntax-only -Wall -Wextra -Werror -I include $CXXFLAGS_EXTRA \
        -x c++ - >"$log" 2>&1; then
    return 1
  fi
  rm -f "$log"
}
export -f check_one

mapfile -d '' headers < <(cd include && find sluice -type f \( -name '*.h' -o -name '*.hpp' \) -print0 | sort -z)
if [ ${#headers[@]} -eq 0 ]; then
  echo "check_headers: no headers found under include/sluice/"
  exit 0
fi

# xargs exits 123 when some invocation failed; failures are reported below.
printf '%s\0' "${headers[@]}" | xargs -0 -n 1 -P "$jobs" bash -c 'check_one "$1"' _ || true

failed=0
for h in "${headers[@]}"; do
  log="$logdir/$(printf '%s' "$h" | tr '/' '%').log"
  if [ -f "$log" ]; then
    failed=$((failed + 1))
    echo "FAIL: include/$h: a TU with only #include <$h> does not compile cleanly:"
    sed 's/^/    /' "$log"
    echo
  fi
done

if [ "$failed" -ne 0 ]; then
  echo "check_headers: $failed of ${#headers[@]} headers failed"
  exit 1
fi
echo "check_headers: all ${#headers[@]} headers are self-contained ($CXX)"
