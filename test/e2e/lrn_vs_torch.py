#!/usr/bin/python3
"""e2e.lrn_vs_torch: LRN, Sum and Mean train as in PyTorch, in float64.

A small float64 CNN built with onnx.helper (opset 13): Conv 3x3, LRN (size
5, AlexNet's window, with a large alpha so the normalization matters), a
broadcasting three-input Sum of the LRN output, the convolution's output and
a trainable [C, 1, 1] offset, Relu, LRN (size 3, other beta and bias), a
two-input Mean of that and the Sum with broadcasting from a trainable [W]
row, GlobalAveragePool, Flatten, Gemm, and tofuc's softmax cross-entropy.
The reference is torch.nn.LocalResponseNorm (the same window as ONNX's LRN
for odd sizes) and ``+`` / ``/ 2`` in float64 torch autograd, with SGD.
For k = 1 and 4, 3 SGD steps on one fixed batch (``--data``) must give
torch's losses (rel 1e-9; the report prints 17 digits) and torch's trained
weights (rel 1e-9), k = 4 the same as k = 1 within 1e-12, and step 1's
gradients (``--dump``, k = 1) torch's within 1e-9.
"""
import os

import numpy as np
import torch
import torch.nn.functional as F

import e2e_common as E

KS = (1, 4)
STEPS = 3
LR = 0.25
TOL = 1e-9
K_TOL = 1e-12
N, C, H, W, M, CLASSES = 2, 3, 6, 5, 8, 4
LRN1 = dict(size=5, alpha=0.5, beta=0.75, bias=1.0)
# ONNX float attributes are float32: values exact in binary, as torch takes them.
LRN2 = dict(size=3, alpha=0.75, beta=0.625, bias=2.0)
PARAMS = ("conv.weight", "conv.bias", "offset", "row", "fc.weight", "fc.bias")


def build_model(path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(11)

    def init(name, shape, scale=0.5):
        return numpy_helper.from_array(rng.standard_normal(shape) * scale, name)

    inits = [init("conv.weight", [M, C, 3, 3]), init("conv.bias", [M]),
             init("offset", [M, 1, 1]), init("row", [W]),
             init("fc.weight", [CLASSES, M]), init("fc.bias", [CLASSES])]
    nodes = [
        helper.make_node("Conv", ["x", "conv.weight", "conv.bias"], ["c"], name="conv",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("LRN", ["c"], ["l1"], name="lrn1", **LRN1),
        helper.make_node("Sum", ["l1", "c", "offset"], ["s"], name="sum"),
        helper.make_node("Relu", ["s"], ["r"], name="relu"),
        helper.make_node("LRN", ["r"], ["l2"], name="lrn2", **LRN2),
        helper.make_node("Mean", ["l2", "row"], ["m"], name="mean"),
        helper.make_node("GlobalAveragePool", ["m"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["logits"], name="fc",
                         transB=1),
    ]
    graph = helper.make_graph(
        nodes, "lrn_sum_mean",
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [N, C, H, W])],
        [helper.make_tensor_value_info("logits", TensorProto.DOUBLE, [N, CLASSES])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return {t.name: numpy_helper.to_array(t) for t in inits}


def lrn(x, p):
    return torch.nn.LocalResponseNorm(p["size"], alpha=p["alpha"], beta=p["beta"],
                                      k=p["bias"])(x)


def torch_reference(weights, x, y):
    """Per-step losses, step 1's gradients and the weights after STEPS steps."""
    p = {n: torch.tensor(weights[n], dtype=torch.float64, requires_grad=True) for n in PARAMS}
    x = torch.tensor(x)
    y = torch.tensor(y)
    losses, grads = [], None
    for step in range(STEPS):
        c = F.conv2d(x, p["conv.weight"], p["conv.bias"], padding=1)
        s = lrn(c, LRN1) + c + p["offset"]
        m = (lrn(torch.relu(s), LRN2) + p["row"]) / 2
        logits = F.linear(m.mean(dim=(2, 3)), p["fc.weight"], p["fc.bias"])
        loss = F.cross_entropy(logits, y)
        for t in p.values():
            t.grad = None
        loss.backward()
        losses.append(loss.item())
        if step == 0:
            grads = {n: t.grad.numpy().copy() for n, t in p.items()}
        with torch.no_grad():
            for t in p.values():
                t -= LR * t.grad
    return np.array(losses), grads, {n: t.detach().numpy() for n, t in p.items()}


def main():
    env = E.parse_args(__doc__.splitlines()[1])
    env.require_tools(env.tofuc, env.tofu_run)
    model = env.path("model.onnx")
    weights = build_model(model)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((N, C, H, W))
    y = np.array([1, 3], dtype=np.int64)
    np.save(env.path("data", "batch_0", "x.npy"), x)
    np.save(env.path("data", "batch_0", "labels.npy"), y)
    ref_losses, ref_grads, ref_trained = torch_reference(weights, x, y)
    print("torch losses:", ref_losses.tolist(), flush=True)
    E.check(ref_losses[-1] < ref_losses[0] - 1e-3,
            f"torch's loss does not move ({ref_losses.tolist()}): the test would be weak")
    failures, trained_k = [], {}
    for k in KS:
        plan, report, saved = (env.path(f"k{k}", n) for n in ("plan.bin", "r.json", "t.onnx"))
        E.run_tool([env.tofuc, model, "--gpus", k, "--loss", "softmax-cross-entropy",
                    "--lr", LR, "-o", plan])
        run = [env.tofu_run, plan, "--data", env.path("data"), "--steps", STEPS,
               "--report", report, "--save", saved]
        dump = os.path.dirname(env.path(f"k{k}", "dump", "x"))
        if k == 1:
            run += ["--dump", dump]
        E.run_tool(run)
        losses = E.report_losses(E.load_json(report), report)
        d = E.rel_diff(losses, ref_losses)
        print(f"k={k}: losses {losses.tolist()} (rel {d:.2e})", flush=True)
        if not d <= TOL:
            failures.append(f"k={k}: losses {losses.tolist()} vs torch {ref_losses.tolist()} "
                            f"(rel {d:.2e} > {TOL:g})")
        trained = E.initializers(E.load_onnx(saved, f"k={k} saved model"))
        trained_k[k] = trained
        for n in PARAMS:
            E.check(trained[n].dtype == np.float64, f"k={k}: --save wrote {n} as {trained[n].dtype}")
            d = E.rel_diff(trained[n], ref_trained[n])
            if not d <= TOL:
                failures.append(f"k={k}: trained {n} differs from torch by rel {d:.2e} > {TOL:g}")
            if k == 1:
                g = np.load(os.path.join(dump, f"grad.{n}.npy"))
                d = E.rel_diff(g, ref_grads[n])
                if not d <= TOL:
                    failures.append(f"k=1: step-1 gradient of {n} differs from torch by rel "
                                    f"{d:.2e} > {TOL:g}")
            elif not E.rel_diff(trained[n], trained_k[1][n]) <= K_TOL:
                failures.append(f"k={k}: trained {n} differs from k=1's by rel "
                                f"{E.rel_diff(trained[n], trained_k[1][n]):.2e} > {K_TOL:g}")
    E.check(not failures, "\n  " + "\n  ".join(failures))


if __name__ == "__main__":
    E.main_wrapper(main)
