#!/usr/bin/python3
"""e2e.tofu_export: tools/tofu_export.py records what PyTorch trains, and tofuc trains exactly that.

A float64 module with a training-mode ``nn.BatchNorm1d`` (running statistics
are buffers), a parameter with ``requires_grad = False``, two Linear layers
sharing one weight (tied) and a non-persistent buffer is exported with
``export_for_training``. Proves that:

* ``tofu.frozen`` lists the running statistics and the requires_grad=False
  bias, ``tofu.trainable`` every other parameter, once per tied tensor, both
  in initializer order (the non-persistent buffer is a Constant node, not an
  initializer);
* the same lists are written to a binary file object (``io.BytesIO``), and
  ``record_training_lists`` rewrites a model whose weights are external data
  without loading or moving the data files;
* a parameter that ``do_constant_folding=True`` folds into a new
  initializer is an error naming it (PyTorch trains the parameter), or,
  with ``unknown_initializers="frozen"``, frozen with a warning;
* with tofuc (k = 1 and 2, 2 SGD steps on one fixed batch via ``--data``):
  the requires_grad=False bias is bit-identical after the steps and has no
  gradient, the trainable weights equal torch's SGD (rel 1e-9), and the
  running mean, listed as frozen, still follows the BatchNormalization
  (ONNX's recurrence with the model's float32 momentum: rel 1e-9; torch's
  float64 momentum 0.1: 1e-6), since frozen stops the gradient and the
  optimizer, not the op's statistics; the running variance moves too
  (ONNX's biased batch variance, docs/Training.md).
"""

import copy
import io
import json
import os
import sys
import warnings

import numpy as np
import onnx
import torch

import e2e_common as E

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
import tofu_export  # noqa: E402

LR = 0.25
STEPS = 2
TOL = 1e-9


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc_a = torch.nn.Linear(4, 4)
        self.fc_b = torch.nn.Linear(4, 4)
        self.fc_b.weight = self.fc_a.weight  # tied
        self.bn = torch.nn.BatchNorm1d(4)
        self.out = torch.nn.Linear(4, 3)
        self.out.bias.requires_grad_(False)
        self.register_buffer("scale", torch.full((4,), 0.5), persistent=False)

    def forward(self, x):
        h = torch.relu(self.fc_b(torch.tanh(self.fc_a(self.bn(x)))) * self.scale)
        return torch.tanh(self.out(h)).pow(2).mean()


