#!/usr/bin/python3
"""e2e.attribute_edges_vs_torch: edge values of ONNX attributes train as torch computes them.

Attribute values at their edges (0, empty, absent, negative padding) used to
compile and then fail at step 1, or compute something else without a word.
Each case below is a small float64 ONNX graph written with onnx.helper: a
``features`` input X, trainable initializers, the op under test, and the
loss ``sum(Y * Y)``. tofuc compiles it (SGD, lr 0.1) for k = 1 and k = 4,
tofu-run runs 3 steps on one fixed batch (``--data``) with ``--dump``, and
the 3 losses and the step-1 gradient of every initializer must equal torch
autograd's 3 SGD steps in float64 within 1e-9 (``E.rel_diff``: the largest
absolute difference over the reference's largest magnitude, as a loss may
reach 0). An initializer the op leaves unused (Gemm's C with
beta = 0, A and B with alpha = 0) must keep its value, as torch's zero
gradient leaves it.

* ``reduce_*``: ReduceSum, ReduceMean and ReduceMax at opsets 11, 13 and 18
  with axes absent, empty (an input from 13 for ReduceSum, 18 for the
  others) or [1], and noop_with_empty_axes 0 and 1 (18; ReduceSum 13):
  absent or empty axes reduce every axis, unless noop_with_empty_axes = 1,
  which makes the op the identity. ``reduce_torch_empty_dim`` is what
  ``torch.onnx.export`` writes for ``x.sum(dim=[])``: an empty *float*
  Constant as axes (refused before as "expected an integer type").
* ``gemm_*``: Gemm with alpha = 0 and/or beta = 0, with C absent, [N],
  [M, N], [1, N], [M, 1] or a scalar, transposed operands (alpha = 0 gives
  beta * C broadcast, beta = 0 ignores C, as torch.addmm); C of shapes
  [1, N], [M, 1] and [] also checks Gemm's gradient of a broadcast C.
  Where Y is identically zero (alpha = 0 and no beta * C) the loss is a
  constant, which tofuc refuses at compile time with a clear error.
* ``convtranspose_*``: ConvTranspose with ``output_shape`` (its total padding
  from output_shape, split by auto_pad as ONNX says; a size beyond the
  default extends the end, which made the gradient's Conv pads negative),
  against torch's transposed convolution cropped or zero-extended to it.
* ``avgpool_*``: AveragePool with ceil_mode = 1 and count_include_pad 0/1,
  against torch.nn.functional.avg_pool2d (the divisor of a window that
  reaches past the end padding is the kernel clipped to the padded input;
  count_include_pad = 1 as torch.onnx.export writes it, Pad + AveragePool),
  and onnx 1.17's node test ``averagepool_2d_ceil_last_window_starts_on_pad``.

* ``empty_*``: reductions over a zero-size dimension (ReduceSum of an
  empty slice, MatMul and Gemm with an empty inner dimension, the gradient
  of a Gather with no indices) give the reducer's identity; they used to be
  planned as empty on every device, so nothing wrote their output.

``--only PREFIX`` runs the cases whose name starts with PREFIX.
"""
import io
import os

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

import e2e_common as E

F = torch.nn.functional
LR = 0.1
SGD_STEPS = 3
TOL = 1e-9


class Case:
    """An ONNX graph Y = op(...) with loss sum(Y * Y), and its torch twin.

    ``nodes`` compute ``Y`` from the input ``X`` and the initializers
    ``params`` (trainable) and ``consts`` (int64, not trained);
    ``torch_y(X, params)`` computes Y from torch tensors.
    """

    def __init__(self, name, nodes, x, params, torch_y, opset=13, consts=None, k4=True,
                 constant_loss=False):
        self.name, self.nodes, self.x, self.params = name, nodes, x, params
        self.torch_y, self.opset, self.consts, self.k4 = torch_y, opset, consts or {}, k4
        #: Y is identically zero (Gemm with alpha = 0 and no beta * C): the loss
        #: is a constant, which tofuc refuses at compile time (docs/Training.md,
        #: "A loss that does not depend on the model"); torch's gradients are 0.
        self.constant_loss = constant_loss

    def model(self):
        nodes = list(self.nodes) + [
            helper.make_node("Mul", ["Y", "Y"], ["Y2"]),
            helper.make_node("ReduceSum", ["Y2"], ["loss"], keepdims=0)]
        inits = [numpy_helper.from_array(a, n) for n, a in {**self.params, **self.consts}.items()]
        graph = helper.make_graph(
            nodes, self.name,
            [helper.make_tensor_value_info("X", TensorProto.DOUBLE, self.x.shape)],
            [helper.make_tensor_value_info("loss", TensorProto.DOUBLE, [])], inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])


