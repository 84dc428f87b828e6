#!/usr/bin/python3
"""How far torch's own float32 gradient of torchvision's wide_resnet50_2 lies
from its float64 gradient on the same weights and batch, with
BatchNormalization in training form (batch statistics) and in inference form
(running statistics). Explains e2e.torch_exported.wide_resnet50_2 (see
bench/batchnorm_conditioning.md).

    /usr/bin/python3 bench/batchnorm_conditioning.py [--image 64] [--batch 2]
"""
import argparse

import numpy as np
import torch
import torchvision
from torch import nn


def gradients(net, x, labels, dtype, training):
    net = net.to(dtype)
    net.train(training)
    net.zero_grad()
    nn.functional.cross_entropy(net(x.to(dtype)), labels).backward()
    return {n: p.grad.detach().double().numpy().copy() for n, p in net.named_parameters()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", type=int, default=64)
    parser.add_argument("--batch", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(1)
    for training in (True, False):
        torch.manual_seed(0)
        net = torchvision.models.wide_resnet50_2(num_classes=10)
        x = torch.randn(args.batch, 3, args.image, args.image)
        labels = torch.randint(0, 10, (args.batch,))
        g32 = gradients(net, x, labels, torch.float32, training)
        g64 = gradients(net, x, labels, torch.float64, training)
        per_max = max(np.max(np.abs(g32[n] - g64[n])) / np.max(np.abs(g64[n])) for n in g64)
        a = np.concatenate([g32[n].ravel() for n in g64])
        b = np.concatenate([g64[n].ravel() for n in g64])
        print(f"{'training' if training else 'inference'} BatchNorm, {args.batch}x3x{args.image}"
              f"x{args.image}: worst per-tensor max-element rel {per_max:.2e}, "
              f"whole-gradient norm-wise rel {np.linalg.norm(a - b) / np.linalg.norm(b):.2e}")


if __name__ == "__main__":
    main()
