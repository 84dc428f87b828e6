#!/usr/bin/python3
"""Rewrites an ONNX model in float64: FLOAT initializers and FLOAT graph
inputs, outputs and value_info become DOUBLE (usage: to_float64.py in.onnx out.onnx).
Used by bench/batchnorm_conditioning.md."""
import onnx, numpy as np, sys
from onnx import numpy_helper, TensorProto
m = onnx.load(sys.argv[1])
for i, t in enumerate(m.graph.initializer):
    if t.data_type == TensorProto.FLOAT:
        a = numpy_helper.to_array(t).astype(np.float64)
        m.graph.initializer[i].CopyFrom(numpy_helper.from_array(a, t.name))
for v in list(m.graph.input) + list(m.graph.output) + list(m.graph.value_info):
    if v.type.tensor_type.elem_type == TensorProto.FLOAT:
        v.type.tensor_type.elem_type = TensorProto.DOUBLE
onnx.save(m, sys.argv[2])
