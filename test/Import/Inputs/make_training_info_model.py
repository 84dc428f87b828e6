"""Writes a tiny model with a TrainingInfoProto (an SGD-like algorithm graph
that updates W with W - 0.1 * dW) to the path given as argv[1]; used by
training-info.test."""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

w = numpy_helper.from_array(np.ones((2, 2), np.float32), "W")
graph = helper.make_graph(
    [helper.make_node("MatMul", ["X", "W"], ["Y"]),
     helper.make_node("ReduceSum", ["Y"], ["L"], keepdims=0)],
    "g",
    [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 2])],
    [helper.make_tensor_value_info("L", TensorProto.FLOAT, [])],
    [w])
algorithm = helper.make_graph(
    [helper.make_node("Gradient", ["X", "W"], ["dW"], domain="ai.onnx.preview.training",
                      xs=["W"], y="L"),
     helper.make_node("Mul", ["dW", "lr"], ["step"]),
     helper.make_node("Sub", ["W", "step"], ["W_new"])],
    "algorithm", [], [helper.make_tensor_value_info("W_new", TensorProto.FLOAT, [2, 2])],
    [numpy_helper.from_array(np.array(0.1, np.float32), "lr")])
info = onnx.TrainingInfoProto()
info.algorithm.CopyFrom(algorithm)
binding = info.update_binding.add()
binding.key = "W"
binding.value = "W_new"
model = helper.make_model(graph, opset_imports=[
    helper.make_opsetid("", 13), helper.make_opsetid("ai.onnx.preview.training", 1)])
model.training_info.append(info)
onnx.save(model, sys.argv[1])
