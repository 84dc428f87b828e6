#!/usr/bin/python3
"""e2e.buffers_vs_torch: registered buffers stay fixed and the weights train exactly as in torch.

PyTorch exports a module's registered buffers as ONNX initializers, like its
weights. Two float64 modules with buffers are exported with
``tools/tofu_export.py`` (which records the buffers in the model's
metadata_props ``tofu.frozen``):

* ``causal_attention``: ``nn.MultiheadAttention`` with ``attn_mask`` = a
  registered causal mask buffer (-inf above the diagonal);
* ``encoder``: a registered sinusoidal positional-encoding buffer added to
  the input of an ``nn.TransformerEncoder`` (one layer).

Each is compiled for k = 1 and k = 4 and trained for 3 SGD steps on one
fixed batch (``tofu-run --data``), then compared with the same module in
float64 torch (autograd, ``p -= lr * p.grad`` for every parameter):

* the 3 losses equal torch's (rel 1e-9: the report prints 17 digits); before
  the buffers were frozen the mask became NaN after step 1 (NaN loss from
  step 2) and the positional encoding drifted;
* step 1's gradients (``--dump``) equal torch autograd's (rel 1e-9), and
  there is none for a buffer;
* the weights written by ``--save`` after 3 steps equal torch's (rel 1e-9)
  and moved, and every buffer is bit-identical to its exported value;
* the encoder exported without the lists (plain ``torch.onnx.export``)
  trains its finite positional encoding (tofuc cannot tell it from a
  weight), which is why the lists exist, while the -inf mask stays fixed
  even without them (a non-finite initializer never trains by default).
"""

import copy
import math
import os
import sys

import numpy as np
import onnx
import torch

import e2e_common as E

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
from tofu_export import export_for_training  # noqa: E402

B, T, EMB, HEADS = 2, 4, 8, 2
LR = 0.125
STEPS = 3
TOL = 1e-9
LOSS_TOL = 1e-9  # tofu-run's report prints losses with 17 significant digits


class CausalAttention(torch.nn.Module):
    """Self-attention with a registered causal mask buffer."""

    def __init__(self):
        super().__init__()
        self.attn = torch.nn.MultiheadAttention(EMB, HEADS, dropout=0.0, batch_first=True)
        self.register_buffer("causal_mask",
                             torch.triu(torch.full((T, T), float("-inf")), 1))
        self.head = torch.nn.Linear(EMB, 3)

    def forward(self, x):
        a, _ = self.attn(x, x, x, attn_mask=self.causal_mask, need_weights=False)
        return torch.tanh(self.head(x + a)).pow(2).mean()


class Encoder(torch.nn.Module):
    """A TransformerEncoder over the input plus a sinusoidal encoding buffer."""

    def __init__(self):
        super().__init__()
        pos = torch.arange(T, dtype=torch.float32)[:, None]
        div = torch.exp(torch.arange(0, EMB, 2, dtype=torch.float32)
                        * (-math.log(10000.0) / EMB))
        pe = torch.zeros(T, EMB)
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)
        self.register_buffer("pe", pe)
        layer = torch.nn.TransformerEncoderLayer(EMB, HEADS, dim_feedforward=16,
                                                 dropout=0.0, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, num_layers=1,
                                                   enable_nested_tensor=False)
        self.head = torch.nn.Linear(EMB, 3)

    def forward(self, x):
        return torch.tanh(self.head(self.encoder(x + self.pe))).pow(2).mean()


MODELS = {"causal_attention": (CausalAttention, ["causal_mask"]),
          "encoder": (Encoder, ["pe"])}


def reference(module, x):
    """(losses, step-1 gradients, parameters after STEPS) of torch SGD."""
    module = copy.deepcopy(module)
    losses, grads = [], None
    for _ in range(STEPS):
        module.zero_grad()
        loss = module(x)
        loss.backward()
        losses.append(loss.item())
        if grads is None:
            grads = {n: p.grad.detach().clone().numpy() for n, p in module.named_parameters()}
        with torch.no_grad():
            for p in module.parameters():
                p -= LR * p.grad
    params = {n: p.detach().numpy() for n, p in module.named_parameters()}
    return np.array(losses), grads, params


