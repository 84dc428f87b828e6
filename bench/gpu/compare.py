#!/usr/bin/env python3
"""Summarizes a bench/gpu/run.sh run: results.json and results.md.

For every plan of the bundle: the CUDA backend's first losses against the
CPU backend's (the reference written by prepare_plans.py), the step time
(median of the steps after the first five, CUDA graph replay), the slowest
kernels of its --trace, and PyTorch's eager and torch.compile step times on
the same model and batch (torch_step.py). Tolerances (per dtype, on each of
the first ``STEPS`` losses, |gpu - cpu| <= ATOL + RTOL * |cpu|):

* float32: RTOL 1e-4, ATOL 1e-5 (the executor GPU tests' tolerance:
  cuBLAS/cuDNN sum in other orders than the CPU backend);
* float64: RTOL 1e-9, ATOL 1e-12 (five steps through cuDNN's and the CPU
  backend's different summation orders; a value rounded through float32
  anywhere would be off by 1e-7);
* bfloat16 (a plan compiled with ``--precision bf16``: bf16 GEMMs, float32
  weights and loss): RTOL 1e-4, ATOL 1e-5, float32's. The GEMM outputs
  round to bf16 (2^-8), so a different summation order moves some of them
  to a neighbouring bf16 value, but the loss averages that out: the CPU
  backend's own gpt-bf16 losses at k = 1 and k = 8 (bf16 partial sums
  reduced across devices) part by 4.6e-6 over five steps (measured
  2026-11-26 on the 2-core build machine), 20x below RTOL. The CPU
  reference is the CPU backend's bf16 emulation (float32 math, each bf16
  result rounded once to nearest even), which cuBLAS's float32 compute
  type matches up to summation order.

A model whose CPU-backend losses at k = 1 and at k = 8 already differ by
more than the tolerance (``cpu_k_spread``: float32 BatchNorm at a batch of 4
amplifies rounding differences chaotically; WResNet-50 at the example's lr
0.1 diverges, and even in float64 its two CPU runs part by 1e-8 at step 5)
cannot be compared step by step; for it only the first step must match, the
row says "chaotic", and its float64 twin (``<model>-f64``) and the step-1
gradient dumps carry the comparison. The spread is measured on every run,
never assumed.

Also, per k = 1 plan whose step calls cuBLAS, the GEMM part (gemms.py:
each GEMM's time in the step against the same call alone, and the aggregate
ratio), and per plan with a CPU dump in the bundle, step 1's gradients
against the CPU backend's (compare_dumps.py, its tolerances).

Runs with the standard library only (the GPU machine's python3 has numpy,
but nothing here needs it).
"""

import argparse
import json
import os
import statistics

TOLERANCE = {"float32": (1e-4, 1e-5), "float64": (1e-9, 1e-12),
             "bfloat16": (1e-4, 1e-5)}


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def losses(report):
    if not isinstance(report, dict):
        return []
    return [s.get("loss") for s in report.get("steps", [])]


def step_seconds(report, skip):
    if not isinstance(report, dict):
        return None
    times = [s.get("seconds") for s in report.get("steps", [])[skip:]
             if isinstance(s.get("seconds"), (int, float))]
    return statistics.median(times) if times else None