# --------------------------------------------------------------------------- reductions
REDUCERS = {"ReduceSum": lambda t, axes, keep: t.sum(dim=axes, keepdim=keep),
            "ReduceMean": lambda t, axes, keep: t.mean(dim=axes, keepdim=keep),
            "ReduceMax": lambda t, axes, keep: t.amax(dim=axes, keepdim=keep)}


def reduce_case(op, opset, axes, noop, keepdims):
    """axes: None (absent), [] (empty) or a list."""
    axes_input = opset >= 18 or (op == "ReduceSum" and opset >= 13)
    name = (f"reduce_{op[6:].lower()}_{opset}_"
            f"{'absent' if axes is None else 'empty' if not axes else 'axes' + ''.join(map(str, axes))}"
            f"_noop{noop}_keep{keepdims}")
    rng = np.random.default_rng(len(name))
    x = rng.standard_normal((4, 3))
    params = {"W": rng.standard_normal((4, 3))}
    consts = {}
    inputs = ["P"]
    attrs = {"keepdims": keepdims}
    if noop:
        attrs["noop_with_empty_axes"] = 1
    if axes is not None:
        if axes_input:
            consts["axes"] = np.array(axes, dtype=np.int64)
            inputs.append("axes")
        elif axes:
            attrs["axes"] = axes
    nodes = [helper.make_node("Mul", ["X", "W"], ["P"]),
             helper.make_node(op, inputs, ["Y"], **attrs)]

    def torch_y(X, p):
        P = X * p["W"]
        if not axes and noop:
            return P
        dims = list(axes) if axes else [0, 1]
        return REDUCERS[op](P, dims, bool(keepdims))
    return Case(name, nodes, x, params, torch_y, opset=opset, consts=consts,
                k4=axes is not None and not axes)


def reduce_cases():
    cases = []
    for op in REDUCERS:
        for opset in (11, 13, 18):
            axes_input = opset >= 18 or (op == "ReduceSum" and opset >= 13)
            for axes in (None, [], [1]):
                if axes == [] and not axes_input:
                    continue  # an empty ints attribute: the ONNX checker refuses it
                for noop in ((0, 1) if axes_input else (0,)):
                    cases.append(reduce_case(op, opset, axes, noop, keepdims=0))
    cases.append(reduce_case("ReduceSum", 13, [], 0, keepdims=1))
    return cases


def torch_empty_dim_case():
    """torch.onnx.export of x.sum(dim=[]): ReduceSum with an empty float Constant."""
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.W = torch.nn.Parameter(torch.randn(4, 3, dtype=torch.float64))

        def forward(self, x):
            return (x * self.W).sum(dim=[], keepdim=True)
    torch.manual_seed(0)
    m = M()
    x = torch.randn(4, 3, dtype=torch.float64)
    buf = io.BytesIO()
    torch.onnx.export(m, (x,), buf, input_names=["X"], output_names=["Y"], opset_version=14,
                      do_constant_folding=False)
    exported = onnx.load_from_string(buf.getvalue())
    axes = [n for n in exported.graph.node if n.op_type == "Constant"]
    E.check(axes and axes[0].attribute[0].t.data_type == TensorProto.FLOAT
            and list(axes[0].attribute[0].t.dims) == [0],
            "torch no longer exports sum(dim=[]) with an empty float axes Constant; "
            "the case checks nothing")
    nodes = list(exported.graph.node)
    params = {"W": m.W.detach().numpy().copy()}
    return Case("reduce_torch_empty_dim", nodes, x.numpy(), params,
                lambda X, p: (X * p["W"]).sum(dim=[0, 1], keepdim=True), opset=14)


