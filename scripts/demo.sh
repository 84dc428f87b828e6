#!/usr/bin/env bash
# The README's main command: installs what is missing, builds, compiles the
# bundled example MLP for 4 devices, prints the plan summary, and trains it
# with tofu-run: on the GPUs with the CUDA backend when nvidia-smi lists one
# and the build has the CUDA executor (TOFU_DEMO_BACKEND=cpu forces the CPU),
# otherwise the CPU backend with 4 virtual devices.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
mkdir -p out
model=examples/mlp/mlp.onnx
echo "== tofuc $model --gpus 4 -o out/mlp.plan.bin --dump-plan"
build/bin/tofuc "$model" --gpus 4 -o out/mlp.plan.bin --dump-plan
echo
steps=${TOFU_DEMO_STEPS:-50}
if [ "${TOFU_DEMO_BACKEND:-auto}" != cpu ] && command -v nvidia-smi >/dev/null &&
   nvidia-smi -L 2>/dev/null | grep -q '^GPU' && [ -f build/bin/libtofu_cuda_run.so ]; then
  # The plan's kernels for this GPU's architecture; 4 plan devices on up to 4 GPUs.
  arch=sm_$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
  gpus=$(nvidia-smi -L | grep -c '^GPU')
  [ "$gpus" -gt 4 ] && gpus=4
  echo
  echo "== tofuc $model --gpus 4 --cuda-arch $arch -o out/mlp.cuda.plan.bin"
  build/bin/tofuc "$model" --gpus 4 --cuda-arch "$arch" -o out/mlp.cuda.plan.bin
  echo
  echo "== tofu-run out/mlp.cuda.plan.bin --backend cuda --devices $gpus --steps $steps"
  build/bin/tofu-run out/mlp.cuda.plan.bin --backend cuda --devices "$gpus" \
    --steps "$steps" --report out/mlp.report.json --save out/mlp.trained.onnx
else
  echo "== tofu-run out/mlp.plan.bin --steps $steps   (CPU backend, 4 virtual devices)"
  build/bin/tofu-run out/mlp.plan.bin --steps "$steps" \
    --report out/mlp.report.json --save out/mlp.trained.onnx
fi
echo
echo "report: out/mlp.report.json, trained weights: out/mlp.trained.onnx"
