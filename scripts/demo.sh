#!/usr/bin/env bash
# The README's main command: installs what is missing, builds, compiles the
# bundled example MLP for 4 devices, prints the plan summary, and trains it
# with tofu-run (the CPU backend with 4 virtual devices when there is no GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
mkdir -p out
model=examples/mlp/mlp.onnx
echo "== tofuc $model --gpus 4 -o out/mlp.plan.bin --dump-plan"
build/bin/tofuc "$model" --gpus 4 -o out/mlp.plan.bin --dump-plan
echo
echo "== tofu-run out/mlp.plan.bin --steps ${TOFU_DEMO_STEPS:-50}"
build/bin/tofu-run out/mlp.plan.bin --steps "${TOFU_DEMO_STEPS:-50}" \
  --report out/mlp.report.json --save out/mlp.trained.onnx
echo
echo "report: out/mlp.report.json, trained weights: out/mlp.trained.onnx"
