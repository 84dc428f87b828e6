#!/usr/bin/env bash
# bench/gpu/dry_run_check.sh BUILD WORKDIR: ctest's bench.gpu-dry-run. Builds
# a bundle of the MLP alone with the build's binaries (no rebuild), runs it
# with run.sh on this machine and checks the outcome: without a GPU every
# part is skipped and nothing fails; with one, nothing fails. Then, without a
# GPU, runs it again with TOFU_GPU_SIMULATE_CPU=1 (the CPU backend in the
# CUDA backend's place) and checks the reports the GPU run will write: losses,
# step-1 dumps, --save/--resume and the GEMM part's per-instruction times (gemm_bench itself
# needs a GPU: its part fails there, and only it may).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$1
WORK=$2
rm -rf "$WORK"
mkdir -p "$WORK"
TOFU_BUILD_DIR=$BUILD TOFU_GPU_PREPARE_NO_BUILD=1 \
  "$HERE/prepare.sh" "$WORK/bundle" --models mlp
test -f "$WORK/bundle/bin/tofu-run" -a -f "$WORK/bundle/bin/libtofu_cuda_run.so"
test -f "$WORK/bundle/executor-plans/mlp-8.bin" -a -f "$WORK/bundle/plans/mlp-k8.ref.json"
rm -rf "$WORK/bundle"  # run.sh must work from the archive alone
TOFU_GPU_BUDGET_S=120 "$HERE/run.sh" "$WORK/bundle.tar.xz" "$WORK/out"
for f in results.md results.json logs.tar.gz; do test -s "$WORK/out/$f"; done
python3 - "$WORK/out/results.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert not r["failed"], f"failed parts: {r['failed']}"
assert {p["name"] for p in r["plans"]} == {"mlp-k1", "mlp-k8"}, r["plans"]
if not r["have_gpu"]:
    statuses = {p["status"] for p in r["parts"].values()}
    assert statuses == {"skipped"}, statuses
    print("bench.gpu-dry-run: no GPU; every part was skipped, as it should be")
else:
    assert all(p["losses_match"] for p in r["plans"]), r["plans"]
    print("bench.gpu-dry-run: GPU present; every part passed")
PY
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  TOFU_GPU_SIMULATE_CPU=1 TOFU_GPU_BUDGET_S=120 "$HERE/run.sh" "$WORK/bundle.tar.xz" "$WORK/sim"
  python3 - "$WORK/sim/results.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["simulated_on_cpu"], r
assert set(r["failed"]) <= {"gemm.mlp-k1"}, f"failed parts: {r['failed']}"
for p in r["plans"]:
    assert p["losses_match"], p
    assert p["dump"]["pass"] and p["dump"]["compared"] == 8, p["dump"]
save = next(p for p in r["plans"] if p["name"] == "mlp-k8")["save_resume"]
assert r["parts"]["save.mlp-k8"]["status"] == "pass" and save["pass"], save
assert save["resume"]["exact_compared"] > 0 and save["save"]["compared"] > 0, save
gemm = r["gemm"]["mlp-k1"]
assert gemm["gemm_instructions"] == 8 and gemm["gemm_share_of_traced_step"] > 0, gemm
mlp = next(p for p in r["plans"] if p["name"] == "mlp-k1")
assert all(g["in_step_us"] > 0 and g["shape"] for g in mlp["gemm"]["gemms"]), mlp["gemm"]
print("bench.gpu-dry-run: simulated on the CPU backend; losses, dumps and GEMM rows as expected")
PY
fi
