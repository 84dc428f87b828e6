#!/usr/bin/python3
"""e2e.legacy_opsets_vs_numpy: old-opset forms that tofuc rewrites compute what their opset says.

The importer rewrites forms that ONNX changed (lib/Import/OpsetNormalization.cpp):
Softmax / LogSoftmax before opset 13 normalize over every dim from `axis` on
(the input coerced to 2-D; Flatten, the op on axis 1, Reshape), Add / Mul /
Sub before opset 7 with `broadcast = 1` align B with A from `axis` on (an
Unsqueeze appends size-1 dims), Upsample (opset 7's `scales`, opset 6's
`height_scale` / `width_scale`) is a whole-factor nearest resize,
BatchNormalization-6's `is_test`, Gemm-6's `broadcast` and Dropout-6's
`is_test = 1` (the identity). Each case is a one-node float64 model whose
input is an initializer; a wrapper appends ``loss = ReduceSum((Y - ref)^2)``
with ``ref`` computed by numpy from the opset's own definition, and
``tofu-run --steps 1`` reports that loss (step 1's, before any update):
``sqrt(loss) <= TOL * ||ref||``. Every case also names the answer a wrong
reading would give (the opset-13 Softmax on `axis` alone, numpy's suffix
broadcasting without `axis`, ...) and checks that it differs from ``ref`` by
far more than TOL, so the check can tell them apart.
"""
import json
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import e2e_common as E

TOL = 1e-12
RNG = np.random.default_rng(15)


def softmax_2d(x, axis):
    """Softmax before opset 13: x coerced to [d0..axis-1] x [axis..]."""
    flat = x.reshape(int(np.prod(x.shape[:axis])), -1)
    e = np.exp(flat - flat.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).reshape(x.shape)


def softmax_axis(x, axis):
    """Softmax from opset 13: over `axis` alone."""
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def batchnorm(x, s, b, m, v, eps):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return (s.reshape(shape) * (x - m.reshape(shape)) / np.sqrt(v.reshape(shape) + eps)
            + b.reshape(shape))


def cases():
    """(name, opset, node, {initializer: value}, ref, wrong, wrong_what)."""
    x = RNG.standard_normal((2, 3, 4, 5))
    yield ("softmax-axis1-opset11", 11, helper.make_node("Softmax", ["x"], ["y"], axis=1),
           {"x": x}, softmax_2d(x, 1), softmax_axis(x, 1), "opset 13's Softmax on axis 1")
    yield ("softmax-default-axis-opset9", 9, helper.make_node("Softmax", ["x"], ["y"]),
           {"x": x}, softmax_2d(x, 1), softmax_axis(x, 1), "opset 13's Softmax on axis 1")
    yield ("softmax-axis0-opset11", 11, helper.make_node("Softmax", ["x"], ["y"], axis=0),
           {"x": x}, softmax_2d(x, 0), softmax_axis(x, 0), "opset 13's Softmax on axis 0")
    # squeezenet's: [1, 1000, 1, 1] on axis 1 (the same as opset 13 there:
    # the dims after the axis are 1); the wrong reading is no normalization.
    s = RNG.standard_normal((1, 1000, 1, 1))
    yield ("softmax-squeezenet-opset9", 9, helper.make_node("Softmax", ["x"], ["y"], axis=1),
           {"x": s}, softmax_2d(s, 1), s, "the input itself")
    # Dims 1 and 3 have size 1: the coerced softmax is one over dim 2.
    w = RNG.standard_normal((2, 1, 4, 1))
    yield ("softmax-one-wide-dim-opset11", 11,
           helper.make_node("Softmax", ["x"], ["y"], axis=1),
           {"x": w}, softmax_2d(w, 1), softmax_axis(w, 1), "opset 13's Softmax on axis 1")
    yield ("logsoftmax-axis-2-opset6", 6,
           helper.make_node("LogSoftmax", ["x"], ["y"], axis=-2),
           {"x": x}, np.log(softmax_2d(x, 2)), np.log(softmax_axis(x, 2)),
           "opset 13's LogSoftmax on axis 2")

    a = RNG.standard_normal((2, 3, 3, 3))
    b = RNG.standard_normal((3, 3))
    yield ("add-axis1-opset6", 6,
           helper.make_node("Add", ["a", "b"], ["y"], broadcast=1, axis=1),
           {"a": a, "b": b}, a + b[None, :, :, None], a + b, "numpy's suffix broadcasting")
    a2 = RNG.standard_normal((2, 3, 3, 2))
    c = RNG.standard_normal(2)
    yield ("mul-axis0-opset6", 6,
           helper.make_node("Mul", ["a", "c"], ["y"], broadcast=1, axis=0),
           {"a": a2, "c": c}, a2 * c[:, None, None, None], a2 * c,
           "numpy's suffix broadcasting")
    d = RNG.standard_normal(3)
    yield ("sub-suffix-opset6", 6, helper.make_node("Sub", ["a", "d"], ["y"], broadcast=1),
           {"a": a, "d": d}, a - d, a - d[None, :, None, None], "B on dim 1")

    u = RNG.standard_normal((1, 2, 3, 4))
    up = np.repeat(np.repeat(u, 2, axis=2), 3, axis=3)
    wrong_up = np.tile(u, (1, 1, 2, 3))
    yield ("upsample-scales-opset7", 7,
           helper.make_node("Upsample", ["x"], ["y"], scales=[1.0, 1.0, 2.0, 3.0]),
           {"x": u}, up, wrong_up, "tiling")
    yield ("upsample-height-width-opset6", 6,
           helper.make_node("Upsample", ["x"], ["y"], height_scale=2.0, width_scale=3.0),
           {"x": u}, up, wrong_up, "tiling")

    bx = RNG.standard_normal((4, 3, 2, 2))
    sc, bb = RNG.standard_normal(3), RNG.standard_normal(3)
    mean, var = RNG.standard_normal(3), RNG.uniform(0.5, 2.0, 3)
    stats = {"x": bx, "s": sc, "b": bb, "m": mean, "v": var}
    eps = float(np.float32(1e-3))  # ONNX float attributes are float32
    batch = batchnorm(bx, sc, bb, bx.mean(axis=(0, 2, 3)), bx.var(axis=(0, 2, 3)), eps)
    running = batchnorm(bx, sc, bb, mean, var, eps)
    yield ("batchnorm-is_test1-opset6", 6,
           helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"],
                            is_test=1, epsilon=1e-3),
           stats, running, batch, "batch statistics")
    yield ("batchnorm-is_test0-opset6", 6,
           helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"],
                            is_test=0, epsilon=1e-3),
           stats, batch, running, "the running statistics")

    ga, gw, gc = (RNG.standard_normal((4, 3)), RNG.standard_normal((2, 3)),
                  RNG.standard_normal(2))
    yield ("gemm-broadcast-opset6", 6,
           helper.make_node("Gemm", ["a", "w", "c"], ["y"], broadcast=1, transB=1,
                            alpha=0.5, beta=2.0),
           {"a": ga, "w": gw, "c": gc}, 0.5 * ga @ gw.T + 2.0 * gc, 0.5 * ga @ gw.T,
           "no C")

    dx = RNG.standard_normal((4, 6))
    yield ("dropout-is_test1-opset6", 6,
           helper.make_node("Dropout", ["x"], ["y"], is_test=1, ratio=0.5),
           {"x": dx}, dx, 2.0 * dx * (RNG.uniform(size=dx.shape) >= 0.5), "a dropped mask")


