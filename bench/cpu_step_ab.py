#!/usr/bin/env python3
"""Two tofu builds' CPU step times on the same models, interleaved.

Each build's tofuc compiles each model at each k (`--lr 0.01`), then the
two builds' tofu-run alternate (base, new, base, new); the table gives the
median of steps 2..N of both rounds and whether every step's loss agrees:

    /usr/bin/python3 bench/cpu_step_ab.py --base OLD/build/bin --new build/bin \\
        --work /tmp/ab mlp=examples/mlp/mlp.onnx cnn=/tmp/cnn.onnx ...

bench/simulate.md records a run (the session's start against its end).
"""
import argparse
import json
import os
import statistics
import subprocess


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="the base build's bin folder")
    ap.add_argument("--new", required=True, help="the new build's bin folder")
    ap.add_argument("--work", default="/tmp/tofu-ab")
    ap.add_argument("--k", default="1,4")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("models", nargs="+", help="NAME=MODEL.onnx")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    bins = {"base": args.base, "new": args.new}
    print("| model | k | base ms | new ms | new / base | losses equal |")
    print("|---|---|---|---|---|---|")
    for spec in args.models:
        name, path = spec.split("=", 1)
        for k in [int(x) for x in args.k.split(",")]:
            times = {"base": [], "new": []}
            losses = {}
            for which, bin_dir in bins.items():
                plan = os.path.join(args.work, f"{name}-k{k}-{which}.bin")
                subprocess.run([os.path.join(bin_dir, "tofuc"), path, "--gpus", str(k),
                                "--lr", "0.01", "-o", plan], check=True, capture_output=True)
            for _ in range(2):
                for which, bin_dir in bins.items():
                    plan = os.path.join(args.work, f"{name}-k{k}-{which}.bin")
                    report = os.path.join(args.work, "report.json")
                    subprocess.run([os.path.join(bin_dir, "tofu-run"), plan, "--steps",
                                    str(args.steps), "--report", report, "--quiet"],
                                   check=True, capture_output=True)
                    with open(report) as f:
                        steps = json.load(f)["steps"]
                    times[which] += [s["seconds"] for s in steps[1:]]
                    # A diverged loss is null in the report.
                    losses[which] = [None if s["loss"] is None else round(s["loss"], 5)
                                     for s in steps]
            base = statistics.median(times["base"]) * 1e3
            new = statistics.median(times["new"]) * 1e3
            print(f"| {name} | {k} | {base:.2f} | {new:.2f} | {new / base:.2f} | "
                  f"{losses['base'] == losses['new']} |", flush=True)


if __name__ == "__main__":
    main()
