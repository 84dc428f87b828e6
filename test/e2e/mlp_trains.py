#!/usr/bin/python3
"""e2e.mlp_trains: a 4-device plan of the MLP actually learns.

Compiles ``mlp.onnx`` for 4 devices (``tofuc --gpus 4``), trains 50 steps with
``tofu-run --steps 50 --report r.json`` (CPU backend, 4 virtual devices) and
proves that the whole pipeline — import, loss, autodiff, SGD update,
partitioning, materialized fetches/reductions, runtime — produces a training
step that reduces the loss: every step's loss is finite and the last step's
loss is below half of the first step's.
"""

import numpy as np

import e2e_common as E

STEPS = 50


def main():
    env = E.parse_args(__doc__.splitlines()[1])
    env.require_tools()
    plan = env.path("plan.bin")
    report = env.path("r.json")
    E.compile_plan(env, 4, plan)
    E.run_tool([env.tofu_run, plan, "--steps", STEPS, "--report", report])
    losses = E.report_losses(E.load_json(report), report)
    print("losses:", " ".join(f"{l:.5f}" for l in losses))
    E.check(len(losses) == STEPS, f"report has {len(losses)} steps, expected {STEPS}")
    E.check(np.all(np.isfinite(losses)), "a loss is not finite")
    first, last = losses[0], losses[-1]
    print(f"first {first:.6f}  last {last:.6f}  ratio {last / first:.4f}")
    E.check(last < first / 2,
            f"the loss did not halve in {STEPS} steps: first {first:.6f}, last {last:.6f}")


if __name__ == "__main__":
    E.main_wrapper(main)
