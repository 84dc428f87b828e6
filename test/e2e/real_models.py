#!/usr/bin/python3
"""e2e.realmodels.<model>: models as PyTorch writes them train as PyTorch trains them.

The project-owned real-model suite (issue 14; ctest label ``realmodels``,
``ctest -L realmodels`` runs it alone). Each model is a ``torch.nn.Module``
nobody here wrote the graph of (torchvision classifiers, ``torch.nn``
transformer, attention and recurrent modules), built with random weights
(``torch.manual_seed``), exported at test time by Debian's torch 1.13 through
``tools/tofu_export.py`` ``export_for_training`` (training mode, no constant
folding, registered buffers recorded as frozen), compiled by tofuc and
trained by tofu-run on one fixed batch fed with ``--data``; no ONNX file is
committed. Dropout is set to p = 0 and stochastic depth to p = 0, so that
torch is deterministic and tofu-run can be compared step by step.

**float64** (``model.double()`` before export): tofuc at k = 1 and k = 4
(``--lr LR``, SGD), tofu-run 3 steps on the batch. The oracle is the original
``nn.Module`` trained by ``torch.optim.SGD`` (same lr, same batch, same
weights) in float64:

* the 3 losses equal torch's within ``TOL_FLOAT64`` = 1e-6 relative, at k = 1
  and k = 4;
* the step-1 gradient of every parameter (``tofu-run --dump``) equals torch
  autograd's within 1e-6, at k = 1 and k = 4: the largest element difference
  over max(the largest reference magnitude of that parameter, ``GRAD_FLOOR``
  = 1e-6 x the largest reference magnitude of any parameter). The floor is
  there for gradients that are zero in exact arithmetic: the bias of a
  BatchNorm whose output reaches another BatchNorm through a convolution
  (EfficientNet's and ShuffleNet's blocks; the second normalization cancels
  any constant shift) has a float64 gradient of 1e-19 of the largest one,
  pure rounding noise in both implementations, and relative to itself the
  difference of two noises means nothing. Every other parameter of the
  suite's models has a gradient well above the floor, so for them the
  measure is the per-parameter relative difference (``E.rel_diff``);
* tofu trains exactly torch's parameters: a gradient tofu-run dumps for an
  initializer that is not a torch parameter (a buffer) is a failure, and so
  is a torch parameter without one;
* tofu-run's initial weights (``param.*.npy``) are the module's, bit for bit.

Why 1e-6: in float64 the two implementations differ only by rounding
(summation orders, library kernels), about 1e-16 relative per operation,
amplified by the model's conditioning; the worst float64 difference measured
over the whole suite (``bench/real_models.md``) stays many orders of
magnitude below 1e-6, while every class of defect this suite looks for (a
wrong subgradient at a kink or a tie, a buffer trained, a double softmax, a
label permuted) moves a loss or a gradient by far more than 1e-6. That
margin is measured for every model on every run: torch float64 trains the
same 3 steps again on the batch permuted along its batch dimension (the same
mathematics, other summation orders); that spread must stay below
``TOL_FLOAT64 / SPREAD_MARGIN`` (1e-7), otherwise the model is too
ill-conditioned at its size for the float64 check and the test fails saying
so. (At 32x32 with batch 4, RegNetY-400MF's last stage normalizes 4 values
per channel and its step-3 loss moves by 5e-4 under the permutation: no
implementation could match torch to 1e-6; hence 64x64 for the models that
need it, ``IMAGE``.)

The oracle trains the model the ONNX file describes: ONNX stores
BatchNormalization's ``epsilon`` as a float32 attribute, so each BatchNorm's
eps is rounded to float32 in the torch module (``onnx_epsilons``; without it
ShuffleNet's float64 gradients differ by 2.5e-8, see there).

**float32** (the same weights and batch rounded to float32, k = 1, 3 steps):
tofu-run's float32 losses and step-1 gradients are compared with float64
torch on the float32 weights, and so are torch's own float32 results on the
same model and batch: those are the model's measured conditioning limits,
``L_loss`` (torch float32's worst relative error over the 3 losses) and
``L_grad`` (its worst over the parameters' gradients, measured as above),
each the worse of two torch float32 runs: on the batch, and on the batch
permuted as in the float64 spread (another, equally valid rounding; one run
alone can be luckier than the model's conditioning: EfficientNet-B0's
losses 2.2e-4 off on the batch, 1.0e-3 permuted, and tofu's 1.5e-3 or
2.7e-3 depending on how its GEMMs split C, bench/real_models.md).
tofu float32 must be within ``F32_FACTOR`` (10) times ``max(L_loss,
F32_FLOOR)`` on every loss and ``max(L_grad, F32_FLOOR)`` on every gradient.
F32_FLOOR = 1e-6 (8 float32 ulps): below it the worst error of a float32
computation is decided by which summation order happens to be luckier, not
by correctness. The factor 10 leaves room for a different but equally valid
summation order (blocked GEMM, another reduction tree) in a model whose
conditioning amplifies rounding; a wrong subgradient or a trained buffer
breaks it by orders of magnitude more. Where BatchNorm normalizes a handful
of values per channel, float32 itself is chaotic
(``bench/batchnorm_conditioning.md``): the step-1 gradients may still be
meaningful while the later losses are not (ResNet-18 at 32x32: torch float32's
gradients within 2e-4, its step-3 loss 4e-2 off), and the limits say so;
the float64 check is then the meaningful one. The measured limits and tofu's
float32 errors of every model are in ``bench/real_models.md``.

Models (``MODELS``; image batches are small so the suite fits in CI; the
seconds each takes are in ``bench/real_models.md``):

* torchvision ``resnet18``, ``densenet121``, ``googlenet`` (aux_logits and
  transform_input off), ``efficientnet_b0``, ``shufflenet_v2_x0_5``,
  ``regnet_y_400mf``, ``convnext_tiny``, all with 10 classes, and a small
  ``vit`` (``VisionTransformer``: image 32, patch 8, 2 layers, 2 heads,
  hidden 32, MLP 64): cross-entropy of the logits against ``labels``;
* ``transformer_pe``: ``nn.TransformerEncoder`` (2 layers) after adding a
  registered sinusoidal positional-encoding buffer;
* ``mha_causal``: ``nn.MultiheadAttention`` with a registered causal mask
  buffer (``-inf`` above the diagonal) as ``attn_mask``;
* ``lstm_lm``, ``gru_lm``: ``nn.Embedding`` -> ``nn.LSTM`` / ``nn.GRU`` ->
  ``nn.Linear``, loss ``F.cross_entropy(logits.view(-1, V),
  targets.view(-1))`` with ``targets`` an int64 [T, B] input;
* ``softmax_classifier``: a CNN whose output is ``nn.Softmax``
  (probabilities), exported without a loss and compiled with
  ``--loss=softmax-cross-entropy``; torch's loss is ``F.cross_entropy`` of
  the logits before the Softmax, as the user who wrote the model means it.

``KNOWN_FAILURES`` lists the models that fail today and why (the issue-14
branch that fixes each). A listed model still FAILS (its message says it is
known and why); a listed model that passes also fails ("remove it from
KNOWN_FAILURES"), so the list can only shrink as fixes land.

``--only NAME`` runs one model (ctest runs one model per test);
``--skip-f32`` / ``--skip-k4`` leave parts out when measuring by hand.
"""
import copy
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import e2e_common as E

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tools"))

