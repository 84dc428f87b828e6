#!/usr/bin/python3
"""e2e.indexing_vs_torch: indexing and selection ops train as PyTorch's.

A float64 model built in PyTorch from the differentiable ops of
tdl-specs/indexing.tdl, exported with tools/tofu_export.py's
``export_for_training`` at opset 16 (cross-entropy inside ``forward``),
compiled for k = 1 and k = 4 with ``--optimizer sgd`` and run for 3 steps
on one fixed batch (``tofu-run --data``). Every feature is a function of
``z = x + b`` (b trained, 0 at step 1, x small integers with ties):

* torch.gather (GatherElements) with repeated indices, and with the indices
  of z.argmax (ArgMax, ties: first maximum) computed at run time;
* scatter (ScatterElements "none") and scatter_add (ScatterElements "add",
  a repeated index) of a trained source;
* index_put (ScatterND "none") and index_put(accumulate=True) (ScatterND
  into zeros, then Add) of trained rows;
* repeat (Tile), cumsum (CumSum), topk (TopK, of distinct values: at ties
  torch's order is its sort's, not ONNX's lower-index-first),
  pixel_shuffle (DepthToSpace, CRD), amin (ReduceMin, tied minima share dY
  evenly), round (Round: zero gradient, halves to even), einsum (Einsum: a
  matmul and a three-operand product with a repeated operand).

The step-1 gradient of every parameter (``--dump``) must equal torch
autograd's in float64 within TOL at k = 1 and k = 4, and the 3 losses those
of 3 torch SGD steps within LOSS_TOL.
"""
import os
import sys

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

import e2e_common as E

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "tools"))
import tofu_export  # noqa: E402

TOL = 1e-9
LOSS_TOL = 1e-9
LR = 0.02
STEPS = 3
KS = (1, 4)
ROWS, FEATURES = 4, 8


class Indexing(nn.Module):
    def __init__(self):
        super().__init__()
        self.b = nn.Parameter(torch.zeros(FEATURES))
        self.u = nn.Parameter(torch.linspace(-1, 1, ROWS * 2).view(ROWS, 2))
        self.v = nn.Parameter(torch.linspace(0.5, -0.5, 2 * FEATURES).view(2, FEATURES))
        self.w = nn.Parameter(torch.linspace(-0.3, 0.4, FEATURES * 3).view(FEATURES, 3))
        # gather, argmax gather, scatter, scatter_add, repeat, index_puts,
        # cumsum, topk, pixel_shuffle, amin, round, two einsums.
        width = 4 + 1 + 2 * FEATURES + 2 * FEATURES + 2 * FEATURES + FEATURES + 3 \
            + FEATURES + 1 + FEATURES + 3 + FEATURES
        self.fc = nn.Linear(width, 3)

    def forward(self, x, labels):
        z = x + self.b
        rows = torch.tensor([0, 2])
        feats = [
            torch.gather(z, 1, torch.tensor([[0, 7, 7, 2]] * ROWS)),
            torch.gather(z, 1, z.argmax(1, keepdim=True)),
            z.scatter(1, torch.tensor([[1, 3]] * ROWS), self.u),
            z.scatter_add(1, torch.tensor([[1, 1]] * ROWS), self.u),
            z.repeat(1, 2) * torch.linspace(0, 1, FEATURES * 2),
            torch.cat([z.index_put((rows,), self.v),
                       z.index_put((rows,), self.v, accumulate=True)], 1),
            torch.cumsum(z, 1),
            # Distinct values: at ties torch.topk's order is its sort's
            # (row [1, 3, 3, 0, 2, 0, 1, 3] gives indices [1, 7, 2] on the
            # CPU), tofu's ONNX's (the lower index first).
            torch.topk(z + torch.arange(FEATURES) * 1e-3, 3, dim=1).values,
            F.pixel_shuffle(z.view(ROWS, 4, 1, 2), 2).reshape(ROWS, FEATURES),
            torch.amin(z, 1, keepdim=True),
            torch.round(z * 0.5) * z,
            torch.einsum("ri,ij->rj", z, self.w),
            torch.einsum("ri,ri,i->ri", z, z, self.b + 1),
        ]
        return F.cross_entropy(self.fc(torch.cat(feats, 1)), labels)


def main():
    env = E.parse_args(__doc__.splitlines()[1])
    env.require_tools()
    torch.manual_seed(1)
    module = Indexing().double()
    module.train()
    # Small integers: tied maxima (argmax, topk), tied minima (amin) and
    # halves for round(z / 2).
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0, 2.0, 0.0, 1.0, 3.0],
                      [2.0, 2.0, 1.0, 2.0, 0.0, 0.0, 5.0, 1.0],
                      [0.0, 1.0, 4.0, 4.0, 4.0, 1.0, 0.0, 2.0],
                      [3.0, 1.0, 2.0, 1.0, 3.0, 2.0, 1.0, 0.0]]).double()
    labels = torch.tensor([0, 2, 1, 2])
    path = env.path("indexing", "model.onnx")
    tofu_export.export_for_training(module, (x, labels), path,
                                    input_names=["input", "labels"],
                                    output_names=["loss"], opset_version=16)
    data = env.path("indexing", "data", "batch_0", "input.npy")
    np.save(data, x.numpy())
    np.save(os.path.join(os.path.dirname(data), "labels.npy"), labels.numpy())
    failures = []
    for k in KS:
        E.train_vs_torch(env, "indexing", path, os.path.dirname(os.path.dirname(data)),
                         module, x, labels, k, lr=LR, steps=STEPS, tol=TOL,
                         loss_tol=LOSS_TOL, failures=failures)
    E.check(not failures, "\n  " + "\n  ".join(failures))


if __name__ == "__main__":
    E.main_wrapper(main)
