#!/usr/bin/python3
"""e2e.fused_chains_float64: PyTorch's exported chains tofuc rewrites train as in torch, in float64.

A float64 transformer block written in torch — nn.LayerNorm, nn.Linear on a
[N, S, D] activation, single-head attention (q k^T), nn.GELU, mean over the
sequence, Linear, cross-entropy — is exported with tools/tofu_export.py's
``export_for_training`` at opset 14 (torch 1.13's default), where the layer
norm is nine ops, GELU five, and each Linear ``MatMul(x, Transpose(W))``.
Checks, on the IR tofuc trains (``--compile-to=train``), that the rewrites
happened (``tofu-fuse-layer-norm``, ``tofu-fuse-gelu``,
``tofu-absorb-transposes``: LayerNormalization, Gelu and MatMulTransposed
present; no Erf or Transpose left, one ReduceMean: the sequence mean), then compiles for k = 1 and
k = 4 with SGD, runs 3 steps on one fixed batch (``--data``) and requires
every parameter's step-1 gradient to equal torch autograd's on the module
within 1e-9 (rel_diff) and the 3 losses torch SGD's within 1e-9: the fused
ops compute the same function in float64, not an approximation of it.
"""
import os
import sys

import numpy as np
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
N, S, D, H, CLASSES = 4, 6, 8, 16, 5


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(D)
        # k without a bias: q (k + b)^T adds q b to a whole row of scores,
        # which the softmax cancels, so b's gradient is 0 up to rounding
        # (1e-18 noise both sides) and no relative comparison is meaningful.
        self.q, self.v = nn.Linear(D, D), nn.Linear(D, D)
        self.k = nn.Linear(D, D, bias=False)
        self.up, self.down = nn.Linear(D, H), nn.Linear(H, D)
        self.norm2 = nn.LayerNorm(D)
        self.head = nn.Linear(D, CLASSES)

    def forward(self, x, labels):
        h = self.norm(x)
        scores = self.q(h) @ self.k(h).transpose(-1, -2) / D ** 0.5
        h = x + torch.softmax(scores, -1) @ self.v(h)
        h = h + self.down(F.gelu(self.up(self.norm2(h))))
        return F.cross_entropy(self.head(h.mean(1)), labels)


def main():
    env = E.parse_args(__doc__.splitlines()[1])
    env.require_tools()
    torch.manual_seed(1)
    module = Block().double()
    # Non-trivial layer-norm weights, so that their gradients are checked
    # through the scale, not only at 1 and 0.
    with torch.no_grad():
        for norm in (module.norm, module.norm2):
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.5, 0.5)
    module.train()
    torch.manual_seed(3)
    x = torch.randn(N, S, D, dtype=torch.float64)
    labels = torch.tensor([0, 3, 1, 4])
    path = env.path("block", "model.onnx")
    export_for_training(module, (x, labels), path, input_names=["input", "labels"],
                        output_names=["loss"], opset_version=14)

    ir = E.run_tool([env.tofuc, path, "--compile-to=train"]).stdout
    # One ReduceMean stays: the mean over the sequence, not a layer norm's.
    for op, want in (("LayerNormalization", 2), ("Gelu", 1), ("GeluGrad", 1),
                     ("ReduceMean", 1)):
        got = ir.count(f'tofu.compute "{op}"')
        E.check(got == want, f"the trained IR has {got} {op} ops, expected {want}")
    E.check('tofu.compute "MatMulTransposed"' in ir,
            "no MatMulTransposed: the Linear layers' weight Transposes were not absorbed")
    for op in ("Erf", "Transpose"):
        E.check(f'tofu.compute "{op}"' not in ir,
                f"the trained IR still computes {op} (a chain was not rewritten)")

    data = env.path("block", "data", "batch_0", "input.npy")
    np.save(data, x.numpy())
    np.save(os.path.join(os.path.dirname(data), "labels.npy"), labels.numpy())
    failures = []
    for k in KS:
        E.train_vs_torch(env, "block", path, os.path.dirname(os.path.dirname(data)),
                         module, x, labels, k, lr=LR, steps=STEPS, tol=TOL,
                         loss_tol=LOSS_TOL, failures=failures)
    E.check(not failures, "\n  " + "\n  ".join(failures))


if __name__ == "__main__":
    E.main_wrapper(main)
