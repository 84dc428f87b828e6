#!/usr/bin/env bash
# Search time of the `tofu` partitioner (idle machine): WResNet-152-10 and
# RNN-10-8K at k = 8 (the paper's Table 1), and GPT-style decoders of growing
# depth at k = 8 to show how search time grows with the number of operators.
# Usage: bench/search_time.sh [build-dir] > table.md   (results: bench/search_time.md)
# Each row is the median of 3 runs of `tofuc --no-weights --dump-plan=json`
# (search_seconds = wall time of the partition phase).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
tofuc="$build/bin/tofuc"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py=/usr/bin/python3
$py examples/rnn/make_rnn.py --layers 10 --hidden 8192 --batch 128 --no-weights -o "$tmp/rnn-10-8k.onnx" >/dev/null
$py examples/wresnet/make_wresnet.py --depth 152 --width 10 --batch 8 --no-weights -o "$tmp/wresnet-152-10.onnx" >/dev/null
for layers in 1 2 12 24 48 96; do
  $py examples/transformer/make_gpt.py --layers $layers --hidden 1024 --heads 16 --seq 512 \
      --vocab 32000 --batch 8 --no-weights -o "$tmp/gpt-$layers.onnx" >/dev/null
done

row() {
  local model=$1 k=$2 path=$3
  local times=() ops=0
  for run in 1 2 3; do
    if ! out=$("$tofuc" "$path" --no-weights --gpus "$k" --dump-plan=json 2>"$tmp/err"); then
      echo "| $model | | $k | error: $(tail -1 "$tmp/err" | sed 's/^.*: error: [^:]*: //' | cut -c1-160) | |"
      return
    fi
    read -r t n < <(echo "$out" | $py -c "
import json, sys
j = json.load(sys.stdin)
print(j['search_seconds'], len(j['ops']))")
    times+=("$t"); ops=$n
  done
  median=$(printf '%s\n' "${times[@]}" | sort -g | sed -n 2p)
  beam=$(grep -c "solved with a beam" "$tmp/err" || true)
  echo "| $model | $ops | $k | $median | ${times[*]} | $beam |"
}

echo "| model | ops in the training step | k | search s (median) | runs | steps solved by beam DP |"
echo "|---|---|---|---|---|---|"
row wresnet-152-10 8 "$tmp/wresnet-152-10.onnx"
row rnn-10-8k 8 "$tmp/rnn-10-8k.onnx"
for layers in 1 2 12 24 48 96; do
  row "gpt-$layers (D 1024, S 512)" 8 "$tmp/gpt-$layers.onnx"
done
