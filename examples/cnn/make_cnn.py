#!/usr/bin/python3
"""Writes a small convolutional classifier exported from PyTorch.

    input[B, C, H, W] -> Conv(C, F, 3, pad 1) -> ReLU
                      -> Conv(F, F, 3, pad 1, stride 2) -> ReLU
                      -> GlobalAveragePool -> Flatten -> LayerNorm(F)
                      -> Linear(F, K)
    loss = cross_entropy(logits, labels)

The exported graph (opset 17) is Conv, Relu, Conv, Relu, GlobalAveragePool,
Flatten, LayerNormalization, Gemm, SoftmaxCrossEntropyLoss; its single output
is the scalar loss.
``build_cnn`` is imported by the end-to-end test that compares tofu's
gradients with PyTorch autograd on this model.

Run with Debian's Python (it has torch): /usr/bin/python3 make_cnn.py -o cnn.onnx
"""
import argparse
import sys

import torch
import torch.nn as nn


def build_cnn(channels: int, filters: int, classes: int) -> nn.Sequential:
    """The classifier (without the loss); state_dict names match the ONNX
    initializer names of the export."""
    return nn.Sequential(
        nn.Conv2d(channels, filters, 3, padding=1), nn.ReLU(),
        nn.Conv2d(filters, filters, 3, padding=1, stride=2), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.LayerNorm(filters),
        nn.Linear(filters, classes))


class CNNWithLoss(nn.Module):
    """Wraps the classifier so that the exported output is the mean loss."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net

    def forward(self, input, labels):  # noqa: A002 - matches the ONNX name
        return nn.functional.cross_entropy(self.net(input), labels)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--channels", type=int, default=3)
    parser.add_argument("--size", type=int, default=16, help="image height and width")
    parser.add_argument("--filters", type=int, default=8)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)
    model = CNNWithLoss(build_cnn(args.channels, args.filters, args.classes)).eval()
    example = torch.randn(args.batch, args.channels, args.size, args.size)
    labels = torch.randint(0, args.classes, (args.batch,), dtype=torch.int64)
    torch.onnx.export(model, (example, labels), args.output,
                      input_names=["input", "labels"], output_names=["loss"],
                      opset_version=17, do_constant_folding=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
