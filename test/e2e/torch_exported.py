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
* ``padded_cnn``: ``nn.functional.pad`` (constant 0.5, asymmetric) -> Conv
  -> ReLU -> Linear: the exported Pad and its gradient.
* ``resnet18``: torchvision's model (random initialization, 10 classes) on
  2 images of 64x64, exported in training mode, so BatchNormalization uses
  the batch statistics as in PyTorch.
* ``wide_resnet50_2``: likewise (training-form BatchNorm), but in float64:
  ``model.double()`` is exported, tofuc compiles the float64 model and
  tofu-run computes its step in float64 (the native kernels are templates
  over float and double). At float32 its gradient cannot be compared:
  with batch statistics at batch 2 it is so ill-conditioned that torch's
  own float32 gradient differs from its float64 one by 4.5e-2 (whole
  gradient, norm-wise) at 2x3x64x64 (``bench/batchnorm_conditioning.md``).
  In float64 the two implementations agree to TOL_FLOAT64.

``--only NAME`` runs one model. ctest registers ``lstm``, ``transformer``,
``padded_cnn`` and ``resnet18`` (e2e.torch_exported.<name>), and
``wide_resnet50_2`` (about 41 s on the idle 2-core VM: the export, tofuc's
import of 0.5 GB of float64 weights, one float64 step in tofu-run and in
torch).

The float32 models built with ``nn.ReLU`` modules (``resnet18``; the
others' few ReLUs are functional and keep tofu-run's synthetic batch) are
fed a batch of their own (``--data``): the first of
``torch.manual_seed(1000 + i)``, i < 20, whose every nonzero ReLU input, in
float64 torch on the exported weights, lies at least KINK_MARGIN from the
kink at 0, relative to that ReLU input's largest magnitude. ReLU's gradient
jumps at 0, so an input within float32 rounding of it makes the comparison
test the rounding, not the gradient: on tofu-run's synthetic batch,
resnet18's layer1.1 first ReLU input at (0, 51, 2, 7) is +1.65e-6 in
float64 (+1.10e-6 in float32 torch), 3.8e-7 of that input's largest
magnitude; tofu-run's float32 forward, with OpenBLAS's 2-thread sgemm
rounding, puts it at -2.7e-8 (+4.1e-7 with the stem conv's sgemm on one
thread), and that one mask bit moves layer1.1.bn1.bias's gradient by 6e-2
and layer1.1.conv1.weight's by 1.1e-1 (torch with that ReLU input set to
-1e-6 equals tofu-run's gradients to 2e-5). Every sgemm call of that step was within 6e-7 of a
float64 GEMM of the same operands: both answers are right to float32. A
random batch of resnet18 has some ReLU input within 1e-6 to 5e-6 of 0
(relative; it has 376 832 of them), so KINK_MARGIN is 2e-6, 16 to 20 times
the 1.0e-7 (tofu-run's two sgemm roundings) and 1.3e-7 (torch's float32)
(relative) by which float32 rounding moved that input.

