#!/usr/bin/python3
"""e2e.partitioners_agree: every partitioner's plan trains exactly like k=1.

The model (MLP or CNN, ``--model``) is compiled with ``--gpus 1`` and trained
3 steps (``tofu-run --steps 3 --report r.json --save trained.onnx``); then
with the recursive DP (``--partitioner tofu``, the default) for k in 2, 3, 4,
6, 8 (several recursion steps, uneven parts, primes) and with every baseline
for k in 4 and 6. Proves that:

* every plan's 3 losses equal k=1's within relative difference 1e-5;
* every trained initializer equals k=1's within relative difference 1e-5;
* every plan's per-op bytes (``--dump-plan=json``) add up to its
  ``comm_bytes``;
* training changed the weights at k=1 (so the comparison is not vacuous).
"""

import json

import numpy as np

import e2e_common as E

STEPS = 3
TOL = 1e-5
RUNS = [("tofu", k) for k in (2, 3, 4, 6, 8)] + [
    (name, k)
    for name in ("data-parallel", "allrow-greedy", "spartan", "equal-chop", "icml18")
    for k in (4, 6)
]


def train(env, name, k):
    tag = f"{name}-k{k}"
    plan, report, saved = (env.path(tag, n) for n in ("plan.bin", "r.json", "trained.onnx"))
    E.compile_plan(env, k, plan, ["--partitioner", name])
    E.run_tool([env.tofu_run, plan, "--steps", STEPS, "--report", report, "--save", saved])
    losses = E.report_losses(E.load_json(report), report)
    E.check(len(losses) == STEPS and np.all(np.isfinite(losses)),
            f"{tag}: losses {losses} (expected {STEPS} finite values)")
    return losses, E.initializers(E.load_onnx(saved, f"{tag} saved model"))


def main():
    env = E.parse_args(__doc__.splitlines()[1])
    env.require_tools()
    original = E.initializers(E.load_onnx(env.model))
    base_losses, base_weights = train(env, "tofu", 1)
    changed = [n for n in original if not np.array_equal(base_weights[n], original[n])]
    E.check(changed, "k=1: the weights did not change in training")
    failures = []
    for name, k in RUNS:
        losses, weights = train(env, name, k)
        d = E.rel_diff(losses, base_losses)
        worst = max((E.rel_diff(weights[n], base_weights[n]), n) for n in original)
        print(f"{name} k={k}: losses rel {d:.3e}; worst initializer {worst[1]} rel {worst[0]:.3e}",
              flush=True)
        if d > TOL:
            failures.append(f"{name} k={k}: losses {losses.tolist()} vs k=1 {base_losses.tolist()}")
        if worst[0] > TOL:
            failures.append(f"{name} k={k}: trained {worst[1]} differs from k=1 by rel {worst[0]:.3e}")
        plan = json.loads(E.run_tool([env.tofuc, env.model, "--gpus", str(k),
                                      "--partitioner", name, "--dump-plan=json"]).stdout)
        per_op = sum(op["comm_bytes"] for op in plan["ops"])
        if per_op != plan["comm_bytes"]:
            failures.append(f"{name} k={k}: ops move {per_op} bytes, the plan {plan['comm_bytes']}")
    E.check(not failures, "\n  " + "\n  ".join(failures))


if __name__ == "__main__":
    E.main_wrapper(main)
