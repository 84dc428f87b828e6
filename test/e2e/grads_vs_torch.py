#!/usr/bin/python3
"""e2e.grads_vs_torch: tofuc's autodiff gives PyTorch's gradients, for k=1 and k=4.

For k in 1 and 4: compile the MLP, run one step with
``tofu-run --steps 1 --dump DIR --report r.json``, which writes (names are ONNX
names with '/' replaced by '_'):

* ``DIR/param.<name>.npy``  the initial weights of each initializer,
* ``DIR/input.input.npy``, ``DIR/input.labels.npy``  the step-1 batch,
* ``DIR/grad.<name>.npy``   the gradient of each initializer at step 1.

The same model is rebuilt in torch from the ONNX graph (``e2e_common.TorchGraph``:
Gemm weights are [out, in] with transB=1, biases [out], nodes in graph order) with
those weights, evaluated in float64 on that batch, and ``loss.backward()`` gives
the reference gradients. Proves that:

* the dumped initial weights are the model's initializers (same shape and values),
* every parameter gradient matches torch's within relative difference 1e-4,
* tofu-run's step-1 loss (from --report) equals torch's loss within 1e-5 relative.
"""

import os

import numpy as np

import e2e_common as E

KS = (1, 4)
GRAD_TOL = 1e-4
LOSS_TOL = 1e-5


def load_npy(path):
    E.check(os.path.isfile(path), f"tofu-run --dump did not write {path}")
    try:
        return np.load(path)
    except Exception as e:
        E.fail(f"cannot read {path}: {type(e).__name__}: {e}")


def check_k(env, model, k):
    import torch
    plan, report, dump = env.path(f"k{k}", "plan.bin"), env.path(f"k{k}", "r.json"), env.path(f"k{k}", "dump")
    E.compile_plan(env, k, plan)
    E.run_tool([env.tofu_run, plan, "--steps", 1, "--dump", dump, "--report", report])
    run_loss = E.report_losses(E.load_json(report), report)
    E.check(len(run_loss) == 1, f"k={k}: report has {len(run_loss)} steps, expected 1")

    original = E.initializers(model)
    params, grads = {}, {}
    for name, init in original.items():
        p = load_npy(os.path.join(dump, f"param.{E.dump_name(name)}.npy"))
        g = load_npy(os.path.join(dump, f"grad.{E.dump_name(name)}.npy"))
        E.check(p.shape == init.shape, f"k={k}: param.{name} has shape {p.shape}, expected {init.shape}")
        E.check(g.shape == init.shape, f"k={k}: grad.{name} has shape {g.shape}, expected {init.shape}")
        d = E.rel_diff(p, init)
        E.check(d == 0.0, f"k={k}: dumped initial weight {name} differs from the model's "
                          f"initializer (rel {d:.3e})")
        params[name], grads[name] = p, g
    x = load_npy(os.path.join(dump, "input.input.npy"))
    y = load_npy(os.path.join(dump, "input.labels.npy"))
    E.check(x.shape == (64, 64), f"k={k}: input.input has shape {x.shape}, expected (64, 64)")
    E.check(y.shape == (64,), f"k={k}: input.labels has shape {y.shape}, expected (64,)")
    E.check(np.issubdtype(y.dtype, np.integer), f"k={k}: labels dtype {y.dtype} is not integer")
    E.check(y.min() >= 0 and y.max() < 10, f"k={k}: labels out of [0, 10): {y.min()}..{y.max()}")

    tparams = {n: torch.tensor(v, dtype=torch.float64, requires_grad=True) for n, v in params.items()}
    tensors = dict(tparams, input=torch.tensor(x, dtype=torch.float64),
                   labels=torch.tensor(y.astype(np.int64)))
    loss = E.TorchGraph(model).loss(tensors)
    loss.backward()

    failures = []
    dl = E.rel_diff(run_loss[0], loss.item())
    print(f"k={k}: loss tofu-run {run_loss[0]:.8f}  torch {loss.item():.8f}  rel {dl:.3e}")
    if dl > LOSS_TOL:
        failures.append(f"k={k}: step-1 loss {run_loss[0]!r} != torch {loss.item()!r} (rel {dl:.3e} > {LOSS_TOL})")
    for name in original:
        ref = tparams[name].grad.numpy()
        d = E.rel_diff(grads[name], ref)
        print(f"k={k}: grad {name:<16} rel {d:.3e}  (max|torch| {np.abs(ref).max():.3e})")
        if d > GRAD_TOL:
            failures.append(f"k={k}: gradient of {name} differs from torch: rel {d:.3e} > {GRAD_TOL}")
    return failures


def main():
    env = E.parse_args(__doc__.splitlines()[1])
    env.require_tools()
    model = E.load_onnx(env.model)
    failures = []
    for k in KS:
        failures += check_k(env, model, k)
    E.check(not failures, "\n  " + "\n  ".join(failures))


if __name__ == "__main__":
    E.main_wrapper(main)
