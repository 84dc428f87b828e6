#!/usr/bin/python3
"""e2e.float64_vs_torch: a float64 PyTorch model trains under tofu in float64, as in PyTorch.

A small MLP (Linear, ReLU, Linear, Tanh, Linear, cross-entropy) is built in
torch, converted with ``model.double()`` and exported to ONNX (every
initializer, activation and the loss DOUBLE). For k in 1 and 2 it is compiled
with ``tofuc --optimizer adam``, and with plain SGD (whose updates tofuc
computes in place: docs/Training.md, "Updates in place"), and run for 3 steps
with ``tofu-run --dump DIR --save trained.onnx --report r.json``. The
reference replays the same batches in float64 torch: autograd gives each
step's loss and gradients, and the update is ONNX's Adam or SGD written out
in torch (as e2e.optimizers_vs_torch does). Proves that:

* SGD's plans update the parameters in place (no parameter copies in the
  schedule; Adam's plans have them),
* the plan keeps float64 end to end: the dumped weights, inputs and
  gradients are float64 arrays, and --save writes DOUBLE initializers,
* step 1's gradients equal torch's in float64 (relative difference <= 1e-9,
  far below what float32 arithmetic could reach),
* the trained weights after 3 Adam or SGD steps equal the reference's
  (<= 1e-9),
  every step's loss too (<= 1e-9: the report prints 17 significant digits),
  and k = 2 gives the same weights as k = 1.

The learning rate and Adam's betas are powers of two or short binary
fractions, exact in float32 (the learning-rate state tensor is float32, as
ONNX's Adam allows).
"""

import os
import sys

import numpy as np
import torch

import e2e_common as E

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "mlp"))
import make_mlp  # noqa: E402
import optimizers_vs_torch as O  # noqa: E402

TOL = 1e-9
LOSS_TOL = 1e-9  # tofu-run's report prints losses with 17 significant digits
K_TOL = 1e-12
ADAM = dict(flags=["--optimizer", "adam", "--lr", "0.0625", "--beta1", "0.75",
                   "--beta2", "0.9375", "--epsilon", "1e-4", "--weight-decay", "0.015625"])
SGD = dict(flags=["--lr", "0.125", "--weight-decay", "0.015625"])


def export_model(path):
    """The float64 MLP with a Tanh layer, exported like examples/mlp."""
    torch.manual_seed(7)
    net = torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.ReLU(),
                              torch.nn.Linear(16, 16), torch.nn.Tanh(),
                              torch.nn.Linear(16, 5))
    model = make_mlp.MLPWithLoss(net).double()
    x = torch.zeros(8, 12, dtype=torch.float64)
    y = torch.zeros(8, dtype=torch.int64)
    torch.onnx.export(model, (x, y), path, input_names=["input", "labels"],
                      output_names=["loss"], opset_version=17,
                      do_constant_folding=True)


def main():
    env = E.parse_args(__doc__.splitlines()[1])
    env.require_tools()
    env.model = env.path("mlp64.onnx")
    export_model(env.model)
    model = E.load_onnx(env.model)
    initial = E.initializers(model)
    for n, v in initial.items():
        E.check(v.dtype == np.float64, f"exported initializer {n} is {v.dtype}, not float64")

    # The SGD plans update in place (no end-of-step copy of a new value into
    # its parameter); Adam's keep the copies, so the check can tell.
    for name, cfg, in_place in (("sgd", SGD, True), ("adam", ADAM, False)):
        schedule = E.run_tool([env.tofuc, env.model, "--gpus", "2", "--compile-to=schedule",
                               *[str(f) for f in cfg["flags"]]], quiet=True).stdout
        copies = schedule.count("; param-update")
        print(f"{name}: {copies} parameter copies at k=2")
        E.check((copies == 0) == in_place,
                f"{name}: {copies} parameter copies in the k=2 schedule; expected "
                f"{'none (updates in place)' if in_place else 'some'}")

    results = {}
    for k in (1, 2):
        results[k] = O.run_config(env, model, "adam64", ADAM, k)
        results["sgd", k] = O.run_config(env, model, "sgd64", SGD, k)
        d = os.path.join(env.path("adam64", f"k{k}"), "dump")
        for n in initial:
            for kind in ("param", "grad"):
                a = np.load(os.path.join(d, f"{kind}.{E.dump_name(n)}.npy"))
                E.check(a.dtype == np.float64, f"k={k}: {kind}.{n} was dumped as {a.dtype}")
        x = np.load(os.path.join(d, "input.input.npy"))
        E.check(x.dtype == np.float64, f"k={k}: the input was dumped as {x.dtype}")
        for n, v in results[k][1].items():
            E.check(v.dtype == np.float64, f"k={k}: --save wrote {n} as {v.dtype}")

    # Step 1's gradients against autograd.
    d1 = os.path.join(env.path("adam64", "k1"), "dump")
    x, y = results[1][2][0]
    leaves = {n: torch.tensor(v, requires_grad=True) for n, v in initial.items()}
    loss = E.TorchGraph(model).loss(dict(leaves, input=torch.tensor(x),
                                         labels=torch.tensor(y.astype(np.int64))))
    loss.backward()
    failures = []
    for n, leaf in leaves.items():
        got = np.load(os.path.join(d1, f"grad.{E.dump_name(n)}.npy"))
        diff = E.rel_diff(got, leaf.grad.numpy())
        print(f"step 1 gradient {n:<14} rel {diff:.2e}")
        if diff > TOL:
            failures.append(f"gradient of {n} differs from torch float64: rel {diff:.2e} > {TOL}")

    for name, cfg, runs in (("adam", ADAM, {k: results[k] for k in (1, 2)}),
                            ("sgd", SGD, {k: results["sgd", k] for k in (1, 2)})):
        failures += O.compare_with_reference(name, model, cfg, runs, initial, loss_tol=LOSS_TOL,
                                             tol=TOL, k_tol=K_TOL, min_moved=1e-6)
    E.check(not failures, "\n  " + "\n  ".join(failures))


if __name__ == "__main__":
    E.main_wrapper(main)
