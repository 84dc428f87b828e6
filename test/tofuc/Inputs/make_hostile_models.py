"""Writes the hand-made hostile ONNX models of test/tofuc/hostile-models.test
into the folder given as argv[1] (issue 18): each one is a model error that
tofuc must refuse with one line naming the limit, never crash, hang or
accept."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def save(name, nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    onnx.save(m, os.path.join(out, name + ".onnx"))


def vi(name, shape, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


loss = vi("loss", [])


def conv(name, **attrs):
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "W")
    save(name, [helper.make_node("Conv", ["x", "W"], ["y"], name="conv1", **attrs),
                helper.make_node("ReduceSum", ["y"], ["loss"], keepdims=0)],
         [vi("x", [2, 3, 8, 8])], [loss], [w])


conv("conv-stride0", strides=[0, 1])
conv("conv-dilation-min", dilations=[-2**63, 1])
conv("conv-pad-huge", pads=[2**62, 0, 0, 0])

# A rank-400 input (18 GB before the limit).
save("rank400", [helper.make_node("ReduceSum", ["x"], ["loss"], keepdims=0)],
     [vi("x", [1] * 400)], [loss])
# Dims of 2^62: the element count overflows int64.
save("dims-2p62", [helper.make_node("ReduceSum", ["x"], ["loss"], keepdims=0)],
     [vi("x", [2**62, 4])], [loss])
# A negative dim: not "symbolic".
save("dim-negative", [helper.make_node("ReduceSum", ["x"], ["loss"], keepdims=0)],
     [vi("x", [4, -3])], [loss])
# An initializer whose dims overflow (was "holds 16 bytes but needs 0").
bad = helper.make_tensor("W", TensorProto.FLOAT, [4], vals=[1.0] * 4)
bad.dims[:] = [2**62, 4]
save("init-overflow", [helper.make_node("Mul", ["x", "W"], ["y"]),
                       helper.make_node("ReduceSum", ["y"], ["loss"], keepdims=0)],
     [vi("x", [4])], [loss], [bad])
# A computed shape that overflows: Expand to [2^40, 2^40].
shape = numpy_helper.from_array(np.array([2**40, 2**40], np.int64), "shape")
save("expand-overflow", [helper.make_node("Expand", ["x", "shape"], ["y"]),
                         helper.make_node("ReduceSum", ["y"], ["loss"], keepdims=0)],
     [vi("x", [1, 1])], [loss], [shape])
# One output produced by two nodes.
save("output-twice", [helper.make_node("Relu", ["x"], ["y"], name="first"),
                      helper.make_node("Neg", ["x"], ["y"], name="second"),
                      helper.make_node("ReduceSum", ["y"], ["loss"], keepdims=0)],
     [vi("x", [4, 3])], [loss])
# A node name with a newline and an escape sequence, on a failing node.
save("name-escapes", [helper.make_node("Conv", ["x", "W"], ["y"], name="evil\n\x1b[31mname",
                                       strides=[0, 1]),
                      helper.make_node("ReduceSum", ["y"], ["loss"], keepdims=0)],
     [vi("x", [2, 3, 8, 8])], [loss],
     [numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "W")])
# The same names on a model that compiles: --dump-plan's text prints them.
save("names-escaped", [helper.make_node("MatMul", ["x", "w\x1b[31mred"], ["y"],
                                         name="mm\nline2\x1b[0m"),
                       helper.make_node("ReduceSum", ["y"], ["loss"], keepdims=0)],
     [vi("x", [2, 4])], [loss],
     [numpy_helper.from_array(np.ones((4, 3), np.float32), "w\x1b[31mred")])

# A trained weight holding NaN and +Inf (refused at compile time).
w = np.ones((4, 3), np.float32)
w[1, 2] = np.nan
save("nan-weight", [helper.make_node("MatMul", ["x", "W"], ["y"]),
                    helper.make_node("ReduceSum", ["y"], ["loss"], keepdims=0)],
     [vi("x", [2, 4])], [loss], [numpy_helper.from_array(w, "W")])
w = np.ones((4, 3), np.float32)
w[3, 0] = np.inf
save("inf-weight", [helper.make_node("MatMul", ["x", "W"], ["y"]),
                    helper.make_node("ReduceSum", ["y"], ["loss"], keepdims=0)],
     [vi("x", [2, 4])], [loss], [numpy_helper.from_array(w, "W")])
# An embedding lookup: token ids index the 10 rows of the table.
table = numpy_helper.from_array(np.ones((10, 4), np.float32), "table")
save("embedding", [helper.make_node("Gather", ["table", "ids"], ["y"]),
                   helper.make_node("ReduceSum", ["y"], ["loss"], keepdims=0)],
     [vi("ids", [8], TensorProto.INT64)], [loss], [table])
# A Transpose whose perm is not a permutation of the axes.
save("transpose-bad-perm", [helper.make_node("Transpose", ["x"], ["y"], name="t", perm=[0, 5]),
                            helper.make_node("ReduceSum", ["y"], ["loss"], keepdims=0)],
     [vi("x", [4, 3])], [loss])
# Subgraphs nested 150 deep (If in If): over protobuf's parse depth of 100
# (it was reported as "truncated").
branch = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "leaf", [],
                           [vi("y", [2])])
for depth in range(150):
    node = helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch
                            if depth == 0 else helper.make_graph(
                                [helper.make_node("Identity", ["x"], ["y"])], "e", [],
                                [vi("y", [2])]))
    branch = helper.make_graph([node], f"level{depth}", [], [vi("y", [2])])
save("protobuf-deep", list(branch.node) + [helper.make_node("ReduceSum", ["y"], ["loss"],
                                                             keepdims=0)],
     [vi("c", [], TensorProto.BOOL), vi("x", [2])], [loss])
# A node name that is not UTF-8 (bytes 0xff 0xfe): printed escaped.
w = numpy_helper.from_array(np.ones((5, 4), np.float32), "W")
save("name-bad-utf8", [helper.make_node("MatMul", ["x", "W"], ["y"], name="NAMEXX"),
                       helper.make_node("ReduceSum", ["y"], ["loss"], keepdims=0)],
     [vi("x", [4, 4])], [loss], [w])
path = os.path.join(out, "name-bad-utf8.onnx")
with open(path, "rb") as f:
    data = f.read().replace(b"NAMEXX", b"NAM\xff\xfeX")
with open(path, "wb") as f:
    f.write(data)
# ConstantOfShape of 90,000 elements: over the folding limit of 65,536, so it
# is not folded but runs as an op (it was "ConstantOfShape has no TDL spec").
shape = numpy_helper.from_array(np.array([300, 300], np.int64), "s")
save("constant-of-shape-large",
     [helper.make_node("ConstantOfShape", ["s"], ["c"],
                       value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0])),
      helper.make_node("Mul", ["x", "c"], ["y"]),
      helper.make_node("ReduceSum", ["y"], ["loss"], keepdims=0)],
     [vi("x", [300, 300])], [loss], [shape])
