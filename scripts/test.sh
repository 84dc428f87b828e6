#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs every
# test (lit suites, GoogleTest, end-to-end) through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
# The CUDA toolkit is optional (not on Debian's archive): without nvcc the
# generated CUDA kernels are checked on the host only, and the nvcc checks
# report themselves skipped (docs/Cuda.md). GPU tests (label gpu) are skipped
# without a GPU.
if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "test: no nvcc (CUDA toolkit): CUDA compile checks will be skipped"
fi
# The e2e tests write models, plans and gradient dumps into build/test/e2e
# and remove them when they pass; about 4 GB are in use at the peak (two
# large models at once under -j2), measured on 2026-11-25.
free_kb=$(df -Pk build | awk 'NR == 2 {print $4}')
if [ "${free_kb:-0}" -lt $((6 * 1024 * 1024)) ]; then
  echo "test: warning: only $((free_kb / 1024)) MiB free for build/; the e2e tests need about 4 GiB at their peak and fail with 'no space left on the device' below that"
fi
cd build
ctest --output-on-failure -j"${TOFU_JOBS:-2}" "$@"
