#!/usr/bin/env bash
# The whole consistency matrix of issue 6: MLP, RNN-2-1K, WResNet-50-1
# (32x32 images) and the GPT-style example, k in {1,2,3,4,6,8}, plans from
# --partitioner=tofu and =data-parallel, each trained 5 steps in one process
# and under `mpirun -np k`; losses and trained weights against k = 1
# (relative difference <= 1e-5), measured against planned bytes.
# Sizes: test/e2e/k_matrix.py (--size full). ctest runs a subset.
# Usage: bench/k_matrix.sh [build-dir] [results-file]   (results: bench/k_matrix.md)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
results=${2:-/tmp/k_matrix.txt}
: > "$results"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
OMP_NUM_THREADS=2 /usr/bin/python3 test/e2e/k_matrix.py --bin "$build/bin" \
  --model examples/mlp/mlp.onnx --workdir "$work" --size full --results "$results"
