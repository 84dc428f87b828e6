#!/usr/bin/python3
"""e2e.activations_vs_torch: torch's activation modules train as in torch.

Two float64 models apply every differentiable activation tofu has a spec
for to ``x * s_j + b_j`` (trained per-activation scale and shift), concatenate
the results and end in Linear -> cross-entropy:

PReLU (nn.PReLU(3): ONNX PRelu with the [3] weight unsqueezed to [3, 1]),
ELU(0.5), SELU, CELU(1.25), Softplus, Softsign (exported as Abs/Add/Div),
Hardswish (HardSwish), Hardsigmoid (HardSigmoid), Mish (exported as
Mul(x, Tanh(Softplus(x)))), GELU with approximate 'none' and 'tanh'
(exported as Erf / Tanh formulas), Hardshrink(0.5) and Softshrink(0.5)
(exported as Where / Greater / Less / Or), LeakyReLU(0.125), SiLU,
Tanhshrink and torch.fmod (ONNX Mod, fmod = 1).

* ``smooth``: a random batch (no input on a kink);
* ``kinks``: s = 1, b = 0 and a batch of small values that put step 1
  EXACTLY on every kink: 0 (PReLU, ELU, SELU, CELU, LeakyReLU), -3
  (Hardswish), +-0.5 (the shrinks). Not +3: there torch 1.13's own
  Hardswish gradient depends on the element's position in the tensor (its
  vectorized CPU loop gives dY, its scalar loop for the last elements and
  its CUDA kernel 3 dY / 2, which tofu follows; docs/Training.md).

Each is exported with tools/tofu_export.py's ``export_for_training`` at
opset 14, compiled for k = 1 and k = 4 with ``--optimizer sgd``, and run for
3 steps on the fixed batch; the step-1 gradient of every parameter must
equal torch autograd's in float64 within TOL and the 3 losses torch SGD's
within LOSS_TOL.

Two exporter facts are accounted for, both named here rather than hidden:

* torch 1.13 exports a float64 CELU as Cast(float32) -> Celu -> Cast(float64);
  the test removes the two Casts from the file (the Celu node then runs in
  float64, which is what is compared);
* torch exports Hardsigmoid as HardSigmoid(alpha = 1/6) and an ONNX float
  attribute is a float32: tofu computes with alpha = float32(1/6) =
  0.1666666716..., torch's forward with x / 6 (its backward already uses
  float32(1/6)). The torch reference therefore computes Hardsigmoid as
  hardtanh(x * float32(1/6) + 0.5, 0, 1), whose backward is torch's
  hardsigmoid_backward with the same constant (0 at both kinks).

SELU needs no such care: tofu's Selu defaults are the float64 constants
(ONNX documents their float32 roundings). With the previous state of tofu
every model was refused at import (no spec for PRelu, Elu, Selu, Celu,
Softplus, HardSwish, HardSigmoid, Or, Mod).
"""
import os
import sys

import numpy as np
import onnx
import torch
from torch import nn
import torch.nn.functional as F

import e2e_common as E

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
from tofu_export import export_for_training  # noqa: E402

TOL = 1e-9
LOSS_TOL = 1e-9
LR = 0.125
STEPS = 3
KS = (1, 4)
C, L = 3, 4  # input [N, C, L]
#: float32(1/6): the alpha of the exported HardSigmoid.
HARDSIGMOID_ALPHA = float(np.float32(1 / 6))

ACTIVATIONS = ("prelu", "elu", "selu", "celu", "softplus", "softsign",
               "hardswish", "hardsigmoid", "mish", "gelu", "gelu_tanh",
               "hardshrink", "softshrink", "leaky_relu", "silu", "tanhshrink",
               "fmod")


