"""Writes a tiny attention-like model with PyTorch-style buffers to argv[1],
with the metadata_props given as KEY=VALUE arguments (argv[2:], in order),
for trainable-lists.test:

  loss = ReduceSum(Reshape(Softmax(Gemm(x + pe, w, b) + mask), shape))

"pe" stands for a positional encoding, "mask" for a causal mask (-inf above
the diagonal), "w" and "b" are weights, "shape" is an int64 initializer
(never a parameter). With a KEY of the form ``nan:NAME`` instead, the
initializer NAME gets a NaN element (and no metadata is written for it).
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

inits = {
    "w": np.full((4, 4), 0.1, np.float32) + np.eye(4, dtype=np.float32),
    "b": np.array([0.1, 0.2, 0.3, 0.4], np.float32),
    "pe": np.linspace(0, 1, 16, dtype=np.float32).reshape(4, 4),
    "mask": np.triu(np.full((4, 4), -np.inf, np.float32), 1),
    "shape": np.array([4, 4], np.int64),
}
props = []
for arg in sys.argv[2:]:
    key, value = arg.split("=", 1) if "=" in arg else (arg, "")
    if key.startswith("nan:"):
        inits[key[4:]].flat[1] = np.nan
    else:
        props.append((key, value))
nodes = [
    helper.make_node("Add", ["x", "pe"], ["h"], name="add_pe"),
    helper.make_node("Gemm", ["h", "w", "b"], ["s"], name="scores"),
    helper.make_node("Add", ["s", "mask"], ["m"], name="masked"),
    helper.make_node("Softmax", ["m"], ["p"], name="softmax", axis=1),
    helper.make_node("Reshape", ["p", "shape"], ["r"], name="reshape"),
    helper.make_node("ReduceSum", ["r"], ["loss"], name="sum", keepdims=0),
]
graph = helper.make_graph(
    nodes, "buffers",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
    [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
    [numpy_helper.from_array(v, k) for k, v in inits.items()])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
for key, value in props:
    prop = model.metadata_props.add()
    prop.key, prop.value = key, value
onnx.save(model, sys.argv[1])
