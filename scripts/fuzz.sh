#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/: plan reader, TDL front end, ONNX
# import of binary and text models) with clang, ASan and UBSan into
# build-fuzz/, and runs each for SECONDS (default 60) on a seed corpus taken
# from the repository. Exits 1 when a target crashes, hangs, runs out of
# memory or trips a sanitizer; the input that did it is left in
# build-fuzz/fuzz-findings/<target>/ and named in the summary.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     TARGET: plan tdl onnx onnx-text
#
#   TOFU_JOBS=2                  build parallelism
#   TOFU_FUZZ_BUILD_DIR=DIR      build directory (default build-fuzz)
#   TOFU_FUZZ_CXX=clang++        the C++ compiler (clang: libFuzzer)
#   TOFU_FUZZ_RSS_MB=2048        memory limit per target (libFuzzer -rss_limit_mb)
#   TOFU_FUZZ_INPUT_TIMEOUT=30   seconds one input may take (-timeout): a hang
#   TOFU_FUZZ_NODE_SEEDS=0       leave out the ONNX backend node test models
#                                (libonnx-testdata) from the onnx seeds
#
# The corpus a run grows is kept in build-fuzz/fuzz-corpus/<target>/ and
# extends the next run's. Seeds: fuzz/README.md. Recorded runs: bench/fuzz.md.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(plan tdl onnx onnx-text)
build=${TOFU_FUZZ_BUILD_DIR:-build-fuzz}
cxx=${TOFU_FUZZ_CXX:-clang++}
cc=${TOFU_FUZZ_CC:-${cxx/clang++/clang}}
case "$seconds" in ''|*[!0-9]*) echo "fuzz: SECONDS must be a whole number, got '$seconds'" >&2; exit 2;; esac
for t in "${targets[@]}"; do
  case "$t" in plan|tdl|onnx|onnx-text) ;; *) echo "fuzz: unknown target '$t' (plan, tdl, onnx, onnx-text)" >&2; exit 2;; esac
done

# clang with libFuzzer and the sanitizer runtimes (Debian: clang,
# libclang-rt-dev); scripts/setup.sh --fuzz installs them.
have_libfuzzer() {
  local probe
  probe=$(mktemp -d)
  echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char *, unsigned long) { return 0; }' > "$probe/p.cpp"
  "$cxx" -fsanitize=fuzzer,address,undefined "$probe/p.cpp" -o "$probe/p" >/dev/null 2>&1
  local rc=$?
  rm -rf "$probe"
  return $rc
}
if ! command -v "$cxx" >/dev/null || ! have_libfuzzer; then
  echo "fuzz: $cxx with libFuzzer is missing; installing it (scripts/setup.sh --fuzz)"
  scripts/setup.sh --fuzz
  have_libfuzzer || { echo "fuzz: $cxx still cannot link -fsanitize=fuzzer" >&2; exit 1; }
fi

start=$(date +%s)
if [ ! -f "$build/build.ninja" ]; then
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  # -O1 with assertions (no NDEBUG): an assert is an internal invariant, and
  # a fuzzer that trips one has found a bug. CUDA is left out (host code
  # only; the plan reader does not need it).
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_C_FLAGS_RELEASE="-O1 -gline-tables-only" \
    -DCMAKE_CXX_FLAGS_RELEASE="-O1 -gline-tables-only" \
    -DTOFU_SANITIZERS="address;undefined" -DTOFU_FUZZ=ON \
    -DTOFU_RUNTIME_ENABLE_CUDA=OFF "${launcher[@]}"
fi
bins=()
for t in "${targets[@]}"; do bins+=("tofu-fuzz-$t"); done
cmake --build "$build" -j"${TOFU_JOBS:-2}" --target "${bins[@]}"
echo "fuzz: build took $(( $(date +%s) - start )) s"

# Seeds: the repository's inputs of each kind (fuzz/README.md), plus
# fuzz/regressions/<target>/ (inputs of fixed findings, replayed every run).
seeds_of() {
  case "$1" in
    plan) ls fuzz/corpus/plan/* ;;
    tdl) ls tdl-specs/*.tdl test/TDL/*.tdl ;;
    onnx-text) find test examples -name '*.onnxtxt' | sort ;;
    onnx)
      find examples test -name '*.onnx' | sort
      ls fuzz/corpus/onnx/* 2>/dev/null || true
      if [ "${TOFU_FUZZ_NODE_SEEDS:-1}" != 0 ] && [ -d /usr/share/libonnx-testdata/data/node ]; then
        ls /usr/share/libonnx-testdata/data/node/*/model.onnx
      fi ;;
  esac
  ls fuzz/regressions/"$1"/* 2>/dev/null || true
}

# ASan's defaults (leak checks per input on): the targets need none of the
# options scripts/sanitize.sh documents.
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
status=0
summary=()
for t in "${targets[@]}"; do
  seeds="$build/fuzz-seeds/$t" corpus="$build/fuzz-corpus/$t"
  findings="$build/fuzz-findings/$t" log="$build/fuzz-$t.log"
  rm -rf "$seeds"
  mkdir -p "$seeds" "$corpus" "$findings"
  n=0
  while IFS= read -r f; do
    n=$((n + 1))
    cp "$f" "$seeds/$n-$(basename "$f")"
  done < <(seeds_of "$t")
  echo "fuzz: $t: $seconds s on $n seeds (log $log)"
  rc=0
  # The watchdog gives libFuzzer 5 minutes beyond its own limit (the seeds
  # are run before the clock is checked).
  timeout $((seconds + 300)) "$build/bin/tofu-fuzz-$t" "$corpus" "$seeds" \
    -max_total_time="$seconds" -rss_limit_mb="${TOFU_FUZZ_RSS_MB:-2048}" \
    -timeout="${TOFU_FUZZ_INPUT_TIMEOUT:-30}" -print_final_stats=1 \
    -artifact_prefix="$findings/" > "$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  if [ "$rc" = 0 ]; then
    result=ok
  else
    status=1
    artifact=$(ls -t "$findings" 2>/dev/null | head -1)
    result="FAILED (exit $rc; input: $findings/${artifact:-?}; see $log)"
    grep -m1 -E 'ERROR: (AddressSanitizer|libFuzzer)|runtime error:|==ERROR' "$log" >&2 || tail -5 "$log" >&2
  fi
  summary+=("$(printf '%-10s %10s execs %6s/s  cov %6s  corpus %5s  %s' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" "$(ls "$corpus" | wc -l)" "$result")")
done
echo "fuzz: summary ($seconds s per target, $(date -u +%Y-%m-%dT%H:%MZ)):"
printf '  %s\n' "${summary[@]}"
exit $status