# --------------------------------------------------------------------------- Gemm
def gemm_case(alpha, beta, c_shape, trans_a=0, trans_b=0):
    M, K, N = 4, 3, 5
    tag = "none" if c_shape is None else "x".join(map(str, c_shape)) or "scalar"
    name = f"gemm_a{alpha:g}_b{beta:g}_c{tag}_t{trans_a}{trans_b}"
    rng = np.random.default_rng(len(name) * 7 + trans_a)
    x = rng.standard_normal((K, M) if trans_a else (M, K))
    params = {"B": rng.standard_normal((N, K) if trans_b else (K, N))}
    inputs = ["A", "B"]
    if c_shape is not None:
        params["C"] = rng.standard_normal(c_shape)
        inputs.append("C")
    # A is X * S (S trainable) so that A's gradient is checked too.
    params["S"] = rng.standard_normal(x.shape)
    nodes = [helper.make_node("Mul", ["X", "S"], ["A"]),
             helper.make_node("Gemm", inputs, ["Y"], alpha=alpha, beta=beta,
                              transA=trans_a, transB=trans_b)]

    def torch_y(X, p):
        A = X * p["S"]
        A = A.T if trans_a else A
        B = p["B"].T if trans_b else p["B"]
        y = alpha * (A @ B)
        if c_shape is not None and beta != 0:  # beta = 0 ignores C (torch.addmm)
            y = y + beta * p["C"]
        return y
    return Case(name, nodes, x, params, torch_y,
                constant_loss=alpha == 0 and (c_shape is None or beta == 0))


def gemm_cases():
    cases = []
    for alpha, beta in ((0.0, 1.0), (1.0, 0.0), (0.0, 0.5), (0.5, 0.0), (0.0, 0.0), (0.5, 2.0)):
        for c_shape in (None, (5,), (4, 5), (1, 5), (4, 1), ()):
            cases.append(gemm_case(alpha, beta, c_shape))
    cases.append(gemm_case(0.0, 1.0, (5,), trans_a=1, trans_b=1))
    cases.append(gemm_case(0.0, 0.5, (4, 5), trans_a=0, trans_b=1))
    cases.append(gemm_case(2.0, 0.0, (4, 5), trans_a=1, trans_b=0))
    return cases


# --------------------------------------------------------------------------- ConvTranspose
def onnx_conv_transpose(X, W, B, stride, dilation, pads, out):
    """ONNX ConvTranspose with pads (begin, end) per spatial dim (negative: extend)."""
    y = F.conv_transpose2d(X, W, None, stride=stride, dilation=dilation)
    for dim, (pb, pe) in zip((2, 3), pads):
        if pb < 0 or pe < 0:
            widths = [0, 0, 0, 0]
            slot = 0 if dim == 3 else 2
            widths[slot], widths[slot + 1] = max(0, -pb), max(0, -pe)
            y = F.pad(y, widths)
        start = max(0, pb)
        y = y.narrow(dim, start, out[dim - 2])
    return y + B.view(1, -1, 1, 1)


