#!/usr/bin/python3
"""e2e.k_consistency: partitioning changes where work runs, not what it computes.

For k in 1, 2, 3, 4 the MLP is compiled with ``--gpus k`` and trained 5 steps
(``tofu-run --steps 5 --report r.json --save trained.onnx``). Proves that:

* every k's 5 losses equal k=1's within relative difference 1e-5, and
* every trained initializer in every k's saved model equals k=1's within 1e-5
  (relative difference = max|a-b| / max(max|b|, 1e-12) per tensor);
* the saved model has the same initializers (names, shapes) as the input model,
  and training changed at least one of them (so the comparison is not vacuous).

k=3 exercises uneven splits (64, 128 and 10 are not divisible by 3).
"""

import numpy as np

import e2e_common as E

KS = (1, 2, 3, 4)
STEPS = 5
TOL = 1e-5


def main():
    env = E.parse_args(__doc__.splitlines()[1])
    env.require_tools()
    original = E.initializers(E.load_onnx(env.model))
    losses, weights = {}, {}
    for k in KS:
        plan, report, saved = (env.path(f"k{k}", n) for n in ("plan.bin", "r.json", "trained.onnx"))
        E.compile_plan(env, k, plan)
        E.run_tool([env.tofu_run, plan, "--steps", STEPS, "--report", report, "--save", saved])
        losses[k] = E.report_losses(E.load_json(report), report)
        E.check(len(losses[k]) == STEPS, f"k={k}: report has {len(losses[k])} steps, expected {STEPS}")
        E.check(np.all(np.isfinite(losses[k])), f"k={k}: non-finite loss {losses[k]}")
        weights[k] = E.initializers(E.load_onnx(saved, f"k={k} saved model"))
        names = sorted(weights[k])
        E.check(names == sorted(original),
                f"k={k}: saved initializers {names} != model initializers {sorted(original)}")
        for n in names:
            E.check(weights[k][n].shape == original[n].shape,
                    f"k={k}: saved {n} has shape {weights[k][n].shape}, expected {original[n].shape}")
        print(f"k={k} losses:", " ".join(f"{l:.7f}" for l in losses[k]), flush=True)

    changed = [n for n in original if not np.array_equal(weights[1][n], original[n])]
    E.check(changed, "k=1: --save wrote the initial weights unchanged after 5 steps")

    failures = []
    for k in KS[1:]:
        d = E.rel_diff(losses[k], losses[1])
        worst = max((E.rel_diff(weights[k][n], weights[1][n]), n) for n in original)
        print(f"k={k} vs k=1: losses rel {d:.3e}; worst initializer {worst[1]} rel {worst[0]:.3e}")
        if d > TOL:
            failures.append(f"k={k}: losses differ from k=1 by rel {d:.3e} > {TOL}: "
                            f"{losses[k].tolist()} vs {losses[1].tolist()}")
        for n in original:
            dn = E.rel_diff(weights[k][n], weights[1][n])
            if dn > TOL:
                failures.append(f"k={k}: trained {n} differs from k=1 by rel {dn:.3e} > {TOL}")
    E.check(not failures, "\n  " + "\n  ".join(failures))


if __name__ == "__main__":
    E.main_wrapper(main)
