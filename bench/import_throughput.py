#!/usr/bin/env python3
"""Import throughput of tofuc on a model with over 2 GB of external weights.

Writes an MLP (LAYERS square MatMul+Relu layers of width HIDDEN, float32,
every weight an external-data initializer in one weights.bin, 4 KiB aligned)
under a temporary directory, runs

    /usr/bin/time -v tofuc model.onnx --compile-to=import

(the import phase maps every weight file and hashes every weight byte into
the model fingerprint, so it reads all of them), and prints the wall time,
MB/s (weight bytes / wall time) and peak resident memory as a fraction of the
model size, once with the data file evicted from the page cache
(posix_fadvise DONTNEED: cold, read from disk) and once warm. The directory
is deleted afterwards. Usage (from the repository root, after a build):

    /usr/bin/python3 bench/import_throughput.py [--hidden 8192] [--layers 9]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper

ALIGN = 4096


def write_model(directory, hidden, layers, batch):
    data_path = os.path.join(directory, "weights.bin")
    inits, nodes = [], []
    offset = 0
    layer_bytes = hidden * hidden * 4
    rng = np.random.default_rng(0)
    block = rng.standard_normal(hidden * 64, dtype=np.float32) * 0.01
    with open(data_path, "wb") as f:
        for i in range(layers):
            f.seek(offset)
            # Distinct, non-zero pages (a sparse file would read as zeros
            # without touching the disk).
            for r in range(0, hidden, 64):
                f.write((block + np.float32(i * hidden + r)).tobytes())
            t = TensorProto()
            t.name, t.data_type = f"w{i}", TensorProto.FLOAT
            t.dims.extend([hidden, hidden])
            t.data_location = TensorProto.EXTERNAL
            for k, v in (("location", "weights.bin"), ("offset", str(offset)),
                         ("length", str(layer_bytes))):
                e = t.external_data.add()
                e.key, e.value = k, v
            inits.append(t)
            prev = "x" if i == 0 else f"a{i - 1}"
            nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"h{i}"]))
            nodes.append(helper.make_node("Relu", [f"h{i}"], [f"a{i}"]))
            offset = (offset + layer_bytes + ALIGN - 1) // ALIGN * ALIGN
    nodes.append(helper.make_node("ReduceSum", [f"a{layers - 1}"], ["loss"],
                                  keepdims=0))
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                     [batch, hidden])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model_path = os.path.join(directory, "model.onnx")
    onnx.save(model, model_path)
    return model_path, data_path, layers * layer_bytes


def evict(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def measure(tofuc, model_path):
    start = time.monotonic()
    proc = subprocess.run(["/usr/bin/time", "-v", tofuc, model_path,
                           "--compile-to=import"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit(f"tofuc failed:\n{proc.stderr}")
    rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)",
                           proc.stderr).group(1))
    return wall, rss_kb * 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=8192)
    parser.add_argument("--layers", type=int, default=9)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--tofuc", default="build/bin/tofuc")
    parser.add_argument("--dir", default=None,
                        help="parent of the temporary model directory")
    args = parser.parse_args()
    directory = tempfile.mkdtemp(prefix="tofu-import-bench-", dir=args.dir)
    try:
        t0 = time.monotonic()
        model_path, data_path, weight_bytes = write_model(
            directory, args.hidden, args.layers, args.batch)
        print(f"model: {args.layers} x MatMul [{args.hidden}x{args.hidden}] "
              f"f32, {weight_bytes / 1e9:.3f} GB of external weights "
              f"(written in {time.monotonic() - t0:.1f} s)")
        for label in ("cold", "warm"):
            if label == "cold":
                evict(data_path)
            wall, rss = measure(args.tofuc, model_path)
            print(f"{label}: wall {wall:.2f} s, {weight_bytes / 1e6 / wall:.0f} "
                  f"MB/s, peak RSS {rss / 1e6:.0f} MB = "
                  f"{rss / weight_bytes:.3f} x the weights")
    finally:
        shutil.rmtree(directory)


if __name__ == "__main__":
    main()