#: float64: losses and step-1 gradients vs torch float64 (see the docstring).
TOL_FLOAT64 = 1e-6
#: float32: tofu's error may be this many times torch float32's own error.
F32_FACTOR = 10.0
#: float32: the conditioning limit is never taken below this (8 ulps).
F32_FLOOR = 1e-6
#: A parameter's gradient difference is relative to max(its largest
#: reference magnitude, GRAD_FLOOR x the largest of any parameter): see the
#: docstring (gradients that are zero in exact arithmetic).
GRAD_FLOOR = 1e-6
#: SGD steps and the default learning rate (language models: 1.0, so that 3
#: steps move their loss by more than 1e-3).
STEPS = 3
LR = 0.01
#: torch float64's own spread (the batch permuted) must stay this many
#: times below TOL_FLOAT64, or the model is too ill-conditioned to check.
SPREAD_MARGIN = 10.0
#: The data-parallel width of the partitioned check.
K_PARTITIONED = 4

#: Models that fail today for a reason another issue-14 branch fixes. Each
#: still fails (the message says why); a listed model that passes fails too,
#: so the lead removes the entry when the fix is merged.
KNOWN_FAILURES = {
}


# --------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------

class WithLoss(nn.Module):
    """``forward(input, labels)`` = cross-entropy of ``net(input)``."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, input, labels):  # noqa: A002 - the ONNX input name
        return F.cross_entropy(self.net(input), labels)


def sinusoidal_encoding(length, width):
    """The positional encoding of "Attention is all you need", [length, width]."""
    position = torch.arange(length, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, width, 2, dtype=torch.float32) * (-math.log(1e4) / width))
    pe = torch.zeros(length, width)
    pe[:, 0::2] = torch.sin(position * freq)
    pe[:, 1::2] = torch.cos(position * freq)
    return pe


class PositionalTransformer(nn.Module):
    """``nn.TransformerEncoder`` over [S, B, D] + a registered positional encoding."""

    def __init__(self, seq=6, width=16, heads=2, layers=2, classes=10):
        super().__init__()
        self.register_buffer("pe", sinusoidal_encoding(seq, width)[:, None, :])
        layer = nn.TransformerEncoderLayer(width, heads, dim_feedforward=32, dropout=0.0)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(width, classes)

    def forward(self, input, labels):  # noqa: A002
        y = self.encoder(input + self.pe)
        return F.cross_entropy(self.head(y.mean(0)), labels)


class CausalAttention(nn.Module):
    """``nn.MultiheadAttention`` with a registered causal ``-inf`` mask buffer."""

    def __init__(self, seq=6, width=16, heads=2, classes=10):
        super().__init__()
        self.register_buffer(
            "causal_mask", torch.triu(torch.full((seq, seq), float("-inf")), diagonal=1))
        self.attention = nn.MultiheadAttention(width, heads, dropout=0.0)
        self.head = nn.Linear(width, classes)

    def forward(self, input, labels):  # noqa: A002
        y, _ = self.attention(input, input, input, attn_mask=self.causal_mask,
                              need_weights=False)
        return F.cross_entropy(self.head(torch.relu(y).mean(0)), labels)


class RecurrentLM(nn.Module):
    """Embedding -> LSTM/GRU -> Linear; the language-model loss over [T, B] targets."""

    def __init__(self, cell, vocab=32, width=16, hidden=16, layers=2):
        super().__init__()
        self.vocab = vocab
        self.embedding = nn.Embedding(vocab, width)
        self.rnn = getattr(nn, cell)(width, hidden, layers)
        self.decoder = nn.Linear(hidden, vocab)

    def forward(self, tokens, targets):
        y, _ = self.rnn(self.embedding(tokens))
        logits = self.decoder(y)
        return F.cross_entropy(logits.view(-1, self.vocab), targets.view(-1))


class SoftmaxClassifier(nn.Module):
    """A CNN whose output is probabilities (``nn.Softmax``), as many model-zoo
    graphs are; ``logits`` is what the user means to train with cross-entropy."""

    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
            nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.ReLU(), nn.Flatten())
        self.classifier = nn.Linear(8 * 4 * 4, classes)
        self.softmax = nn.Softmax(dim=1)

    def logits(self, x):
        return self.classifier(self.features(x))

    def forward(self, input):  # noqa: A002
        return self.softmax(self.logits(input))


def no_randomness(model):
    """Dropout and stochastic depth off (p = 0), so torch is deterministic."""
    import torchvision
    for m in model.modules():
        if isinstance(m, (nn.Dropout, torchvision.ops.StochasticDepth)):
            m.p = 0.0
    return model


def onnx_epsilons(model):
    """Each BatchNorm's eps rounded to float32, as the exported model holds it.

    ONNX stores ``BatchNormalization``'s ``epsilon`` as a float32 attribute,
    so a float64 model exported with eps = 1e-5 says 9.99999974737875e-06:
    that is the model tofu trains. Where a BatchNorm's output reaches another
    BatchNorm through a bias-free convolution (ShuffleNet, EfficientNet), the
    first one's scale reaches the loss only through the second one's eps, and
    the 2.5e-9 relative change of eps moves its gradient by 2.5e-8 in float64
    (measured; with the rounded eps the difference is 4e-11). The oracle
    trains the model the ONNX file describes.
    """
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.eps = float(np.float32(m.eps))
    return model


class Case:
    """One model of the suite.

    ``model``: the module; ``batch``: {ONNX input name: tensor} fed with
    ``--data``; ``batch_dims``: {input name: its batch dim} where not 0;
    ``export_args``: the names of ``batch`` passed to the module
    when exporting and training; ``labels``: the name of the labels input
    tofuc adds with ``--loss=softmax-cross-entropy`` (None: the loss is in
    the model); ``loss(model, batch)``: torch's loss; ``lr``: the SGD
    learning rate (default ``LR``).
    """

    def __init__(self, model, batch, export_args, loss=None, tofuc_flags=(), labels=None,
                 batch_dims=None, lr=None):
        self.model = model
        self.lr = lr or LR
        self.batch_dims = batch_dims or {}
        self.batch = batch
        self.export_args = export_args
        self.loss = loss or (lambda m, b: m(*(b[n] for n in export_args)))
        self.tofuc_flags = list(tofuc_flags)
        self.labels = labels


def torchvision_case(ctor, image, batch, **kwargs):
    import torchvision
    net = no_randomness(getattr(torchvision.models, ctor)(num_classes=10, **kwargs))
    x = torch.randn(batch, 3, image, image)
    y = torch.randint(0, 10, (batch,))
    return Case(WithLoss(net), {"input": x, "labels": y}, ["input", "labels"])


def make_case(name):
    """The model ``name``, its weights from seed 0 and its batch from seed 1,
    in float32 (the float64 runs use ``.double()`` of both: exact)."""
    torch.manual_seed(0)
    if name == "resnet18":
        model = torchvision_case("resnet18", IMAGE[name], 4)
    elif name == "densenet121":
        model = torchvision_case("densenet121", IMAGE[name], 4)
    elif name == "googlenet":
        model = torchvision_case("googlenet", IMAGE[name], 4, aux_logits=False,
                                 transform_input=False, init_weights=True)
    elif name == "efficientnet_b0":
        model = torchvision_case("efficientnet_b0", IMAGE[name], 4)
    elif name == "shufflenet_v2_x0_5":
        model = torchvision_case("shufflenet_v2_x0_5", IMAGE[name], 4)
    elif name == "regnet_y_400mf":
        model = torchvision_case("regnet_y_400mf", IMAGE[name], 4)
    elif name == "convnext_tiny":
        model = torchvision_case("convnext_tiny", IMAGE[name], 4)
    elif name == "vit":
        from torchvision.models import VisionTransformer
        net = no_randomness(VisionTransformer(image_size=32, patch_size=8, num_layers=2,
                                              num_heads=2, hidden_dim=32, mlp_dim=64,
                                              num_classes=10))
        model = Case(WithLoss(net), {"input": torch.randn(4, 3, 32, 32),
                                     "labels": torch.randint(0, 10, (4,))},
                     ["input", "labels"])
    elif name == "transformer_pe":
        net = PositionalTransformer()
        model = Case(net, {"input": torch.randn(6, 4, 16),
                           "labels": torch.randint(0, 10, (4,))}, ["input", "labels"],
                     batch_dims={"input": 1})
    elif name == "mha_causal":
        net = CausalAttention()
        model = Case(net, {"input": torch.randn(6, 4, 16),
                           "labels": torch.randint(0, 10, (4,))}, ["input", "labels"],
                     batch_dims={"input": 1})
    elif name in ("lstm_lm", "gru_lm"):
        net = RecurrentLM("LSTM" if name == "lstm_lm" else "GRU")
        model = Case(net, {"tokens": torch.randint(0, 32, (6, 4)),
                           "targets": torch.randint(0, 32, (6, 4))}, ["tokens", "targets"],
                     batch_dims={"tokens": 1, "targets": 1}, lr=1.0)
    elif name == "softmax_classifier":
        net = SoftmaxClassifier()
        model = Case(net, {"input": torch.randn(4, 3, 8, 8),
                           "labels": torch.randint(0, 10, (4,))}, ["input"],
                     loss=lambda m, b: F.cross_entropy(m.logits(b["input"]), b["labels"]),
                     tofuc_flags=["--loss=softmax-cross-entropy"], labels="labels")
    else:
        raise ValueError(name)
    # The batch from its own seed, whatever the model's constructor drew.
    torch.manual_seed(1)
    for k, v in model.batch.items():
        if v.is_floating_point():
            model.batch[k] = torch.randn(v.shape)
        else:
            model.batch[k] = torch.randint(0, CLASSES.get(name, 10), v.shape)
    onnx_epsilons(model.model)
    model.model.train()
    return model


#: Image sizes of the torchvision CNNs (batch 4; see the docstring).
IMAGE = {"resnet18": 32, "densenet121": 32, "googlenet": 32, "efficientnet_b0": 64,
         "shufflenet_v2_x0_5": 64, "regnet_y_400mf": 64, "convnext_tiny": 32}

#: Class (vocabulary) counts other than 10: the range of the integer inputs.
CLASSES = {"lstm_lm": 32, "gru_lm": 32}

MODELS = ("resnet18", "densenet121", "googlenet", "efficientnet_b0", "shufflenet_v2_x0_5",
          "regnet_y_400mf", "convnext_tiny", "vit", "transformer_pe", "mha_causal",
          "lstm_lm", "gru_lm", "softmax_classifier")


# --------------------------------------------------------------------------
# torch
# --------------------------------------------------------------------------

def cast(batch, dtype):
    return {k: v.to(dtype) if v.is_floating_point() else v for k, v in batch.items()}


def torch_train(case, model, dtype):
    """3 SGD steps of ``model`` (a copy, in ``dtype``) on the case's batch:
    (losses, {param: step-1 gradient as float64 numpy})."""
    model = copy.deepcopy(model).to(dtype)
    model.train()
    batch = cast(case.batch, dtype)
    opt = torch.optim.SGD(model.parameters(), lr=case.lr)
    losses, grads = [], None
    for step in range(STEPS):
        opt.zero_grad()
        loss = case.loss(model, batch)
        loss.backward()
        if step == 0:
            grads = {n: p.grad.detach().to(torch.float64).numpy().copy()
                     for n, p in model.named_parameters()}
        losses.append(loss.item())
        opt.step()
    return np.asarray(losses), grads


def torch_permuted(case, model, dtype):
    """torch in ``dtype`` on the batch permuted along its batch dims: (losses,
    gradients) as torch_train. The permutation changes nothing
    mathematically (the mean over the batch), only summation orders."""
    permuted = copy.copy(case)
    permuted.batch = {}
    for name, value in case.batch.items():
        dim = case.batch_dims.get(name, 0)
        permuted.batch[name] = value.flip(dim)
    losses, grads = torch_train(permuted, model, dtype)
    E.check(np.all(np.isfinite(losses)), f"torch {dtype} on the permuted batch: {losses}")
    return losses, grads


def torch_spread(case, model, ref):
    """torch float64 on the permuted batch against ``ref``: (losses rel,
    worst gradient rel), how far float64 rounding alone moves this model's
    3 steps."""
    losses, grads = torch_permuted(case, model, torch.float64)
    return loss_rel(losses, ref[0]), worst(grads, ref[1])[0]


# --------------------------------------------------------------------------
# tofu
# --------------------------------------------------------------------------

def export(env, case, model, dtype, path):
    """Exports ``model`` in ``dtype`` with tools/tofu_export.py."""
    try:
        from tofu_export import export_for_training
    except ImportError as e:
        E.fail(f"cannot import tools/tofu_export.py ({e})")
    model = copy.deepcopy(model).to(dtype)
    model.train()
    batch = cast(case.batch, dtype)
    export_for_training(model, tuple(batch[n] for n in case.export_args), path,
                        input_names=list(case.export_args),
                        output_names=["probabilities" if case.labels else "loss"])


def write_batch(env, case, dtype, folder):
    """``folder``/batch_0/<input>.npy of the case's batch in ``dtype``."""
    for name, value in cast(case.batch, dtype).items():
        np.save(env.path(folder, "batch_0", E.dump_name(name) + ".npy"), value.numpy())
    return os.path.join(env.workdir, folder)