class Activations(nn.Module):
    def __init__(self):
        super().__init__()
        n = len(ACTIVATIONS)
        self.s = nn.Parameter(torch.ones(n, C, 1))
        self.b = nn.Parameter(torch.zeros(n, C, 1))
        self.prelu = nn.PReLU(C, init=0.25)
        self.fc = nn.Linear(n * C * L, 3)
        #: True while computing torch's reference (see the docstring).
        self.reference = False

    def act(self, name, z):
        if name == "prelu":
            return self.prelu(z)
        if name == "elu":
            return F.elu(z, 0.5)
        if name == "selu":
            return F.selu(z)
        if name == "celu":
            return F.celu(z, 1.25)
        if name == "softplus":
            return F.softplus(z)
        if name == "softsign":
            return F.softsign(z)
        if name == "hardswish":
            return F.hardswish(z)
        if name == "hardsigmoid":
            if self.reference:
                return F.hardtanh(z * HARDSIGMOID_ALPHA + 0.5, 0.0, 1.0)
            return F.hardsigmoid(z)
        if name == "mish":
            return F.mish(z)
        if name == "gelu":
            return F.gelu(z)
        if name == "gelu_tanh":
            return F.gelu(z, approximate="tanh")
        if name == "hardshrink":
            return F.hardshrink(z, 0.5)
        if name == "softshrink":
            return F.softshrink(z, 0.5)
        if name == "leaky_relu":
            return F.leaky_relu(z, 0.125)
        if name == "silu":
            return F.silu(z)
        if name == "tanhshrink":
            return F.tanhshrink(z)
        if name == "fmod":
            return torch.fmod(z, 1.5)
        raise ValueError(name)

    def forward(self, x, labels):
        feats = [self.act(name, x * self.s[j] + self.b[j]).flatten(1)
                 for j, name in enumerate(ACTIVATIONS)]
        return F.cross_entropy(self.fc(torch.cat(feats, 1)), labels)


def make_batch(name):
    torch.manual_seed(3)
    if name == "smooth":
        x = torch.randn(4, C, L) * 2
        # No input on a kink (0, +-0.5, +-3) nor a multiple of 1.5 (fmod).
        return x.double(), torch.tensor([0, 2, 1, 2])
    if name == "kinks":
        x = torch.tensor([[[0.0, -3.0, 2.0, 0.5], [-0.5, 0.0, 1.0, -1.0],
                           [4.0, -0.5, 0.0, 0.25]],
                          [[-3.0, 0.5, -1.0, 0.0], [0.0, 2.5, -0.5, 0.5],
                           [2.0, 0.0, -3.0, 0.0]]])
        return x.double(), torch.tensor([1, 0])
    raise ValueError(name)


MODELS = ("smooth", "kinks")


def strip_celu_casts(path):
    """Removes the Cast(float32) -> Celu -> Cast(float64) pair torch 1.13
    wraps around a float64 Celu; fails if the pattern is not there."""
    model = onnx.load(path)
    g = model.graph
    producer = {o: n for n in g.node for o in n.output}
    celus = [n for n in g.node if n.op_type == "Celu"]
    E.check(len(celus) == 1, f"{path}: expected one Celu node, found {len(celus)}")
    celu = celus[0]
    before = producer.get(celu.input[0])
    after = [n for n in g.node if celu.output[0] in n.input]
    E.check(before is not None and before.op_type == "Cast" and len(after) == 1
            and after[0].op_type == "Cast",
            f"{path}: Celu is not wrapped in two Casts (exporter changed?)")
    after = after[0]
    celu.input[0] = before.input[0]
    celu.output[0] = after.output[0]
    g.node.remove(before)
    g.node.remove(after)
    onnx.save(model, path)


def torch_steps(module, params0, x, labels):
    """torch's SGD steps with the module in its reference mode."""
    module.reference = True
    try:
        return E.torch_sgd_steps(module, params0, (x, labels), LR, STEPS)
    finally:
        module.reference = False


def main():
    def extra(parser):
        parser.add_argument("--only", choices=MODELS, help="check this model only")
    env = E.parse_args(__doc__.splitlines()[1], extra=extra)
    env.require_tools()
    failures = []
    for name in MODELS:
        if env.args.only and name != env.args.only:
            continue
        torch.manual_seed(1)
        module = Activations().double()
        module.train()
        x, labels = make_batch(name)
        path = env.path(name, "model.onnx")
        export_for_training(module, (x, labels), path, input_names=["input", "labels"],
                            output_names=["loss"], opset_version=14)
        strip_celu_casts(path)
        ops = {n.op_type for n in onnx.load(path).graph.node}
        for op in ("PRelu", "Elu", "Selu", "Celu", "Softplus", "HardSwish",
                   "HardSigmoid", "Erf", "Or", "Where", "Mod"):
            E.check(op in ops, f"{name}: the export has no {op} node ({sorted(ops)})")
        data = env.path(name, "data", "batch_0", "input.npy")
        np.save(data, x.numpy())
        np.save(os.path.join(os.path.dirname(data), "labels.npy"), labels.numpy())
        for k in KS:
            E.train_vs_torch(env, name, path, os.path.dirname(os.path.dirname(data)),
                             module, x, labels, k, lr=LR, steps=STEPS, tol=TOL,
                             loss_tol=LOSS_TOL, failures=failures,
                             reference_steps=torch_steps)
    E.check(not failures, "\n  " + "\n  ".join(failures))


if __name__ == "__main__":
    E.main_wrapper(main)
