#!/usr/bin/env bash
# Static memory plan vs the liveness lower bound, and per-device memory at
# k = 8 vs one device's / 8 (issue 6). Plans only: nothing is run.
# Usage: bench/memory.sh [build-dir] > table.md   (results: bench/memory.md)
# For each model and k: `tofuc --no-weights --gpus k --dump-plan=json`;
# peak_bytes[d] is device d's arena (the memory plan), live_bytes_lower_bound[d]
# the most bytes of its buffers live at one moment (docs/PlanJson.md).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
tofuc="$build/bin/tofuc"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py=/usr/bin/python3
$py examples/rnn/make_rnn.py --layers 10 --hidden 8192 --batch 128 --no-weights -o "$tmp/rnn-10-8k.onnx" >/dev/null
$py examples/wresnet/make_wresnet.py --depth 152 --width 10 --batch 8 --no-weights -o "$tmp/wresnet-152-10.onnx" >/dev/null
$py examples/rnn/make_rnn.py --layers 2 --hidden 1024 --batch 64 --no-weights -o "$tmp/rnn-2-1k.onnx" >/dev/null
$py examples/wresnet/make_wresnet.py --depth 50 --width 1 --image 32 --batch 32 --classes 10 --no-weights -o "$tmp/wresnet-50-1.onnx" >/dev/null
$py examples/transformer/make_gpt.py --layers 2 --hidden 256 --heads 4 --seq 64 --vocab 1000 --batch 8 --no-weights -o "$tmp/gpt-2.onnx" >/dev/null
cp examples/mlp/mlp.onnx "$tmp/mlp.onnx"

dump() { # model k partitioner -> $tmp/<model>.<k>.<partitioner>.json
  "$tofuc" "$tmp/$1.onnx" --no-weights --gpus "$2" --partitioner "$3" --dump-plan=json \
      > "$tmp/$1.$2.$3.json"
}

echo "## (a) Memory plan vs liveness lower bound"
echo
echo "| model | partitioner | k | peak / bound, worst device | peak / bound, mean | worst device: peak bytes | its bound |"
echo "|---|---|---|---|---|---|---|"
for model in mlp rnn-2-1k wresnet-50-1 gpt-2 rnn-10-8k wresnet-152-10; do
  for part in tofu data-parallel; do
    for k in 1 2 4 8; do
      case $model in rnn-10-8k|wresnet-152-10) [ "$k" = 1 ] || [ "$k" = 8 ] || continue;; esac
      [ "$part" = data-parallel ] && case $model in rnn-10-8k|wresnet-152-10) continue;; esac
      dump "$model" "$k" "$part"
      $py - "$tmp/$model.$k.$part.json" "$model" "$part" "$k" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
r = [p / b for p, b in zip(j["peak_bytes"], j["live_bytes_lower_bound"])]
w = max(range(len(r)), key=lambda d: r[d])
print(f"| {sys.argv[2]} | {sys.argv[3]} | {sys.argv[4]} | {r[w]:.4f} | {sum(r) / len(r):.4f} "
      f"| {j['peak_bytes'][w]} | {j['live_bytes_lower_bound'][w]} |")
PY
    done
  done
done

echo
echo "## (b) Per-device peak / (single-device peak / k), k = 8, partitioner tofu"
echo
echo "| model | single-device peak bytes | per-device peak bytes at k = 8 (min .. max) | ratio, worst device |"
echo "|---|---|---|---|"
for model in wresnet-152-10 rnn-10-8k; do
  $py - "$tmp/$model.1.tofu.json" "$tmp/$model.8.tofu.json" "$model" <<'PY'
import json, sys
one = json.load(open(sys.argv[1]))["peak_bytes"][0]
eight = json.load(open(sys.argv[2]))["peak_bytes"]
print(f"| {sys.argv[3]} | {one} | {min(eight)} .. {max(eight)} | {max(eight) / (one / 8):.4f} |")
PY
done
