#!/usr/bin/python3
"""e2e.data_batches: tofu-run --data feeds .npy batches into a real partitioned plan.

Compiles ``mlp.onnx`` for 4 devices and runs one step with ``--dump d`` (the
synthetic step-1 inputs as ``d/input.<name>.npy``). Those files, copied to
``data/batch_0/<name>.npy``, fed with ``--data data``, give bit-for-bit the
same step-1 loss; with numpy-generated batches of other values (2 batches,
3 steps, so the run cycles) the losses differ from the synthetic ones and
are the same as with the batch folders written out as 0, 1, 0.
"""

import os
import shutil

import numpy as np

import e2e_common as E

K = 4


def main():
    env = E.parse_args(__doc__.splitlines()[1])
    env.require_tools()
    plan = env.path("plan.bin")
    E.compile_plan(env, K, plan)

    def losses(*args):
        report = env.path("r.json")
        E.run_tool([env.tofu_run, plan, "--quiet", "--report", report, *args])
        return E.report_losses(E.load_json(report), report)

    dump = env.path("dump", "x")[:-2]
    synthetic = losses("--steps", 1, "--dump", dump)
    inputs = sorted(f for f in os.listdir(dump) if f.startswith("input."))
    E.check(len(inputs) >= 2, f"--dump wrote no inputs and labels: {os.listdir(dump)}")
    batch0 = env.path("data", "batch_0", "x")[:-2]
    for f in inputs:
        shutil.copy(os.path.join(dump, f), os.path.join(batch0, f[len("input."):]))
    fed = losses("--steps", 1, "--data", os.path.dirname(batch0))
    print("synthetic", synthetic, "fed", fed)
    E.check(fed.tolist() == synthetic.tolist(),
            f"--data with the dumped batch: loss {fed} != synthetic {synthetic}")

    # Other batches, made with numpy; 3 steps over 2 batches cycle.
    rng = np.random.default_rng(7)
    arrays = {f[len("input."):]: np.load(os.path.join(dump, f)) for f in inputs}
    made = []
    for _ in range(2):
        batch = {}
        for name, a in arrays.items():
            if a.dtype == np.int64:
                batch[name] = rng.integers(0, a.max() + 1, size=a.shape, dtype=np.int64)
            else:
                batch[name] = rng.standard_normal(a.shape).astype(np.float32)
        made.append(batch)
    for folder, order in (("two", (0, 1)), ("cycled", (0, 1, 0))):
        for i, b in enumerate(order):
            for name, a in made[b].items():
                np.save(env.path(folder, f"batch_{i}", name), a)
    two = losses("--steps", 3, "--data", os.path.join(env.workdir, "two"))
    cycled = losses("--steps", 3, "--data", os.path.join(env.workdir, "cycled"))
    print("two", two, "cycled", cycled)
    E.check(two.tolist() == cycled.tolist(), f"cycling 2 batches: {two} != {cycled}")
    E.check(two[0] != synthetic[0], "other data gave the synthetic loss")
    E.check(np.all(np.isfinite(two)), "a loss is not finite")


if __name__ == "__main__":
    E.main_wrapper(main)
