#!/usr/bin/env python3
"""Exports a small CNN with torch.onnx.export (batch dimension dynamic) for
torch-export.test: `h.view(h.size(0), -1)` and `h.shape[1] ** -0.5` make
PyTorch emit Shape -> Gather -> Unsqueeze -> Concat -> Reshape and
Shape -> Gather -> Cast -> Pow chains, which tofuc folds at import.

usage: export_torch_cnn.py OUT.onnx OPSET
"""
import sys

import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.fc = torch.nn.Linear(4 * 8 * 8, 10)

    def forward(self, x, labels):
        h = torch.relu(self.conv(x))
        h = h.view(h.size(0), -1)
        h = h * (h.shape[1] ** -0.5)
        return torch.nn.functional.cross_entropy(self.fc(h), labels)


torch.manual_seed(0)
torch.onnx.export(Net(), (torch.randn(2, 3, 8, 8), torch.zeros(2, dtype=torch.long)),
                  sys.argv[1], opset_version=int(sys.argv[2]),
                  input_names=["x", "labels"], output_names=["loss"],
                  dynamic_axes={"x": {0: "batch"}, "labels": {0: "batch"}})
