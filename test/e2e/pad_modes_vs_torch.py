#!/usr/bin/python3
"""e2e.pad_modes_vs_torch: Pad's edge, reflect and wrap modes train as in PyTorch.

For each mode a small CNN is built with onnx.helper: Conv 1x1 (so the Pad's
gradient is needed), Pad of H and W with asymmetric pads in that mode, Conv
3x3, GlobalAveragePool, Flatten, Gemm, and tofuc's softmax cross-entropy
loss. At k = 1, step 1's loss and every parameter gradient (tofu-run
--dump) must match float64 PyTorch (F.pad with 'replicate', 'reflect' or
'circular') on the same weights and batch within relative difference 1e-4;
for k in 1, 2, 3 and 4, the loss and the weights after one SGD step
(tofu-run --save) must equal the initial weights minus lr times PyTorch's
gradients (same tolerance), and measured communication must equal the
plan's. The
partitioned runs exercise the interval analysis of the non-affine source
indices (a worker fetches the rows it reflects / clamps / wraps) and the
scatter-add gradient PadGrad.
"""
import os

import numpy as np
import torch
import torch.nn.functional as F

import e2e_common as E

KS = (1, 2, 3, 4)
TOL = 1e-4
LR = 0.5
#: ONNX mode -> torch F.pad mode.
MODES = {"edge": "replicate", "reflect": "reflect", "wrap": "circular"}
#: ONNX pads of [N, C, H, W]: begins then ends (H: 2 before, 1 after; W: 1, 2).
PADS = [0, 0, 2, 1, 0, 0, 1, 2]
N, C, H, W, C2, CLASSES = 2, 3, 10, 9, 4, 5


def build_model(mode, path):
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(3)

    def init(name, shape):
        return numpy_helper.from_array(
            (rng.standard_normal(shape) * 0.5).astype(np.float32), name)

    inits = [init("conv1.weight", [C, C, 1, 1]), init("conv1.bias", [C]),
             init("conv2.weight", [C2, C, 3, 3]), init("conv2.bias", [C2]),
             init("fc.weight", [CLASSES, C2]), init("fc.bias", [CLASSES]),
             numpy_helper.from_array(np.array(PADS, dtype=np.int64), "pads")]
    nodes = [
        helper.make_node("Conv", ["input", "conv1.weight", "conv1.bias"], ["c1"],
                         name="conv1", kernel_shape=[1, 1]),
        helper.make_node("Pad", ["c1", "pads"], ["p"], name="pad", mode=mode),
        helper.make_node("Conv", ["p", "conv2.weight", "conv2.bias"], ["c2"],
                         name="conv2", kernel_shape=[3, 3]),
        helper.make_node("GlobalAveragePool", ["c2"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["logits"],
                         name="fc", transB=1),
    ]
    graph = helper.make_graph(
        nodes, "pad_" + mode,
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [N, C, H, W])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [N, CLASSES])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    import onnx
    onnx.checker.check_model(model)
    onnx.save(model, path)


def torch_reference(mode, dump):
    def load(name):
        return torch.from_numpy(np.load(os.path.join(dump, name)).astype(np.float64))

    p = {n: load(f"param.{n}.npy").requires_grad_()
         for n in ("conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias",
                   "fc.weight", "fc.bias")}
    x = load("input.input.npy")
    y = torch.from_numpy(np.load(os.path.join(dump, "input.labels.npy")))
    h = F.conv2d(x, p["conv1.weight"], p["conv1.bias"])
    # F.pad lists the last dim first: (W begin, W end, H begin, H end).
    h = F.pad(h, (PADS[3], PADS[7], PADS[2], PADS[6]), mode=MODES[mode])
    h = F.conv2d(h, p["conv2.weight"], p["conv2.bias"])
    logits = F.linear(h.mean(dim=(2, 3)), p["fc.weight"], p["fc.bias"])
    loss = F.cross_entropy(logits, y)
    loss.backward()
    return loss.item(), {n: t.grad.numpy() for n, t in p.items()}


def main():
    env = E.parse_args(__doc__.splitlines()[1])
    env.require_tools(env.tofuc, env.tofu_run)
    for mode in MODES:
        model = env.path(mode, "model.onnx")
        build_model(mode, model)
        dump = None
        for k in KS:
            plan = env.path(mode, f"k{k}", "plan.bin")
            report = env.path(mode, f"k{k}", "r.json")
            saved = env.path(mode, f"k{k}", "saved.onnx")
            E.run_tool([env.tofuc, model, "--gpus", k, "--loss", "softmax-cross-entropy",
                        "--optimizer", "sgd", "--lr", LR, "-o", plan])
            run = [env.tofu_run, plan, "--steps", 1, "--save", saved, "--report", report]
            if k == 1:
                # The batch and the initial weights (the same for every k).
                dump = os.path.dirname(env.path(mode, "k1", "dump", "x"))
                run += ["--dump", dump]
            E.run_tool(run)
            r = E.load_json(report)
            loss = E.report_losses(r, report)[0]
            ref_loss, ref_grads = torch_reference(mode, dump)
            d = abs(loss - ref_loss) / abs(ref_loss)
            E.check(d <= TOL, f"{mode} k={k}: loss {loss} vs PyTorch {ref_loss} (rel {d:.2e})")
            trained = E.initializers(E.load_onnx(saved, "saved model"))
            for name, ref in ref_grads.items():
                if k == 1:
                    got = np.load(os.path.join(dump, f"grad.{name}.npy"))
                    d = E.rel_diff(got, ref)
                    E.check(d <= TOL, f"{mode} k={k}: gradient of {name} differs from "
                                      f"PyTorch by rel {d:.3e}")
                # One SGD step: w1 = w0 - lr * grad.
                w0 = np.load(os.path.join(dump, f"param.{name}.npy")).astype(np.float64)
                d = E.rel_diff((w0 - trained[name]) / LR, ref)
                E.check(d <= TOL, f"{mode} k={k}: the step of {name} is not -lr times "
                                  f"PyTorch's gradient (rel {d:.3e})")
            E.check(r["comm_bytes"]["measured"] == r["comm_bytes"]["planned"],
                    f"{mode} k={k}: measured comm {r['comm_bytes']['measured']} != "
                    f"planned {r['comm_bytes']['planned']}")
            print(f"{mode} k={k}: loss and {len(ref_grads)} weight updates match PyTorch; "
                  f"comm {r['comm_bytes']['planned']} bytes", flush=True)


if __name__ == "__main__":
    E.main_wrapper(main)
