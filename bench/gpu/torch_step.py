#!/usr/bin/env python3
"""PyTorch's training step on the GPU for the bundle's real models and GPTs.

For every real model of the bundle's plans/index.json, builds the same module
as the project's real-model suite (test/e2e/real_models.py ``make_case``,
copied into the bundle's py/) and feeds it the bundle's fixed batch (the .npy
files tofu-run reads with --data). For every plan with a ``torch_model``
entry (the GPT examples: gpt, gpt-big, gpt-bf16), builds
examples/transformer/gpt_torch.py's ``Gpt`` of the same configuration (the
ONNX graph of make_gpt.py, op for op; e2e.example_models checks it), on a
seeded random batch of the plan's shapes, SGD at the plan's learning rate;
``precision: bf16`` runs its forward under ``torch.autocast(bfloat16)``, as
tofuc --precision bf16 plans (float32 weights and optimizer).

Times SGD steps: eager, and ``torch.compile`` (default mode; compile time
reported apart). Step time is the median over ``--steps`` steps after
``--warmup`` (CUDA synchronized). Writes {model: {...}} as JSON, after each
model (a time limit keeps what was measured). The GPT models come first:
they carry issue 17's step-time goal.

The weights come from torch.manual_seed(0) (real models) or Gpt's seeded
draw, not the plans' weights: only the times are comparable, the losses are
listed for information.
"""

import argparse
import json
import os
import statistics
import sys
import time


def synchronize(torch, device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed_steps(step, steps, warmup, torch, device):
    for _ in range(warmup):
        step()
    synchronize(torch, device)
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        synchronize(torch, device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def real_model_case(torch, model_name, entry, plans_dir):
    """(module, batch, loss(module, batch), lr) of a real-model-suite model
    on the bundle's fixed batch."""
    import numpy as np
    import real_models as R
    import e2e_common as E
    case = R.make_case(model_name)
    for name in case.batch:
        path = os.path.join(plans_dir, entry["data"], "batch_0", E.dump_name(name) + ".npy")
        case.batch[name] = torch.from_numpy(np.load(path))
    return case.model, case.batch, case.loss, case.lr, None


def gpt_case(torch, config):
    """(module, batch, loss(module, batch), lr, autocast dtype) of
    gpt_torch.Gpt for a ``torch_model`` entry of index.json."""
    import gpt_torch
    dims = {k: config[k] for k in ("layers", "hidden", "heads", "seq", "vocab", "batch")}
    model = gpt_torch.Gpt(**dims)
    g = torch.Generator().manual_seed(1)
    batch = {"input": torch.randn(dims["batch"], dims["seq"], dims["hidden"], generator=g),
             "labels": torch.randint(0, dims["vocab"], (dims["batch"] * dims["seq"],),
                                     generator=g)}
    precision = config.get("precision", "float32")
    if precision not in ("float32", "bf16"):
        raise ValueError(f"torch_model precision {precision!r}: float32 or bf16")
    return (model, batch, lambda m, b: m(b["input"], b["labels"]), config["lr"],
            torch.bfloat16 if precision == "bf16" else None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--device", default="cuda", help="cuda, or cpu to test this script")
    ap.add_argument("--models", default="", help="comma-separated subset")
    args = ap.parse_args()
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    index = json.load(open(args.index))
    plans_dir = os.path.dirname(os.path.abspath(args.index))
    wanted = set(filter(None, args.models.split(",")))
    # model -> entry: the float32 GPTs (torch_model) first, then gpt-bf16, then
    # the real models.
    todo = {}
    for p in sorted(index, key=lambda p: ("torch_model" not in p,
                                          p.get("torch_model", {}).get("precision") == "bf16",
                                          p["model"])):
        if p["model"] in todo or (wanted and p["model"] not in wanted):
            continue
        if "torch_model" in p or (p.get("real_model") and p.get("dtype") == "float32"):
            todo[p["model"]] = p
    results = {}
    for model_name, entry in todo.items():
        row = {"torch": torch.__version__,
               "device": (torch.cuda.get_device_name(0) if args.device.startswith("cuda")
                          else args.device)}
        try:
            if "torch_model" in entry:
                module, batch, loss_fn, lr, autocast = gpt_case(torch, entry["torch_model"])
                row["config"] = entry["torch_model"]
            else:
                module, batch, loss_fn, lr, autocast = real_model_case(
                    torch, model_name, entry, plans_dir)
            model = module.to(args.device)
            batch = {n: v.to(args.device) for n, v in batch.items()}
            opt = torch.optim.SGD(model.parameters(), lr=lr)

            def step(fn=lambda b: loss_fn(model, b)):
                opt.zero_grad(set_to_none=True)
                if autocast is not None:
                    with torch.autocast(args.device.split(":")[0], dtype=autocast):
                        loss = fn(batch)
                else:
                    loss = fn(batch)
                loss.backward()
                opt.step()
                return loss

            row["losses"] = [float(step()) for _ in range(5)]
            row["eager_seconds"] = timed_steps(step, args.steps, args.warmup, torch,
                                               args.device)
            if not args.no_compile:
                compiled = torch.compile(model)
                t0 = time.perf_counter()
                step(lambda b: loss_fn(compiled, b))
                synchronize(torch, args.device)
                row["compile_time_seconds"] = time.perf_counter() - t0
                row["compile_seconds"] = timed_steps(
                    lambda: step(lambda b: loss_fn(compiled, b)), args.steps, args.warmup,
                    torch, args.device)
        except Exception as e:  # one model's failure must not hide the others
            row["error"] = f"{type(e).__name__}: {e}"[:500]
        print(model_name, row, flush=True)
        results[model_name] = row
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)
    return 0 if all("error" not in r for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