Gradients are compared element-wise (``E.rel_diff``: the largest absolute
difference over the reference's largest magnitude).
"""
import os

import numpy as np
import torch
from torch import nn

import e2e_common as E

TOL = 1e-3
#: Tolerance of the float64 models: float64 rounding, amplified by the
#: conditioning that costs float32 its 4.5e-2, stays far below it
#: (wide_resnet50_2: worst gradient 4.1e-10, loss 1.3e-10, the report's 9
#: digits; bench/float64_kernels.md).
TOL_FLOAT64 = 1e-7
#: Smallest distance of a ReLU input from 0 the float32 models' batch may
#: have, over that ReLU input's largest magnitude (see the docstring).
KINK_MARGIN = 2e-6
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


class PaddedCnn(nn.Module):
    """Constant padding (exported as ONNX Pad) before a convolution."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.fc = nn.Linear(4 * 8 * 8, 10)

    def forward(self, x):
        y = nn.functional.pad(x, (2, 1, 0, 3), value=0.5)  # [N, 3, 10, 10]
        return self.fc(torch.relu(self.conv(y)).flatten(1))


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
    if name == "padded_cnn":
        return WithLoss(PaddedCnn()), torch.randn(2, 3, 7, 7), torch.randint(0, 10, (2,))
    if name == "transformer":
        return (WithLoss(EncoderClassifier()), torch.randn(5, 4, 16),
                torch.randint(0, 10, (4,)))
    import torchvision
    ctor = getattr(torchvision.models, name)
    return (WithLoss(ctor(num_classes=10)), torch.randn(2, 3, IMAGE, IMAGE),
            torch.randint(0, 10, (2,)))


MODELS = ("lstm", "transformer", "padded_cnn", "resnet18", "wide_resnet50_2")
#: Models exported, compiled, run and compared in float64 (see the docstring).
FLOAT64 = ("wide_resnet50_2",)


def relu_margin(model, x, labels):
    """Smallest nonzero |input| of any ``nn.ReLU`` call over that input's
    largest magnitude, in float64 (inf when the model has no ``nn.ReLU``)."""
    import copy
    m = copy.deepcopy(model).double()
    m.train()
    margins = []

    def hook(_mod, ins):  # before the call: torchvision's ReLUs are in place
        a = ins[0].detach().abs()
        a = a[a > 0]  # exact zeros are exact in float32 too (e2e.kinks_vs_torch)
        if a.numel():
            margins.append((a.min() / a.max()).item())
    handles = [mod.register_forward_pre_hook(hook) for mod in m.modules()
               if isinstance(mod, nn.ReLU)]
    with torch.no_grad():
        m(x.double(), labels)
    for h in handles:
        h.remove()
    return min(margins, default=float("inf"))


def kink_free_batch(name, model, x, labels):
    """A batch of x's shape whose ReLU inputs keep KINK_MARGIN from 0, or
    None when the model has no ``nn.ReLU`` (see the docstring)."""
    if not any(isinstance(mod, nn.ReLU) for mod in model.modules()):
        return None
    tried = []
    for i in range(20):
        torch.manual_seed(1000 + i)
        xi = torch.randn(x.shape, dtype=x.dtype)
        li = torch.randint(0, 10, labels.shape)
        margin = relu_margin(model, xi, li)
        if margin >= KINK_MARGIN:
            print(f"{name}: batch of torch.manual_seed({1000 + i}), ReLU inputs at least "
                  f"{margin:.1e} (relative) from 0", flush=True)
            return xi, li
        tried.append(f"{margin:.1e}")
    E.fail(f"{name}: no batch keeps its ReLU inputs {KINK_MARGIN:.0e} from 0 "
           f"(margins {', '.join(tried)})")


def main():
    def extra(parser):
        parser.add_argument("--only", choices=MODELS, help="check this model only")
    env = E.parse_args(__doc__.splitlines()[1], extra=extra)
    env.require_tools()
    for name in MODELS:
        if env.args.only and name != env.args.only:
            continue
        model, x, labels = make_model(name)
        float64 = name in FLOAT64
        tol = TOL_FLOAT64 if float64 else TOL
        if float64:
            model, x = model.double(), x.double()
        model.train()
        path = env.path(name, "model.onnx")
        torch.onnx.export(model, (x, labels), path, input_names=["input", "labels"],
                          output_names=["loss"], opset_version=14,
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False)
        plan, dump = env.path(name, "plan.bin"), env.path(name, "dump")
        E.run_tool([env.tofuc, path, "--gpus", 1, "-o", plan])
        report = env.path(name, "report.json")
        data = []
        batch = None if float64 else kink_free_batch(name, model, x, labels)
        if batch is not None:
            folder = env.path(name, "data", "batch_0")
            os.makedirs(folder, exist_ok=True)
            np.save(os.path.join(folder, "input.npy"), batch[0].numpy().astype(np.float32))
            np.save(os.path.join(folder, "labels.npy"), batch[1].numpy().astype(np.int64))
            data = ["--data", env.path(name, "data")]
        E.run_tool([env.tofu_run, plan, "--steps", 1, "--dump", dump, "--report", report,
                    "--quiet", *data], timeout=max(E.DEFAULT_TIMEOUT_S, 900))
        tofu_loss = E.report_losses(E.load_json(report), report)[0]

        # The same step in float64 torch on the weights and batch tofu-run used.
        model = model.double()
        model.train()
        exported = E.initializers(E.load_onnx(path))
        inits = list(exported)
        state = model.state_dict()
        params = dict(model.named_parameters())
        missing = [p for p in params if p not in inits]
        E.check(not missing, f"{name}: parameters not exported as initializers: {missing}")
        with torch.no_grad():
            for p in inits:
                f = os.path.join(dump, f"param.{E.dump_name(p)}.npy")
                if p in state and os.path.exists(f):
                    state[p].copy_(torch.from_numpy(np.load(f).astype(np.float64)))
                elif p in state and state[p].is_floating_point():
                    # e.g. running statistics, which tofu-run does not dump
                    state[p].copy_(torch.from_numpy(exported[p].astype(np.float64)))
        xin = np.load(os.path.join(dump, "input.input.npy"))
        if xin.dtype == np.int64:  # token ids
            E.check(xin.min() >= 0 and xin.max() < 32 and len(np.unique(xin)) > 8,
                    f"{name}: token ids {np.unique(xin)} are not spread over [0, 32)")
            xin = torch.from_numpy(xin)
        else:
            E.check(xin.dtype == (np.float64 if float64 else np.float32),
                    f"{name}: tofu-run's input batch is {xin.dtype}")
            xin = torch.from_numpy(xin.astype(np.float64))
        lab = torch.from_numpy(np.load(os.path.join(dump, "input.labels.npy")))
        grads = {p: np.load(os.path.join(dump, f"grad.{E.dump_name(p)}.npy")) for p in params}
        if float64:
            wrong = sorted(p for p, g in grads.items() if g.dtype != np.float64)
            E.check(not wrong, f"{name}: tofu-run dumped gradients that are not float64: "
                    f"{wrong[:5]}")
        model.zero_grad()
        loss = model(xin, lab)
        loss.backward()
        worst = max((E.rel_diff(grads[p], t.grad.numpy()), p) for p, t in params.items())
        loss = loss.item()
        d = abs(tofu_loss - loss) / abs(loss)
        E.check(d <= tol, f"{name}: loss {tofu_loss} vs torch {loss} (rel {d:.2e})")
        E.check(worst[0] <= tol,
                f"{name}: gradient of {worst[1]} differs from torch by rel {worst[0]:.3e} "
                f"(tolerance {tol:.0e})")
        print(f"{name}: loss (rel {d:.2e}) and {len(params)} gradients match torch autograd"
              f"{' in float64' if float64 else ''} (worst rel {worst[0]:.2e}, {worst[1]})",
              flush=True)


if __name__ == "__main__":
    E.main_wrapper(main)