def wrap(node, opset, inits, ref):
    """The one-node model with loss = ReduceSum((y - ref)^2), float64."""
    nodes = [node,
             helper.make_node("Sub", ["y", "ref"], ["diff"]),
             helper.make_node("Mul", ["diff", "diff"], ["sq"]),
             helper.make_node("ReduceSum", ["sq"], ["loss"], keepdims=0)]
    tensors = [numpy_helper.from_array(np.asarray(v, np.float64), k) for k, v in inits.items()]
    tensors.append(numpy_helper.from_array(ref.astype(np.float64), "ref"))
    # Before IR version 4 every initializer is a graph input too.
    inputs = [helper.make_tensor_value_info(t.name, TensorProto.DOUBLE, list(t.dims))
              for t in tensors]
    graph = helper.make_graph(nodes, "legacy", inputs,
                              [helper.make_tensor_value_info("loss", TensorProto.DOUBLE, [])],
                              tensors)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 3
    return model


def main():
    env = E.parse_args(__doc__.splitlines()[1])
    env.require_tools()
    checked = 0
    for name, opset, node, inits, ref, wrong, wrong_what in cases():
        gap = np.linalg.norm(wrong - ref) / np.linalg.norm(ref)
        E.check(gap > 1e3 * TOL,
                f"{name}: the reference and {wrong_what} differ by only {gap:.1e}: "
                "the case cannot tell a wrong rewrite")
        path = env.path(name, "model.onnx")
        onnx.save(wrap(node, opset, inits, ref), path)
        plan = env.path(name, "plan.bin")
        report = env.path(name, "report.json")
        E.run_tool([env.tofuc, path, "--gpus", "1", "-o", plan])
        E.run_tool([env.tofu_run, plan, "--steps", "1", "--quiet", "--report", report])
        loss = E.report_losses(E.load_json(report), report)[0]
        rel = np.sqrt(max(loss, 0.0)) / np.linalg.norm(ref)
        E.check(np.isfinite(loss) and rel <= TOL,
                f"{name} (opset {opset}): |Y - ref| / |ref| = {rel:.2e} > {TOL:g} "
                f"(loss {loss!r}); {wrong_what} would give {gap:.2e}")
        print(f"{name}: rel error {rel:.1e} (a wrong reading, {wrong_what}: {gap:.1e})")
        checked += 1
    print(f"PASS: {checked} old-opset forms match numpy")


if __name__ == "__main__":
    E.main_wrapper(main)
