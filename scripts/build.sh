#!/usr/bin/env bash
# Configures and builds tofuc into build/ (Ninja, ccache when present).
set -euo pipefail
cd "$(dirname "$0")/.."
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
# TOFU_FUZZ_BRIEF_SECONDS=N registers ctest fuzz.brief (scripts/fuzz.sh N,
# test/CMakeLists.txt); set, it is applied to an existing build/ too.
fuzz=()
[ -n "${TOFU_FUZZ_BRIEF_SECONDS:-}" ] && fuzz=(-DTOFU_FUZZ_BRIEF_SECONDS="$TOFU_FUZZ_BRIEF_SECONDS")
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" "${fuzz[@]}"
elif [ ${#fuzz[@]} -gt 0 ]; then
  cmake -S . -B build "${fuzz[@]}" >/dev/null
fi
cmake --build build -j"${TOFU_JOBS:-2}"
