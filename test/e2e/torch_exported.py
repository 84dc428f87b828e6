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

* ``lstm``: ``nn.LSTM`` language model: ``nn.Embedding`` of 32 tokens
  (width 16) -> 2 LSTM layers, hidden 16, 6 time steps, batch 4 ->
  ``nn.Linear`` -> cross-entropy over the 32 tokens. The input is the int64
  token ids [T, B]; the embedding is exported as ``Gather(emb.weight,
  input)``, tofuc makes the input a features input of token ids in
  [0, 32), and tofu-run's synthetic data draws them uniformly.
* ``transformer``: ``nn.TransformerEncoder`` (2 layers, d_model 16, 2 heads,
  feed-forward 32, dropout 0) over [S=5, B=4, 16], mean over the sequence,
  ``nn.Linear`` to 10 classes.
* ``resnet18`` and ``wide_resnet50_2``: torchvision's models (random
  initialization, 10 classes) on 2 images of 64x64, exported in training
  mode, so BatchNormalization uses the batch statistics as in PyTorch.

``--only NAME`` runs one model. ctest registers ``lstm``, ``transformer`` and
``resnet18`` (e2e.torch_exported.<name>), which pass.

NOT REGISTERED: ``wide_resnet50_2`` imports, compiles and runs (about 2 min
under load), its loss matches, but the gradient of ``net.conv1.weight``
differs from float64 torch by rel 8.8e-3 (> 1e-3). This is the model's
conditioning at batch 2, not tofu: torch's own float32 gradient differs from
its float64 one by rel 1.5e-2 on the same weights and batch. (At 16x16
images resnet18 showed the same effect in the loss: float32 torch 2.1776,
float64 1.9726, tofu 2.0004, because BatchNormalization over 2 values of a
1x1 map amplifies rounding; hence 64x64.) A comparison at float32's
precision needs a larger batch, which costs minutes of CPU per step.
"""
import os

import numpy as np
import torch
from torch import nn

import e2e_common as E

TOL = 1e-3
#: Image size of the torchvision models (see the docstring).
IMAGE = 64  # later stages stay >= 2x2 (see the docstring)


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
        self.emb = nn.Embedding(vocab, embed)
        self.lstm = nn.LSTM(embed, hidden, layers)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, tokens):
        y, _ = self.lstm(self.emb(tokens))
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
        return (WithLoss(LstmLm(), reshape_logits=True), torch.randint(0, 32, (6, 4)),
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
        xin = np.load(os.path.join(dump, "input.input.npy"))
        if xin.dtype == np.int64:  # token ids
            E.check(xin.min() >= 0 and xin.max() < 32 and len(np.unique(xin)) > 8,
                    f"{name}: token ids {np.unique(xin)} are not spread over [0, 32)")
            xin = torch.from_numpy(xin)
        else:
            xin = torch.from_numpy(xin.astype(np.float64))
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
