#!/usr/bin/python3
"""e2e.optimizers_vs_torch: every --optimizer trains the MLP as the ONNX ops' definitions say.

For each optimizer (sgd, momentum, Nesterov momentum, adam, adagrad, with
non-default hyper-parameters and weight decay) and k in 1 and 4: compile the
MLP with ``tofuc --optimizer ...``, run ``STEPS`` steps with ``tofu-run --dump
DIR --save trained.onnx --report r.json`` (step s's batch is in DIR or
DIR/step<s>). The reference replays the same steps in float64 torch: the
forward graph and autograd give each step's loss and gradients, and the
update is the ONNX ai.onnx.preview.training definition written out in torch
(update count T = 0 at the first step; optimizer state starts at zero).
Proves that:

* every step's loss equals the reference's (relative difference <= 1e-4),
* the trained weights equal the reference's after STEPS steps (<= 1e-4),
* k = 4 gives the same trained weights as k = 1 (<= 1e-5),
* the weights moved (the update is not a no-op).
"""

import os

import numpy as np

import e2e_common as E

STEPS = 3
TOL = 1e-4
K_TOL = 1e-5
WD = 0.01

CONFIGS = {
    "sgd": dict(flags=["--lr", "0.1", "--weight-decay", WD]),
    "momentum": dict(flags=["--optimizer", "momentum", "--lr", "0.05", "--momentum", "0.8",
                            "--momentum-beta", "0.7", "--weight-decay", WD]),
    "nesterov": dict(flags=["--optimizer", "momentum", "--lr", "0.05", "--momentum", "0.8",
                            "--momentum-beta", "0.7", "--nesterov", "--weight-decay", WD]),
    "adam": dict(flags=["--optimizer", "adam", "--lr", "0.002", "--beta1", "0.8", "--beta2", "0.95",
                        "--epsilon", "1e-4", "--weight-decay", WD]),
    "adagrad": dict(flags=["--optimizer", "adagrad", "--lr", "0.02", "--lr-decay", "0.5",
                           "--epsilon", "1e-4", "--weight-decay", WD]),
}


def reference_update(name, state, x, g, t, cfg):
    """One ONNX optimizer update of x (float64 torch) with update count t."""
    import torch
    f = {cfg["flags"][i].lstrip("-"): cfg["flags"][i + 1]
         for i in range(len(cfg["flags"]) - 1) if str(cfg["flags"][i]).startswith("--")
         and not str(cfg["flags"][i + 1]).startswith("--")}
    r = float(f["lr"])
    g = float(f.get("weight-decay", 0)) * x + g
    if name == "sgd":
        return x - r * g
    if name in ("momentum", "nesterov"):
        alpha, beta = float(f["momentum"]), float(f["momentum-beta"])
        v = state.get("v", torch.zeros_like(x))
        v = alpha * v + (beta if t > 0 else 1.0) * g
        state["v"] = v
        return x - r * (g + alpha * v if name == "nesterov" else v)
    if name == "adam":
        alpha, beta, eps = float(f["beta1"]), float(f["beta2"]), float(f["epsilon"])
        v = alpha * state.get("v", torch.zeros_like(x)) + (1 - alpha) * g
        h = beta * state.get("h", torch.zeros_like(x)) + (1 - beta) * g * g
        state["v"], state["h"] = v, h
        ra = r * np.sqrt(1 - beta ** t) / (1 - alpha ** t) if t > 0 else r
        return x - ra * (v / (torch.sqrt(h) + eps))
    if name == "adagrad":
        decay, eps = float(f["lr-decay"]), float(f["epsilon"])
        h = state.get("h", torch.zeros_like(x)) + g * g
        state["h"] = h
        return x - r / (1 + t * decay) * g / (torch.sqrt(h) + eps)
    E.fail(f"no reference for {name}")


def load_npy(path):
    E.check(os.path.isfile(path), f"tofu-run --dump did not write {path}")
    return np.load(path)