def tofu_train(env, case, onnx_path, data, k, tag):
    """tofuc at k devices, tofu-run 3 steps on ``data`` with --dump:
    (losses, dump folder, seconds of tofuc, seconds of tofu-run)."""
    plan, dump, report = (env.path(tag, "plan.bin"), env.path(tag, "dump", "x")[:-2],
                          env.path(tag, "report.json"))
    t0 = time.time()
    E.run_tool([env.tofuc, onnx_path, "--gpus", k, "--lr", case.lr, "-o", plan,
                *case.tofuc_flags], timeout=900)
    t1 = time.time()
    E.run_tool([env.tofu_run, plan, "--data", data, "--steps", STEPS, "--dump", dump,
                "--report", report, "--quiet"], timeout=900)
    t2 = time.time()
    interpreted = E.load_json(report).get("interpreted_instructions") or {}
    if interpreted:
        print(f"{tag}: ran on the TDL interpreter (slow, issue 16): "
              + ", ".join(f"{op} x{n // STEPS}" for op, n in interpreted.items()), flush=True)
    return report_losses(report), dump, t1 - t0, t2 - t1


def dumped_grads(dump, params, label, problems):
    """{param: step-1 gradient} from ``dump`` for the torch ``params``; a
    problem when tofu trains a tensor torch does not (a buffer), a failure
    when it computes no gradient for a torch parameter."""
    files = {f[len("grad."):-len(".npy")] for f in os.listdir(dump)
             if f.startswith("grad.") and f.endswith(".npy")}
    by_dump = {E.dump_name(p): p for p in params}
    extra = sorted(files - set(by_dump))
    if extra:
        problems.append(f"{label}: tofu trains initializers that torch does not (buffers): "
                        f"{extra[:8]}")
    missing = sorted(p for d, p in by_dump.items() if d not in files)
    E.check(not missing, f"tofu computes no gradient for the torch parameters {missing[:8]}")
    return {p: np.load(os.path.join(dump, f"grad.{d}.npy")) for d, p in by_dump.items()}


