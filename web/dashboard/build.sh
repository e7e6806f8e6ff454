#!/usr/bin/env bash
# Builds the web dashboard into web/dashboard/dist/ (index.html and assets/).
#
# The built dist/ is committed: cmake/EmbedWebAssets.cmake compiles every file
# in it into the sluice binary, so a C++ build needs no Node.js and never runs
# this script. Run it (Node.js >= 18 and npm) after changing anything under
# src/ or package.json, and commit dist/ together with the change:
#
#   web/dashboard/build.sh
#
# It installs the exact versions of package-lock.json (npm ci) into
# web/dashboard/node_modules/ (ignored by git) and bundles with esbuild.
set -euo pipefail
cd "$(dirname "$0")"
npm ci --no-audit --no-fund
node build.mjs
