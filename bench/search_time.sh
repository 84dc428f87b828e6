#!/usr/bin/env bash
# Search time of the `tofu` partitioner: WResNet-152-10 and RNN-10-8K at
# k = 8 (the paper's Table 1) and over k = 2 ... 64, and GPT-style decoders
# of growing depth at k = 8 (up to over 10,000 operators) to show how search
# time grows with the graph.
# Usage: bench/search_time.sh [build-dir] [tables] > table.md
#   (results: bench/search_time.md); tables: any of table1 sweep gpt
#   (default: all three), e.g. `bench/search_time.sh build gpt`.
# Each time is the median of 3 runs of `tofuc --no-weights --dump-plan=json`
# (search_seconds = wall time of the partition phase); the load average
# (1 min) is printed before each table and after the last.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
tables=${2:-"table1 sweep gpt"}
want() { [[ " $tables " == *" $1 "* ]]; }
tofuc="$build/bin/tofuc"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py=/usr/bin/python3
gpt_layers="1 2 12 24 48 96"
$py examples/rnn/make_rnn.py --layers 10 --hidden 8192 --batch 128 --no-weights -o "$tmp/rnn-10-8k.onnx" >/dev/null
$py examples/wresnet/make_wresnet.py --depth 152 --width 10 --batch 8 --no-weights -o "$tmp/wresnet-152-10.onnx" >/dev/null
for layers in $gpt_layers; do
  $py examples/transformer/make_gpt.py --layers $layers --hidden 1024 --heads 16 --seq 512 \
      --vocab 32000 --batch 8 --no-weights -o "$tmp/gpt-$layers.onnx" >/dev/null
done

load() { echo "load average (1 min): $(cut -d' ' -f1 /proc/loadavg)"; }

# Op groups and tensor groups of the coarsened training graph.
groups() {
  "$tofuc" "$1" --no-weights --compile-to=coarsen 2>/dev/null | $py -c "
import re, sys
ops, tensors = set(), set()
for line in sys.stdin:
    ops.update(re.findall(r'tofu\.op_group = (\d+)', line))
    for ids in re.findall(r'tofu\.tensor_groups = array<i64: ([\d, ]+)>', line):
        tensors.update(i.strip() for i in ids.split(','))
print(len(ops), len(tensors))"
}

# Prints "ops median runs beam-steps bytes" for model $1 at k = $2, or
# "error: ...".
measure() {
  local path=$1 k=$2 times=() ops=0 bytes=0
  for run in 1 2 3; do
    if ! out=$("$tofuc" "$path" --no-weights --gpus "$k" --dump-plan=json 2>"$tmp/err"); then
      echo "error: $(tail -1 "$tmp/err" | sed 's/^.*: error: [^:]*: //' | cut -c1-160)"
      return
    fi
    read -r t n b < <(echo "$out" | $py -c "
import json, sys
j = json.load(sys.stdin)
print(j['search_seconds'], len(j['ops']), j['comm_bytes'])")
    times+=("$t"); ops=$n; bytes=$b
  done
  median=$(printf '%s\n' "${times[@]}" | sort -g | sed -n 2p)
  beam=$(grep -c "solved with a beam" "$tmp/err" || true)
  echo "$ops $median ${times[*]} $beam $bytes"
}

if want table1; then
load
echo
echo "| model | ops in the training step | k | search s (median) | runs | steps solved by beam DP |"
echo "|---|---|---|---|---|---|"
for model in wresnet-152-10 rnn-10-8k; do
  r=($(measure "$tmp/$model.onnx" 8))
  echo "| $model | ${r[0]} | 8 | ${r[1]} | ${r[2]} ${r[3]} ${r[4]} | ${r[5]} |"
done
echo
fi

if want sweep; then
load
echo
echo "| model | k | steps | search s (median) | runs | bytes per step |"
echo "|---|---|---|---|---|---|"
for model in ${SWEEP_MODELS:-wresnet-152-10 rnn-10-8k}; do
  for k in 2 3 4 6 8 12 16 24 32 64; do
    steps=$($py -c "
n, f = $k, []
p = 2
while p * p <= n:
    while n % p == 0: f.append(p); n //= p
    p += 1
f += [n] if n > 1 else []
print('·'.join(map(str, sorted(f, reverse=True))))")
    r=($(measure "$tmp/$model.onnx" $k))
    echo "| $model | $k | $steps | ${r[1]} | ${r[2]} ${r[3]} ${r[4]} | ${r[6]} |"
  done
done
echo
fi

if want gpt; then
load
echo
echo "| model | ops in the training step | op groups | tensor groups | k | search s (median) | runs | ms per 1000 ops | steps solved by beam DP |"
echo "|---|---|---|---|---|---|---|---|---|"
for layers in $gpt_layers; do
  path="$tmp/gpt-$layers.onnx"
  read -r opGroups tensorGroups < <(groups "$path")
  r=($(measure "$path" 8))
  perk=$($py -c "print(f'{1000 * 1000 * ${r[1]} / ${r[0]}:.1f}')")
  echo "| gpt-$layers (D 1024, S 512) | ${r[0]} | $opGroups | $tensorGroups | 8 | ${r[1]} | ${r[2]} ${r[3]} ${r[4]} | $perk | ${r[5]} |"
done
echo
fi
load
