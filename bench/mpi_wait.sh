#!/usr/bin/env bash
# Step time of the MLP example compiled for k = 4 devices, run as 4 processes
# under mpirun (one per device), for one or more tofu-run binaries, run
# alternately so that they see the same machine load (issue 6: MPI waits).
# Usage: bench/mpi_wait.sh [build-dir] [tofu-run ...]   (results: bench/mpi_wait.md)
# Each binary: REPEATS runs (default 7) of `mpirun -np 4 tofu-run plan.bin
# --steps 30 --quiet --report r.json`; prints, per binary, the median and the
# best of the runs' mean step time (steps 2-30; step 1 warms up).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
runs=("$@")
[ ${#runs[@]} -gt 0 ] || runs=("$build/bin/tofu-run")
repeats=${REPEATS:-7}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$build/bin/tofuc" examples/mlp/mlp.onnx --gpus 4 -o "$tmp/plan.bin" >/dev/null
mpirun=(mpirun --oversubscribe -np 4)
[ "$(id -u)" = 0 ] && mpirun=(mpirun --allow-run-as-root --oversubscribe -np 4)
for ((r = 0; r < repeats; ++r)); do
  for i in "${!runs[@]}"; do
    "${mpirun[@]}" "${runs[$i]}" "$tmp/plan.bin" --steps 30 --quiet --report "$tmp/r.json"
    /usr/bin/python3 -c "
import json, sys
s = json.load(open(sys.argv[1]))['steps'][1:]
print(sum(x['seconds'] for x in s) / len(s))" "$tmp/r.json" >> "$tmp/times.$i"
  done
done
echo "| tofu-run | runs | median step (ms) | best step (ms) |"
echo "|---|---|---|---|"
for i in "${!runs[@]}"; do
  /usr/bin/python3 - "$tmp/times.$i" "${runs[$i]}" <<'PY'
import statistics, sys
t = [float(x) for x in open(sys.argv[1])]
print(f"| {sys.argv[2]} | {len(t)} | {statistics.median(t) * 1e3:.2f} | {min(t) * 1e3:.2f} |")
PY
done