def check_initial_params(dump, model, dtype):
    """tofu-run's initial parameters are the module's, bit for bit."""
    state = {k: v.to(dtype).numpy() for k, v in model.state_dict().items()}
    for p, _ in model.named_parameters():
        f = os.path.join(dump, f"param.{E.dump_name(p)}.npy")
        E.check(os.path.exists(f), f"tofu-run dumped no initial value of {p}")
        got = np.load(f)
        E.check(got.dtype == state[p].dtype and np.array_equal(got, state[p]),
                f"tofu-run's initial {p} ({got.dtype}) is not the module's "
                f"({state[p].dtype}), rel {E.rel_diff(got, state[p]):.2e}")


def worst(got, want):
    """(worst relative difference, parameter) over the gradients ``want``
    (the reference) of every parameter: max|got - want| over max(max|want|,
    GRAD_FLOOR x the largest |want| of any parameter), see the docstring."""
    scale = max(float(np.max(np.abs(w))) for w in want.values())
    def rel(p):
        a, b = np.asarray(got[p], np.float64), want[p]
        if a.shape != b.shape or not np.all(np.isfinite(a)):
            return float("inf")
        return float(np.max(np.abs(a - b))) / max(float(np.max(np.abs(b))), GRAD_FLOOR * scale,
                                                   1e-300)
    return max((rel(p), p) for p in want)


