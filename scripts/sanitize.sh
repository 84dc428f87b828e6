#!/usr/bin/env bash
# Builds tofuc, tofu-run and the tests with AddressSanitizer and
# UndefinedBehaviorSanitizer (clang, -O1, assertions on) into build-asan/
# and runs the tests through ctest. Exits with ctest's status; a sanitizer
# report fails the test that made it (-fno-sanitize-recover: UBSan findings
# abort like ASan's).
#
#   scripts/sanitize.sh [CTEST ARGS...]
#       default: every test but the end-to-end and ONNX node suites
#       (-E '^(e2e|onnx-node)\.|^runtime\.standalone-build$'), which run the
#       same binaries on larger models and take 2-5x longer under ASan (the
#       standalone-build test builds an uninstrumented runtime of its own);
#       pass e.g. -R . for all.
#
#   TOFU_JOBS=2                   build and ctest parallelism
#   TOFU_SANITIZE_BUILD_DIR=DIR   build directory (default build-asan)
#   TOFU_SANITIZE_TARGETS="a b"   build only these targets (default: all)
#   TOFU_SANITIZE_CXX=clang++     the C++ compiler
#
# Sanitizer options (each overridable by setting the variable yourself):
#   ASAN_OPTIONS=allow_user_poisoning=0
#     LLVM's BumpPtrAllocator (llvm/Support/Allocator.h) is inline code that
#     poisons each new slab and unpoisons what it hands out when it is
#     compiled with ASan (LLVM_ADDRESS_SANITIZER_BUILD). Our objects are;
#     Debian's libMLIR.so is not. A slab that an instrumented copy poisons
#     and MLIR's uninstrumented copy then hands out (the storage of a
#     uniqued attribute) reads as "use-after-poison" in correct code: without
#     the option 8 of 60 tofuc/tofu-opt lit tests fail that way
#     (bench/sanitize.md). The option makes the manual poisoning calls no-ops;
#     ASan's own checks (heap, stack and global overflows, use after free,
#     double free) and LeakSanitizer are unaffected.
#   UBSAN_OPTIONS=print_stacktrace=1
# LeakSanitizer stays on, except in processes that started Open MPI
# (runtime/lib/MpiTransport.cpp defines __lsan_is_turned_off): Open MPI
# 4.1's allocations are reported from components it has unloaded by then.
#
# Recorded runs: bench/sanitize.md.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${TOFU_SANITIZE_BUILD_DIR:-build-asan}
cxx=${TOFU_SANITIZE_CXX:-clang++}
cc=${TOFU_SANITIZE_CC:-${cxx/clang++/clang}}
if ! command -v "$cxx" >/dev/null; then
  echo "sanitize: $cxx is missing; installing it (scripts/setup.sh --fuzz)"
  scripts/setup.sh --fuzz
fi
start=$(date +%s)
if [ ! -f "$build/build.ninja" ]; then
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_C_FLAGS_RELEASE="-O1 -gline-tables-only" \
    -DCMAKE_CXX_FLAGS_RELEASE="-O1 -gline-tables-only" \
    -DTOFU_SANITIZERS="address;undefined" \
    -DTOFU_RUNTIME_ENABLE_CUDA=OFF "${launcher[@]}"
fi
if [ -n "${TOFU_SANITIZE_TARGETS:-}" ]; then
  # shellcheck disable=SC2086
  cmake --build "$build" -j"${TOFU_JOBS:-2}" --target ${TOFU_SANITIZE_TARGETS}
else
  cmake --build "$build" -j"${TOFU_JOBS:-2}"
fi
echo "sanitize: build took $(( $(date +%s) - start )) s"

export ASAN_OPTIONS="${ASAN_OPTIONS:-allow_user_poisoning=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"
[ $# -gt 0 ] || set -- -E '^(e2e|onnx-node)\.|^runtime\.standalone-build$'
cd "$build"
ctest --output-on-failure -j"${TOFU_JOBS:-2}" "$@"
