#!/usr/bin/python3
"""e2e.batchnorm_running_stats: training-mode BatchNormalization updates its running statistics as PyTorch does.

A small CNN is built with onnx.helper: Conv 3x3, BatchNormalization
(training_mode = 1, momentum 0.8, non-trivial initial running_mean and
running_var initializers), Relu, GlobalAveragePool, Flatten, Gemm, and
tofuc's softmax cross-entropy loss with SGD. Three batches are fed with
tofu-run --data. For k in 1, 2 and 4, after 1 and after 3 steps the
running_mean and running_var that tofu-run --save writes back into the
model must equal float64 PyTorch (nn.BatchNorm2d with momentum 1 - 0.8,
trained by the same SGD on the same batches) within relative difference
1e-4:

* running_mean equals torch's running_mean;
* running_var follows ONNX's definition, input_var * momentum + var *
  (1 - momentum) with the *biased* batch variance, where torch uses the
  unbiased one: the reference applies that recurrence to the BN inputs
  torch saw (and checks that torch's own running_var is the same recurrence
  with Bessel's correction, so the two differ only by it).

The scale, bias and conv weights after 3 steps match torch too. At k = 2,
2 steps, --save, then --resume for 1 step give the 3-step statistics
bit-for-bit (they persist like optimizer state). The same model with
training_mode = 0 keeps both statistics bit-identical to the initializers.
"""
import os

import numpy as np
import torch
import torch.nn.functional as F

import e2e_common as E

KS = (1, 2, 4)
TOL = 1e-4
LR = 0.1
MOMENTUM = 0.8
N, C, H, W, C2, CLASSES = 4, 2, 6, 6, 4, 5
BATCHES = 3
PARAMS = ("conv.weight", "conv.bias", "bn.weight", "bn.bias", "fc.weight", "fc.bias")


