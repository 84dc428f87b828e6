#!/usr/bin/python3
"""Writes a small CNN with training-mode batch normalization and pooling.

    input[B, C, S, S] -> Conv(C, F, 3, pad 1, no bias)
      -> BatchNormalization(training_mode 1, momentum 0.9) -> Relu
      -> MaxPool(3, stride 2, pad 1)
      -> Conv(F, F, 3, pad 1, bias)
      -> BatchNormalization(training_mode 1, momentum 0.8) -> Relu
      -> AveragePool(3, stride 1, pad 1, count_include_pad 0)
      -> AveragePool(2, stride 2, count_include_pad 1)
      -> Flatten -> Gemm(F * (S / 4)^2, K)
    loss = SoftmaxCrossEntropyLoss(logits, labels)   (scalar output "loss")

With ``--shortcut`` the MaxPool's output gets a ResNet-style downsampling
shortcut added, Conv(F, F, 1, stride 2, no bias) of r1, before conv2: a
strided 1x1 convolution reads every other row and column of r1, so its X
region leaves out the last row and column (the CUDA backend must still map
it to cuDNN).

Both BatchNormalizations have the running-statistic outputs, so tofuc's
training step writes running_mean and running_var back (ONNX momentum
convention, biased batch variance). Written with onnx.helper (opset 15),
weights from a seeded NumPy generator, so the file depends on no PyTorch
version. The CUDA schedule tests (runtime/cuda/CudaScheduleTest.cpp) use it
to check which pools and batch normalizations go to cuDNN.

Run with Debian's Python (it has onnx): /usr/bin/python3 make_cnn_bn.py -o cnn_bn.onnx
"""
import argparse
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build(batch, channels, size, filters, classes, seed, shortcut=False):
    if size % 4:
        raise SystemExit("--size must be a multiple of 4")
    rng = np.random.default_rng(seed)

    def init(name, values):
        return numpy_helper.from_array(np.asarray(values, dtype=np.float32), name)

    F = filters
    flat = F * (size // 4) ** 2
    inits = [
        init("conv1.weight", rng.standard_normal([F, channels, 3, 3]) * 0.3),
        init("bn1.weight", 1 + rng.standard_normal([F]) * 0.2),
        init("bn1.bias", rng.standard_normal([F]) * 0.2),
        init("bn1.running_mean", rng.standard_normal([F]) * 0.3),
        init("bn1.running_var", 0.5 + rng.random([F])),
        init("conv2.weight", rng.standard_normal([F, F, 3, 3]) * 0.2),
        init("conv2.bias", rng.standard_normal([F]) * 0.1),
        init("bn2.weight", 1 + rng.standard_normal([F]) * 0.2),
        init("bn2.bias", rng.standard_normal([F]) * 0.2),
        init("bn2.running_mean", rng.standard_normal([F]) * 0.3),
        init("bn2.running_var", 0.5 + rng.random([F])),
        init("fc.weight", rng.standard_normal([classes, flat]) * 0.2),
        init("fc.bias", rng.standard_normal([classes]) * 0.1),
    ]
    conv2_input = "p1"
    shortcut_nodes = []
    if shortcut:
        # Drawn last: the model without the shortcut keeps its weights.
        inits.append(init("down.weight", rng.standard_normal([F, F, 1, 1]) * 0.3))
        shortcut_nodes = [
            helper.make_node("Conv", ["r1", "down.weight"], ["d1"], name="down",
                             kernel_shape=[1, 1], strides=[2, 2]),
            helper.make_node("Add", ["p1", "d1"], ["q1"], name="shortcut"),
        ]
        conv2_input = "q1"
    nodes = [
        helper.make_node("Conv", ["input", "conv1.weight"], ["c1"], name="conv1",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization",
                         ["c1", "bn1.weight", "bn1.bias", "bn1.running_mean",
                          "bn1.running_var"],
                         ["b1", "bn1.mean_out", "bn1.var_out"], name="bn1",
                         momentum=0.9, training_mode=1),
        helper.make_node("Relu", ["b1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="maxpool",
                         kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        *shortcut_nodes,
        helper.make_node("Conv", [conv2_input, "conv2.weight", "conv2.bias"], ["c2"],
                         name="conv2", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization",
                         ["c2", "bn2.weight", "bn2.bias", "bn2.running_mean",
                          "bn2.running_var"],
                         ["b2", "bn2.mean_out", "bn2.var_out"], name="bn2",
                         momentum=0.8, training_mode=1),
        helper.make_node("Relu", ["b2"], ["r2"], name="relu2"),
        helper.make_node("AveragePool", ["r2"], ["a1"], name="avgpool1",
                         kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1],
                         count_include_pad=0),
        helper.make_node("AveragePool", ["a1"], ["a2"], name="avgpool2",
                         kernel_shape=[2, 2], strides=[2, 2], count_include_pad=1),
        helper.make_node("Flatten", ["a2"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["logits"],
                         name="fc", transB=1),
        helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "labels"], ["loss"],
                         name="loss", reduction="mean"),
    ]
    graph = helper.make_graph(
        nodes, "cnn_bn",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                       [batch, channels, size, size]),
         helper.make_tensor_value_info("labels", TensorProto.INT64, [batch])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--channels", type=int, default=3)
    parser.add_argument("--size", type=int, default=8, help="image height and width")
    parser.add_argument("--filters", type=int, default=8)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shortcut", action="store_true",
                        help="add a 1x1 stride-2 convolution shortcut before conv2")
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args(argv)
    onnx.save(build(args.batch, args.channels, args.size, args.filters,
                    args.classes, args.seed, args.shortcut), args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
