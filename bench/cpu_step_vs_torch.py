#!/usr/bin/python3
"""tofu-run's CPU step beside PyTorch eager's, same model, batch and machine.

For each real model of a GPU bundle (bench/gpu/prepare.sh; its k = 1 plans
and fixed batches), back to back in one run: ``tofu-run PLAN --data DIR
--steps N --report`` (CPU backend; its kernels use every core, here 2) and
the same torch module (test/e2e/real_models.py ``make_case``, the torch that
exported the plan, so the same initial weights), fed the same .npy batch,
trained by torch.optim.SGD with the same lr, ``torch.set_num_threads`` =
the core count. Step time: the median of steps 3..N of each. Prints a
markdown table; the step-1 losses of both are listed as a check that the
two trained the same thing.

    /usr/bin/python3 bench/cpu_step_vs_torch.py --bundle .gpubundle/tofu-gpu
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))
sys.path.insert(0, os.path.join(ROOT, "tools"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bundle", required=True, help="the unpacked bundle folder")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--steps", type=int, default=12)
    args = ap.parse_args()
    import numpy as np
    import torch
    import e2e_common as E
    import real_models as R
    threads = os.cpu_count()
    torch.set_num_threads(threads)
    plans = os.path.join(args.bundle, "plans")
    index = json.load(open(os.path.join(plans, "index.json")))
    rows = []
    for entry in index:
        if not entry.get("real_model") or entry["k"] != 1:
            continue
        data = os.path.join(plans, entry["data"])
        with tempfile.TemporaryDirectory() as tmp:
            report = os.path.join(tmp, "r.json")
            subprocess.run([os.path.join(args.bin, "tofu-run"), os.path.join(plans, entry["plan"]),
                            "--data", data, "--steps", str(args.steps), "--quiet",
                            "--report", report], check=True, stdout=subprocess.DEVNULL)
            steps = json.load(open(report))["steps"]
        tofu_s = statistics.median(s["seconds"] for s in steps[2:])
        tofu_loss = steps[0]["loss"]

        base = entry["model"][:-4] if entry["model"].endswith("-f64") else entry["model"]
        dtype = torch.float64 if entry.get("dtype") == "float64" else torch.float32
        case = R.make_case(base)
        for name in case.batch:
            case.batch[name] = torch.from_numpy(
                np.load(os.path.join(data, "batch_0", E.dump_name(name) + ".npy")))
        model = case.model.to(dtype)
        opt = torch.optim.SGD(model.parameters(), lr=case.lr)
        times, torch_loss = [], None
        for step in range(args.steps):
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            loss = case.loss(model, case.batch)
            loss.backward()
            opt.step()
            times.append(time.perf_counter() - t0)
            if step == 0:
                torch_loss = float(loss)
        torch_s = statistics.median(times[2:])
        rows.append((entry["model"], tofu_s, torch_s, tofu_loss, torch_loss))

    print(f"threads: torch {threads}, tofu-run {threads} (its default); "
          f"torch {torch.__version__}; {args.steps} steps, median of steps 3..{args.steps}\n")
    print("| model (k = 1) | tofu-run ms | torch eager ms | tofu / torch | step-1 loss tofu | torch |")
    print("|---|---|---|---|---|---|")
    for model, t, p, lt, lp in rows:
        print(f"| {model} | {t * 1e3:.1f} | {p * 1e3:.1f} | {t / p:.2f} | {lt:.7g} | {lp:.7g} |")


if __name__ == "__main__":
    main()
