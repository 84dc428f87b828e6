#!/usr/bin/env bash
# Installs what tofuc needs on a fresh Debian 12 machine (as root), skipping
# what is already there. Idempotent; called by demo.sh and test.sh.
#   scripts/setup.sh --fuzz   the Debian packages only, plus clang with
#                             libFuzzer and the sanitizer runtimes (clang,
#                             libclang-rt-dev) for scripts/fuzz.sh and
#                             scripts/sanitize.sh
set -euo pipefail

debs=(
  cmake ninja-build ccache lld-22
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools
  libonnx-dev libprotobuf-dev protobuf-compiler libonnx-testdata
  libfmt-dev libflatbuffers-dev flatbuffers-compiler
  libopenblas-dev libopenblas0-pthread libgtest-dev
  python3-torch python3-torchvision python3-numpy python3-onnx python3-venv
  python3-pip
  chromium python3-pil
  openmpi-bin libopenmpi-dev
)
if [ "${1:-}" = --fuzz ]; then
  debs+=(clang libclang-rt-dev)
fi
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"
fi
[ "${1:-}" = --fuzz ] && exit 0
# lit (the LLVM test runner) comes with llvm-22-tools; fall back to pip.
if [ ! -x /usr/lib/llvm-22/bin/lit ] && ! command -v lit >/dev/null; then
  python3 -m pip install -q lit
fi
# onnxruntime-training (PyPI, a second gradient reference for
# test/e2e/ort_training.py): a venv over Debian's Python (it imports torch,
# which only Debian provides here), with the wheel's other dependencies.
# Best effort: without it the test reports itself skipped.
ORT_VENV="${TOFU_ORT_VENV:-$HOME/.local/share/tofuc/ort-venv}"
if [ ! -x "$ORT_VENV/bin/python" ] ||
   ! "$ORT_VENV/bin/python" -c "import onnxruntime.training.api" 2>/dev/null; then
  echo "setup: onnxruntime-training into $ORT_VENV"
  if /usr/bin/python3 -m venv --system-site-packages "$ORT_VENV" &&
     "$ORT_VENV/bin/python" -m pip install -q --no-deps onnxruntime-training==1.19.2 &&
     "$ORT_VENV/bin/python" -m pip install -q cerberus flatbuffers packaging; then
    :
  else
    echo "setup: warning: onnxruntime-training could not be installed; e2e.ort_training will not run" >&2
  fi
fi
# onnx 1.17's backend test data (node tests with opsets up to 22), unpacked
# from the onnx==1.17.0 wheel into a cache folder for ctest
# onnx-node.cpu-onnx117. Offline, a note says the tests will not be
# registered (cmake says so too).
"$(dirname "$0")/fetch_onnx_testdata.sh"
