#!/usr/bin/python3
"""e2e.kinks_vs_torch: at kinks and ties tofu takes PyTorch's subgradient.

Small float64 models are built in PyTorch so that step 1 sits EXACTLY on
the kinks and ties of their ops (docs/Training.md, "Subgradients at kinks
and ties"), exported with ``torch.onnx.export(..., training=TRAINING,
do_constant_folding=False)`` at opset 14 (cross-entropy inside
``forward``), compiled for k = 1 and k = 4 with ``--optimizer sgd``, and run
for 3 steps on one fixed batch (``tofu-run --data``):

* ``pools``: Conv -> ReLU -> MaxPool2d(3, stride 1, padding 1, ceil_mode) ->
  MaxPool2d(3, stride 1, padding 1, ceil_mode) (GoogLeNet's inception pool
  twice: the second pool sees exact ties, and the ReLU's zeros tie too) ->
  AdaptiveMaxPool2d(1) (exported as a MaxPool over the whole plane, tied
  after the pools) and Flatten -> Linear. The input has repeated
  small-integer values. At k = 4 the plan splits batch and channels.
* ``pools_spatial``: the same with one channel, so the k = 4 plan splits
  the two 3x3 pools' MaxPoolGrad along H or W (checked in --dump-plan): each
  device reads X over the whole windows of its rows (the halo of the new
  rule).
* ``clips``: x + b (b = 0, x exactly on -1, 0, 2, 6, 7) through ReLU6
  (exported as Relu then Clip(0, 6)), Hardtanh(-1, 2) (Clip(-1, 2)),
  clamp(min=0) and clamp(max=6) (one-bound Clips), LeakyReLU(0.125), ReLU and
  abs, concatenated -> Linear.
* ``amax``: x + b with tied row maxima through torch.amax(dim=1) and
  Tensor.max() (both ReduceMax) -> Linear.
* ``maxmin``: torch.maximum / torch.minimum (2-input Max / Min) of two
  parameterized halves of the input with equal entries, and a maximum
  broadcast against a parameter of zeros (ties share dY / 2); sign, floor
  and ceil (zero gradient) multiplied into the features.
* ``pow``: torch.pow(x * s, p) with x exactly 0 in places and trained
  exponents p in {0, 2, 3} (Pow's base and exponent gradients at 0).

The step-1 gradient of every parameter (``--dump``) must equal torch
autograd's in float64 within TOL at k = 1 and k = 4 (the pool models also at
k = 2 and 3), and the 3 losses must
equal those of 3 torch SGD steps within LOSS_TOL (the report prints 17
significant digits). With the old rules (every tied cell of a window gets
dY; Clip passes dY on a bound; LeakyReLU's slope starts below 0; ReduceMax
gives every tied maximum all of dY; Pow's gradients NaN at 0) each model's
step-1 gradients differ from torch's by far more than TOL (or the model did
not import: clamp(max=), Max, Min, Sign, Floor and Ceil were refused).
"""
import os

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

import e2e_common as E

TOL = 1e-9
LOSS_TOL = 1e-9
LR = 0.125
STEPS = 3
KS = (1, 4)
#: The max-pool models also run at k = 2 and 3 (the halo of MaxPoolGrad's
#: new rule under more splits).
POOL_KS = (1, 2, 3, 4)


class Pools(nn.Module):
    def __init__(self, channels=3, size=6):
        super().__init__()
        self.conv = nn.Conv2d(2, channels, 1)
        self.pool = nn.MaxPool2d(3, stride=1, padding=1, ceil_mode=True)
        self.gmp = nn.AdaptiveMaxPool2d(1)
        self.fc = nn.Linear(channels * size * size + channels, 4)

    def forward(self, x, labels):
        h = self.pool(self.pool(torch.relu(self.conv(x))))
        feats = torch.cat([h.flatten(1), self.gmp(h).flatten(1)], 1)
        return F.cross_entropy(self.fc(feats), labels)


