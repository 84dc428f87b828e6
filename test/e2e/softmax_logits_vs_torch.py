#!/usr/bin/python3
"""e2e.softmax_logits_vs_torch: a classifier that ends in Softmax trains with --loss=softmax-cross-entropy as torch's cross_entropy on its logits.

Most ONNX model-zoo classifiers end in Softmax: their output is
probabilities. ``tofuc --loss=softmax-cross-entropy`` on such a model must
not apply a second softmax to the probabilities (the loss would stay near
ln(C - 1 + e) and nothing would learn); it takes the Softmax's input as the
logits. The model here is ``Linear(6, 10) -> Tanh -> Linear(10, 5) ->
Softmax(dim=1)`` in float64, exported for inference (output ``probs``).

For k = 1 and k = 4, 3 SGD steps (lr 0.5) on 3 fixed batches fed with
``tofu-run --data`` (inputs ``x`` and the added ``labels``; one label is
-100, which the built-in loss ignores as PyTorch's cross_entropy does) equal
torch's SGD on ``cross_entropy(logits, labels)`` with the logits before the
Softmax: every step's loss, the
step-1 gradients (``--dump``) and the weights after 3 steps (``--save``)
within TOL, in float64. ``--dump-plan`` says that the loss reads the
Softmax's input.
"""
import os

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import e2e_common as E

N, FEATURES, HIDDEN, CLASSES = 8, 6, 10, 5
STEPS = 3
LR = 0.5
TOL = 1e-9
LOSS_TOL = 1e-9


def main():
    env = E.parse_args(__doc__.splitlines()[1])
    env.require_tools()
    torch.manual_seed(5)
    logits_net = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.Tanh(),
                               nn.Linear(HIDDEN, CLASSES)).double()
    model = nn.Sequential(logits_net, nn.Softmax(dim=1))
    path = env.path("classifier.onnx")
    torch.onnx.export(model, torch.zeros(N, FEATURES, dtype=torch.float64), path,
                      input_names=["x"], output_names=["probs"], opset_version=13)
    ops = [n.op_type for n in E.load_onnx(path).graph.node]
    E.check(ops[-1] == "Softmax", f"the export does not end in Softmax: {ops}")
    initial = E.initializers(E.load_onnx(path))

    rng = np.random.default_rng(11)
    data = []
    folder = env.path("data", "x")[:-2]
    for i in range(STEPS):
        x = rng.standard_normal((N, FEATURES))
        labels = rng.integers(0, CLASSES, size=N).astype(np.int64)
        if i == 1:
            labels[3] = -100
        data.append((x, labels))
        os.makedirs(os.path.join(folder, f"batch_{i}"))
        np.save(os.path.join(folder, f"batch_{i}", "x.npy"), x)
        np.save(os.path.join(folder, f"batch_{i}", "labels.npy"), labels)

    # torch: cross_entropy on the logits (before the Softmax), SGD.
    opt = torch.optim.SGD(logits_net.parameters(), lr=LR)
    ref_losses, ref_grads = [], None
    for x, labels in data:
        opt.zero_grad()
        loss = F.cross_entropy(logits_net(torch.from_numpy(x)), torch.from_numpy(labels))
        loss.backward()
        ref_losses.append(loss.item())
        if ref_grads is None:
            ref_grads = {n: p.grad.numpy().copy() for n, p in model.named_parameters()}
        opt.step()
    ref_losses = np.array(ref_losses)
    ref_params = {n: p.detach().numpy() for n, p in model.named_parameters()}
    E.check(set(ref_params) <= set(initial),
            f"parameters {sorted(ref_params)} not all exported as initializers {sorted(initial)}")

    for k in (1, 4):
        d = os.path.dirname(env.path(f"k{k}", "x"))
        plan, dump, report, saved = (os.path.join(d, f) for f in
                                     ("plan.bin", "dump", "r.json", "trained.onnx"))
        E.run_tool([env.tofuc, path, "--gpus", k, "--lr", LR, "--loss=softmax-cross-entropy",
                    "-o", plan])
        summary = E.run_tool([env.tofu_run, plan, "--dump-plan"], quiet=True).stdout
        E.check("read before its Softmax" in summary,
                f"k={k}: the plan summary does not say that the loss skips the Softmax:\n"
                f"{summary[:2000]}")
        E.run_tool([env.tofu_run, plan, "--steps", STEPS, "--data", folder, "--dump", dump,
                    "--save", saved, "--report", report, "--quiet"])
        losses = E.report_losses(E.load_json(report), report)
        dl = E.rel_diff(losses, ref_losses)
        print(f"k={k}: losses {losses} torch {ref_losses} rel {dl:.2e}")
        E.check(dl <= LOSS_TOL, f"k={k}: losses {losses} differ from torch's cross_entropy on "
                f"the logits {ref_losses} (rel {dl:.2e}); a second softmax on the "
                f"probabilities gives about ln({CLASSES - 1} + e) = "
                f"{np.log(CLASSES - 1 + np.e):.4f}")
        trained = E.initializers(E.load_onnx(saved, "trained model"))
        for n, ref in ref_grads.items():
            got = np.load(os.path.join(dump, f"grad.{E.dump_name(n)}.npy"))
            E.check(got.dtype == np.float64, f"k={k}: gradient of {n} dumped as {got.dtype}")
            diff = E.rel_diff(got, ref)
            E.check(diff <= TOL, f"k={k}: step-1 gradient of {n} differs from torch by rel "
                    f"{diff:.2e}")
            diff = E.rel_diff(trained[n], ref_params[n])
            E.check(diff <= TOL, f"k={k}: {n} after {STEPS} steps differs from torch by rel "
                    f"{diff:.2e}")
            E.check(E.rel_diff(trained[n], initial[n]) > 1e-3, f"k={k}: {n} did not move")
        print(f"k={k}: step-1 gradients and trained weights equal torch's (<= {TOL})")


if __name__ == "__main__":
    E.main_wrapper(main)
