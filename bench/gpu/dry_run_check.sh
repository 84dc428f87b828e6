#!/usr/bin/env bash
# bench/gpu/dry_run_check.sh BUILD WORKDIR: ctest's bench.gpu-dry-run. Builds
# a bundle of the MLP alone with the build's binaries (no rebuild), runs it
# with run.sh on this machine and checks the outcome: without a GPU every
# part is skipped and nothing fails; with one, nothing fails.
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