def top_kernels(trace_path, count=8):
    """The instructions that took the most time in a --trace, by name: per
    step, the sum of a name's events; ranked by the median over steps 2 on
    (the steady state: step 1 also loads modules and picks algorithms), with
    step 1's time beside it."""
    trace = load(trace_path)
    if trace is None:
        return []
    events = trace.get("traceEvents", trace) if isinstance(trace, dict) else trace
    per_step = {}  # name -> step -> microseconds
    for e in events:
        if isinstance(e, dict) and e.get("ph") == "X":
            step = (e.get("args") or {}).get("step", 0)
            steps = per_step.setdefault(e.get("name", "?"), {})
            steps[step] = steps.get(step, 0.0) + float(e.get("dur", 0))
    rows = []
    for name, steps in per_step.items():
        first = min(steps)
        later = [us for s, us in steps.items() if s != first]
        rows.append({"name": name,
                     "microseconds": round(statistics.median(later), 1) if later
                     else round(steps[first], 1),
                     "first_step_microseconds": round(steps[first], 1),
                     "total_microseconds": round(sum(steps.values()), 1)})
    return sorted(rows, key=lambda r: -r["microseconds"])[:count]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--outdir", required=True)
    ap.add_argument("--parts", required=True)
    ap.add_argument("--have-gpu", type=int, default=0)
    ap.add_argument("--seconds", type=int, default=0)
    ap.add_argument("--simulated", type=int, default=0,
                    help="run.sh TOFU_GPU_SIMULATE_CPU=1: the CPU backend stood in")
    args = ap.parse_args()

    parts = {}
    with open(args.parts) as f:
        for line in f:
            name, status, seconds, log = line.rstrip("\n").split("\t")
            parts[name] = {"status": status, "seconds": int(seconds), "log": log}
    index = load(os.path.join(args.bundle, "plans", "index.json")) or []
    torch_runs = load(os.path.join(args.outdir, "runs", "torch.json")) or {}
    env_log = os.path.join(args.outdir, "logs", "environment.log")
    environment = open(env_log).read() if os.path.exists(env_log) else ""

    # The CPU backend's own disagreement between k = 1 and k = 8, per model.
    spread = {}
    for entry in index:
        mine = losses(load(os.path.join(args.bundle, "plans", entry["reference"])))
        for other in index:
            if other["model"] == entry["model"] and other["k"] != entry["k"]:
                theirs = losses(load(os.path.join(args.bundle, "plans", other["reference"])))
                if mine and len(mine) == len(theirs) and None not in mine + theirs:
                    spread[entry["model"]] = max(
                        spread.get(entry["model"], 0.0),
                        max(abs(a - b) / max(abs(b), 1e-30) for a, b in zip(mine, theirs)))

    plans = []
    for entry in index:
        name, steps = entry["name"], entry["steps"]
        ref = load(os.path.join(args.bundle, "plans", entry["reference"]))
        run = load(os.path.join(args.outdir, "runs", name + ".json"))
        dtype = entry.get("dtype", "float32")
        rtol, atol = TOLERANCE[dtype]
        want, got = losses(ref)[:steps], losses(run)[:steps]
        row = {"name": name, "model": entry["model"], "k": entry["k"],
               "status": parts.get("plan." + name, {}).get("status", "missing"),
               "cpu_losses": want, "gpu_losses": got, "dtype": dtype,
               "tolerance": {"rtol": rtol, "atol": atol}}
        if got and len(got) == len(want) and all(g is not None for g in got):
            diffs = [abs(g - w) / max(abs(w), 1e-30) for g, w in zip(got, want)]
            row["max_rel_diff"] = max(diffs)
            close = [abs(g - w) <= atol + rtol * abs(w) for g, w in zip(got, want)]
            row["cpu_k_spread"] = spread.get(entry["model"])
            chaotic = row["cpu_k_spread"] is not None and row["cpu_k_spread"] > rtol
            row["chaotic"] = chaotic
            row["losses_match"] = close[0] if chaotic else all(close)
        else:
            row["losses_match"] = None if not args.have_gpu else False
        nolt = load(os.path.join(args.outdir, "runs", name + ".nolt.json"))
        if isinstance(nolt, dict):
            separate = losses(nolt)[:steps]
            # The same rule as the plan's own run: a chaotic model's
            # separate-call losses are held to step 1 only.
            compared = 1 if row.get("chaotic") else len(want)
            row["no_lt"] = {
                "gpu_losses": separate,
                "gpu_step_seconds": step_seconds(nolt, steps),
                "losses_match": bool(separate) and len(separate) == len(want) and all(
                    g is not None and abs(g - w) <= atol + rtol * abs(w)
                    for g, w in list(zip(separate, want))[:compared])}
        row["gpu_step_seconds"] = step_seconds(run, steps)
        row["cpu_step_seconds"] = step_seconds(ref, 1)
        dump = load(os.path.join(args.outdir, "runs", name + ".dump.json"))
        if isinstance(dump, dict):
            row["dump"] = {k: dump.get(k) for k in (
                "pass", "tensors", "compared", "missing", "failed", "ill_conditioned",
                "max_err", "worst", "rtol", "error")}
        save = load(os.path.join(args.outdir, "runs", name + ".save.json"))
        if isinstance(save, dict):
            row["save_resume"] = save
        gemm = load(os.path.join(args.outdir, "runs", name + ".gemms.json"))
        if isinstance(gemm, dict):
            row["gemm"] = gemm
        if entry["k"] == 1:
            row["top_kernels"] = top_kernels(os.path.join(args.outdir, "runs", name + ".trace.json"))
            t = torch_runs.get(entry["model"]) if isinstance(torch_runs, dict) else None
            if t:
                row["torch"] = t
        plans.append(row)

    failed = [n for n, p in parts.items() if p["status"] not in ("pass", "skipped")]
    failed += [p["name"] for p in plans if p["losses_match"] is False]
    failed += ["dump." + p["name"] for p in plans if p.get("dump") and not p["dump"]["pass"]]
    failed += ["save." + p["name"] for p in plans
               if p.get("save_resume") and not p["save_resume"].get("pass")]
    failed += ["nolt." + p["name"] for p in plans
               if p.get("no_lt") and not p["no_lt"]["losses_match"]]
    gemm_summary = {p["name"]: p["gemm"]["aggregate"] for p in plans if p.get("gemm")}
    result = {"have_gpu": bool(args.have_gpu), "simulated_on_cpu": bool(args.simulated),
              "seconds": args.seconds, "parts": parts,
              "plans": plans, "gemm": gemm_summary, "environment": environment,
              "failed": sorted(set(failed))}
    with open(os.path.join(args.outdir, "results.json"), "w") as f:
        json.dump(result, f, indent=1)

    def fmt(x, spec="{:.3g}"):
        return "-" if x is None else spec.format(x)

    lines = ["# GPU check results", "", "```", environment.strip()[:3000], "```", "",
             f"GPU: {'SIMULATED: the CPU backend stood in for the CUDA backend' if args.simulated else 'yes' if args.have_gpu else 'none: every part skipped'}; "
             f"{args.seconds} s in all.", "", "## Parts", "", "| part | status | seconds |",
             "|---|---|---|"]
    lines += [f"| {n} | {p['status']} | {p['seconds']} |" for n, p in parts.items()]
    lines += ["", "## Plans: CUDA backend (1 GPU) against the CPU backend, and PyTorch", "",
              "| plan | run | losses match (max rel diff) | GPU step ms | CPU step ms "
              "| torch eager ms | torch.compile ms |", "|---|---|---|---|---|---|---|"]
    for p in plans:
        t = p.get("torch", {})
        match = {True: "yes", False: "NO", None: "-"}[p["losses_match"]]
        if p.get("chaotic"):
            match += (f", step 1 only: chaotic, CPU k=1 vs k=8 differ by "
                      f"{p['cpu_k_spread']:.1e}")
        lines.append(f"| {p['name']} | {p['status']} | {match} ({fmt(p.get('max_rel_diff'), '{:.1e}')}) "
                     f"| {fmt(p['gpu_step_seconds'] and p['gpu_step_seconds'] * 1e3)} "
                     f"| {fmt(p['cpu_step_seconds'] and p['cpu_step_seconds'] * 1e3)} "
                     f"| {fmt(t.get('eager_seconds') and t['eager_seconds'] * 1e3)} "
                     f"| {fmt(t.get('compile_seconds') and t['compile_seconds'] * 1e3)} |")
    if any(p.get("dump") for p in plans):
        lines += ["", "## Step 1's gradients: CUDA backend --dump against the CPU backend's", "",
                  "err = max |gpu - cpu| / max |cpu| per tensor; allowed: the dtype's "
                  "tolerance, or 10x the CPU backend's own k=1 vs k=8 err where that is "
                  "larger (ill-conditioned).", "",
                  "| plan | match | tensors compared | max err | worst (err / allowed) "
                  "| ill-conditioned | failed or missing |", "|---|---|---|---|---|---|---|"]
        for p in plans:
            d = p.get("dump")
            if not d:
                continue
            w = d.get("worst") or {}
            bad = (d.get("failed") or []) + (d.get("missing") or [])
            lines.append(
                f"| {p['name']} | {'yes' if d['pass'] else 'NO'} "
                f"| {d.get('compared')}/{d.get('tensors')} | {fmt(d.get('max_err'), '{:.1e}')} "
                f"| {w.get('tensor', '-')} ({fmt(w.get('err'), '{:.1e}')} / "
                f"{fmt(w.get('allowed'), '{:.0e}')}) | {d.get('ill_conditioned')} "
                f"| {', '.join(bad[:4]) + (' ...' if len(bad) > 4 else '') or d.get('error') or '-'} |")
    if any(p.get("save_resume") for p in plans):
        lines += ["", "## --save and --resume on the GPU against the CPU backend", "",
                  "Both backends train 3 steps and --save; the CPU backend resumes its own "
                  "checkpoint for step 4 with --dump (reference). resume: the CUDA backend "
                  "resumes the CPU's checkpoint (parameters and inputs bit for bit, "
                  "gradients and loss within tolerance); save: the CPU backend resumes the "
                  "CUDA backend's checkpoint (parameters, gradients and loss within "
                  "tolerance).", "",
                  "| plan | match | resume: bit-equal / tolerance, max err, loss | "
                  "save: tensors, max err, loss | reference loss |", "|---|---|---|---|---|"]
        for p in plans:
            sr = p.get("save_resume")
            if not sr:
                continue
            if sr.get("error"):
                lines.append(f"| {p['name']} | NO | {sr['error']} | - | - |")
                continue
            r, v = sr["resume"], sr["save"]
            lines.append(
                f"| {p['name']} | {'yes' if sr['pass'] else 'NO'} "
                f"| {r['exact_compared'] - len(r['not_bit_equal'])}/{r['exact_compared']} / "
                f"{r['compared'] - len(r['failed'])}/{r['tensors']}, "
                f"{fmt(r.get('max_err'), '{:.1e}')}, {fmt(r.get('loss'), '{:.7g}')} "
                f"| {v['compared'] - len(v['failed'])}/{v['tensors']}, "
                f"{fmt(v.get('max_err'), '{:.1e}')}, {fmt(v.get('loss'), '{:.7g}')} "
                f"| {fmt(sr.get('reference_loss'), '{:.7g}')} |")
    lt_rows = [p for p in plans if p.get("no_lt")]
    if lt_rows:
        lines += ["", "## cuBLASLt epilogues against separate calls", "",
                  "epilogue: a Gemm's bias row and a fused float32 Relu in one "
                  "cublasLtMatmul (the default); separate: TOFU_CUDA_NO_LT=1 (bias "
                  "kernel, cuBLAS GEMM, ReLU kernel). Both against the CPU backend's losses.", "",
                  "| plan | epilogue step ms | separate step ms | separate losses match |",
                  "|---|---|---|---|"]
        for p in lt_rows:
            n = p["no_lt"]
            lines.append(
                f"| {p['name']} | {fmt(p['gpu_step_seconds'] and p['gpu_step_seconds'] * 1e3)} "
                f"| {fmt(n['gpu_step_seconds'] and n['gpu_step_seconds'] * 1e3)} "
                f"| {'yes' if n['losses_match'] else 'NO'}"
                f"{' (step 1: chaotic)' if p.get('chaotic') else ''} |")
    if gemm_summary:
        lines += ["", "## cuBLAS alone against the same GEMMs inside the step (k = 1)", "",
                  "in step: --trace (events around each instruction, eager issue, median "
                  "of steps 2-5); alone: gemm_bench, the same cuBLAS call back to back; "
                  "ratio = alone / in step (goal >= 0.9 on GEMM-heavy steps); folded: a "
                  "broadcast-B batched GEMM timed as one GEMM of m*batch rows.", "",
                  "| plan | GEMM instrs | share of traced step | in step us | alone us "
                  "| ratio | ratio vs folded | TFLOP/s in step / alone |",
                  "|---|---|---|---|---|---|---|---|"]
        for name, a in gemm_summary.items():
            lines.append(
                f"| {name} | {a.get('timed')}/{a.get('gemm_instructions')} "
                f"| {fmt(a.get('gemm_share_of_traced_step'), '{:.0%}')} "
                f"| {fmt(a.get('in_step_us'), '{:.0f}')} | {fmt(a.get('alone_us'), '{:.0f}')} "
                f"| {fmt(a.get('ratio'), '{:.2f}')} | {fmt(a.get('ratio_vs_folded'), '{:.2f}')} "
                f"| {fmt(a.get('in_step_tflops'), '{:.2f}')} / {fmt(a.get('alone_tflops'), '{:.2f}')} |")
        for p in plans:
            if not p.get("gemm") or p["name"] not in ("gpt-big-k1", "gpt-k1"):
                continue
            rows = sorted(p["gemm"]["gemms"], key=lambda r: -(r.get("in_step_us") or 0))[:16]
            lines += ["", f"GEMMs of {p['name']} (slowest 16 in the step):", "",
                      "| instr | shape | in step us | alone us | event us | folded us | ratio |",
                      "|---|---|---|---|---|---|---|"]
            for r in rows:
                lines.append(
                    f"| {r['instr']} | {r['shape']}{' +' + ','.join(r['other_calls']) if r['other_calls'] else ''} "
                    f"| {fmt(r.get('in_step_us'), '{:.1f}')} | {fmt(r.get('alone_us'), '{:.1f}')} "
                    f"| {fmt(r.get('alone_event_us'), '{:.1f}')} | {fmt(r.get('alone_folded_us'), '{:.1f}')} "
                    f"| {fmt(r.get('ratio'), '{:.2f}')} |")
    for p in plans:
        if p.get("top_kernels"):
            lines += ["", f"Slowest instructions of {p['name']} (--trace, 5 steps; "
                      "median of steps 2-5 per step, step 1 in brackets):", ""]
            lines += [f"- {k['name']}: {k['microseconds']} us "
                      f"({k.get('first_step_microseconds', '-')} us)" for k in p["top_kernels"]]
    if failed:
        lines += ["", "## Failed", ""] + [f"- {n}" for n in sorted(set(failed))]
    with open(os.path.join(args.outdir, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines[-40:]))


if __name__ == "__main__":
    main()