def loss_rel(got, want):
    return float(np.max(np.abs(np.asarray(got) - want) / np.abs(want)))


def report_losses(path):
    """The losses of a tofu-run --report; a non-finite loss (JSON null) is NaN."""
    report = E.load_json(path)
    steps = report.get("steps") if isinstance(report, dict) else None
    E.check(isinstance(steps, list) and len(steps) == STEPS,
            f"{path}: expected {STEPS} steps, got: {str(report)[:300]}")
    return np.asarray([np.nan if s.get("loss") is None else float(s["loss"]) for s in steps])


class Row:
    """What one model measured (bench/real_models.md's table)."""

    def __init__(self, name):
        self.name = name
        self.cells = {}

    def line(self):
        c = self.cells
        def get(key, fmt="{:.1e}"):
            return fmt.format(c[key]) if key in c else "-"
        return (f"| {self.name} | {get('spread_loss')} / {get('spread_grad')} | "
                f"{get('k1_loss')} | {get('k1_grad')} | {get('k4_loss')} | "
                f"{get('k4_grad')} | {get('limit_loss')} / {get('limit_grad')} | "
                f"{get('f32_loss')} / {get('f32_grad')} | {get('seconds', '{:.0f}')} | "
                f"{get('cpu', '{:.0f}')} |")


