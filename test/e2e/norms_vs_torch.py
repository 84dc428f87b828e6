#!/usr/bin/python3
"""e2e.norms_vs_torch: normalizations, Lp pools, reductions and resizes train as torch.

Small float64 torch models exported with tools/tofu_export.py's
``export_for_training`` (opset 14, training mode), compiled for k = 1 and
k = 4 with ``--optimizer sgd`` and run for 3 steps on one fixed batch:

* ``norms``: Conv2d 1x1 -> InstanceNorm2d(affine) (InstanceNormalization)
  -> GroupNorm(2, 4) (exported as Reshape + InstanceNormalization + Mul +
  Add) -> Linear.
* ``reductions``: F.normalize(p=2) (ReduceL2, Clip, Div), torch.norm(p=1)
  (ReduceL1), torch.logsumexp (ReduceLogSumExp), torch.prod (ReduceProd)
  of a parameterized input -> Linear.
* ``interpolate``: F.interpolate(scale_factor=2) bilinear and bicubic with
  align_corners False and True (Resize linear / cubic with
  pytorch_half_pixel / align_corners) -> Linear.

The step-1 gradient of every parameter must equal torch autograd's within
TOL and the 3 losses torch SGD's within LOSS_TOL.

ONNX operators torch does not export are built as ONNX graphs with loss
sum(Y * Y) and compared with their torch twins the same way
(attribute_edges_vs_torch's Case): GroupNormalization (opset 21, per-channel
scale and bias) vs F.group_norm, LpNormalization (p = 1, 2) vs x / norm,
LpPool (p = 2, whole windows) vs sqrt(sum of squares) and GlobalLpPool (p =
3) vs the plane's 3-norm.
"""
import os
import sys

import numpy as np
import torch
from onnx import helper
from torch import nn
import torch.nn.functional as F

import e2e_common as E
import attribute_edges_vs_torch as AE

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
from tofu_export import export_for_training  # noqa: E402

TOL = 1e-9
LOSS_TOL = 1e-9
LR = 0.125
STEPS = 3
KS = (1, 4)


class Norms(nn.Module):
    def __init__(self):
        super().__init__()
        # No bias: InstanceNorm removes it (its gradient is 0 up to rounding).
        self.conv = nn.Conv2d(2, 4, 1, bias=False)
        self.inorm = nn.InstanceNorm2d(4, affine=True)
        self.gnorm = nn.GroupNorm(2, 4)
        self.fc = nn.Linear(4 * 5 * 5, 3)

    def forward(self, x, labels):
        h = self.gnorm(torch.tanh(self.inorm(self.conv(x))))
        return F.cross_entropy(self.fc(h.flatten(1)), labels)


