"""Writes a tiny model that carries its training algorithm (TrainingInfoProto)
to argv[1]; argv[2] picks the variant (used by training-info.test):

* ``sgd``: L = ReduceSum(X @ W); the algorithm takes dL/dW with Gradient and
  computes W_new = W - 0.1 * dW (plain arithmetic), update_binding W <- W_new.
* ``adam``: L = ReduceSum(X @ W + B); Adam over W and B (one node, two
  tensors) with its state V_*, H_* and the update count T (incremented with
  Add) as algorithm initializers, all bound in update_binding.
* ``two-gradients``: a second Gradient node of the same L with respect to W
  (one backward pass serves both).
* ``two-losses``: a second loss L2 = ReduceSum(W * W) computed by the
  algorithm and its own Gradient; W_new = W - 0.1 * (dL/dW + dL2/dW) (two
  backward passes in one step).
* ``initialization``: an initialization graph that halves W (reading the
  initializer) and sets lr from a Constant; it runs at compile time.
* ``initialization-random``: W drawn by RandomNormal with a seed.
* the others are models tofuc must refuse, each for the reason in its name.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

TRAINING = "ai.onnx.preview.training"
variant = sys.argv[2] if len(sys.argv) > 2 else "sgd"


def tensor(name, value, dtype=np.float32):
    return numpy_helper.from_array(np.array(value, dtype), name)


def vinfo(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


w = tensor("W", np.arange(4).reshape(2, 2) / 4)
b = tensor("B", [0.5, -0.5])
inference_nodes = [helper.make_node("MatMul", ["X", "W"], ["XW"], name="matmul")]
if variant == "adam":
    inference_nodes.append(helper.make_node("Add", ["XW", "B"], ["Y"], name="bias"))
else:
    inference_nodes.append(helper.make_node("Identity", ["XW"], ["Y"], name="identity"))
inference_nodes.append(helper.make_node("ReduceSum", ["Y"], ["L"], name="loss", keepdims=0))
graph = helper.make_graph(inference_nodes, "g", [vinfo("X", [2, 2])], [vinfo("L", [])],
                          [w, b] if variant == "adam" else [w])

gradient_inputs = ["W", "X"]
gradient = helper.make_node("Gradient", gradient_inputs, ["dW"], name="grad", domain=TRAINING,
                            xs=["W"], zs=["X"], y="L")
nodes = [gradient,
         helper.make_node("Mul", ["dW", "lr"], ["step"], name="scale"),
         helper.make_node("Sub", ["W", "step"], ["W_new"], name="descend")]
inits = [tensor("lr", 0.1)]
outputs = [vinfo("W_new", [2, 2])]
bindings = [("W", "W_new")]
initialization = None
initialization_bindings = None

if variant == "adam":
    gradient = helper.make_node("Gradient", ["W", "B", "X"], ["dW", "dB"], name="grad",
                                domain=TRAINING, xs=["W", "B"], zs=["X"], y="L")
    nodes = [gradient,
             helper.make_node("Adam", ["lr", "T", "W", "B", "dW", "dB", "V_W", "V_B", "H_W", "H_B"],
                              ["W_new", "B_new", "V_W_new", "V_B_new", "H_W_new", "H_B_new"],
                              name="adam", domain=TRAINING, alpha=0.9, beta=0.999,
                              epsilon=1e-6, norm_coefficient=0.01),
             helper.make_node("Add", ["T", "one"], ["T_new"], name="count")]
    inits = [tensor("lr", 0.1), tensor("T", 0, np.int64), tensor("one", 1, np.int64),
             tensor("V_W", np.zeros((2, 2))), tensor("V_B", np.zeros(2)),
             tensor("H_W", np.zeros((2, 2))), tensor("H_B", np.zeros(2))]
    outputs = [vinfo("W_new", [2, 2]), vinfo("B_new", [2]), vinfo("V_W_new", [2, 2]),
               vinfo("V_B_new", [2]), vinfo("H_W_new", [2, 2]), vinfo("H_B_new", [2]),
               vinfo("T_new", [], TensorProto.INT64)]
    bindings = [("W", "W_new"), ("B", "B_new"), ("V_W", "V_W_new"), ("V_B", "V_B_new"),
                ("H_W", "H_W_new"), ("H_B", "H_B_new"), ("T", "T_new")]
elif variant == "two-gradients":
    nodes.insert(1, helper.make_node("Gradient", ["W", "X"], ["dW2"], name="grad2",
                                     domain=TRAINING, xs=["W"], zs=["X"], y="L"))
elif variant == "two-losses":
    nodes = [gradient,
             helper.make_node("Mul", ["W", "W"], ["WW"], name="square"),
             helper.make_node("ReduceSum", ["WW"], ["L2"], name="loss2", keepdims=0),
             helper.make_node("Gradient", ["W"], ["dW2"], name="grad2", domain=TRAINING,
                              xs=["W"], y="L2"),
             helper.make_node("Add", ["dW", "dW2"], ["dsum"], name="sum"),
             helper.make_node("Mul", ["dsum", "lr"], ["step"], name="scale"),
             helper.make_node("Sub", ["W", "step"], ["W_new"], name="descend")]
elif variant == "second-order":
    nodes = [gradient,
             helper.make_node("Mul", ["dW", "dW"], ["dWdW"], name="square"),
             helper.make_node("ReduceSum", ["dWdW"], ["L2"], name="loss2", keepdims=0),
             helper.make_node("Gradient", ["W"], ["dW2"], name="grad2", domain=TRAINING,
                              xs=["W"], y="L2"),
             helper.make_node("Mul", ["dW2", "lr"], ["step"], name="scale"),
             helper.make_node("Sub", ["W", "step"], ["W_new"], name="descend")]
elif variant == "gradient-inputs":
    nodes[0] = helper.make_node("Gradient", ["X", "W"], ["dW"], name="grad", domain=TRAINING,
                                xs=["W"], y="L")
elif variant == "initialization":
    initialization = helper.make_graph(
        [helper.make_node("Constant", [], ["half"], value=tensor("half", 0.5)),
         helper.make_node("Mul", ["W", "half"], ["W_init"], name="halve"),
         helper.make_node("Constant", [], ["lr_init"], value=tensor("lr0", 0.25))],
        "init", [], [vinfo("W_init", [2, 2]), vinfo("lr_init", [])])
    initialization_bindings = [("W", "W_init"), ("lr", "lr_init")]
elif variant == "initialization-random":
    initialization = helper.make_graph(
        [helper.make_node("RandomNormal", [], ["W_init"], shape=[2, 2], seed=3.0, mean=1.0,
                          scale=0.5)], "init", [], [vinfo("W_init", [2, 2])])
    initialization_bindings = [("W", "W_init")]
elif variant == "initialization-input":
    initialization = helper.make_graph(
        [helper.make_node("Mul", ["X", "X"], ["W_init"], name="from_data")], "init",
        [vinfo("X", [2, 2])], [vinfo("W_init", [2, 2])])
    initialization_bindings = [("W", "W_init")]
elif variant == "initialization-unknown-value":
    initialization = helper.make_graph(
        [helper.make_node("Mul", ["XW", "lr"], ["W_init"], name="from_graph")], "init", [],
        [vinfo("W_init", [2, 2])])
    initialization_bindings = [("W", "W_init")]
elif variant == "initialization-shape":
    initialization = helper.make_graph(
        [helper.make_node("RandomUniform", [], ["W_init"], shape=[3, 2], seed=1.0)], "init",
        [], [vinfo("W_init", [3, 2])])
    initialization_bindings = [("W", "W_init")]
elif variant == "initialization-no-spec":
    initialization = helper.make_graph(
        [helper.make_node("Det", ["W"], ["d"], name="det"),
         helper.make_node("Mul", ["W", "d"], ["W_init"], name="scale_init")], "init", [],
        [vinfo("W_init", [2, 2])])
    initialization_bindings = [("W", "W_init")]
elif variant == "unbound-key":
    bindings = [("Q", "W_new")]
elif variant == "no-gradient":
    nodes = [helper.make_node("Mul", ["W", "lr"], ["W_new"], name="shrink")]
elif variant == "vector-y":
    nodes[0] = helper.make_node("Gradient", ["W", "X"], ["dW"], name="grad", domain=TRAINING,
                                xs=["W"], zs=["X"], y="Y")
elif variant == "other-training-op":
    nodes.append(helper.make_node("SGD", ["W"], ["W_other"], name="sgd", domain=TRAINING))
elif variant == "inference-gradient":
    # No training_info: the inference graph itself outputs a gradient.
    graph.node.append(gradient)
    graph.output.append(vinfo("dW", [2, 2]))
elif variant != "sgd":
    sys.exit(f"unknown variant {variant}")

algorithm = helper.make_graph(nodes, "algorithm", [], outputs, inits)
info = helper.make_training_info(algorithm, bindings, initialization, initialization_bindings)
model = helper.make_model(graph, opset_imports=[
    helper.make_opsetid("", 13), helper.make_opsetid(TRAINING, 1)])
if variant != "inference-gradient":
    model.training_info.append(info)
onnx.save(model, sys.argv[1])
