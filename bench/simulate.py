"""Predicted against measured CPU step time (docs/DeviceModel.md).

Calibrates this machine (``tofu-run --calibrate``), compiles each example
model at k = 1 and 4 with ``tofuc --device <calibrated.json>
--dump-plan=json`` (the plan is the one ``--gpus k`` gives: ``--device``
does not change it), runs ``tofu-run --steps N --report`` and compares
``predicted.step_seconds`` with the median measured step after the first
``--skip`` steps (default 7: step 1 warms up, and at k > 1 steps 2-7 are
the CPU executor's trials of its two schedules, `--cpu-schedule auto`,
half of them on the schedule it then drops; the prediction is of the step
it keeps). The built-in ``cpu`` description's prediction is shown
beside it. The load average is recorded before every run: the numbers mean
little when the machine is busy. With ``--rounds R`` the whole of it
(calibration, then every row) runs R times, interleaved, and each row
compares the median of its R predictions with the median of its R measured
medians: this machine's speed moves by up to 2x from minute to minute
(bench/simulate.md), so one calibration and one measurement minutes apart
may see two different machines.

    /usr/bin/python3 bench/simulate.py --build build --work /tmp/simulate --rounds 5

Prints a markdown table (bench/simulate.md records one run). Real models:
``--models "" --extra resnet18=DIR/resnet18/model.onnx`` after
``bench/cpu_step_vs_torch.py --models resnet18 --k 1 --steps 4 --keep DIR``.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"

# name -> (generator command line without -o, extra tofuc flags); sizes
# chosen so that one step takes milliseconds to a second on 2 cores.
MODELS = {
    "mlp": (None, "examples/mlp/mlp.onnx"),
    "cnn": ([PY, "examples/cnn/make_cnn.py", "--batch", "32", "--size", "32",
             "--filters", "32"], None),
    "rnn-2-256": ([PY, "examples/rnn/make_rnn.py", "--layers", "2", "--hidden",
                   "256", "--steps", "10", "--batch", "32"], None),
    "gpt-2-128": ([PY, "examples/transformer/make_gpt.py", "--layers", "2",
                   "--hidden", "128", "--heads", "4", "--seq", "64", "--vocab",
                   "512", "--batch", "8"], None),
    "wresnet-50-1": ([PY, "examples/wresnet/make_wresnet.py", "--depth", "50",
                      "--width", "1", "--image", "32", "--batch", "8",
                      "--classes", "10", "--batchnorm", "inference"], None),
}


def load_average():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def run(cmd, **kw):
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, **kw)
    if result.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{result.stderr}")
    return result


def kernel_misses(tofu_run, plan, dump, work):
    """Traces 4 steps of `plan` and compares each kernel's traced time (steps
    2-4, summed over devices) with its predicted time (compute seconds by
    kernel; fetches and reductions against the predicted copies and
    transfers). Returns (traced ms, predicted ms, the 4 largest misses)."""
    trace = os.path.join(work, "trace.json")
    run([tofu_run, plan, "--steps", "4", "--trace", trace, "--quiet"])
    with open(trace) as f:
        events = json.load(f)
    events = events["traceEvents"] if isinstance(events, dict) else events
    traced = {}
    steps = [2, 3, 4]
    for e in events:
        if e.get("ph") != "X" or e["args"]["step"] not in steps:
            continue
        kernel = e["name"].split(" ")[0] if e["cat"] == "compute" else "fetch/reduce"
        traced[kernel] = traced.get(kernel, 0) + e["dur"] / 1e3 / len(steps)
    pred = dump["predicted"]
    predicted = {k: v * 1e3 for k, v in pred["compute_seconds_by_kernel"].items()}
    predicted["fetch/reduce"] = (pred["copy_seconds"] + pred["comm_seconds"]) * 1e3
    kernels = set(traced) | set(predicted)
    worst = sorted(((k, predicted.get(k, 0), traced.get(k, 0)) for k in kernels),
                   key=lambda row: -abs(row[1] - row[2]))[:4]
    return sum(traced.values()), sum(predicted.values()), worst


def schedules(kept):
    """The CPU schedule each round's run kept (report field cpu_schedule),
    once when every round kept the same."""
    return kept[0] if len(set(kept)) == 1 else " ".join(kept)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--work", default="/tmp/tofu-simulate")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--skip", type=int, default=7,
                        help="steps left out of the measured median: the "
                             "warm-up and tofu-run's schedule trials (steps "
                             "2-7 under --cpu-schedule auto)")
    parser.add_argument("--k", default="1,4")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--extra", action="append", default=[],
                        help="NAME=PATH: another ONNX model (e.g. one that "
                             "bench/cpu_step_vs_torch.py --keep DIR kept)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="calibrate and measure every row this many times, "
                             "interleaved, and compare the median prediction "
                             "with the median measurement (this machine's speed "
                             "moves by up to 2x from minute to minute)")
    parser.add_argument("--calibrate-each", action="store_true",
                        help="calibrate again right before every row (about "
                             "30 s each), so that each prediction and its "
                             "measurement see the machine of the same minute")
    parser.add_argument("--per-kernel", action="store_true",
                        help="also trace each plan (tofu-run --trace, 4 steps) "
                             "and print, per row, the kernels whose predicted "
                             "time is furthest from the traced one")
    args = parser.parse_args()
    for extra in args.extra:
        name, path = extra.split("=", 1)
        MODELS[name] = (None, os.path.abspath(path))
    build = os.path.join(ROOT, args.build) if not os.path.isabs(args.build) else args.build
    tofuc = os.path.join(build, "bin", "tofuc")
    tofu_run = os.path.join(build, "bin", "tofu-run")
    os.makedirs(args.work, exist_ok=True)
    names = [n for n in args.models.split(",") if n] + [e.split("=", 1)[0] for e in args.extra]
    paths = {}
    for name in names:
        generator, path = MODELS[name]
        if generator:
            path = os.path.join(args.work, name + ".onnx")
            if not os.path.exists(path):
                run(generator + ["-o", path])
        else:
            path = os.path.join(ROOT, path)
        paths[name] = path
    ks = [int(x) for x in args.k.split(",")]

    # Round r: calibrate, then predict and measure every row. Rows of a
    # round follow their calibration by seconds to minutes; several rounds
    # spread each row's measurements over the run.
    by_row, misses = {}, []
    for r in range(args.rounds):
        device = os.path.join(args.work, "calibrated.json" if r == 0
                              else f"calibrated-{r}.json")
        print(f"round {r + 1}: load average before calibrating: {load_average()}",
              file=sys.stderr)
        cal = run([tofu_run, "--calibrate", device])
        print(cal.stderr, file=sys.stderr, end="")
        for name in names:
            for k in ks:
                if args.calibrate_each and (name, k) != (names[0], ks[0]):
                    # The first row uses the round's calibration above.
                    cal = run([tofu_run, "--calibrate", device])
                plan = os.path.join(args.work, f"{name}-k{k}.bin")
                dump = json.loads(run([tofuc, paths[name], "--gpus", str(k), "--lr", "0.01",
                                       "--device", device, "--dump-plan=json",
                                       "-o", plan]).stdout)
                row = by_row.setdefault((name, k), {"batch": dump["batch_size"],
                                                    "comm": dump["comm_bytes"],
                                                    "predicted": [], "measured": [],
                                                    "load": [], "interpreted": 0,
                                                    "schedule": []})
                if r == 0:
                    row["builtin"] = json.loads(run(
                        [tofuc, paths[name], "--gpus", str(k), "--lr", "0.01", "--device",
                         "cpu", "--dump-plan=json"]).stdout)["predicted"]["step_seconds"]
                report = os.path.join(args.work, f"{name}-k{k}.json")
                load = load_average()
                env = dict(os.environ, TOFU_LOG_INTERPRETED="1")
                result = run([tofu_run, plan, "--steps", str(args.steps), "--report",
                              report, "--quiet"], env=env)
                row["interpreted"] = max(row["interpreted"], sum(
                    1 for line in result.stderr.splitlines() if "interpret" in line))
                with open(report) as f:
                    report_json = json.load(f)
                steps = [s["seconds"] for s in report_json["steps"]]
                row["schedule"].append(report_json.get("cpu_schedule", "?"))
                if len(steps) <= args.skip:
                    sys.exit(f"--steps {args.steps} leaves no step after --skip {args.skip}")
                measured = statistics.median(steps[args.skip:])
                predicted = dump["predicted"]["step_seconds"]
                row["predicted"].append(predicted)
                row["measured"].append(measured)
                row["load"].append(load)
                if args.per_kernel and r == args.rounds - 1:
                    misses.append((name, k, kernel_misses(tofu_run, plan, dump, args.work)))
                print(f"round {r + 1}: {name} k={k}: predicted {predicted * 1e3:.2f} ms, "
                      f"measured {measured * 1e3:.2f} ms (load {load})", file=sys.stderr)

    rounds = args.rounds > 1
    print("| model | k | batch | comm bytes | predicted (calibrated) | predicted "
          "(built-in cpu) | measured median | predicted / measured |"
          + (" each round |" if rounds else "") + " load before | schedule kept | interpreted ops |")
    print("|---|---|---|---|---|---|---|---|" + ("---|" if rounds else "") + "---|---|---|")
    within = 0
    for (name, k), row in by_row.items():
        # Over rounds: the median prediction against the median measurement.
        pred = statistics.median(row["predicted"])
        meas = statistics.median(row["measured"])
        within += abs(pred / meas - 1) <= 0.25
        each = " ".join(f"{p / m:.2f}" for p, m in zip(row["predicted"], row["measured"]))
        load = " ".join(f"{x}" for x in row["load"])
        print(f"| {name} | {k} | {row['batch']} | {row['comm']} | {pred * 1e3:.2f} ms | "
              f"{row['builtin'] * 1e3:.2f} ms | {meas * 1e3:.2f} ms | {pred / meas:.2f} |"
              + (f" {each} |" if rounds else "")
              + f" {load} | {schedules(row['schedule'])} | {row['interpreted']} |")
    print(f"\n{within} of {len(by_row)} rows within 25%"
          + (f" (medians over {args.rounds} rounds)" if rounds else ""))
    if misses:
        print()
        print("| model | k | traced kernels | predicted compute + copies | "
              "largest misses (kernel: predicted / traced ms per step) |")
        print("|---|---|---|---|---|")
        for name, k, (traced, predicted, worst) in misses:
            text = "; ".join(f"{kernel} {p:.2f} / {t:.2f}" for kernel, p, t in worst)
            print(f"| {name} | {k} | {traced:.2f} ms | {predicted:.2f} ms | {text} |")


if __name__ == "__main__":
    main()