def train(env, model_path, name, k, data):
    """Compiles and runs 3 steps; returns (losses, dump dir, saved initializers)."""
    work = env.path(name, f"k{k}", "plan.bin")
    d = os.path.dirname(work)
    E.run_tool([env.tofuc, model_path, "--gpus", k, "--lr", LR, "-o", work])
    report, dump, saved = (os.path.join(d, f) for f in ("r.json", "dump", "trained.onnx"))
    E.run_tool([env.tofu_run, work, "--data", data, "--steps", STEPS, "--dump", dump,
                "--report", report, "--save", saved])
    losses = E.report_losses(E.load_json(report), report)
    return losses, dump, E.initializers(E.load_onnx(saved, "saved model"))


def main():
    env = E.parse_args(__doc__.splitlines()[1])
    env.require_tools()
    failures = []
    for name, (cls, buffers) in MODELS.items():
        torch.manual_seed(0)
        module = cls().double()
        x = torch.randn(B, T, EMB, dtype=torch.float64)
        path = env.path(name, "model.onnx")
        frozen, trainable = export_for_training(module, (x,), path, input_names=["x"],
                                                output_names=["loss"], opset_version=17)
        E.check(frozen == buffers, f"{name}: tofu.frozen is {frozen}, expected {buffers}")
        E.check(sorted(trainable) == sorted(n for n, _ in module.named_parameters()),
                f"{name}: tofu.trainable is {trainable}")
        initial = E.initializers(E.load_onnx(path))
        data = env.path(name, "data", "batch_0", "x.npy")
        np.save(data, x.numpy())
        ref_losses, ref_grads, ref_params = reference(module, x)
        E.check(np.all(np.isfinite(ref_losses)), f"{name}: torch's losses {ref_losses}")

        for k in (1, 4):
            tag = f"{name} k={k}"
            losses, dump, saved = train(env, path, name, k, env.path(name, "data"))
            dl = E.rel_diff(losses, ref_losses)
            print(f"{tag}: losses {losses} torch {ref_losses} rel {dl:.2e}")
            if dl > LOSS_TOL:
                failures.append(f"{tag}: losses {losses} differ from torch's {ref_losses} "
                                f"(rel {dl:.2e} > {LOSS_TOL})")
            for n, ref in ref_grads.items():
                g = os.path.join(dump, f"grad.{E.dump_name(n)}.npy")
                if not os.path.isfile(g):
                    failures.append(f"{tag}: no gradient dumped for {n}")
                    continue
                diff = E.rel_diff(np.load(g), ref)
                print(f"{tag}: step-1 gradient {n:<48} rel {diff:.2e}")
                if diff > TOL:
                    failures.append(f"{tag}: step-1 gradient of {n} rel {diff:.2e} > {TOL}")
            for n, ref in ref_params.items():
                diff = E.rel_diff(saved[n], ref)
                moved = E.rel_diff(saved[n], initial[n])
                if diff > TOL:
                    failures.append(f"{tag}: {n} after {STEPS} steps rel {diff:.2e} > {TOL}")
                if moved < 1e-6:
                    failures.append(f"{tag}: {n} did not move")
            for b in buffers:
                if os.path.isfile(os.path.join(dump, f"grad.{E.dump_name(b)}.npy")):
                    failures.append(f"{tag}: a gradient was dumped for buffer {b}")
                same = np.array_equal(saved[b], initial[b])
                print(f"{tag}: buffer {b} bit-identical after {STEPS} steps: {same}")
                if not same:
                    failures.append(f"{tag}: buffer {b} changed (max |diff| "
                                    f"{np.nanmax(np.abs(saved[b] - initial[b]))})")

    # Without the lists (as torch.onnx.export alone writes it): the finite
    # positional encoding looks like a weight and trains.
    plain = onnx.load(env.path("encoder", "model.onnx"))
    del plain.metadata_props[:]
    plain_path = env.path("encoder_plain", "model.onnx")
    onnx.save(plain, plain_path)
    _, _, saved = train(env, plain_path, "encoder_plain", 1, env.path("encoder", "data"))
    pe0 = E.initializers(plain)["pe"]
    if np.array_equal(saved["pe"], pe0):
        failures.append("encoder without tofu.frozen: pe did not train; the default "
                        "should train every finite float initializer")
    E.check(not failures, "\n  " + "\n  ".join(failures))


if __name__ == "__main__":
    E.main_wrapper(main)
