#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs every
# test (lit suites, GoogleTest, end-to-end) through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
cd build
ctest --output-on-failure -j"${TOFU_JOBS:-2}" "$@"
