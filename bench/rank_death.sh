#!/usr/bin/env bash
# What the survivors print when one rank of a 4-process tofu-run is killed
# with SIGKILL mid-training (issue 18). Results: bench/rank_death.md.
#
#   bench/rank_death.sh BUILD_DIR [TCP_RUNS] [MPI_RUNS]
#
# TCP (RANK/WORLD_SIZE environment): each run kills a random rank after a
# random 0.5-2.5 s (k = 4 or 8 alternately) and counts the survivors whose
# one error line names the killed rank as the one that closed its connection
# and no other. mpirun: each run kills rank (run mod 4) once rank 0 has
# printed step lines (about 3 s) and counts the survivors' own
# "ended by SIGTERM from mpirun" lines and whether mpirun named the rank.
set -uo pipefail
build=$(cd "${1:?usage: bench/rank_death.sh BUILD_DIR [TCP_RUNS] [MPI_RUNS]}" && pwd)
tcp_runs=${2:-30}
mpi_runs=${3:-40}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
"$build/bin/tofuc" "$root/examples/mlp/mlp.onnx" --gpus 4 -o plan4.bin >/dev/null
"$build/bin/tofuc" "$root/examples/mlp/mlp.onnx" --gpus 8 -o plan8.bin >/dev/null

named=0 survivors=0
for i in $(seq 1 "$tcp_runs"); do
  k=$(( i % 2 ? 8 : 4 )); victim=$(( RANDOM % k ))
  delay=$(python3 -c 'import random; print(round(random.uniform(0.5, 2.5), 2))')
  port=$(( 20000 + RANDOM % 20000 ))
  pids=()
  for r in $(seq 0 $((k - 1))); do
    RANK=$r WORLD_SIZE=$k MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      "$build/bin/tofu-run" plan$k.bin --steps 1000000 --comm-timeout 30 \
      >/dev/null 2>"err.$r" &
    pids+=($!)
  done
  sleep "$delay"
  kill -9 "${pids[$victim]}"
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  for r in $(seq 0 $((k - 1))); do
    [ "$r" = "$victim" ] && continue
    survivors=$((survivors + 1))
    if [ "$(grep -c . "err.$r")" = 1 ] &&
       grep -q "rank $victim closed its connection" "err.$r" &&
       ! grep -v "rank $victim closed its connection" "err.$r" | grep -q "closed its connection"; then
      named=$((named + 1))
    else
      echo "tcp run $i (k=$k, rank $victim killed after ${delay}s): rank $r: $(cat "err.$r")"
    fi
  done
done
echo "tcp: $tcp_runs runs, $named of $survivors survivors named the killed rank"

spoke=0 survivors=0 mpinamed=0
mpirun_cmd=(mpirun --oversubscribe -np 4)
[ "$(id -u)" = 0 ] && mpirun_cmd=(mpirun --allow-run-as-root --oversubscribe -np 4)
for i in $(seq 1 "$mpi_runs"); do
  victim=$(( i % 4 ))
  "${mpirun_cmd[@]}" "$build/bin/tofu-run" plan4.bin --steps 1000000 --comm-timeout 30 \
    >/dev/null 2>mpi.err &
  m=$!
  sleep 3
  for c in $(pgrep -P "$m"); do
    if tr '\0' '\n' < "/proc/$c/environ" | grep -qx "OMPI_COMM_WORLD_RANK=$victim"; then
      kill -9 "$c"
    fi
  done
  wait "$m"
  said=""
  for r in 0 1 2 3; do
    [ "$r" = "$victim" ] && continue
    survivors=$((survivors + 1))
    if grep -q "tofu-run: error: rank $r: ended by SIGTERM from mpirun" mpi.err; then
      spoke=$((spoke + 1)); said="$said $r"
    fi
  done
  grep -q "process rank $victim .*signal 9" mpi.err && mpinamed=$((mpinamed + 1))
  echo "mpi run $i: rank $victim killed; survivors that printed their line:$said"
done
echo "mpi: $mpi_runs runs, $spoke of $survivors survivors printed their line," \
     "mpirun named the killed rank in $mpinamed"