def run_config(env, model, name, cfg, k):
    d = env.path(name, f"k{k}", "x")
    d = os.path.dirname(d)
    plan, report, dump, saved = (os.path.join(d, f) for f in ("plan.bin", "r.json", "dump", "t.onnx"))
    E.compile_plan(env, k, plan, [str(f) for f in cfg["flags"]])
    E.run_tool([env.tofu_run, plan, "--steps", STEPS, "--dump", dump, "--save", saved,
                "--report", report, "--quiet"])
    losses = E.report_losses(E.load_json(report), report)
    E.check(len(losses) == STEPS, f"{name} k={k}: {len(losses)} steps reported")
    trained = E.initializers(E.load_onnx(saved, "trained model"))
    batches = []
    for s in range(1, STEPS + 1):
        sd = dump if s == 1 else os.path.join(dump, f"step{s}")
        batches.append((load_npy(os.path.join(sd, "input.input.npy")),
                        load_npy(os.path.join(sd, "input.labels.npy"))))
    return losses, trained, batches


def reference(model, name, cfg, batches):
    import torch
    params = {n: torch.tensor(v, dtype=torch.float64) for n, v in E.initializers(model).items()}
    states = {n: {} for n in params}
    losses = []
    graph = E.TorchGraph(model)
    for t, (x, y) in enumerate(batches):
        leaves = {n: p.clone().requires_grad_(True) for n, p in params.items()}
        loss = graph.loss(dict(leaves, input=torch.tensor(x, dtype=torch.float64),
                               labels=torch.tensor(y.astype(np.int64))))
        loss.backward()
        losses.append(loss.item())
        with torch.no_grad():
            for n in params:
                params[n] = reference_update(name, states[n], params[n], leaves[n].grad, t, cfg)
    return np.asarray(losses), {n: p.numpy() for n, p in params.items()}


def compare_with_reference(name, model, cfg, results, initial, loss_tol, tol, k_tol, min_moved):
    """The failures of ``results`` (k -> run_config's result; k = 1 first) against
    the reference replay of k = 1's batches: every step's loss within loss_tol,
    every trained weight within tol and moved by at least min_moved, and every
    k's weights within k_tol of k = 1's."""
    ref_losses, ref_params = reference(model, name, cfg, results[1][2])
    failures = []
    for k, (losses, trained, _) in results.items():
        dl = E.rel_diff(losses, ref_losses)
        print(f"{name} k={k}: losses {np.round(losses, 6)} ref {np.round(ref_losses, 6)} rel {dl:.2e}")
        if dl > loss_tol:
            failures.append(f"{name} k={k}: losses differ from the reference (rel {dl:.2e})")
        for n, ref in ref_params.items():
            d = E.rel_diff(trained[n], ref)
            moved = E.rel_diff(ref, initial[n])
            print(f"{name} k={k}: {n:<14} rel {d:.2e} (moved {moved:.2e})")
            if d > tol:
                failures.append(f"{name} k={k}: {n} after {STEPS} steps differs from the "
                                f"reference (rel {d:.2e} > {tol})")
            if moved < min_moved:
                failures.append(f"{name}: {n} did not move ({moved:.2e})")
            if k != 1:
                dk = E.rel_diff(trained[n], results[1][1][n])
                if dk > k_tol:
                    failures.append(f"{name}: k={k} and k=1 trained {n} differently "
                                    f"(rel {dk:.2e} > {k_tol})")
    return failures


def main():
    env = E.parse_args(__doc__.splitlines()[1])
    env.require_tools()
    model = E.load_onnx(env.model)
    initial = E.initializers(model)
    failures = []
    for name, cfg in CONFIGS.items():
        results = {k: run_config(env, model, name, cfg, k) for k in (1, 4)}
        for k in (1, 4):
            b1, bk = results[1][2], results[k][2]
            for s in range(STEPS):
                E.check(np.array_equal(b1[s][0], bk[s][0]) and np.array_equal(b1[s][1], bk[s][1]),
                        f"{name}: k={k} saw a different batch at step {s + 1} than k=1")
        failures += compare_with_reference(name, model, cfg, results, initial, loss_tol=TOL,
                                           tol=TOL, k_tol=K_TOL, min_moved=1e-4)
    E.check(not failures, "\n  " + "\n  ".join(failures))


if __name__ == "__main__":
    E.main_wrapper(main)
