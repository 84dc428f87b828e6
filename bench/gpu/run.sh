#!/usr/bin/env bash
# bench/gpu/run.sh BUNDLE OUTDIR
#
# Runs the prepared GPU check (bench/gpu/README.md) from a bundle written by
# bench/gpu/prepare.sh (a folder, or its .tar.xz). Each part has its own time
# limit, so that one hang cannot eat the rest; the whole run is sized for
# at most 8 minutes on one H100 (TOFU_GPU_BUDGET_S, default 450). Writes OUTDIR/results.json,
# OUTDIR/results.md and OUTDIR/logs.tar.gz. Without a GPU every part is
# recorded as skipped and the script exits 0 (how it is tested here).
#
# TOFU_GPU_SIMULATE_CPU=1 (no GPU needed): the plan, trace, GEMM and dump
# parts run the CPU backend in the CUDA backend's place (6 steps), so that
# everything after tofu-run (reports, traces, gemms.py, compare_dumps.py,
# compare.py) is exercised here; the GPU tests and torch are skipped and
# gemm_bench fails (no GPU). TOFU_GPU_SKIP_TORCH=1 skips the PyTorch part
# (about 70 s on an H200) when device time is short.
set -uo pipefail

BUNDLE=${1:?usage: run.sh BUNDLE OUTDIR}
OUTDIR=${2:?usage: run.sh BUNDLE OUTDIR}
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
if [ -f "$BUNDLE" ]; then
  tar -C "$OUTDIR" -xJf "$BUNDLE" || { echo "run.sh: cannot unpack $BUNDLE" >&2; exit 1; }
  BUNDLE="$OUTDIR/$(tar -tJf "$BUNDLE" | head -1 | cut -d/ -f1)"
fi
BUNDLE=$(cd "$BUNDLE" && pwd)
LOGS="$OUTDIR/logs"
mkdir -p "$LOGS"
PARTS="$OUTDIR/parts.tsv"   # name  status  seconds  log
: > "$PARTS"
PY=${PYTHON:-python3}
START=$(date +%s)
# The whole run's budget: a part gets at most what is left of it, and none
# starts with under 10 s left (recorded as "no-time").
BUDGET=${TOFU_GPU_BUDGET_S:-450}

# The GPU machine's CUDA libraries: its toolkit and the cuDNN/NCCL wheels.
cuda_dirs=""
for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 libnccl.so.2; do
  f=$(find /usr/local/cuda*/ /usr/lib/x86_64-linux-gnu /opt /usr/local/lib \
        -name "$lib" 2>/dev/null | head -1)
  [ -n "$f" ] && case ":$cuda_dirs:" in *":$(dirname "$f"):"*) ;; *) cuda_dirs="$cuda_dirs:$(dirname "$f")" ;; esac
done
export LD_LIBRARY_PATH="$BUNDLE/lib$cuda_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# part NAME LIMIT_S CMD...: runs CMD with a time limit, logs, records status.
part() {
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s) rc
  local left=$(( BUDGET - (t0 - START) ))
  if [ $left -lt 10 ]; then
    printf '%s\tno-time\t0\t-\n' "$name" >> "$PARTS"
    echo "== $name: no time left of the ${BUDGET}s budget"
    return
  fi
  [ $limit -gt $left ] && limit=$left
  echo "== $name (limit ${limit}s)"
  timeout -k 5 "$limit" "$@" > "$LOGS/$name.log" 2>&1
  rc=$?
  local status=pass
  if [ $rc -eq 77 ]; then status=skipped
  elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then status=timeout
  elif [ $rc -ne 0 ]; then status="fail(rc=$rc)"; fi
  printf '%s\t%s\t%s\t%s\n' "$name" "$status" "$(( $(date +%s) - t0 ))" "$name.log" >> "$PARTS"
  echo "   $status, $(( $(date +%s) - t0 )) s"
  tail -3 "$LOGS/$name.log" | sed 's/^/   | /'
}

skip_all() {
  for name in "$@"; do printf '%s\tskipped\t0\t-\n' "$name" >> "$PARTS"; done
}