def float64_run(env, case, onnx64, data64, k, model64, ref, row, problems):
    """tofu float64 at k devices against torch float64 (``ref``)."""
    name = case.name
    ref_losses, ref_grads = ref
    losses, dump, tc, tr = tofu_train(env, case, onnx64, data64, k, f"f64k{k}")
    check_initial_params(dump, model64, torch.float64)
    grads = dumped_grads(dump, ref_grads, f"float64 k={k}", problems)
    bad = sorted(p for p, g in grads.items() if g.dtype != np.float64)
    E.check(not bad, f"float64 model, gradients dumped as another dtype: {bad[:5]}")
    lrel, (grel, gp) = loss_rel(losses, ref_losses), worst(grads, ref_grads)
    row.cells.update({f"k{k}_loss": lrel, f"k{k}_grad": grel})
    print(f"{name}: float64 k={k}: losses {losses.tolist()} (rel {lrel:.2e}), "
          f"worst gradient rel {grel:.2e} ({gp}); tofuc {tc:.1f} s, tofu-run {tr:.1f} s",
          flush=True)
    if not lrel <= TOL_FLOAT64:
        problems.append(f"float64 k={k}: losses {losses.tolist()} vs torch "
                        f"{ref_losses.tolist()} (rel {lrel:.2e} > {TOL_FLOAT64:.0e})")
    if not grel <= TOL_FLOAT64:
        problems.append(f"float64 k={k}: step-1 gradient of {gp} differs from torch "
                        f"autograd by rel {grel:.2e} > {TOL_FLOAT64:.0e}")


