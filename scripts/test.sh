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
cd build
ctest --output-on-failure -j"${TOFU_JOBS:-2}" "$@"
