#!/usr/bin/env bash
# Compiles every tests/compile_fail/*.cc and checks that the API turns a user
# callable of the wrong signature into exactly one readable error:
#   - a file whose first line is "// expect: REGEX" must fail to compile, with
#     exactly one "error:" line, and that line's message must match REGEX;
#   - a file whose first line is "// expect-ok" must compile.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
cxx="${CXX:-g++}"
failed=0
for f in tests/compile_fail/*.cc; do
  first=$(head -n 1 "$f")
  out=$("$cxx" -std=c++20 -fsyntax-only -I include "$f" 2>&1) && rc=0 || rc=$?
  if [[ "$first" == "// expect-ok" ]]; then
    if [ $rc -ne 0 ]; then
      echo "FAIL: $f should compile:"; echo "$out" | head -20; failed=1
    else
      echo "ok: $f"
    fi
    continue
  fi
  regex="${first#// expect: }"
  errors=$(echo "$out" | grep -c "error:" || true)
  if [ $rc -eq 0 ]; then
    echo "FAIL: $f compiled but should not"; failed=1
  elif [ "$errors" -ne 1 ]; then
    echo "FAIL: $f gave $errors errors, expected exactly one:"; echo "$out" | grep "error:" | head -10; failed=1
  elif ! echo "$out" | grep "error:" | grep -Eq "$regex"; then
    echo "FAIL: $f: the error does not match '$regex':"; echo "$out" | grep "error:"; failed=1
  else
    echo "ok: $f"
  fi
done
exit $failed