class Folded(torch.nn.Module):
    """x @ w.t(): constant folding stores w transposed under a new name."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3, 4))

    def forward(self, x):
        return (x @ self.w.t()).sum()


FROZEN = ["bn.running_mean", "bn.running_var", "out.bias"]
TRAINABLE = ["fc_a.weight", "fc_a.bias", "fc_b.bias", "bn.weight", "bn.bias", "out.weight"]


def metadata(model):
    return {p.key: json.loads(p.value) for p in model.metadata_props}


def check_lists(what, lists, frozen, trainable):
    E.check(list(frozen) == FROZEN and lists.get(tofu_export.FROZEN_KEY) == FROZEN,
            f"{what}: tofu.frozen is {lists.get(tofu_export.FROZEN_KEY)} "
            f"(returned {frozen}), expected {FROZEN}")
    E.check(list(trainable) == TRAINABLE
            and lists.get(tofu_export.TRAINABLE_KEY) == TRAINABLE,
            f"{what}: tofu.trainable is {lists.get(tofu_export.TRAINABLE_KEY)} "
            f"(returned {trainable}), expected {TRAINABLE}")


def reference(module, x):
    """torch SGD over the requires_grad parameters: (module after STEPS)."""
    module = copy.deepcopy(module).train()
    for _ in range(STEPS):
        module.zero_grad()
        module(x).backward()
        with torch.no_grad():
            for p in module.parameters():
                if p.requires_grad:
                    p -= LR * p.grad
    return module


def main():
    env = E.parse_args(__doc__.splitlines()[1])
    torch.manual_seed(3)
    module = Net().double()
    x = torch.randn(6, 4, dtype=torch.float64)
    kwargs = dict(input_names=["x"], output_names=["loss"], opset_version=17)

    path = env.path("net.onnx")
    frozen, trainable = tofu_export.export_for_training(module, (x,), path, **kwargs)
    # Exporting in training mode runs the module once, which updates its
    # running statistics; the file holds the updated values, so the oracle
    # starts from the module as it is now (the exports below update it again).
    exported = copy.deepcopy(module)
    model = onnx.load(path)
    check_lists("path", metadata(model), frozen, trainable)
    initial = E.initializers(model)
    E.check("scale" not in initial, "the non-persistent buffer became an initializer")

    buffer = io.BytesIO()
    frozen, trainable = tofu_export.export_for_training(module, (x,), buffer, **kwargs)
    check_lists("BytesIO", metadata(onnx.load_model_from_string(buffer.getvalue())),
                frozen, trainable)

    # External data: written by onnx, one file per tensor; the lists are
    # added without touching them.
    ext_dir = os.path.dirname(env.path("external", "net.onnx"))
    plain = onnx.load(path)
    del plain.metadata_props[:]
    onnx.save(plain, os.path.join(ext_dir, "net.onnx"), save_as_external_data=True,
              all_tensors_to_one_file=False, size_threshold=0)
    files = {f: os.path.getmtime(os.path.join(ext_dir, f))
             for f in os.listdir(ext_dir) if f != "net.onnx"}
    E.check(len(files) == len(initial), f"expected one data file per tensor: {files}")
    frozen, trainable = tofu_export.record_training_lists(module, os.path.join(ext_dir, "net.onnx"))
    ext = onnx.load(os.path.join(ext_dir, "net.onnx"))
    check_lists("external data", metadata(ext), frozen, trainable)
    for n, v in E.initializers(ext).items():
        E.check(np.array_equal(v, initial[n]), f"external data: {n} changed")
    for f, mtime in files.items():
        E.check(os.path.getmtime(os.path.join(ext_dir, f)) == mtime,
                f"external data file {f} was rewritten")

    # A parameter folded into a new initializer (w transposed, named
    # onnx::MatMul_*) is neither a parameter nor a buffer: an error by
    # default, frozen with a warning on request.
    folded = Folded().double()
    xf = torch.randn(2, 4, dtype=torch.float64)
    try:
        tofu_export.export_for_training(folded, (xf,), io.BytesIO(), do_constant_folding=True)
        E.fail("a parameter folded by do_constant_folding=True was accepted")
    except ValueError as e:
        E.check("onnx::MatMul" in str(e) and "do_constant_folding=False" in str(e),
                f"unexpected error for a folded parameter: {e}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frozen, trainable = tofu_export.export_for_training(
            folded, (xf,), io.BytesIO(), do_constant_folding=True,
            unknown_initializers="frozen")
    E.check(len(frozen) == 1 and frozen[0].startswith("onnx::MatMul") and not trainable,
            f"unknown_initializers='frozen': lists {frozen}, {trainable}")
    E.check(any("neither a parameter nor a buffer" in str(w.message) for w in caught),
            "no warning for an initializer listed as frozen that is no buffer")
    E.check(tofu_export.export_for_training(folded, (xf,), io.BytesIO()) == ([], ["w"]),
            "without folding, w keeps its name and trains")

    if not os.path.isfile(env.tofuc):
        print("tofuc not built: the training checks are skipped")
        return
    env.require_tools()
    E.check(np.array_equal(exported.bn.running_mean.numpy(), initial["bn.running_mean"]),
            "the exported running mean is not the module's after export")
    ref = reference(exported, x)
    ref_params = {n: p.detach().numpy() for n, p in ref.named_parameters()}
    # BatchNorm reads the fixed input x: each step's batch mean is x's. ONNX
    # keeps the momentum as a float32 attribute (0.9 -> 0.89999998), so torch
    # (momentum 0.1 in float64) differs at about 1e-7; the recurrence with
    # the model's own momentum is exact.
    momentum = [a.f for n in model.graph.node if n.op_type == "BatchNormalization"
                for a in n.attribute if a.name == "momentum"][0]
    expected_mean = initial["bn.running_mean"].copy()
    for _ in range(STEPS):
        expected_mean = expected_mean * momentum + x.numpy().mean(0) * (1 - momentum)
    np.save(env.path("data", "batch_0", "x.npy"), x.numpy())
    failures = []
    for k in (1, 2):
        plan = env.path(f"k{k}", "plan.bin")
        d = os.path.dirname(plan)
        E.run_tool([env.tofuc, path, "--gpus", k, "--lr", LR, "-o", plan])
        E.run_tool([env.tofu_run, plan, "--data", env.path("data"), "--steps", STEPS,
                    "--dump", os.path.join(d, "dump"), "--save", os.path.join(d, "trained.onnx")])
        saved = E.initializers(E.load_onnx(os.path.join(d, "trained.onnx")))
        for n in TRAINABLE:
            name = "fc_a.weight" if n == "fc_b.weight" else n
            diff = E.rel_diff(saved[name], ref_params[n])
            print(f"k={k}: {n:<16} rel {diff:.2e} to torch")
            if diff > TOL or np.array_equal(saved[name], initial[name]):
                failures.append(f"k={k}: {n} rel {diff:.2e} to torch (or did not move)")
        if not np.array_equal(saved["out.bias"], initial["out.bias"]):
            failures.append(f"k={k}: out.bias (requires_grad=False) changed")
        if os.path.isfile(os.path.join(d, "dump", "grad.out.bias.npy")):
            failures.append(f"k={k}: a gradient was dumped for out.bias")
        mean = E.rel_diff(saved["bn.running_mean"], expected_mean)
        to_torch = E.rel_diff(saved["bn.running_mean"], ref.bn.running_mean.numpy())
        print(f"k={k}: bn.running_mean rel {mean:.2e} to ONNX's recurrence, "
              f"{to_torch:.2e} to torch")
        if mean > TOL or to_torch > 1e-6:
            failures.append(f"k={k}: bn.running_mean rel {mean:.2e} (torch: {to_torch:.2e}): "
                            "a frozen running statistic must still follow the op")
        if np.array_equal(saved["bn.running_var"], initial["bn.running_var"]):
            failures.append(f"k={k}: bn.running_var did not follow the op")
    E.check(not failures, "\n  " + "\n  ".join(failures))


if __name__ == "__main__":
    E.main_wrapper(main)
