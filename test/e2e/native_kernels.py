#!/usr/bin/python3
"""e2e.native_kernels: no instruction of a training step runs on the TDL interpreter.

Issue 16: every op of the project's examples and real-model suite runs a
native CPU kernel in every partitioning the partitioner picks; the TDL
expression interpreter (10-1000x slower) is a fallback that a training step
of these models must not take. Small models that each once sent a class of
instructions to the interpreter (bench/interpreted_ops.md) are compiled at
k in KS and run one step; the test fails when the report's
``interpreted_instructions`` is not empty, naming the ops and (from
``TOFU_LOG_INTERPRETED=1``) the kernels' reasons:

* ``rnn``: examples/rnn/make_rnn.py (explicit LSTM cells): at k >= 2 the
  gates' SliceGrad shares beside the slice read no dY (SliceGrad);
* ``shufflenet``: torchvision's ShuffleNetV2 x0.5 (channel halves sliced
  apart; SliceGrad at k = 8);
* ``gpt``: examples/transformer/make_gpt.py (LayerNormalization, Softmax,
  batched MatMul, Gather);
* ``cnn``: examples/cnn/cnn.onnx (LayerNormalization split along its
  normalized dim at k = 6);
* ``avgpool``: a small CNN with ``nn.AvgPool2d(2)``, which torch 1.13
  exports as Pad + AveragePool (Pad and PadGrad; DenseNet's transitions).
"""

import copy
import os
import sys

import numpy as np

import e2e_common as E

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EXAMPLES = os.path.join(ROOT, "examples")
sys.path.insert(0, os.path.join(ROOT, "tools"))

KS = (1, 4, 6, 8)
LR = 0.01


def generated(env, name, script, args):
    """An example generator's model: (onnx, data folder or None)."""
    onnx = env.path(name, "model.onnx")
    E.run_tool([sys.executable, os.path.join(EXAMPLES, script), *args, "-o", onnx], quiet=True)
    return onnx, None


def exported(env, name, module, inputs):
    """A torch module (forward(*inputs) -> loss) exported for training, and
    its batch as --data: (onnx, data folder)."""
    from tofu_export import export_for_training
    onnx = env.path(name, "model.onnx")
    names = list(inputs)
    export_for_training(copy.deepcopy(module), tuple(inputs[n] for n in names), onnx,
                        input_names=names, output_names=["loss"])
    data = env.path(name, "data", "batch_0", "x")[:-2]
    for n, v in inputs.items():
        np.save(os.path.join(data, E.dump_name(n) + ".npy"), v.numpy())
    return onnx, os.path.dirname(data)


def shufflenet(env):
    import torch
    import torchvision
    import torch.nn.functional as F
    torch.manual_seed(0)
    net = torchvision.models.shufflenet_v2_x0_5(num_classes=10)

    class WithLoss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = net

        def forward(self, input, labels):  # noqa: A002 - the ONNX input name
            return F.cross_entropy(self.net(input), labels)

    module = WithLoss().train()
    return exported(env, "shufflenet", module, {"input": torch.randn(4, 3, 64, 64),
                                                "labels": torch.randint(0, 10, (4,))})


def avgpool(env):
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.pool = torch.nn.AvgPool2d(2)
            self.fc = torch.nn.Linear(8 * 4 * 4, 10)

        def forward(self, input, labels):  # noqa: A002 - the ONNX input name
            y = self.pool(F.relu(self.conv(input)))
            return F.cross_entropy(self.fc(y.flatten(1)), labels)

    return exported(env, "avgpool", Net().train(), {"input": torch.randn(4, 3, 8, 8),
                                                    "labels": torch.randint(0, 10, (4,))})


MODELS = {
    "rnn": lambda env: generated(env, "rnn", "rnn/make_rnn.py",
                                 ["--layers", "2", "--hidden", "32", "--batch", "8",
                                  "--vocab", "64", "--steps", "8"]),
    "shufflenet": shufflenet,
    "gpt": lambda env: generated(env, "gpt", "transformer/make_gpt.py",
                                 ["--layers", "1", "--hidden", "32", "--heads", "2",
                                  "--seq", "16", "--vocab", "64", "--batch", "2"]),
    "cnn": lambda env: (os.path.join(EXAMPLES, "cnn", "cnn.onnx"), None),
    "avgpool": avgpool,
}


def interpreted(env, name, onnx, data, k):
    """{op: instructions per step} that ran on the interpreter, and the
    reasons tofu-run logged."""
    plan, report = env.path(name, f"k{k}.bin"), env.path(name, f"k{k}.json")
    E.run_tool([env.tofuc, onnx, "--gpus", k, "--lr", LR, "-o", plan], quiet=True)
    os.environ["TOFU_LOG_INTERPRETED"] = "1"
    res = E.run_tool([env.tofu_run, plan, "--steps", 1, "--quiet", "--report", report,
                      *(["--data", data] if data else [])], quiet=True)
    counts = E.load_json(report).get("interpreted_instructions")
    E.check(isinstance(counts, dict),
            f"{name} k={k}: the report has no interpreted_instructions object")
    reasons = [line for line in res.stderr.splitlines() if line.startswith("tofu: interpreted")]
    return counts, reasons


def main():
    env = E.parse_args(__doc__.splitlines()[1])
    env.require_tools()
    failures = []
    for name, make in MODELS.items():
        onnx, data = make(env)
        for k in KS:
            counts, reasons = interpreted(env, name, onnx, data, k)
            print(f"{name} k={k}: interpreted {counts or 'none'}", flush=True)
            if counts:
                failures.append(f"{name} k={k}: " + ", ".join(
                    f"{op} x{n}" for op, n in sorted(counts.items())) + " ran on the TDL "
                    "interpreter:\n    " + "\n    ".join(reasons))
    E.check(not failures, "instructions ran on the TDL interpreter (issue 16):\n"
            + "\n".join(failures))
    print("PASS")


if __name__ == "__main__":
    E.main_wrapper(main)