class Reductions(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.s = nn.Parameter(torch.linspace(0.5, 1.5, features))
        self.fc = nn.Linear(features + 3, 3)

    def forward(self, x, labels):
        z = x * self.s
        feats = torch.cat([F.normalize(z, p=2.0, dim=1),
                           torch.norm(z, p=1, dim=1, keepdim=True),
                           torch.logsumexp(z, dim=1, keepdim=True),
                           torch.prod(z, dim=1, keepdim=True)], 1)
        return F.cross_entropy(self.fc(feats), labels)


class Interpolate(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 1)
        self.fc = nn.Linear(4 * 2 * 6 * 8, 3)

    def forward(self, x, labels):
        h = self.conv(x)
        ups = [F.interpolate(h, scale_factor=2.0, mode=mode, align_corners=ac)
               for mode in ("bilinear", "bicubic") for ac in (False, True)]
        return F.cross_entropy(self.fc(torch.cat(ups, 1).flatten(1)), labels)


def make_model(name):
    torch.manual_seed(3)
    if name == "norms":
        return Norms(), torch.randn(2, 2, 5, 5).double(), torch.tensor([1, 2])
    if name == "reductions":
        return Reductions(5), torch.randn(4, 5).double(), torch.tensor([0, 2, 1, 2])
    if name == "interpolate":
        return Interpolate(), torch.randn(2, 1, 3, 4).double(), torch.tensor([2, 0])
    raise ValueError(name)


MODELS = ("norms", "reductions", "interpolate")


def check_exported(env, name, failures):
    module, x, labels = make_model(name)
    module = module.double()
    module.train()
    path = env.path(name, "model.onnx")
    export_for_training(module, (x, labels), path, input_names=["input", "labels"],
                        output_names=["loss"], opset_version=14)
    data = env.path(name, "data", "batch_0", "input.npy")
    np.save(data, x.numpy())
    np.save(os.path.join(os.path.dirname(data), "labels.npy"), labels.numpy())
    for k in KS:
        E.train_vs_torch(env, name, path, os.path.dirname(os.path.dirname(data)),
                         module, x, labels, k, lr=LR, steps=STEPS, tol=TOL,
                         loss_tol=LOSS_TOL, failures=failures)


def node_cases():
    """ONNX operators torch does not export, against their torch twins."""
    rng = np.random.default_rng(7)
    cases = []
    x = rng.standard_normal((2, 6, 3, 2))
    params = {"S": rng.standard_normal(x.shape), "gamma": rng.standard_normal(6),
              "beta": rng.standard_normal(6)}
    cases.append(AE.Case(
        "groupnormalization", [
            helper.make_node("Mul", ["X", "S"], ["P"]),
            helper.make_node("GroupNormalization", ["P", "gamma", "beta"], ["Y"],
                             num_groups=3, epsilon=1e-3)],
        x, params, lambda X, p: F.group_norm(X * p["S"], 3, p["gamma"], p["beta"], 1e-3),
        opset=21))
    for p in (1, 2):
        x = rng.standard_normal((3, 4, 2))
        params = {"S": rng.standard_normal(x.shape), "W": rng.standard_normal(x.shape)}
        # Times W: the loss sum(Y * Y) of a 2-normalized Y is a constant.
        cases.append(AE.Case(
            f"lpnormalization_p{p}", [
                helper.make_node("Mul", ["X", "S"], ["P"]),
                helper.make_node("LpNormalization", ["P"], ["Q"], axis=1, p=p),
                helper.make_node("Mul", ["Q", "W"], ["Y"])],
            x, params,
            lambda X, q, p=p: (X * q["S"]) / (X * q["S"]).norm(p=p, dim=1, keepdim=True)
            * q["W"]))
    x = rng.standard_normal((2, 2, 4, 6))
    params = {"S": rng.standard_normal(x.shape)}
    cases.append(AE.Case(
        "lppool_p2", [
            helper.make_node("Mul", ["X", "S"], ["P"]),
            helper.make_node("LpPool", ["P"], ["Y"], kernel_shape=[2, 3], strides=[2, 3], p=2)],
        x, params, lambda X, q: F.lp_pool2d(X * q["S"], 2.0, (2, 3), (2, 3)), opset=18))
    cases.append(AE.Case(
        "globallppool_p3", [
            helper.make_node("Mul", ["X", "S"], ["P"]),
            helper.make_node("GlobalLpPool", ["P"], ["Y"], p=3)],
        x, params,
        lambda X, q: (X * q["S"]).abs().pow(3).sum((2, 3), keepdim=True).pow(1.0 / 3)))
    return cases


def main():
    def extra(parser):
        parser.add_argument("--only", help="run the models / cases whose name starts with this")
    env = E.parse_args(__doc__.splitlines()[1], extra=extra)
    env.require_tools()
    only = env.args.only or ""
    failures = []
    for name in MODELS:
        if name.startswith(only):
            check_exported(env, name, failures)
    E.check(not failures, "\n  " + "\n  ".join(failures))
    for case in node_cases():
        if case.name.startswith(only):
            AE.run_case(env, case)


if __name__ == "__main__":
    E.main_wrapper(main)