{
  echo "date: $(date -u +%FT%TZ)"
  echo "bundle commit: $(cat "$BUNDLE/COMMIT" 2>/dev/null)"
  echo "bundle arch: $(cat "$BUNDLE/ARCH" 2>/dev/null)"
  [ -s "$BUNDLE/UNCOMMITTED" ] && echo "bundle built with uncommitted changes in:" \
    $(awk '{print $2}' "$BUNDLE/UNCOMMITTED")
  echo "LD_LIBRARY_PATH: $LD_LIBRARY_PATH"
  nvidia-smi 2>&1 || echo "nvidia-smi: not available"
  nvcc --version 2>&1 | tail -1
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available() and torch.cuda.get_device_name(0))' 2>&1
  for f in "$BUNDLE"/bin/*; do
    missing=$(ldd "$f" 2>&1 | grep "not found")
    [ -n "$missing" ] && echo "$(basename "$f"): $missing"
  done
} > "$LOGS/environment.log" 2>&1
cat "$LOGS/environment.log" | head -40

HAVE_GPU=0
if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  HAVE_GPU=1
fi
SIMULATE=${TOFU_GPU_SIMULATE_CPU:-0}
BACKEND=(--backend cuda --devices 1)
RUN_STEPS=25
if [ "$SIMULATE" = 1 ]; then
  echo "run.sh: TOFU_GPU_SIMULATE_CPU=1: the CPU backend stands in for the GPU"
  HAVE_GPU=1
  BACKEND=(--backend cpu)
  RUN_STEPS=6
fi

# "name k data dump dtype" per plan ("-" where the plan runs on synthetic
# batches, or the bundle has no CPU dump of its model).
PLAN_INFO=$("$PY" -c 'import json,sys
for p in json.load(open(sys.argv[1])):
    print(p["name"], p["k"], p["data"] or "-", p.get("dump") or "-", p.get("dtype", "float32"))' \
              "$BUNDLE/plans/index.json")
PLANS=$(echo "$PLAN_INFO" | cut -d' ' -f1)
K1_PLANS=$(echo "$PLAN_INFO" | awk '$2 == 1 {print $1}')
DUMP_PLANS=$(echo "$PLAN_INFO" | awk '$4 != "-" {print $1}')
# Save/resume part: --save and --resume on the GPU against the CPU backend's.
SAVE_PLANS=$(for p in mlp-k8 gpt-k1 gpt-k8 vit-k8; do
  echo "$PLANS" | grep -qx "$p" && echo "$p"; done)
# GEMM part: the k = 1 plans whose CUDA schedule calls cuBLAS.
GEMM_PLANS=$(for p in $K1_PLANS; do
  grep -q cublas "$BUNDLE/plans/$p.schedule.txt" 2>/dev/null && echo "$p"; done)
# Epilogue part: the plans whose CUDA schedule has cuBLASLt epilogues (a
# Gemm's bias row, a fused Relu), run again with the separate calls.
LT_PLANS=$(for p in $PLANS; do
  grep -q cublasLtMatmul "$BUNDLE/plans/$p.schedule.txt" 2>/dev/null && echo "$p"; done)
# info PLAN FIELD: a field of the plan's line (3 data, 4 dump, 5 dtype).
info() { echo "$PLAN_INFO" | awk -v p="$1" -v f="$2" '$1 == p {print $f}'; }
# data_flags PLAN: sets dflags to the plan's --data flags (none for "-").
data_flags() {
  local data
  data=$(info "$1" 3)
  dflags=()
  [ "$data" != "-" ] && dflags=(--data "$BUNDLE/plans/$data")
}

if [ $HAVE_GPU -eq 0 ]; then
  echo "run.sh: no GPU visible (nvidia-smi -L lists none): every part is skipped"
  skip_all gtest.library gtest.elementwise gtest.multifetch gtest.executor
  for p in $PLANS; do skip_all "plan.$p"; done
  for p in $K1_PLANS; do skip_all "trace.$p" "ktimes.$p"; done
  for p in $GEMM_PLANS; do skip_all "gemm.$p"; done
  for p in $DUMP_PLANS; do skip_all "dump.$p"; done
  for p in $SAVE_PLANS; do skip_all "save.$p"; done
  for p in $LT_PLANS; do skip_all "nolt.$p"; done
  skip_all torch
else
  B="$BUNDLE/bin"
  if [ "$SIMULATE" = 1 ]; then
    skip_all gtest.library gtest.elementwise gtest.multifetch gtest.executor
  else
    part gtest.library 90 "$B/tofu-cuda-library-tests"
    part gtest.elementwise 90 "$B/tofu-cuda-elementwise-tests"
    part gtest.multifetch 60 "$B/tofu-cuda-multifetch-gpu-tests"
    part gtest.executor 150 "$B/tofu-cuda-executor-tests" --plans "$BUNDLE/executor-plans"
  fi
  mkdir -p "$OUTDIR/runs"
  for p in $PLANS; do
    data_flags "$p"
    # 25 steps: the first 5 are compared with the CPU backend, the median of
    # the rest is the step time (CUDA graph replay, the default).
    part "plan.$p" 45 "$B/tofu-run" "$BUNDLE/plans/$p.bin" "${BACKEND[@]}" \
      --steps $RUN_STEPS --quiet --report "$OUTDIR/runs/$p.json" "${dflags[@]}"
  done
  # The same plans without cuBLASLt epilogues (TOFU_CUDA_NO_LT=1: bias
  # kernel, GEMM, ReLU kernel): the losses must not change; the step time
  # both ways.
  for p in $LT_PLANS; do
    data_flags "$p"
    part "nolt.$p" 45 env TOFU_CUDA_NO_LT=1 "$B/tofu-run" "$BUNDLE/plans/$p.bin" \
      "${BACKEND[@]}" --steps $RUN_STEPS --quiet --report "$OUTDIR/runs/$p.nolt.json" \
      "${dflags[@]}"
  done
  # Per-instruction times (eager issue, events around each instruction):
  # the slowest kernels, and the GEMMs' time in the step (median of steps 2-5).
  for p in $K1_PLANS; do
    data_flags "$p"
    part "trace.$p" 30 "$B/tofu-run" "$BUNDLE/plans/$p.bin" "${BACKEND[@]}" \
      --steps 5 --quiet --trace "$OUTDIR/runs/$p.trace.json" "${dflags[@]}"
  done
  # Each instruction's calls alone, replayed in a CUDA graph (tofu-run
  # --kernel-times): what the step-time model's per-kernel costs are fitted
  # to (bench/gpu/fit_kernels.py). The CPU backend has no such mode.
  for p in $K1_PLANS; do
    if [ "$SIMULATE" = 1 ]; then skip_all "ktimes.$p"; continue; fi
    data_flags "$p"
    part "ktimes.$p" 40 "$B/tofu-run" "$BUNDLE/plans/$p.bin" "${BACKEND[@]}" \
      --steps 3 --quiet --kernel-times "$OUTDIR/runs/$p.kernel-times.json" "${dflags[@]}"
  done
  # The same cuBLAS calls alone (gemm_bench), against their time in the step.
  for p in $GEMM_PLANS; do
    part "gemm.$p" 60 "$PY" "$BUNDLE/gemms.py" run "$B/gemm_bench" \
      "$BUNDLE/plans/$p.schedule.txt" "$OUTDIR/runs/$p.trace.json" "$OUTDIR/runs/$p.gemms"
  done
  # Step 1's gradients (and inputs) against the CPU backend's --dump.
  for p in $DUMP_PLANS; do
    data_flags "$p"
    dump=$(info "$p" 4)
    part "dump.$p" 60 "$PY" "$BUNDLE/compare_dumps.py" --tofu-run "$B/tofu-run" \
      --backend "${BACKEND[1]}" --plan "$BUNDLE/plans/$p.bin" --ref "$BUNDLE/plans/$dump" \
      --index "$BUNDLE/plans/$dump.json" --dtype "$(info "$p" 5)" \
      --workdir "$OUTDIR/dump-work/$p" --out "$OUTDIR/runs/$p.dump.json" -- "${dflags[@]}"
  done
  # --save after 3 steps and --resume for a 4th, each against the CPU
  # backend's checkpoint and step-4 dump (save_resume.py).
  for p in $SAVE_PLANS; do
    data_flags "$p"
    part "save.$p" 60 "$PY" "$BUNDLE/save_resume.py" --tofu-run "$B/tofu-run" \
      --backend "${BACKEND[1]}" --plan "$BUNDLE/plans/$p.bin" --dtype "$(info "$p" 5)" \
      --workdir "$OUTDIR/dump-work/$p.save" --out "$OUTDIR/runs/$p.save.json" -- "${dflags[@]}"
  done
  rm -rf "$OUTDIR/dump-work"
  if [ "$SIMULATE" = 1 ] || [ "${TOFU_GPU_SKIP_TORCH:-0}" = 1 ]; then
    skip_all torch
  else
    # 77 s for the two real models on an H200 (run 11); the three GPTs'
    # torch.compile adds its compile time.
    part torch 300 env PYTHONPATH="$BUNDLE/py" "$PY" "$BUNDLE/torch_step.py" \
      --index "$BUNDLE/plans/index.json" --out "$OUTDIR/runs/torch.json"
  fi
fi

"$PY" "$BUNDLE/compare.py" --bundle "$BUNDLE" --outdir "$OUTDIR" --parts "$PARTS" \
  --have-gpu $HAVE_GPU --simulated "$SIMULATE" --seconds $(( $(date +%s) - START ))
tar -C "$OUTDIR" -czf "$OUTDIR/logs.tar.gz" logs parts.tsv $( [ -d "$OUTDIR/runs" ] && echo runs )
echo "run.sh: wrote $OUTDIR/results.md, $OUTDIR/results.json, $OUTDIR/logs.tar.gz ($(( $(date +%s) - START )) s)"
