#!/usr/bin/env python3
"""PyTorch's training step on the GPU for the bundle's real models.

For every real model of the bundle's plans/index.json, builds the same module
as the project's real-model suite (test/e2e/real_models.py ``make_case``,
copied into the bundle's py/), feeds it the bundle's fixed batch (the .npy
files tofu-run reads with --data) and times SGD steps on the GPU: eager, and
``torch.compile`` (default mode; compile time reported apart). Step time is
the median over ``--steps`` steps after ``--warmup`` (CUDA synchronized).
Writes {model: {...}} as JSON.

The weights come from torch.manual_seed(0) in this torch's version; where it
differs from the torch that exported the bundle's model, the initial weights
(and so the losses) differ: only the times are comparable, the losses are
listed for information.
"""

import argparse
import json
import os
import statistics
import sys
import time


def timed_steps(step, steps, warmup, torch):
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--no-compile", action="store_true")
    args = ap.parse_args()
    import numpy as np
    import torch
    import real_models as R
    import e2e_common as E
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    index = json.load(open(args.index))
    plans_dir = os.path.dirname(os.path.abspath(args.index))
    results = {}
    for model_name in sorted({p["model"] for p in index
                              if p.get("real_model") and p.get("dtype") == "float32"}):
        entry = next(p for p in index if p["model"] == model_name)
        row = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0)}
        try:
            case = R.make_case(model_name)
            for name in case.batch:
                path = os.path.join(plans_dir, entry["data"], "batch_0",
                                    E.dump_name(name) + ".npy")
                case.batch[name] = torch.from_numpy(np.load(path))
            model = case.model.cuda()
            batch = {n: v.cuda() for n, v in case.batch.items()}
            opt = torch.optim.SGD(model.parameters(), lr=case.lr)

            def step(fn=lambda b: case.loss(model, b)):
                opt.zero_grad(set_to_none=True)
                loss = fn(batch)
                loss.backward()
                opt.step()
                return loss

            row["losses"] = [float(step()) for _ in range(5)]
            row["eager_seconds"] = timed_steps(step, args.steps, args.warmup, torch)
            if not args.no_compile:
                compiled = torch.compile(model)
                t0 = time.perf_counter()
                step(lambda b: case.loss(compiled, b))
                torch.cuda.synchronize()
                row["compile_time_seconds"] = time.perf_counter() - t0
                row["compile_seconds"] = timed_steps(
                    lambda: step(lambda b: case.loss(compiled, b)), args.steps, args.warmup,
                    torch)
        except Exception as e:  # one model's failure must not hide the others
            row["error"] = f"{type(e).__name__}: {e}"[:500]
        print(model_name, row, flush=True)
        results[model_name] = row
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)
    return 0 if all("error" not in r for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
