#!/usr/bin/python3
"""Writes WResNet-L-W: the bottleneck ResNet-50/101/152 (He et al. 2016)
with every convolution widened W times, on ImageNet-sized images, as the Tofu
paper evaluates it (§7: WResNet-50/101/152, W = 4..10, 224x224 images).

"Widened" follows the paper: every weight tensor is widened on both its input
and output channels, so the model grows quadratically in W. Channel widths
are those of ResNet times W: the stem has 64W filters; stage s (s = 0..3)
has bottleneck width 64W·2^s and output 256W·2^s. (torchvision's
``wide_resnet50_2`` widens only the bottleneck's inner convolutions; this
generator follows the paper's definition.)

Graph (opset 17)::

    input [B, 3, S, S] -> Conv 7x7/2 -> BN -> Relu -> MaxPool 3x3/2
      -> stages of bottleneck blocks (3, 4, 6, 3 for L=50; 3, 4, 23, 3 for
         101; 3, 8, 36, 3 for 152):
           Conv 1x1 -> BN -> Relu -> Conv 3x3/stride -> BN -> Relu
           -> Conv 1x1 -> BN, + shortcut (Conv 1x1/stride -> BN in each
           stage's first block, identity otherwise) -> Relu
      -> GlobalAveragePool -> Flatten -> Gemm (classes)
      -> SoftmaxCrossEntropyLoss(labels [B])  = scalar output ``loss``

The stride sits on the 3x3 convolution (ResNet v1.5, as torchvision). Convolutions
have no bias; BatchNormalization runs in training mode (``training_mode=1``,
batch statistics; tofuc's training step writes its running_mean and
running_var outputs back into the running statistics), or with
``--batchnorm inference`` on the running statistics (``training_mode=0``: an
element-wise op). Weights: convolutions normal with
std sqrt(2 / fan_in) (He), BN scale 1, bias 0, running mean 0, variance 1; the
classifier [classes, 2048W] + [classes].

Usage::

    /usr/bin/python3 examples/wresnet/make_wresnet.py --depth 50 --width 1 \\
        --image 32 --batch 2 -o wresnet-50-1.onnx
    /usr/bin/python3 examples/wresnet/make_wresnet.py --depth 152 --width 10 \\
        --batch 8 --no-weights -o wresnet-152-10.onnx   # graph only
"""
import argparse
import os
import sys

from onnx import TensorProto

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import onnx_builder as ob  # noqa: E402

#: Bottleneck blocks per stage for each depth.
BLOCKS = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3)}


class _Net:
    def __init__(self, g, bn_training):
        self.g = g
        self.bn_training = bn_training

    def conv_bn(self, x, cin, cout, kernel, stride, name, relu):
        g = self.g
        w = g.weight(f"{name}.conv.weight", [cout, cin, kernel, kernel], "normal",
                     (2.0 / (cin * kernel * kernel)) ** 0.5)
        pad = kernel // 2
        y = g.op("Conv", [x, w], f"{name}.conv", kernel_shape=[kernel, kernel],
                 strides=[stride, stride], pads=[pad] * 4)
        scale = g.weight(f"{name}.bn.weight", [cout], "ones")
        bias = g.weight(f"{name}.bn.bias", [cout], "zeros")
        mean = g.weight(f"{name}.bn.running_mean", [cout], "zeros")
        var = g.weight(f"{name}.bn.running_var", [cout], "ones")
        y = g.op("BatchNormalization", [y, scale, bias, mean, var], f"{name}.bn",
                 outputs=3 if self.bn_training else 1, epsilon=1e-5, momentum=0.9,
                 training_mode=1 if self.bn_training else 0)
        if self.bn_training:
            y = y[0]
        return g.op("Relu", [y], f"{name}.relu") if relu else y


def build(depth, width, image, batch, classes, seed=0, bn_training=True):
    """The WResNet-depth-width classifier as a GraphBuilder."""
    g = ob.GraphBuilder(f"wresnet_{depth}_{width}", seed)
    net = _Net(g, bn_training)
    x = g.input("input", TensorProto.FLOAT, [batch, 3, image, image])
    labels = g.input("labels", TensorProto.INT64, [batch])
    stem = 64 * width
    x = net.conv_bn(x, 3, stem, 7, 2, "stem", relu=True)
    x = g.op("MaxPool", [x], "stem.pool", kernel_shape=[3, 3], strides=[2, 2],
             pads=[1, 1, 1, 1])
    cin = stem
    for s, blocks in enumerate(BLOCKS[depth]):
        inner = 64 * width * 2 ** s
        cout = 4 * inner
        for b in range(blocks):
            name = f"stage{s + 1}.block{b}"
            stride = 2 if (b == 0 and s > 0) else 1
            y = net.conv_bn(x, cin, inner, 1, 1, f"{name}.a", relu=True)
            y = net.conv_bn(y, inner, inner, 3, stride, f"{name}.b", relu=True)
            y = net.conv_bn(y, inner, cout, 1, 1, f"{name}.c", relu=False)
            shortcut = (net.conv_bn(x, cin, cout, 1, stride, f"{name}.down", relu=False)
                        if b == 0 else x)
            x = g.op("Relu", [g.op("Add", [y, shortcut], f"{name}.add")], f"{name}.out")
            cin = cout
    x = g.op("GlobalAveragePool", [x], "pool")
    x = g.op("Flatten", [x], "flatten", axis=1)
    fc_w = g.weight("fc.weight", [classes, cin], "uniform", 1.0 / cin ** 0.5)
    fc_b = g.weight("fc.bias", [classes], "zeros")
    logits = g.op("Gemm", [x, fc_w, fc_b], "fc", transB=1)
    g.op("SoftmaxCrossEntropyLoss", [logits, labels], "loss", reduction="mean")
    g.output("loss", TensorProto.FLOAT, [])
    return g


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--depth", type=int, choices=sorted(BLOCKS), default=50,
                        help="ResNet depth L")
    parser.add_argument("--width", type=int, default=1, help="widening factor W")
    parser.add_argument("--image", type=int, default=224, help="image size S (S x S)")
    parser.add_argument("--batch", type=int, default=8, help="batch size B")
    parser.add_argument("--classes", type=int, default=1000, help="classes")
    parser.add_argument("--batchnorm", choices=["train", "inference"], default="train",
                        help="BatchNormalization training_mode: batch statistics "
                             "(train, the model as trained) or the running statistics "
                             "(inference: element-wise, fast on the interpreted CPU kernels)")
    ob.add_common_arguments(parser)
    args = parser.parse_args(argv)
    ob.check_positive(parser, args, ["width", "image", "batch", "classes"])
    if args.image < 32:
        parser.error("--image must be at least 32 (five stride-2 reductions)")
    g = build(args.depth, args.width, args.image, args.batch, args.classes, args.seed,
              args.batchnorm == "train")
    data = g.save(args.output, weights=not args.no_weights)
    ob.report(g, args.output, data, not args.no_weights)
    return 0


if __name__ == "__main__":
    sys.exit(main())
