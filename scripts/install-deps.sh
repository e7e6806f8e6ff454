#!/usr/bin/env bash
# Installs every Debian 12 package that building, testing and benchmarking
# Sluice needs. Idempotent: packages already present are not touched, and apt
# is not called at all when nothing is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libyaml-cpp-dev libspdlog-dev libfmt-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev librocksdb-dev libxxhash-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc libasio-dev
  libcpp-httplib-dev nlohmann-json3-dev libssl-dev chromium chromium-driver
  clang-format python3
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
