#!/usr/bin/env bash
# bench/gpu/prepare.sh OUTDIR [--arch sm_90] [--models a,b]
#
# Builds the self-contained GPU check bundle (bench/gpu/README.md) here, on a
# machine without a GPU: tofu-run and its CUDA plugin, the GPU test binaries,
# the shared libraries they need that a bare CUDA machine lacks (ldd; neither
# the driver nor the CUDA toolkit's libraries, which run.sh finds there),
# plans compiled with --cuda-arch, their CPU-backend reference losses, --dump
# snapshots and CUDA schedules, gemm_bench (cuBLAS alone), and the scripts
# that run it all (run.sh, compare.py, gemms.py, compare_dumps.py,
# torch_step.py). Writes OUTDIR/ and OUTDIR.tar.xz (at most 60 MiB; the
# script fails above that).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=${TOFU_BUILD_DIR:-$ROOT/build}
OUTDIR=${1:?usage: bench/gpu/prepare.sh OUTDIR [--arch sm_90] [--models a,b]}
shift
ARCH=sm_90
MODELS=""
while [ $# -gt 0 ]; do
  case "$1" in
    --arch) ARCH=$2; shift 2 ;;
    --models) MODELS=$2; shift 2 ;;
    *) echo "prepare.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
LIMIT_MIB=60

GPU_TESTS="tofu-cuda-library-tests tofu-cuda-elementwise-tests
  tofu-cuda-multifetch-gpu-tests tofu-cuda-executor-tests"
NEEDED="tofuc tofu-run $GPU_TESTS"
if [ ! -x "$NVCC" ]; then
  echo "prepare.sh: no nvcc at $NVCC (set NVCC=...); the plans need tofuc --cuda-arch" >&2
  exit 1
fi
if [ -z "${TOFU_GPU_PREPARE_NO_BUILD:-}" ]; then  # ctest sets it: already built
  echo "prepare.sh: building $NEEDED in $BUILD"
  cmake --build "$BUILD" --target $NEEDED tofu_cuda_run -- -j2 >/dev/null
fi
[ -f "$BUILD/bin/libtofu_cuda_run.so" ] || {
  echo "prepare.sh: $BUILD/bin/libtofu_cuda_run.so missing: CMake found no CUDA toolkit" >&2
  exit 1
}

rm -rf "$OUTDIR"
mkdir -p "$OUTDIR/bin" "$OUTDIR/lib" "$OUTDIR/py"
cp "$BUILD/bin/tofu-run" "$BUILD/bin/libtofu_cuda_run.so" "$OUTDIR/bin/"
for t in $GPU_TESTS; do cp "$BUILD/bin/$t" "$OUTDIR/bin/"; done
# cuBLAS alone, called as the CUDA backend calls it (run.sh's GEMM part).
"$NVCC" -O2 -std=c++17 -o "$OUTDIR/bin/gemm_bench" "$HERE/gemm_bench.cu" -lcublas

# Libraries: everything ldd resolves except the C library family, the C++
# runtime (newer on the GPU machine, and backward compatible), the driver and
# the CUDA libraries (the GPU machine's own toolkit and cuDNN/NCCL).
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libstdc\+\+|libgcc_s|libcuda\.|libcudart|libcublas|libcudnn|libnccl|libnvrtc|libnvJitLink)'
for f in "$OUTDIR"/bin/*; do
  ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  if ! echo "$name" | grep -Eq "$skip"; then cp -L "$path" "$OUTDIR/lib/$name"; fi
done

# The executor GPU tests' plans (CudaTestPlans.cpp), compiled here.
"$BUILD/bin/tofu-cuda-executor-tests" --tofuc "$BUILD/bin/tofuc" --nvcc "$NVCC" \
  --python /usr/bin/python3 --examples "$ROOT/examples" \
  --workdir "$OUTDIR/executor-plans" --compile-only "$ARCH" >/dev/null
rm -f "$OUTDIR"/executor-plans/*.onnx

# The benchmark plans and their CPU references.
/usr/bin/python3 "$HERE/prepare_plans.py" --bin "$BUILD/bin" --out "$OUTDIR" \
  --arch "$ARCH" --nvcc "$NVCC" ${MODELS:+--models "$MODELS"}

cp "$HERE/run.sh" "$HERE/compare.py" "$HERE/torch_step.py" "$HERE/gemms.py" \
  "$HERE/compare_dumps.py" "$HERE/save_resume.py" "$OUTDIR/"
cp "$ROOT/test/e2e/real_models.py" "$ROOT/test/e2e/e2e_common.py" \
  "$ROOT/examples/transformer/gpt_torch.py" "$OUTDIR/py/"
( cd "$ROOT" && git rev-parse HEAD 2>/dev/null || echo unknown ) > "$OUTDIR/COMMIT"
# The binaries are built from the work tree: name what differed from COMMIT.
( cd "$ROOT" && git status --porcelain --untracked-files=no 2>/dev/null ) > "$OUTDIR/UNCOMMITTED"
echo "$ARCH" > "$OUTDIR/ARCH"

tar -C "$(dirname "$OUTDIR")" -cf - "$(basename "$OUTDIR")" | xz -T2 -6 > "$OUTDIR.tar.xz"
size=$(stat -c %s "$OUTDIR.tar.xz")
echo "prepare.sh: $OUTDIR.tar.xz is $((size / 1024 / 1024)) MiB ($size bytes)"
if [ "$size" -gt $((LIMIT_MIB * 1024 * 1024)) ]; then
  echo "prepare.sh: the bundle is over $LIMIT_MIB MiB; drop models with --models" >&2
  exit 1
fi