def float32_run(env, case, model32, ref, row, problems):
    """tofu float32 at k = 1 against torch float64 (``ref``), within
    F32_FACTOR of torch float32's own error (the measured limit)."""
    name = case.name
    ref_losses, ref_grads = ref
    t0 = time.time()
    t32_losses, t32_grads = torch_train(case, model32, torch.float32)
    # torch float32 again on the permuted batch: another, equally valid
    # rounding of the same mathematics. The limit is the worse of the two
    # (one torch run can be luckier than the model's conditioning allows:
    # EfficientNet-B0's losses 2.2e-4 off on the batch, 1.0e-3 on it
    # permuted; bench/real_models.md).
    p32_losses, p32_grads = torch_permuted(case, model32, torch.float32)
    row.cells["torch_s"] += time.time() - t0
    as_given_loss = loss_rel(t32_losses, ref_losses)
    permuted_loss = loss_rel(p32_losses, ref_losses)
    limit_loss = max(as_given_loss, permuted_loss)
    limit_grad, limit_param = max(worst(t32_grads, ref_grads),
                                  worst(p32_grads, ref_grads))
    tol_loss = F32_FACTOR * max(limit_loss, F32_FLOOR)
    tol_grad = F32_FACTOR * max(limit_grad, F32_FLOOR)
    row.cells.update({"limit_loss": limit_loss, "limit_grad": limit_grad})
    onnx32 = env.path("f32", "model.onnx")
    export(env, case, model32, torch.float32, onnx32)
    data32 = write_batch(env, case, torch.float32, "data32")
    losses, dump, tc, tr = tofu_train(env, case, onnx32, data32, 1, "f32k1")
    check_initial_params(dump, model32, torch.float32)
    grads = dumped_grads(dump, ref_grads, "float32 k=1", problems)
    lrel, (grel, gp) = loss_rel(losses, ref_losses), worst(grads, ref_grads)
    row.cells.update({"f32_loss": lrel, "f32_grad": grel})
    print(f"{name}: float32 k=1: torch float32 vs float64 (the limit): losses rel "
          f"{limit_loss:.2e} ({as_given_loss:.2e} on the batch, {permuted_loss:.2e} "
          f"permuted), worst gradient rel {limit_grad:.2e} ({limit_param}); "
          f"tofu float32: losses rel {lrel:.2e}, worst gradient rel {grel:.2e} ({gp}); "
          f"tolerances {tol_loss:.2e} / {tol_grad:.2e}; tofuc {tc:.1f} s, tofu-run {tr:.1f} s",
          flush=True)
    if not lrel <= tol_loss:
        problems.append(f"float32: losses {losses.tolist()} vs torch float64 "
                        f"{ref_losses.tolist()} (rel {lrel:.2e}), torch float32's own "
                        f"{limit_loss:.2e}: above {F32_FACTOR:g} x max(that, {F32_FLOOR:.0e}) "
                        f"= {tol_loss:.2e}")
    if not grel <= tol_grad:
        problems.append(f"float32: step-1 gradient of {gp} differs from torch float64 by "
                        f"rel {grel:.2e}, torch float32's own worst {limit_grad:.2e} "
                        f"({limit_param}): above {F32_FACTOR:g} x max(that, {F32_FLOOR:.0e}) "
                        f"= {tol_grad:.2e}")


