#!/usr/bin/env bash
# Hashes of plan.bin and of --dump-plan=json (less search_seconds) for the
# example models at several k and two partitioners, one line per compile, so
# that two tofuc builds can be compared for byte-identical plans (issue 20:
# bench/compile_scale.md).
# Usage: bench/plan_identity.sh TOFUC OUT.txt; then diff two OUT files.
# TOFUC_FLAGS: more tofuc flags for every compile (e.g. --no-weights).
set -u
cd "$(dirname "$0")/.."
tofuc=$1; out=$2
py=/usr/bin/python3
m=$(mktemp -d); w=$(mktemp -d)
trap 'rm -rf "$m" "$w"' EXIT
$py examples/rnn/make_rnn.py --layers 2 --hidden 64 --steps 8 --batch 8 --vocab 32 -o $m/rnn_s.onnx >/dev/null
$py examples/rnn/make_rnn.py --layers 2 --hidden 1024 --steps 4 --batch 8 --vocab 64 -o $m/rnn_f.onnx >/dev/null
$py examples/wresnet/make_wresnet.py --depth 50 --width 1 --image 32 --batch 2 --classes 10 \
    --batchnorm inference -o $m/wres.onnx >/dev/null
$py examples/transformer/make_gpt.py --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 32 \
    --batch 8 -o $m/gpt_s.onnx >/dev/null
$py examples/transformer/make_gpt.py --layers 4 --hidden 128 --heads 4 --seq 32 --vocab 64 \
    --batch 8 -o $m/gpt_m.onnx >/dev/null
cp examples/mlp/mlp.onnx examples/cnn/cnn.onnx examples/cnn/cnn_bn.onnx $m/
: > "$out"
for model in mlp cnn cnn_bn rnn_s gpt_s gpt_m wres rnn_f; do
  for k in 1 2 3 4 6 8 16 65; do
    case $model in wres|rnn_f) [ $k -gt 8 ] && continue;; esac
    for p in tofu data-parallel; do
      "$tofuc" $m/$model.onnx --gpus $k --partitioner=$p ${TOFUC_FLAGS:-} -o $w/p.bin --dump-plan=json \
          > $w/p.json 2> $w/err; rc=$?
      echo "$model k=$k $p rc=$rc $(sha256sum < $w/p.bin | cut -c1-16)" \
           "$(grep -v search_seconds $w/p.json | sha256sum | cut -c1-16)" >> "$out"
      rm -f $w/p.bin
    done
  done
done
