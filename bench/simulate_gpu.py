"""Predicted against measured GPU step, without a GPU: bench/gpu's plans at k = 1.

A GPU check (bench/gpu/run.sh) measured tofu-run's CUDA backend on one GPU
(CUDA graphs, median of the last 20 of 25 steps) and saved its results.json
(default: bench/gpu/H200-run16.json, one H200). This script compiles the
same models at k = 1 (bench/gpu/prepare_plans.py's generators and flags,
without --cuda-arch) with ``--device`` (default bench/devices/h200.json)
and prints the prediction beside those measurements. With ``--traces`` (the
``runs/`` folder of that check's logs.tar.gz) it also prints, per model, the
predicted compute time of each kernel beside the traced one (--trace: eager
issue with events around each instruction, median of steps 2-5).

    /usr/bin/python3 bench/simulate_gpu.py --build build --work /tmp/simgpu \\
        [--measured bench/gpu/H200-run16.json] [--traces DIR/runs]
"""
import argparse
import collections
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench", "gpu"))
import prepare_plans  # noqa: E402  (the bundle's models, generated the same way)


def traced_by_kernel(path):
    """{kernel: median over steps 2-5 of its summed traced µs} of a --trace
    file, and the median traced step (µs)."""
    events = json.load(open(path))["traceEvents"]
    by_step = collections.defaultdict(lambda: collections.defaultdict(float))
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "compute" and e["args"].get("step", 1) > 1:
            by_step[e["args"]["step"]][e["name"].split()[0]] += e["dur"]
    steps = sorted(by_step)
    kernels = {k for s in steps for k in by_step[s]}
    return ({k: statistics.median(by_step[s].get(k, 0.0) for s in steps) for k in kernels},
            statistics.median(sum(by_step[s].values()) for s in steps))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--work", default="/tmp/tofu-simulate-gpu")
    ap.add_argument("--device", default=os.path.join(ROOT, "bench", "devices", "h200.json"))
    ap.add_argument("--measured", default=os.path.join(ROOT, "bench", "gpu", "H200-run16.json"))
    ap.add_argument("--traces", help="the GPU check's runs/ folder (its *.trace.json)")
    ap.add_argument("--models", default="", help="comma-separated subset")
    args = ap.parse_args()
    tofuc = os.path.join(args.build, "bin", "tofuc")
    os.makedirs(args.work, exist_ok=True)
    measured = {p["model"]: p for p in json.load(open(args.measured))["plans"] if p["k"] == 1}
    wanted = set(filter(None, args.models.split(",")))
    names = [n for n in prepare_plans.model_names()
             if n in measured and (not wanted or n in wanted)]
    source = os.path.basename(args.measured)
    print(f"| model | predicted step | compute / copies | largest kernels (predicted, ms) | "
          f"measured GPU step ({source}) | predicted / measured |")
    print("|---|---|---|---|---|---|")
    per_kernel = {}
    for name in names:
        onnx, data, flags = prepare_plans.model_onnx(name, args.work)
        out = subprocess.run([tofuc, onnx, "--gpus", "1", *flags, "--device", args.device,
                              "--dump-plan=json"], capture_output=True, text=True)
        if out.returncode:
            sys.exit(f"{name}: {out.stderr}")
        p = json.loads(out.stdout)["predicted"]
        by_kernel = p["compute_seconds_by_kernel"]
        top = sorted(by_kernel.items(), key=lambda kv: -kv[1])[:3]
        tops = ", ".join(f"{k} {v * 1e3:.2f}" for k, v in top)
        step_ms = p["step_seconds"] * 1e3
        measured_ms = measured[name]["gpu_step_seconds"] * 1e3
        print(f"| {name} | {step_ms:.3f} ms | {p['compute_seconds'] * 1e3:.3f} / "
              f"{p['copy_seconds'] * 1e3:.3f} ms | {tops} | {measured_ms:.3f} ms | "
              f"{step_ms / measured_ms:.2f} |", flush=True)
        trace = args.traces and os.path.join(args.traces, f"{name}-k1.trace.json")
        if trace and os.path.exists(trace):
            per_kernel[name] = (by_kernel, *traced_by_kernel(trace))
    for name, (predicted, traced, traced_step) in per_kernel.items():
        print(f"\n{name}: traced step {traced_step / 1e3:.3f} ms (eager, events); kernels "
              f"by traced time:\n\n| kernel | predicted ms | traced ms | predicted / traced |"
              f"\n|---|---|---|---|")
        for k in sorted(set(predicted) | set(traced), key=lambda k: -traced.get(k, 0.0))[:12]:
            pm, tm = predicted.get(k, 0.0) * 1e3, traced.get(k, 0.0) / 1e3
            print(f"| {k} | {pm:.3f} | {tm:.3f} | {pm / tm:.2f} |" if tm else
                  f"| {k} | {pm:.3f} | - | - |")


if __name__ == "__main__":
    main()