def cpu_seconds():
    """User + system CPU seconds of this process and its finished children."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def run_model(env, name):
    """Every check of one model: (problems, Row). A phase that fails (a tool
    error, a missing gradient) is one problem; the other phases still run."""
    t_start, cpu_start = time.time(), cpu_seconds()
    case = make_case(name)
    case.name = name
    model32 = case.model
    model64 = copy.deepcopy(model32).double()
    row, problems = Row(name), []

    # torch float64: the reference of both precisions; the same run on the
    # batch permuted is its own rounding spread (see the docstring).
    t0 = time.time()
    ref = torch_train(case, model64, torch.float64)
    spread_loss, spread_grad = torch_spread(case, model64, ref)
    row.cells.update({"spread_loss": spread_loss, "spread_grad": spread_grad})
    row.cells["torch_s"] = time.time() - t0
    print(f"{name}: torch float64 losses {ref[0].tolist()}; torch's own spread (batch "
          f"permuted): losses rel {spread_loss:.1e}, gradients rel {spread_grad:.1e}",
          flush=True)
    E.check(abs(ref[0][-1] - ref[0][0]) > 1e-3 * abs(ref[0][0]),
            f"3 SGD steps hardly change torch's loss ({ref[0]}): nothing to compare")
    E.check(max(spread_loss, spread_grad) <= TOL_FLOAT64 / SPREAD_MARGIN,
            f"torch float64 itself moves by {max(spread_loss, spread_grad):.1e} when the "
            f"batch is permuted, above TOL_FLOAT64 / {SPREAD_MARGIN:g}: the model is too "
            "ill-conditioned at this size for the float64 check (use larger images)")

    def phase(label, fn, *args):
        try:
            fn(*args)
            return True
        except E.TestFailure as e:
            problems.append(f"{label}: {e}")
            return False

    onnx64 = env.path("f64", "model.onnx")
    data64 = os.path.join(env.workdir, "data64")
    if phase("float64 export", lambda: (export(env, case, model64, torch.float64, onnx64),
                                        write_batch(env, case, torch.float64, "data64"))):
        for k in (1, K_PARTITIONED):
            if k == 1 or not env.args.skip_k4:
                phase(f"float64 k={k}", float64_run, env, case, onnx64, data64, k, model64,
                      ref, row, problems)
    if not env.args.skip_f32:
        phase("float32 k=1", float32_run, env, case, model32, ref, row, problems)
    row.cells["seconds"] = time.time() - t_start
    row.cells["cpu"] = cpu_seconds() - cpu_start
    print(f"{name}: {row.cells['seconds']:.1f} s in all, {row.cells['cpu']:.1f} s of CPU "
          f"(torch {row.cells['torch_s']:.1f} s)", flush=True)
    return problems, row


def main():
    def extra(parser):
        parser.add_argument("--only", choices=MODELS, action="append",
                            help="check this model only (may repeat)")
        parser.add_argument("--skip-f32", action="store_true", help="no float32 run")
        parser.add_argument("--skip-k4", action="store_true", help="no k = 4 run")
    env = E.parse_args(__doc__.splitlines()[1], extra=extra)
    env.require_tools()
    # One torch thread: ctest runs the models two at a time on two cores, and
    # torch's OpenMP threads spin when they share them (densenet121's torch
    # part took 264 s instead of 6 under ctest -j2 with two threads each).
    torch.set_num_threads(1)
    failures, rows = [], []
    for name in env.args.only or MODELS:
        sub = E.Env(env.args)
        sub.args = env.args
        sub.workdir = os.path.join(env.workdir, name)
        try:
            problems, row = run_model(sub, name)
            rows.append(row)
        except E.TestFailure as e:
            problems = [str(e)]
        known = KNOWN_FAILURES.get(name)
        if problems and known:
            failures.append(f"{name}: KNOWN FAILURE ({known}):\n  " + "\n  ".join(problems))
        elif problems:
            failures.append(f"{name}:\n  " + "\n  ".join(problems))
        elif known:
            failures.append(f"{name}: passes, but is listed in KNOWN_FAILURES ({known}): "
                            "remove it from the list")
        else:
            print(f"{name}: ok", flush=True)
    print("| model | torch f64 spread (loss / grad) | f64 k=1 loss rel | f64 k=1 grad rel | f64 k=4 loss rel | "
          "f64 k=4 grad rel | torch f32 limit (loss / grad) | tofu f32 (loss / grad) | s | "
          "CPU s |")
    for row in rows:
        print(row.line())
    E.check(not failures, "\n".join(failures))


if __name__ == "__main__":
    E.main_wrapper(main)
