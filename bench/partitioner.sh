#!/usr/bin/env bash
# Plan quality (bytes per training step, per recursion step) and search time
# of every partitioner (docs/Partitioning.md) on the example models.
# Usage: bench/partitioner.sh [build-dir] > table.md   (results: bench/partitioner.md)
# Graph-only models (--no-weights) are generated into a temporary folder with
# Debian's python3 (the example generators need numpy/onnx).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
tofuc="$build/bin/tofuc"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py=/usr/bin/python3
$py examples/rnn/make_rnn.py --layers 4 --hidden 8192 --batch 512 --no-weights -o "$tmp/rnn-4-8k.onnx" >/dev/null
$py examples/rnn/make_rnn.py --layers 10 --hidden 8192 --batch 128 --no-weights -o "$tmp/rnn-10-8k.onnx" >/dev/null
$py examples/wresnet/make_wresnet.py --depth 152 --width 10 --batch 8 --no-weights -o "$tmp/wresnet-152-10.onnx" >/dev/null

partitioners="tofu icml18 equal-chop spartan allrow-greedy data-parallel exhaustive"

# One row: model, partitioner, k -> bytes, per-step bytes, search seconds.
row() {
  local model=$1 name=$2 k=$3 path=$4
  local out
  if out=$(timeout 600 "$tofuc" "$path" --no-weights --gpus "$k" --partitioner "$name" \
             --dump-plan=json 2>&1); then
    echo "$out" | $py -c "
import json, sys
j = json.load(sys.stdin)
steps = ' + '.join(str(b) for b in j['comm_bytes_per_step'])
print(f\"| $model | $name | $k | {j['comm_bytes']:,} | {steps} | {j['search_seconds']:.3f} |\")"
  else
    echo "| $model | $name | $k | error: $(echo "$out" | tail -1 | cut -c1-120) | | |"
  fi
}

echo "| model | partitioner | k | bytes per step | by link crossed at each recursion step | search s |"
echo "|---|---|---|---|---|---|"
for model in mlp cnn; do
  for k in 2 3 4 6 8 12 16 24 32 64; do
    for name in $partitioners; do
      row $model $name $k examples/$model/$model.onnx
    done
  done
done
for model in rnn-4-8k rnn-10-8k wresnet-152-10; do
  for name in $partitioners; do
    row $model $name 8 "$tmp/$model.onnx"
  done
done
for model in rnn-10-8k wresnet-152-10; do
  for k in 2 4 6 12 16 24 32 64; do
    row $model tofu $k "$tmp/$model.onnx"
  done
done