def convtranspose_case(size, kernel, stride, dilation, out, auto_pad=None, pads=None):
    name = (f"convtranspose_in{size}_k{kernel}_s{stride}_d{dilation}_out{out[0]}x{out[1]}"
            f"_{auto_pad or 'notset'}")
    rng = np.random.default_rng(len(name) + size * 31 + out[0])
    x = rng.standard_normal((2, 3, size, size))
    params = {"S": rng.standard_normal(x.shape), "W": rng.standard_normal((3, 4, kernel, kernel)),
              "B": rng.standard_normal((4,))}
    attrs = {"strides": [stride, stride], "dilations": [dilation, dilation],
             "output_shape": list(out)}
    if auto_pad:
        attrs["auto_pad"] = auto_pad
    if pads:
        attrs["pads"] = pads  # ignored when output_shape is given
    nodes = [helper.make_node("Mul", ["X", "S"], ["P"]),
             helper.make_node("ConvTranspose", ["P", "W", "B"], ["Y"], **attrs)]
    full = stride * (size - 1) + (kernel - 1) * dilation + 1
    split = []
    for o in out:
        total = full - o
        split.append((total // 2, total - total // 2) if auto_pad == "SAME_UPPER"
                     else (total - total // 2, total // 2))

    def torch_y(X, p):
        return onnx_conv_transpose(X * p["S"], p["W"], p["B"], stride, dilation, split, out)
    return Case(name, nodes, x, params, torch_y)


def convtranspose_cases():
    return [
        convtranspose_case(4, 3, 2, 1, (8, 8), pads=[1, 1, 1, 1]),      # torch pad 1 + output_padding 1
        convtranspose_case(4, 3, 2, 1, (10, 10)),                        # beyond the default: end extended
        convtranspose_case(4, 2, 2, 2, (10, 9)),                         # dilated, per-dim sizes
        convtranspose_case(5, 3, 3, 1, (15, 13)),
        convtranspose_case(4, 3, 2, 1, (6, 7), auto_pad="SAME_UPPER"),   # odd total padding
        convtranspose_case(4, 3, 2, 1, (6, 7), auto_pad="SAME_LOWER"),
        convtranspose_case(4, 3, 2, 1, (10, 9), auto_pad="SAME_UPPER"),  # negative totals
    ]


# --------------------------------------------------------------------------- AveragePool
def avgpool_case(size, kernel, stride, pad, count_include_pad):
    """count_include_pad = 1 is written as torch.onnx.export writes it: Pad +
    AveragePool(pads 0, count_include_pad 0), whose divisor (the window's
    cells inside the padded input) is torch's. An AveragePool node with
    count_include_pad = 1 divides a ceil_mode window that reaches past the
    end padding by the whole kernel (onnx's reference; its node tests check
    that), where torch clips the divisor to the padded input."""
    name = f"avgpool_in{size}_k{kernel}_s{stride}_p{pad}_cip{count_include_pad}"
    rng = np.random.default_rng(len(name) + size * 13 + kernel)
    x = rng.standard_normal((2, 2, size, size))
    params = {"S": rng.standard_normal(x.shape)}
    consts = {}
    if count_include_pad:
        consts["pads"] = np.array([0, 0, pad, pad] * 2, dtype=np.int64)
        nodes = [helper.make_node("Mul", ["X", "S"], ["P"]),
                 helper.make_node("Pad", ["P", "pads"], ["Q"], mode="constant"),
                 helper.make_node("AveragePool", ["Q"], ["Y"], kernel_shape=[kernel, kernel],
                                  strides=[stride, stride], ceil_mode=1)]
    else:
        nodes = [helper.make_node("Mul", ["X", "S"], ["P"]),
                 helper.make_node("AveragePool", ["P"], ["Y"], kernel_shape=[kernel, kernel],
                                  strides=[stride, stride], pads=[pad] * 4, ceil_mode=1)]

    def torch_y(X, p):
        return F.avg_pool2d(X * p["S"], kernel, stride, pad, ceil_mode=True,
                            count_include_pad=bool(count_include_pad))
    return Case(name, nodes, x, params, torch_y, opset=11, consts=consts)


def avgpool_cases():
    cases = []
    # Each has a last window that reaches past the end padding (ceil_mode).
    for size, kernel, stride, pad in ((6, 3, 2, 1), (5, 2, 2, 0), (7, 3, 3, 1), (4, 3, 2, 1),
                                      (2, 3, 3, 1)):
        for cip in (0, 1):
            # torch drops a last window that starts in the end padding (2x2
            # -> 1x1 here); its export (Pad + AveragePool) cannot, as the
            # padding became input: torch's own export changes the shape.
            if cip and (size, kernel, stride, pad) == (2, 3, 3, 1):
                continue
            cases.append(avgpool_case(size, kernel, stride, pad, cip))
    return cases


def check_last_window_node_test(env):
    """onnx 1.17's test_averagepool_2d_ceil_last_window_starts_on_pad: 1x1 output, sum / 9."""
    x = np.arange(1, 13, dtype=np.float32).reshape(1, 3, 2, 2)
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[3, 3],
                            pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1)
    graph = helper.make_graph(
        [node, helper.make_node("ReduceSum", ["y"], ["loss"], keepdims=0)], "last_window",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])])
    path = env.path("avgpool_last_window", "model.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)]), path)
    ir = E.run_tool([env.tofuc, path, "--compile-to=import"], quiet=True).stdout
    E.check("tensor<1x3x1x1xf32>" in ir,
            "the last window starting on the end padding is not dropped (expected a 1x1 output)")
    data = env.path("avgpool_last_window", "data", "batch_0", "x.npy")
    np.save(data, x)
    plan = env.path("avgpool_last_window", "plan.bin")
    report = env.path("avgpool_last_window", "report.json")
    E.run_tool([env.tofuc, path, "--gpus", 1, "-o", plan])
    E.run_tool([env.tofu_run, plan, "--steps", 1, "--data", os.path.dirname(os.path.dirname(data)),
                "--report", report, "--quiet"])
    got = E.report_losses(E.load_json(report), report)[0]
    want = float(x.sum()) / 9  # every window is 3x3 inside the padded 4x4 input
    E.check(abs(got - want) <= 1e-6 * abs(want),
            f"averagepool_2d_ceil_last_window_starts_on_pad: sum of outputs {got}, "
            f"ONNX's {want}")
    print("avgpool_last_window: onnx 1.17's node test values", flush=True)


# --------------------------------------------------------------------------- empty reductions
def empty_reduction_case(name, middle, consts):
    """Y = P + op(empty slice of P): a reduction over a zero-size dimension
    (its sum is 0), or a gradient summed over no indices. Such an op used
    to be planned as empty on every device, so no instruction wrote its
    output: the step read stale memory."""
    rng = np.random.default_rng(len(name))
    x = rng.standard_normal((4, 6))
    params = {"W": rng.standard_normal((4, 6))}
    nodes = [helper.make_node("Mul", ["X", "W"], ["P"])] + middle
    consts = {n: np.asarray(v) for n, v in consts.items()}
    return Case(name, nodes, x, params, lambda X, p: X * p["W"], consts=consts)


def empty_reduction_cases():
    i64 = lambda v: np.array(v, dtype=np.int64)  # noqa: E731
    empty_rows = {"st": i64([2]), "en": i64([2]), "ax": i64([0])}
    empty_cols = {"st": i64([0]), "en": i64([0]), "ax1": i64([1])}
    slice_rows = helper.make_node("Slice", ["P", "st", "en", "ax"], ["S"])
    slice_cols = helper.make_node("Slice", ["P", "st", "en", "ax1"], ["S"])
    return [
        # Gather with no indices: its gradient (GatherGrad) sums over none.
        empty_reduction_case("empty_gather_indices", [
            helper.make_node("Gather", ["P", "idx"], ["G"], axis=0),
            helper.make_node("Concat", ["G", "P"], ["Y"], axis=0)],
            {"idx": np.zeros((0,), dtype=np.int64)}),
        empty_reduction_case("empty_reducesum_dim", [
            slice_rows, helper.make_node("ReduceSum", ["S", "ax"], ["R"], keepdims=1),
            helper.make_node("Add", ["P", "R"], ["Y"])], empty_rows),
        empty_reduction_case("empty_matmul_inner", [
            slice_cols, helper.make_node("MatMul", ["S", "Z"], ["M"]),
            helper.make_node("Add", ["P", "M"], ["Y"])], {**empty_cols, "Z": np.ones((0, 6))}),
        empty_reduction_case("empty_gemm_inner", [
            slice_cols, helper.make_node("Gemm", ["S", "Z"], ["M"]),
            helper.make_node("Add", ["P", "M"], ["Y"])], {**empty_cols, "Z": np.ones((0, 6))}),
    ]


# --------------------------------------------------------------------------- the runner
def torch_reference(case):
    """Step-1 gradients and the losses of SGD_STEPS plain SGD steps in torch."""
    params = {n: torch.tensor(a, dtype=torch.float64, requires_grad=True)
              for n, a in case.params.items()}
    X = torch.from_numpy(case.x)
    losses, grads = [], None
    for step in range(SGD_STEPS):
        for t in params.values():
            t.grad = None
        y = case.torch_y(X, params)
        loss = (y * y).sum()
        loss.backward()
        losses.append(loss.item())
        if step == 0:
            grads = {n: (t.grad.numpy().copy() if t.grad is not None else np.zeros_like(t.detach().numpy()))
                     for n, t in params.items()}
        with torch.no_grad():
            for t in params.values():
                if t.grad is not None:
                    t -= LR * t.grad
    return np.array(losses), grads


def run_case(env, case):
    path = env.path(case.name, "model.onnx")
    onnx.save(case.model(), path)
    data = env.path(case.name, "data", "batch_0", "X.npy")
    np.save(data, case.x)
    ref_losses, ref_grads = torch_reference(case)
    if case.constant_loss:
        E.check(not np.any(ref_losses) and not any(np.any(g) for g in ref_grads.values()),
                f"{case.name}: torch's loss is not the constant 0")
        r = E.run_tool([env.tofuc, path, "--gpus", 1, "-o", env.path(case.name, "plan.bin")],
                       expect_rc=1, quiet=True)
        E.check("computed from compile-time constants only" in r.stderr,
                f"{case.name}: tofuc did not refuse the constant loss clearly: {r.stderr}")
        print(f"{case.name}: a constant loss (torch's is 0 with zero gradients), refused by "
              "tofuc at compile time", flush=True)
        return
    for k in ((1, 4) if case.k4 else (1,)):
        plan = env.path(case.name, f"k{k}", "plan.bin")
        dump = env.path(case.name, f"k{k}", "dump")
        report = env.path(case.name, f"k{k}", "report.json")
        E.run_tool([env.tofuc, path, "--gpus", k, "--lr", LR, "-o", plan], quiet=True)
        E.run_tool([env.tofu_run, plan, "--steps", SGD_STEPS, "--data",
                    os.path.dirname(os.path.dirname(data)), "--dump", dump, "--report", report,
                    "--quiet"], quiet=True)
        losses = E.report_losses(E.load_json(report), report)
        d = E.rel_diff(losses, ref_losses)  # a loss may reach 0 (beta * C fitted)
        E.check(d <= TOL, f"{case.name} k={k}: losses {losses.tolist()} vs torch "
                f"{ref_losses.tolist()} (rel {d:.2e})")
        for n, ref in ref_grads.items():
            f = os.path.join(dump, f"grad.{E.dump_name(n)}.npy")
            if not os.path.exists(f):
                # An initializer the op does not read is not trained; torch's
                # gradient must then be zero.
                E.check(not np.any(ref), f"{case.name} k={k}: no gradient of {n} dumped, "
                        f"torch's is {np.abs(ref).max():.3e} at most")
                continue
            d = E.rel_diff(np.load(f), ref)
            E.check(d <= TOL, f"{case.name} k={k}: gradient of {n} differs from torch by "
                    f"rel {d:.3e}")
    print(f"{case.name}: {SGD_STEPS} losses and {len(ref_grads)} gradients match torch "
          f"(k = {'1, 4' if case.k4 else '1'})", flush=True)


def main():
    def extra(parser):
        parser.add_argument("--only", help="run the cases whose name starts with this")
    env = E.parse_args(__doc__.splitlines()[1], extra=extra)
    env.require_tools()
    cases = (reduce_cases() + [torch_empty_dim_case()] + gemm_cases() + convtranspose_cases()
             + avgpool_cases() + empty_reduction_cases())
    only = env.args.only or ""
    ran = 0
    for case in cases:
        if case.name.startswith(only):
            run_case(env, case)
            ran += 1
    if "avgpool_last_window".startswith(only) or only.startswith("avgpool"):
        check_last_window_node_test(env)
        ran += 1
    E.check(ran > 0, f"no case starts with {only!r}")


if __name__ == "__main__":
    E.main_wrapper(main)
