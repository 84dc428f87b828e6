"""Per-kernel GPU costs fitted to tofu-run --kernel-times, checked on held-out models.

A GPU check (bench/gpu/run.sh) times every instruction of each k = 1 plan
alone, replayed in a CUDA graph (``tofu-run --kernel-times``, its
``runs/<plan>.kernel-times.json``), and measures each plan's step (CUDA
graph replay; its ``results.json``). This script, run here without a GPU:

1. compiles the bundle's models at k = 1 (bench/gpu/prepare_plans.py's
   generators and flags, without --cuda-arch) with ``tofuc --device BASE
   --dump-plan=json`` and reads the model's view of device 0's
   instructions (``predicted.device0_instructions``: kernel, elements of
   the largest operand, rows, the call's cost, the predicted time);
2. joins them with the timed instructions (same index; an entry of a fused
   chain covers several instructions and is left out of the fit);
3. fits, per kernel, the description's ``kernels.<name>`` costs (float32
   under the kernel's name, other element types as ``name@dtype``): a
   generated kernel whose samples span at least 3 sizes and 16x gets
   ``call + elements x per-element(elements)`` (the per-element cost at
   16384 and 1M elements, interpolated in log(elements) as the model does;
   non-negative least squares on absolute errors), any other kernel
   (``--calls-only``: every kernel) its ``call`` alone, the mean of
   measured less the model's work at BASE's rates; a contraction (cuBLAS,
   cuDNN) its ``call``, the *median* of the same (a name holds calls of
   several kinds: a Conv on cuDNN or as a generated kernel);
   ``launch_seconds`` (copies and every kernel not fitted) is the median
   measured time of the generated kernels on at most 4096 elements;
   ``step_overhead_seconds`` the smallest measured step less its timed
   instructions;
4. predicts each model family's steps with costs fitted on the *other*
   families only (leave one family out: a GPT's costs never predict a
   GPT), and prints them beside the measured steps; ``--write`` saves the
   description fitted on every model.

    /usr/bin/python3 bench/gpu/fit_kernels.py --build build --work /tmp/fitk \\
        --runs DIR/runs --measured bench/gpu/H200-run18.json [--write out.json] \\
        [--calls-only]
"""
import argparse
import collections
import copy
import json
import math
import os
import statistics
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "gpu"))
import prepare_plans  # noqa: E402

SMALL, LARGE = 16384.0, float(1 << 20)  # DeviceModel::kSmallElements, kLargeElements

#: Models that share their kernels and shapes closely: held out together.
FAMILIES = {"gpt": "gpt", "gpt-big": "gpt", "gpt-bf16": "gpt",
            "wresnet50": "wresnet", "wresnet50-f64": "wresnet",
            "shufflenet_v2_x0_5": "shufflenet", "shufflenet_v2_x0_5-f64": "shufflenet"}


def family(model):
    return FAMILIES.get(model, model)


def weight_small(n):
    """The small anchor's weight in the model's log-interpolation."""
    if n <= SMALL:
        return 1.0
    if n >= LARGE:
        return 0.0
    return 1.0 - math.log(n / SMALL) / math.log(LARGE / SMALL)


def nonneg_lstsq(a, b):
    """min |a x - b| with x >= 0 (active set: drop the most negative)."""
    free = list(range(a.shape[1]))
    x = np.zeros(a.shape[1])
    while free:
        sol, *_ = np.linalg.lstsq(a[:, free], b, rcond=None)
        if (sol >= 0).all():
            x[:] = 0
            x[free] = sol
            return x
        free.pop(int(np.argmin(sol)))
    return x


def predict(tofuc, onnx, flags, device):
    out = subprocess.run([tofuc, onnx, "--gpus", "1", *flags, "--device", device,
                          "--dump-plan=json"], capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"{onnx}: {out.stderr}")
    return json.loads(out.stdout)["predicted"]


def samples_of(model, predicted, times):
    """(kernel, contraction, elements, rows, base call, base seconds,
    measured) per single-instruction entry of device 0."""
    by_index = {i["index"]: i for i in predicted["device0_instructions"]}
    out = []
    for e in times["entries"]:
        if e["device"] != 0 or e["first_index"] != e["index"]:
            continue
        i = by_index.get(e["index"])
        # The model's key adds ".training" to a training-mode batch norm.
        if i is None or i["kernel"].split(".")[0] != e["kernels"][0]:
            sys.exit(f"{model}: instruction {e['index']} is {e['kernels']} on the GPU "
                     f"and {i and i['kernel']} in the prediction (not the same plan?)")
        # float32 costs under the kernel's name, others under "name@dtype"
        # (a float64 batch norm is a generated kernel, a float32 one cuDNN).
        kernel = i["kernel"] if i["dtype"] in ("f32", "") else f"{i['kernel']}@{i['dtype']}"
        out.append(dict(model=model, kernel=kernel, contraction=i["contraction"],
                        elements=i["elements"], rows=i["rows"], call=i["call_seconds"],
                        base=i["seconds"], measured=e["seconds"]))
    return out


