#!/usr/bin/env bash
# plan.bin size as k grows (issue 20): a graph-only GPT (2 layers, hidden 256,
# 4 heads, sequence 64, vocabulary 512, batch 8; --no-weights, so WEIGHTS
# holds only constants) compiled for each k. One markdown row per k: the
# file size, the PLAN section size, and the PLAN bytes per device.
# Usage: bench/plan_size.sh [tofuc] [ks] > rows.md   (results: bench/compile_scale.md)
set -euo pipefail
cd "$(dirname "$0")/.."
tofuc=${1:-build/bin/tofuc}
ks=${2:-"1 2 4 8 16 32 64"}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 examples/transformer/make_gpt.py --layers 2 --hidden 256 --heads 4 \
  --seq 64 --vocab 512 --batch 8 --no-weights -o "$tmp/gpt.onnx" >/dev/null
echo "| k | plan.bin bytes | PLAN section bytes | PLAN bytes / k |"
echo "|---|---|---|---|"
for k in $ks; do
  "$tofuc" "$tmp/gpt.onnx" --no-weights --gpus "$k" -o "$tmp/plan.bin" 2>/dev/null
  # The PLAN section (kind 1) from the section table (docs/PlanFormat.md).
  plan=$(/usr/bin/python3 -c "
import struct, sys
b = open(sys.argv[1], 'rb').read()
n = struct.unpack_from('<I', b, 36)[0]
for i in range(n):
    kind, _, off, size, _ = struct.unpack_from('<IIQQQ', b, 128 + 32 * i)
    if kind == 1:
        print(size)
" "$tmp/plan.bin")
  echo "| $k | $(stat -c %s "$tmp/plan.bin") | $plan | $((plan / k)) |"
done