def build_model(path, training_mode):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(5)

    def init(name, values):
        return numpy_helper.from_array(np.asarray(values, dtype=np.float32), name)

    inits = [init("conv.weight", rng.standard_normal([C2, C, 3, 3]) * 0.4),
             init("conv.bias", rng.standard_normal([C2]) * 0.3),
             init("bn.weight", 1 + rng.standard_normal([C2]) * 0.2),
             init("bn.bias", rng.standard_normal([C2]) * 0.2),
             init("bn.running_mean", rng.standard_normal([C2]) * 0.5),
             init("bn.running_var", 0.5 + rng.random([C2])),
             init("fc.weight", rng.standard_normal([CLASSES, C2]) * 0.5),
             init("fc.bias", rng.standard_normal([CLASSES]) * 0.1)]
    nodes = [
        helper.make_node("Conv", ["input", "conv.weight", "conv.bias"], ["c"], name="conv",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization",
                         ["c", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"],
                         ["b", "bn_mean_out", "bn_var_out"] if training_mode else ["b"],
                         name="bn", momentum=MOMENTUM, training_mode=training_mode),
        helper.make_node("Relu", ["b"], ["r"], name="relu"),
        helper.make_node("GlobalAveragePool", ["r"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["logits"], name="fc",
                         transB=1),
    ]
    graph = helper.make_graph(
        nodes, "bn_running_stats",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [N, C, H, W])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [N, CLASSES])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    onnx.checker.check_model(model)
    onnx.save(model, path)


def write_batches(root):
    rng = np.random.default_rng(11)
    batches = []
    for i in range(BATCHES):
        x = rng.standard_normal([N, C, H, W]).astype(np.float32)
        y = rng.integers(0, CLASSES, [N]).astype(np.int64)
        d = os.path.join(root, f"batch_{i}")
        os.makedirs(d, exist_ok=True)
        np.save(os.path.join(d, "input.npy"), x)
        np.save(os.path.join(d, "labels.npy"), y)
        batches.append((x, y))
    return batches


def torch_reference(inits, batches, steps):
    """Weights and running statistics after `steps` SGD steps in float64 torch,
    and the ONNX-convention running_var (biased batch variance)."""
    t = {n: torch.tensor(inits[n], dtype=torch.float64) for n in inits}
    conv = torch.nn.Conv2d(C, C2, 3, padding=1).double()
    bn = torch.nn.BatchNorm2d(C2, eps=1e-5, momentum=1 - MOMENTUM).double()
    fc = torch.nn.Linear(C2, CLASSES).double()
    with torch.no_grad():
        conv.weight.copy_(t["conv.weight"]), conv.bias.copy_(t["conv.bias"])
        bn.weight.copy_(t["bn.weight"]), bn.bias.copy_(t["bn.bias"])
        bn.running_mean.copy_(t["bn.running_mean"]), bn.running_var.copy_(t["bn.running_var"])
        fc.weight.copy_(t["fc.weight"]), fc.bias.copy_(t["fc.bias"])
    params = list(conv.parameters()) + list(bn.parameters()) + list(fc.parameters())
    opt = torch.optim.SGD(params, lr=LR)
    onnx_var = t["bn.running_var"].clone()
    unbiased_var = t["bn.running_var"].clone()
    bn.train()
    for step in range(steps):
        x, y = batches[step % len(batches)]
        h = conv(torch.from_numpy(x).double())
        with torch.no_grad():
            onnx_var = onnx_var * MOMENTUM + h.var(dim=(0, 2, 3), unbiased=False) * (1 - MOMENTUM)
            unbiased_var = (unbiased_var * MOMENTUM
                            + h.var(dim=(0, 2, 3), unbiased=True) * (1 - MOMENTUM))
        logits = fc(F.relu(bn(h)).mean(dim=(2, 3)))
        loss = F.cross_entropy(logits, torch.from_numpy(y))
        opt.zero_grad()
        loss.backward()
        opt.step()
    E.check(np.allclose(bn.running_var.numpy(), unbiased_var.numpy(), rtol=1e-12, atol=0),
            "the oracle: torch's running_var is not the unbiased-variance recurrence")
    out = {"conv.weight": conv.weight, "conv.bias": conv.bias, "bn.weight": bn.weight,
           "bn.bias": bn.bias, "fc.weight": fc.weight, "fc.bias": fc.bias,
           "bn.running_mean": bn.running_mean, "bn.running_var": onnx_var}
    return {n: v.detach().numpy() for n, v in out.items()}


def run(env, plan, data, steps, out, resume=None):
    cmd = [env.tofu_run, plan, "--steps", steps, "--quiet", "--data", data, "--save", out]
    if resume:
        cmd += ["--resume", resume]
    E.run_tool(cmd)
    return E.initializers(E.load_onnx(out, "saved model"))


def main():
    env = E.parse_args(__doc__.splitlines()[1])
    env.require_tools(env.tofuc, env.tofu_run)
    model = env.path("bn.onnx")
    build_model(model, 1)
    inits = E.initializers(E.load_onnx(model))
    data = os.path.dirname(env.path("data", "x"))
    batches = write_batches(data)
    refs = {s: torch_reference(inits, batches, s) for s in (1, 3)}
    for s in (1, 3):
        for stat in ("bn.running_mean", "bn.running_var"):
            E.check(E.rel_diff(refs[s][stat], inits[stat]) > 1e-3,
                    f"the reference {stat} barely moves after {s} steps")
    for k in KS:
        plan = env.path(f"k{k}", "plan.bin")
        E.run_tool([env.tofuc, model, "--gpus", k, "--loss", "softmax-cross-entropy",
                    "--optimizer", "sgd", "--lr", LR, "-o", plan])
        for s in (1, 3):
            got = run(env, plan, data, s, env.path(f"k{k}", f"s{s}", "model.onnx"))
            names = ("bn.running_mean", "bn.running_var") + (PARAMS if s == 3 else ())
            for name in names:
                d = E.rel_diff(got[name], refs[s][name])
                E.check(d <= TOL, f"k={k}, {s} step(s): {name} {got[name]} differs from "
                                  f"PyTorch's {refs[s][name]} (rel {d:.2e})")
            print(f"k={k}: after {s} step(s) {', '.join(names)} match PyTorch", flush=True)
        if k == 2:
            straight = run(env, plan, data, 3, env.path("k2", "straight", "model.onnx"))
            first = env.path("k2", "first", "model.onnx")
            run(env, plan, data, 2, first)
            resumed = run(env, plan, data, 1, env.path("k2", "resumed", "model.onnx"),
                          resume=first)
            for name in ("bn.running_mean", "bn.running_var"):
                E.check(np.array_equal(resumed[name], straight[name]),
                        f"k=2: {name} after 2 steps + --resume 1 step {resumed[name]} is not "
                        f"the 3-step value {straight[name]}")
            print("k=2: 2 steps, --save, --resume 1 step give the 3-step statistics", flush=True)

    # Inference mode: the statistics stay the initializers' values.
    frozen_model = env.path("bn_inference.onnx")
    build_model(frozen_model, 0)
    plan = env.path("inference", "plan.bin")
    E.run_tool([env.tofuc, frozen_model, "--gpus", 2, "--loss", "softmax-cross-entropy",
                "--optimizer", "sgd", "--lr", LR, "-o", plan])
    got = run(env, plan, data, 3, env.path("inference", "model.onnx"))
    for name in ("bn.running_mean", "bn.running_var"):
        E.check(np.array_equal(got[name], inits[name]),
                f"inference mode: {name} changed from {inits[name]} to {got[name]}")
    E.check(not np.array_equal(got["bn.weight"], inits["bn.weight"]),
            "inference mode: bn.weight did not train")
    print("training_mode = 0: running statistics unchanged after 3 steps", flush=True)


if __name__ == "__main__":
    E.main_wrapper(main)