def call_only(ss):
    """The kernel's call cost alone: the mean of measured less the model's
    work at BASE's rates (its FLOPs, its bytes), at least 0.1 us."""
    return {"call": max(statistics.mean(s["measured"] - (s["base"] - s["call"]) for s in ss),
                        1e-7)}


def fit(samples, base_desc, residuals, calls_only=False):
    """A description: BASE with launch_seconds, kernels and the step's
    overhead fitted to `samples` and to `residuals` ((fed elements, measured
    step less its timed instructions) per model)."""
    generated = [s for s in samples if not s["contraction"] and s["kernel"] not in ("Fetch", "Reduce")]
    tiny = [s["measured"] for s in generated if s["elements"] <= 4096]
    launch = statistics.median(tiny) if tiny else base_desc["launch_seconds"]
    by_kernel = collections.defaultdict(list)
    for s in samples:
        if s["kernel"] not in ("Fetch", "Reduce"):
            by_kernel[s["kernel"]].append(s)
    kernels = {}
    for name, ss in sorted(by_kernel.items()):
        ns = [s["elements"] for s in ss]
        # Per-element costs only where the sizes inform them: at least 3
        # sizes spanning 16x. Otherwise (and for cuBLAS and cuDNN calls) the
        # call's cost alone, the work at the rates: a per-element cost
        # fitted on one size would stretch a fixed cost over other sizes.
        if ss[0]["contraction"]:
            continue  # below, with the other calls at the same rate
        if calls_only or len(set(ns)) < 3 or max(ns) < 16 * max(min(ns), 1):
            kernels[name] = call_only(ss)
            continue
        rows = [s["rows"] for s in ss]
        cols = [[1.0] * len(ss),
                [n * weight_small(n) for n in ns],
                [n * (1 - weight_small(n)) for n in ns]]
        names = ["call", "small", "large"]
        if any(r > 0 for r in rows) and len(set(rows)) > 2:
            cols.append(rows)
            names.append("row")
        # Absolute errors: the step adds the instructions' times up, and
        # with a free call cost the fitted times add up to the measured.
        cost = dict(zip(names, nonneg_lstsq(np.array(cols).T,
                                            np.array([s["measured"] for s in ss]))))
        # An anchor no sample informs takes the other's value.
        if all(n >= LARGE for n in ns):
            cost["small"] = cost["large"]
        if all(n <= SMALL for n in ns):
            cost["large"] = cost["small"]
        entry = {"call": max(cost["call"], 1e-7)}
        if cost["small"] > 0 or cost["large"] > 0:
            entry["small"] = max(cost["small"], 1e-15)
            entry["large"] = max(cost["large"], 1e-15)
            if cost.get("row", 0) > 0:
                entry["row"] = cost["row"]
        kernels[name] = entry
    desc = copy.deepcopy(base_desc)
    # cuBLAS and cuDNN calls: each kernel's call, the median of measured
    # less the work at BASE's rates. The median, not a fit: a kernel name
    # holds calls of several kinds (a Conv on cuDNN, or as a generated
    # kernel where cuDNN does not apply; a Gemm with its bias as a separate
    # kernel), and the rare slow kind must not set the common one's cost.
    for name, ss in sorted(by_kernel.items()):
        if ss[0]["contraction"]:
            kernels[name] = {"call": max(statistics.median(
                s["measured"] - (s["base"] - s["call"]) for s in ss), 1e-7)}
    desc["name"] = base_desc["name"] + "-fitted"
    desc["launch_seconds"] = launch
    desc["kernels"] = kernels
    if residuals:
        # What every step pays beyond its instructions (feed, the graph's
        # launch, the wait): the smallest residual. The larger ones grow
        # with the step (3-7% of it on the H200, run 18), which the model
        # has no term for.
        desc["step_overhead_seconds"] = max(min(r for _, r in residuals), 0.0)
    desc["sources"] = list(base_desc.get("sources", [])) + [
        "kernels, launch_seconds, step overhead: bench/gpu/fit_kernels.py, fitted to tofu-run "
        f"--kernel-times of {len(samples)} instructions of the models "
        f"{', '.join(sorted({s['model'] for s in samples}))} and their measured steps"]
    return desc


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--work", default="/tmp/tofu-fit-kernels")
    ap.add_argument("--device", default=os.path.join(ROOT, "bench", "devices", "h200.json"))
    ap.add_argument("--runs", required=True, help="the GPU check's runs/ folder")
    ap.add_argument("--measured", required=True, help="the GPU check's results.json")
    ap.add_argument("--write", help="save the description fitted on every model here")
    ap.add_argument("--calls-only", action="store_true",
                    help="fit every kernel's call cost alone (its work at BASE's rates)")
    args = ap.parse_args()
    tofuc = os.path.join(args.build, "bin", "tofuc")
    os.makedirs(args.work, exist_ok=True)
    base_desc = json.load(open(args.device))
    measured = {p["model"]: p for p in json.load(open(args.measured))["plans"]
                if p["k"] == 1 and p.get("gpu_step_seconds")}
    models, samples, compiled, residual = [], [], {}, {}
    for name in prepare_plans.model_names():
        path = os.path.join(args.runs, f"{name}-k1.kernel-times.json")
        if name not in measured or not os.path.exists(path):
            continue
        onnx, _, flags = prepare_plans.model_onnx(name, args.work)
        compiled[name] = (onnx, flags)
        base = predict(tofuc, onnx, flags, args.device)
        models.append((name, base))
        times = json.load(open(path))
        samples += samples_of(name, base, times)
        # The step beyond its instructions timed alone (feed, graph launch).
        residual[name] = (base["fed_elements"], measured[name]["gpu_step_seconds"] -
                          sum(e["seconds"] for e in times["entries"]))
    print(f"{len(samples)} timed instructions of {len(models)} models\n")
    print("| model | measured GPU step | predicted, base | predicted, fitted on other families "
          "| fitted / measured | fitted on all / measured |")
    print("|---|---|---|---|---|---|")
    everything = fit(samples, base_desc, list(residual.values()), args.calls_only)
    all_path = os.path.join(args.work, "fitted-all.json")
    json.dump(everything, open(all_path, "w"), indent=2)
    within = 0
    for name, base in models:
        held = fit([s for s in samples if family(s["model"]) != family(name)], base_desc,
                   [r for m, r in residual.items() if family(m) != family(name)],
                   args.calls_only)
        path = os.path.join(args.work, f"fitted-without-{family(name)}.json")
        json.dump(held, open(path, "w"), indent=2)
        onnx, flags = compiled[name]
        out = predict(tofuc, onnx, flags, path)["step_seconds"]
        ins = predict(tofuc, onnx, flags, all_path)["step_seconds"]
        m = measured[name]["gpu_step_seconds"]
        within += abs(out / m - 1) <= 0.25
        print(f"| {name} | {m * 1e3:.3f} ms | {base['step_seconds'] * 1e3:.3f} ms "
              f"({base['step_seconds'] / m:.2f}) | {out * 1e3:.3f} ms | **{out / m:.2f}** | "
              f"{ins / m:.2f} |", flush=True)
    print(f"\nheld-out prediction within 25% of the measured step: {within} of {len(models)}")
    # Per kernel, fitted on all: the sum over models of measured and predicted.
    totals = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for name, _ in models:
        onnx, flags = compiled[name]
        fitted = predict(tofuc, onnx, flags, all_path)
        by_index = {i["index"]: i for i in fitted["device0_instructions"]}
        times = json.load(open(os.path.join(args.runs, f"{name}-k1.kernel-times.json")))
        for e in times["entries"]:
            if e["device"] != 0:
                continue
            key = "+".join(e["kernels"]) if e["first_index"] != e["index"] else by_index[e["index"]]["kernel"]
            pred = sum(by_index[i]["seconds"] for i in range(e["first_index"], e["index"] + 1)
                       if i in by_index)
            t = totals[key]
            t[0] += e["seconds"]
            t[1] += pred
            t[2] += 1
    print("\nper kernel, every model's instructions (fitted on all):\n")
    print("| kernel | instructions | measured ms | predicted ms | predicted / measured |")
    print("|---|---|---|---|---|")
    for key, (m, p, n) in sorted(totals.items(), key=lambda kv: -kv[1][0])[:25]:
        print(f"| {key} | {n} | {m * 1e3:.3f} | {p * 1e3:.3f} | {p / m:.2f} |")
    if args.write:
        json.dump(everything, open(args.write, "w"), indent=2)
        print(f"\nwrote {args.write}")


if __name__ == "__main__":
    main()
