#!/usr/bin/env bash
# Whole-compile time and peak memory of graph-only models as k grows (issue
# 20): GPT-3 175B (96 layers, hidden 12288, 96 heads, sequence 2048, vocab
# 51200, batch 8), and optionally WResNet-152-10 and RNN-10-8K.
# Usage: bench/compile_scale.sh [tofuc] [ks] [models] > rows.md
#   (results: bench/compile_scale.md), e.g.
#   bench/compile_scale.sh build/bin/tofuc "8 16 32 64" "gpt3"
# models: any of gpt3 wresnet-152-10 rnn-10-8k (default gpt3).
# One markdown row per (model, k): wall, user and system seconds and peak
# RSS from /usr/bin/time, tofuc's --time-phases, and the 1-minute load
# average before the run (the machine is shared: compare rows measured
# back to back).
set -euo pipefail
cd "$(dirname "$0")/.."
tofuc=${1:-build/bin/tofuc}
ks=${2:-"8 16 32 64"}
models=${3:-gpt3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py=/usr/bin/python3
for model in $models; do
  case $model in
    gpt3) $py examples/transformer/make_gpt.py --layers 96 --hidden 12288 --heads 96 \
            --seq 2048 --vocab 51200 --batch 8 --no-weights -o "$tmp/$model.onnx" >/dev/null ;;
    wresnet-152-10) $py examples/wresnet/make_wresnet.py --depth 152 --width 10 --batch 8 \
            --no-weights -o "$tmp/$model.onnx" >/dev/null ;;
    rnn-10-8k) $py examples/rnn/make_rnn.py --layers 10 --hidden 8192 --batch 128 \
            --no-weights -o "$tmp/$model.onnx" >/dev/null ;;
    *) echo "unknown model $model" >&2; exit 2 ;;
  esac
done
echo "| model | k | load | wall s | user s | sys s | peak RSS MB | --time-phases (s) |"
echo "|---|---|---|---|---|---|---|---|"
for model in $models; do
  for k in $ks; do
    load=$(cut -d' ' -f1 /proc/loadavg)
    /usr/bin/time -f "%e %U %S %M" -o "$tmp/time" "$tofuc" "$tmp/$model.onnx" --no-weights \
      --gpus "$k" --dump-plan=json --time-phases > "$tmp/plan.json" 2> "$tmp/err" || {
        echo "| $model | $k | $load | failed: $(tail -1 "$tmp/err") |||||"; continue; }
    read -r wall user sys rss < "$tmp/time"
    phases=$(grep 'phase seconds' "$tmp/err" | sed 's/.*phase seconds: //')
    echo "| $model | $k | $load | $wall | $user | $sys | $((rss / 1024)) | $phases |"
  done
done
