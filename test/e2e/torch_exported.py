#!/usr/bin/python3
"""e2e.torch_exported: models exported by torch.onnx.export train as in PyTorch.

Each model below is built in PyTorch (Debian's torch 1.13) with its loss
(cross-entropy against a ``labels`` input) inside ``forward``, exported with
``torch.onnx.export(..., training=TrainingMode.TRAINING,
do_constant_folding=False)`` at opset 14, so the ONNX file holds what the
exporter really writes (Constant nodes, Shape/Gather/Concat shape arithmetic,
the exporter's LSTM gate reordering with Slice/Concat, Expand'ed zero initial
states, Dropout nodes, training-mode BatchNormalization). tofuc compiles it
for k = 1, tofu-run runs one SGD step with --dump, and the loss and the
gradient of every parameter must equal torch autograd's on the same weights
and batch, in float64 (relative difference 1e-3):

* ``lstm``: ``nn.LSTM`` language model, 2 layers, hidden 16, 6 time steps,
  batch 4 -> ``nn.Linear`` -> cross-entropy over 32 tokens. The input is
  the embedded sequence [T, B, E]: an ``nn.Embedding`` in front is exported
  as ``Gather(emb.weight, tokens)`` with an int64 graph input ``tokens``,
  which tofuc does not take yet ("integer graph input 'tokens' does not feed
  the labels of a loss; integer inputs other than class labels are not
  supported yet"; tofu-run's synthetic data has no token generator either),
  so the embedding is not part of this model.
* ``transformer``: ``nn.TransformerEncoder`` (2 layers, d_model 16, 2 heads,
  feed-forward 32, dropout 0) over [S=5, B=4, 16], mean over the sequence,
  ``nn.Linear`` to 10 classes.
* ``resnet18`` and ``wide_resnet50_2``: torchvision's models (random
  initialization, 10 classes) on 2 images of 16x16, exported in training
  mode, so BatchNormalization uses the batch statistics as in PyTorch.

``--only NAME`` runs one model. ctest registers ``lstm`` and ``transformer``
(e2e.torch_exported.<name>), which pass.

KNOWN FAILURES, not registered in ctest (run them with --only to reproduce):

* ``resnet18`` imports and compiles (tofuc, k = 1, 1.5 s) and runs, but the
  step-1 loss differs: tofu 2.000423 (native kernels) and 1.889981
  (``tofu-run --kernels interpreter``) vs PyTorch 1.972589, and the exported
  ONNX graph evaluated op by op with torch (e2e_common.TorchGraph) gives
  PyTorch's value, so the export is right and tofu's execution is not.
  Bisecting with torchvision's resnet18 truncated after a stage, on 8x8
  images: up to layer2 the loss matches; adding layer3 (1x1 feature maps,
  256 channels, batch 2) gives 1.393627 vs 1.425333. Single-op models of
  each op kind and shape involved (training-mode BatchNormalization with
  C = 256 on 1x1 maps, 1x1 and 3x3 stride-2 convolutions on 1x1 inputs,
  MaxPool with pads) all match, so the fault is in how ops combine (memory
  planning or scheduling, since native and interpreted kernels disagree too).
* ``wide_resnet50_2``: not compared for the same reason; at 32x32 images a
  step also takes minutes, because training-mode BatchNormalization runs on
  the expression interpreter with per-element batch sums.
"""
import os

import numpy as np
import torch
from torch import nn

import e2e_common as E

TOL = 1e-3
#: Image size of the torchvision models (see the docstring).
IMAGE = 16


class WithLoss(nn.Module):
    """``forward(input, labels)`` = cross-entropy of ``head(body(input))``."""

    def __init__(self, net, reshape_logits=False):
        super().__init__()
        self.net = net
        self.reshape_logits = reshape_logits

    def forward(self, input, labels):  # noqa: A002 - the ONNX input name
        logits = self.net(input)
        if self.reshape_logits:
            logits = logits.reshape(-1, logits.shape[-1])
        return nn.functional.cross_entropy(logits, labels)


