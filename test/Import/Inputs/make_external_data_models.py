#!/usr/bin/env python3
"""Writes the external-data models of external-data.test into OUT_DIR.

Each subdirectory holds one model.onnx (y = ReduceSum(x @ W), W [3, 2] float
stored as external data) and, where the case needs them, data files. The
valid case `good` also gets `embedded.onnx`, the same model with W inside the
protobuf, so that a test can compare the two. The attacks are the published
ONNX external-data vulnerabilities (path traversal, symlinks and hard links
out of the model's directory, ranges past the end of the file) and malformed
keys.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

W = np.arange(6, dtype=np.float32).reshape(3, 2) / 4.0


def model_with(weight):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3])
    loss = helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"], name="matmul"),
        helper.make_node("ReduceSum", ["h"], ["loss"], name="sum", keepdims=0),
    ]
    graph = helper.make_graph(nodes, "g", [x], [loss], initializer=[weight])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def external_weight(entries):
    t = TensorProto()
    t.name = "W"
    t.data_type = TensorProto.FLOAT
    t.dims.extend([3, 2])
    t.data_location = TensorProto.EXTERNAL
    for key, value in entries:
        e = t.external_data.add()
        e.key, e.value = key, value
    return t


def case(out, name, entries, files=None):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    for fname, data in (files or {}).items():
        with open(os.path.join(d, fname), "wb") as f:
            f.write(data)
    onnx.save(model_with(external_weight(entries)), os.path.join(d, "model.onnx"))
    return d


def main(out):
    raw = W.tobytes()  # 24 bytes
    pad = b"\0" * 16
    good = case(out, "good", [("location", "weights.bin"), ("offset", "16"),
                              ("length", "24")], {"weights.bin": pad + raw})
    onnx.save(model_with(helper.make_tensor("W", TensorProto.FLOAT, [3, 2],
                                            W.flatten().tolist())),
              os.path.join(good, "embedded.onnx"))
    # A file outside every model directory, the target of the attacks.
    with open(os.path.join(out, "outside.bin"), "wb") as f:
        f.write(raw)
    case(out, "dotdot", [("location", "../outside.bin")])
    os.makedirs(os.path.join(out, "nested", "a"), exist_ok=True)
    case(out, "nested", [("location", "a/../../outside.bin")])
    case(out, "absolute", [("location", os.path.join(out, "outside.bin"))])
    d = case(out, "symlink", [("location", "link.bin")])
    os.symlink(os.path.join("..", "outside.bin"), os.path.join(d, "link.bin"))
    d = case(out, "hardlink", [("location", "hard.bin")])
    os.link(os.path.join(out, "outside.bin"), os.path.join(d, "hard.bin"))
    case(out, "offset-past-end", [("location", "w.bin"), ("offset", "32")],
         {"w.bin": raw})
    case(out, "length-past-end", [("location", "w.bin"), ("offset", "8"),
                                  ("length", "24")], {"w.bin": raw})
    case(out, "length-mismatch", [("location", "w.bin"), ("length", "16")],
         {"w.bin": raw})
    case(out, "short-file", [("location", "w.bin")], {"w.bin": raw[:20]})
    case(out, "no-location", [("offset", "0"), ("length", "24")])
    case(out, "bad-offset", [("location", "w.bin"), ("offset", "12abc")],
         {"w.bin": raw})
    case(out, "bad-length", [("location", "w.bin"), ("length", "-24")],
         {"w.bin": raw})
    case(out, "duplicate-key", [("location", "w.bin"), ("location", "v.bin")],
         {"w.bin": raw})
    # A graph-only model: the data file was never written.
    case(out, "graph-only", [("location", "weights.bin"), ("length", "24")])


if __name__ == "__main__":
    main(sys.argv[1])
