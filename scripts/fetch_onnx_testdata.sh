#!/usr/bin/env bash
# Unpacks the backend test data that the onnx 1.17.0 wheel (PyPI) ships
# under onnx/backend/test/data/ (node/: 1288 node tests with opsets up to 22;
# simple/, light/, pytorch-converted/, pytorch-operator/, real/) into a
# stable cache folder, for the ctest test onnx-node.cpu-onnx117
# (test/onnx-node/CMakeLists.txt reads the same folder):
#
#   ${TOFU_ONNX117_DATA:-$HOME/.cache/tofuc/onnx-1.17.0/data}
#
# Only the wheel is downloaded (`pip download --no-deps`, nothing installed)
# and only its test data are unpacked. Idempotent: nothing is done when the
# folder exists (it appears whole, by a rename, or not at all). Offline, it
# prints a note and exits 0: the onnx 1.17 tests are then not registered,
# and cmake says so. Called by scripts/setup.sh.
set -euo pipefail

version=1.17.0
dest="${TOFU_ONNX117_DATA:-$HOME/.cache/tofuc/onnx-$version/data}"
if [ -d "$dest/node" ]; then
  exit 0
fi
note() {
  echo "setup: note: $*; the onnx $version node tests (ctest onnx-node.cpu-onnx117) will not be registered" >&2
}
# The default python3, or Debian's, whichever has pip.
py=""
for candidate in python3 /usr/bin/python3; do
  if "$candidate" -m pip --version >/dev/null 2>&1; then
    py="$candidate"
    break
  fi
done
if [ -z "$py" ]; then
  note "no python3 with pip (Debian package python3-pip)"
  exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

echo "setup: onnx $version test data into $dest"
# The wheel for this Python; any wheel holds the same data, so fall back to
# the cp311 manylinux one for an interpreter onnx $version has none for.
if ! "$py" -m pip download -q --no-deps --only-binary=:all: \
       "onnx==$version" -d "$tmp" 2>"$tmp/pip.log" &&
   ! "$py" -m pip download -q --no-deps --only-binary=:all: \
       --python-version 3.11 --platform manylinux_2_17_x86_64 \
       "onnx==$version" -d "$tmp" 2>>"$tmp/pip.log"; then
  note "cannot download onnx==$version from PyPI (offline?): $(tail -n 1 "$tmp/pip.log")"
  exit 0
fi
wheel="$(ls "$tmp"/onnx-"$version"-*.whl 2>/dev/null | head -n 1)"
if [ -z "$wheel" ]; then
  note "pip downloaded no onnx-$version wheel"
  exit 0
fi
"$py" - "$wheel" "$dest" <<'EOF'
import os, shutil, sys, zipfile

wheel, dest = sys.argv[1], sys.argv[2]
prefix = "onnx/backend/test/data/"
partial = dest + ".partial"
shutil.rmtree(partial, ignore_errors=True)
count = 0
with zipfile.ZipFile(wheel) as z:
    for member in z.infolist():
        name = member.filename
        if not name.startswith(prefix) or name.endswith("/"):
            continue
        rel = name[len(prefix):]
        if rel.startswith("/") or ".." in rel.split("/"):
            sys.exit(f"setup: {wheel}: refusing the member path {name}")
        out = os.path.join(partial, rel)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with z.open(member) as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst)
        count += 1
if not os.path.isdir(os.path.join(partial, "node")):
    sys.exit(f"setup: {wheel} holds no {prefix}node/")
os.makedirs(os.path.dirname(dest), exist_ok=True)
os.rename(partial, dest)
tests = len([d for d in os.listdir(os.path.join(dest, "node"))
             if d.startswith("test_")])
print(f"setup: {count} files, {tests} node tests in {dest}")
EOF
