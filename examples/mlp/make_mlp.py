#!/usr/bin/python3
"""Generate the MLP example model for tofuc: ``mlp.onnx``.

The model is a ``torch.nn.Sequential`` of three ``Linear`` + ``ReLU`` layers::

    input[B, F] -> Linear(F, H) -> ReLU -> Linear(H, H) -> ReLU
                -> Linear(H, C) -> ReLU -> logits[B, C]

wrapped with ``nn.functional.cross_entropy(logits, labels)`` so that the
exported graph's single output is the scalar (mean) loss. tofuc takes the
training loss from that scalar output.

Exported ONNX ops (opset 17): ``Gemm(transB=1)`` + ``Relu`` three times, then
``SoftmaxCrossEntropyLoss(reduction="mean")``. Graph inputs are ``input``
(float32 [B, F]) and ``labels`` (int64 [B]); the output is ``loss`` (float32,
scalar). Weights are initializers in ``[out, in]`` layout, biases ``[out]``.

The result is deterministic: the weights come from ``torch.manual_seed(seed)``
(He/Kaiming-normal weights, PyTorch's default biases), so the default SGD of
tofuc (lr 0.1) trains it on tofu-run's synthetic data in a few dozen steps.

Usage (run with Debian's Python, which has torch)::

    /usr/bin/python3 examples/mlp/make_mlp.py -o examples/mlp/mlp.onnx
    /usr/bin/python3 examples/mlp/make_mlp.py --batch 256 --hidden 1024 -o big.onnx
"""

import argparse
import sys

import torch
from torch import nn


class MLPWithLoss(nn.Module):
    """Wraps a classifier so that ``forward(input, labels)`` returns the loss."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net

    def forward(self, input, labels):  # noqa: A002 - matches the ONNX input name
        logits = self.net(input)
        return nn.functional.cross_entropy(logits, labels)


def build_mlp(features: int, hidden: int, classes: int) -> nn.Sequential:
    """Three Linear+ReLU layers: features -> hidden -> hidden -> classes."""
    net = nn.Sequential(
        nn.Linear(features, hidden), nn.ReLU(),
        nn.Linear(hidden, hidden), nn.ReLU(),
        nn.Linear(hidden, classes), nn.ReLU(),
    )
    # He initialization (the usual choice for ReLU networks) keeps the
    # activations' scale through the three layers, so plain SGD trains the
    # model in a few dozen steps; PyTorch's default Linear init shrinks it.
    # Biases keep their default init: identical zero biases would be folded
    # by the exporter into Identity nodes.
    for layer in net:
        if isinstance(layer, nn.Linear):
            nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
    return net


def export(path: str, batch: int, features: int, hidden: int, classes: int,
           seed: int, double: bool = False) -> None:
    """Builds the model with weights from ``seed`` and exports it to ``path``
    (in float64 with ``double``: weights, input and loss)."""
    torch.manual_seed(seed)
    model = MLPWithLoss(build_mlp(features, hidden, classes)).eval()
    example_input = torch.randn(batch, features)
    if double:
        model = model.double()
        example_input = example_input.double()
    example_labels = torch.randint(0, classes, (batch,), dtype=torch.int64)
    torch.onnx.export(
        model, (example_input, example_labels), path,
        input_names=["input", "labels"], output_names=["loss"],
        opset_version=17, do_constant_folding=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=64, help="batch size B")
    parser.add_argument("--features", type=int, default=64, help="input features F")
    parser.add_argument("--hidden", type=int, default=128, help="hidden width H")
    parser.add_argument("--classes", type=int, default=10, help="classes C")
    parser.add_argument("--seed", type=int, default=0, help="torch.manual_seed")
    parser.add_argument("--double", action="store_true",
                        help="export in float64 (model.double())")
    parser.add_argument("-o", "--output", required=True, metavar="PATH",
                        help="where to write the ONNX model")
    args = parser.parse_args(argv)
    for name in ("batch", "features", "hidden", "classes"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name} must be positive")
    export(args.output, args.batch, args.features, args.hidden, args.classes,
           args.seed, args.double)
    return 0


if __name__ == "__main__":
    sys.exit(main())