class LstmLm(nn.Module):
    def __init__(self, embed=16, hidden=16, layers=2, vocab=32):
        super().__init__()
        self.lstm = nn.LSTM(embed, hidden, layers)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, x):
        y, _ = self.lstm(x)
        return self.out(y)


class EncoderClassifier(nn.Module):
    def __init__(self, d_model=16, heads=2, layers=2, classes=10):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=32, dropout=0.0)
        self.enc = nn.TransformerEncoder(layer, layers)
        self.out = nn.Linear(d_model, classes)

    def forward(self, x):
        return self.out(self.enc(x).mean(0))


def make_model(name):
    """(module with loss, example input, example labels)."""
    torch.manual_seed(0)
    if name == "lstm":
        return (WithLoss(LstmLm(), reshape_logits=True), torch.randn(6, 4, 16),
                torch.randint(0, 32, (24,)))
    if name == "transformer":
        return (WithLoss(EncoderClassifier()), torch.randn(5, 4, 16),
                torch.randint(0, 10, (4,)))
    import torchvision
    ctor = getattr(torchvision.models, name)
    return (WithLoss(ctor(num_classes=10)), torch.randn(2, 3, IMAGE, IMAGE),
            torch.randint(0, 10, (2,)))


MODELS = ("lstm", "transformer", "resnet18", "wide_resnet50_2")


def main():
    def extra(parser):
        parser.add_argument("--only", choices=MODELS, help="check this model only")
    env = E.parse_args(__doc__.splitlines()[1], extra=extra)
    env.require_tools()
    for name in MODELS:
        if env.args.only and name != env.args.only:
            continue
        model, x, labels = make_model(name)
        model.train()
        path = env.path(name, "model.onnx")
        torch.onnx.export(model, (x, labels), path, input_names=["input", "labels"],
                          output_names=["loss"], opset_version=14,
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False)
        plan, dump = env.path(name, "plan.bin"), env.path(name, "dump")
        E.run_tool([env.tofuc, path, "--gpus", 1, "-o", plan])
        report = env.path(name, "report.json")
        E.run_tool([env.tofu_run, plan, "--steps", 1, "--dump", dump, "--report", report,
                    "--quiet"])
        tofu_loss = E.report_losses(E.load_json(report), report)[0]

        # The same step in float64 torch on the weights and batch tofu-run used.
        model = model.double()
        inits = [i.name for i in E.load_onnx(path).graph.initializer]
        state = model.state_dict()
        params = dict(model.named_parameters())
        missing = [p for p in params if p not in inits]
        E.check(not missing, f"{name}: parameters not exported as initializers: {missing}")
        with torch.no_grad():
            for p in inits:
                f = os.path.join(dump, f"param.{E.dump_name(p)}.npy")
                if p in state and os.path.exists(f):
                    state[p].copy_(torch.from_numpy(np.load(f).astype(np.float64)))
        xin = torch.from_numpy(np.load(os.path.join(dump, "input.input.npy")).astype(np.float64))
        lab = torch.from_numpy(np.load(os.path.join(dump, "input.labels.npy")))
        loss = model(xin, lab)
        loss.backward()
        d = abs(tofu_loss - loss.item()) / abs(loss.item())
        E.check(d <= TOL, f"{name}: loss {tofu_loss} vs torch {loss.item()} (rel {d:.2e})")
        for p, t in params.items():
            got = np.load(os.path.join(dump, f"grad.{E.dump_name(p)}.npy"))
            d = E.rel_diff(got, t.grad.numpy())
            E.check(d <= TOL, f"{name}: gradient of {p} differs from torch by rel {d:.3e}")
        print(f"{name}: loss and {len(params)} gradients match torch autograd", flush=True)


if __name__ == "__main__":
    E.main_wrapper(main)