class Clips(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.b = nn.ParameterList([nn.Parameter(torch.zeros(features)) for _ in range(7)])
        self.fc = nn.Linear(7 * features, 3)

    def forward(self, x, labels):
        b = self.b
        feats = torch.cat([
            F.relu6(x + b[0]),
            F.hardtanh(x + b[1], -1.0, 2.0),
            torch.clamp(x + b[2], min=0.0),
            torch.clamp(x + b[3], max=6.0),
            F.leaky_relu(x + b[4], 0.125),
            torch.relu(x + b[5]),
            torch.abs(x + b[6]),
        ], 1)
        return F.cross_entropy(self.fc(feats), labels)


class Amax(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.b = nn.Parameter(torch.zeros(features))
        self.fc = nn.Linear(features + 2, 3)

    def forward(self, x, labels):
        z = x + self.b
        whole = z.max() * torch.ones(z.shape[0], 1, dtype=z.dtype)
        feats = torch.cat([z, torch.amax(z, dim=1, keepdim=True), whole], 1)
        return F.cross_entropy(self.fc(feats), labels)


class MaxMin(nn.Module):
    """torch.maximum / minimum of the two halves of the input (ties where
    the halves are equal), one broadcast against a parameter; sign, floor
    and ceil (zero gradient)."""

    def __init__(self, features):
        super().__init__()
        self.features = features
        self.a = nn.Parameter(torch.zeros(features))
        self.b = nn.Parameter(torch.zeros(features))
        self.fc = nn.Linear(6 * features, 3)

    def forward(self, x, labels):
        u = x[:, :self.features] + self.a
        v = x[:, self.features:] + self.b
        feats = torch.cat([torch.maximum(u, v), torch.minimum(u, v),
                           torch.maximum(u, self.b), torch.sign(u) * v,
                           torch.floor(u) * v, torch.ceil(v) * u], 1)
        return F.cross_entropy(self.fc(feats), labels)


class Pow(nn.Module):
    def __init__(self):
        super().__init__()
        self.s = nn.Parameter(torch.ones(3))
        self.p = nn.Parameter(torch.tensor([0.0, 2.0, 3.0]))
        self.fc = nn.Linear(3, 3)

    def forward(self, x, labels):
        return F.cross_entropy(self.fc(torch.pow(x * self.s, self.p)), labels)


def make_model(name):
    """(module, input batch, labels), float64, with the batch on the kinks."""
    torch.manual_seed(1)
    if name == "pools":
        x = torch.randint(0, 3, (2, 2, 6, 6)).double()
        return Pools(), x, torch.tensor([1, 3])
    if name == "pools_spatial":
        x = torch.randint(0, 3, (2, 2, 8, 8)).double()
        return Pools(channels=1, size=8), x, torch.tensor([2, 0])
    if name == "clips":
        x = torch.tensor([[-1.0, 0.0, 2.0, 6.0, 7.0],
                          [0.0, 6.0, -1.0, 2.0, 0.0],
                          [7.0, 2.0, 0.0, -1.0, 6.0],
                          [6.0, -1.0, 6.0, 0.0, 2.0]])
        return Clips(5), x.double(), torch.tensor([0, 2, 1, 2])
    if name == "amax":
        x = torch.tensor([[1.0, 3.0, 3.0, 0.0],
                          [2.0, 2.0, 2.0, 2.0],
                          [3.0, 0.0, 1.0, 3.0]])
        return Amax(4), x.double(), torch.tensor([0, 1, 2])
    if name == "maxmin":
        x = torch.tensor([[1.0, 2.0, 0.0, 1.0, 3.0, 0.0],
                          [2.0, 0.0, 1.5, 2.0, 0.0, 0.5],
                          [0.0, 0.0, 3.0, 1.0, 0.0, 3.0]])
        return MaxMin(3), x.double(), torch.tensor([1, 0, 2])
    if name == "pow":
        # Column 0: base 0 with exponent 0 (dp stays 0, so p stays 0);
        # column 1: bases 0 and > 0 with exponent 2; column 2: bases > 0.
        x = torch.tensor([[0.0, 0.0, 1.0],
                          [0.0, 1.5, 2.0],
                          [0.0, 0.0, 0.5],
                          [0.0, 2.0, 1.5]])
        return Pow(), x.double(), torch.tensor([2, 0, 1, 2])
    raise ValueError(name)


MODELS = ("pools", "pools_spatial", "clips", "amax", "maxmin", "pow")


def main():
    def extra(parser):
        parser.add_argument("--only", choices=MODELS, help="check this model only")
    env = E.parse_args(__doc__.splitlines()[1], extra=extra)
    env.require_tools()
    failures = []
    for name in MODELS:
        if env.args.only and name != env.args.only:
            continue
        module, x, labels = make_model(name)
        module = module.double()
        module.train()
        path = env.path(name, "model.onnx")
        torch.onnx.export(module, (x, labels), path, input_names=["input", "labels"],
                          output_names=["loss"], opset_version=14,
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False)
        data = env.path(name, "data", "batch_0", "input.npy")
        np.save(data, x.numpy())
        np.save(os.path.join(os.path.dirname(data), "labels.npy"), labels.numpy())
        for k in POOL_KS if name.startswith("pools") else KS:
            if name == "pools_spatial" and k == 4:
                dumped = E.run_tool([env.tofuc, path, "--gpus", k, "--optimizer", "sgd",
                                     "--lr", LR, "--dump-plan"], quiet=True).stdout
                grads = [ln for ln in dumped.splitlines() if " MaxPoolGrad " in ln]
                spatial = [ln for ln in grads if "dim 2" in ln or "dim 3" in ln]
                E.check(len(spatial) >= 2,
                        f"{name} k={k}: MaxPoolGrad is not split along H or W:\n"
                        + "\n".join(grads))
            E.train_vs_torch(env, name, path, os.path.dirname(os.path.dirname(data)),
                             module, x, labels, k, lr=LR, steps=STEPS, tol=TOL,
                             loss_tol=LOSS_TOL, failures=failures)
    E.check(not failures, "\n  " + "\n  ".join(failures))


if __name__ == "__main__":
    E.main_wrapper(main)
