"""The partitioner's two objectives side by side: bytes (the paper's) and the predicted step time.

For each model and k, compiles the training step twice with the same
``--topology`` (``--objective=bytes`` and ``--objective=time``), reads the
bytes and the predicted step time from ``--dump-plan=json``, and measures
both plans with ``tofu-run`` on this machine (k virtual devices), the two
plans' runs interleaved, median over the steps after the first two of every
run, and their device busy time from ``--trace`` (each instruction's
fastest run, summed over instructions and devices). Prints two Markdown
tables (bench/time_objective.md records them).

Models: issue 16's AlexNet (the ONNX model-zoo ``bvlc_alexnet`` graph, with
its group = 2 convolutions and LRN, seeded random weights, batch 1, 224 x 224,
``--loss softmax-cross-entropy``) and ``nn.TransformerEncoder`` (2 layers,
d 64, the ``transformer_encoder`` of bench/cpu_step_vs_torch.py, sequence 32,
batch 8).

  /usr/bin/python3 bench/time_objective.py --bin build/bin \\
      --light-dir <onnx 1.17>/backend/test/data/light [--ks 4,8] [--runs 3]
"""

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "tools"))

LR = 0.01


def prepare_alexnet(light_dir, out):
    """model.onnx and data/ of bvlc_alexnet with seeded random weights; the
    extra tofuc flags it needs."""
    import numpy as np
    import onnx
    import e2e_common as E
    import model_zoo_light as Z
    model = onnx.load(os.path.join(light_dir, "light_bvlc_alexnet.onnx"))
    Z.restore_initializers(model, seed=0)
    feeds = Z.onnx_input(model)
    os.makedirs(os.path.join(out, "data", "batch_0"), exist_ok=True)
    onnx.save(model, os.path.join(out, "model.onnx"))
    for name, value in feeds.items():
        np.save(os.path.join(out, "data", "batch_0", E.dump_name(name) + ".npy"), value)
        batch = value.shape[0]
    np.save(os.path.join(out, "data", "batch_0", "labels.npy"), np.full((batch,), 3, np.int64))
    return ["--loss", "softmax-cross-entropy"]


def prepare_transformer(out):
    import numpy as np
    import e2e_common as E
    import cpu_step_vs_torch as B
    from tofu_export import export_for_training
    model, inputs, _ = B.issue16_case("transformer_encoder")
    names = list(inputs)
    os.makedirs(os.path.join(out, "data", "batch_0"), exist_ok=True)
    export_for_training(copy.deepcopy(model), tuple(inputs[n] for n in names),
                        os.path.join(out, "model.onnx"), input_names=names,
                        output_names=["loss"])
    for name, value in inputs.items():
        np.save(os.path.join(out, "data", "batch_0", E.dump_name(name) + ".npy"), value.numpy())
    return []


def run_plan(tofu_run, plan, data, steps, fastest):
    """One tofu-run of ``plan`` with ``--report`` and ``--trace``: returns
    the step seconds (the first two steps left out), the step-1 loss and the
    ops run on the TDL interpreter, and lowers ``fastest[(device, seq,
    kind)]`` to each instruction's fastest duration in those steps (kind: the
    op kind of a compute instruction, ``fetch`` or ``reduce``)."""
    with tempfile.TemporaryDirectory() as tmp:
        report, trace = os.path.join(tmp, "r.json"), os.path.join(tmp, "t.json")
        subprocess.run([tofu_run, plan, "--data", data, "--steps", str(steps), "--quiet",
                        "--report", report, "--trace", trace], check=True,
                       stdout=subprocess.DEVNULL)
        full = json.load(open(report))
        events = json.load(open(trace))
    events = events["traceEvents"] if isinstance(events, dict) else events
    for e in events:
        if e.get("ph") != "X" or e["args"].get("step", 0) < 2:
            continue
        kind = e["name"].split()[0] if e.get("cat") == "compute" else e.get("cat")
        key = (e["pid"], e["args"]["seq"], kind)
        fastest[key] = min(fastest.get(key, float("inf")), e["dur"] * 1e-6)
    interpreted = sorted(full.get("interpreted_instructions", {}))
    return ([s["seconds"] for s in full["steps"][2:]], full["steps"][0]["loss"],
            ",".join(interpreted) or "none")


def busy_by_kind(fastest):
    """Device busy seconds per kind: the sum over devices and instructions of
    each instruction's fastest duration. On a loaded machine the fastest
    run of an instruction is steadier than a step's wall time."""
    import collections
    busy = collections.defaultdict(float)
    for (_, _, kind), seconds in fastest.items():
        busy[kind] += seconds
    return busy


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--light-dir", required=True,
                    help="onnx 1.17's backend/test/data/light (holds light_bvlc_alexnet.onnx)")
    ap.add_argument("--models", default="alexnet,transformer")
    ap.add_argument("--ks", default="4,8")
    ap.add_argument("--topology", default="{k}x:mem=10",
                    help="--topology for k devices ({k} is replaced; default {k}x:mem=10)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--runs", type=int, default=3, help="tofu-run invocations per plan")
    ap.add_argument("--steps", type=int, default=0,
                    help="steps per run (default: 6 for alexnet, 20 for transformer)")
    ap.add_argument("--keep", help="keep models and plans here")
    args = ap.parse_args()
    tofuc, tofu_run = os.path.join(args.bin, "tofuc"), os.path.join(args.bin, "tofu-run")
    work = args.keep or tempfile.mkdtemp()
    rows, busy_rows = [], []
    for name in args.models.split(","):
        folder = os.path.join(work, name)
        extra = (prepare_alexnet(args.light_dir, folder) if name == "alexnet"
                 else prepare_transformer(folder))
        steps = args.steps or (6 if name == "alexnet" else 20)
        for k in (int(k) for k in args.ks.split(",")):
            topology = args.topology.format(k=k)
            plans, dumps = {}, {}
            for objective in ("bytes", "time"):
                plan = os.path.join(folder, f"k{k}-{objective}.bin")
                flags = [os.path.join(folder, "model.onnx"), "--gpus", str(k), "--lr", str(LR),
                         "--topology", topology, "--objective", objective,
                         "--device", args.device] + extra
                subprocess.run([tofuc] + flags + ["-o", plan], check=True,
                               stdout=subprocess.DEVNULL)
                dumps[objective] = json.loads(subprocess.run(
                    [tofuc] + flags + ["--dump-plan=json"], check=True, capture_output=True,
                    text=True).stdout)
                plans[objective] = plan
            changed = sum(a["step_strategies"] != b["step_strategies"]
                          for a, b in zip(dumps["bytes"]["ops"], dumps["time"]["ops"]))
            measured = {"bytes": [], "time": []}
            fastest = {"bytes": {}, "time": {}}
            losses, interpreted = {}, {}
            for _ in range(args.runs):
                for objective in ("bytes", "time"):
                    times, loss, interp = run_plan(tofu_run, plans[objective],
                                                   os.path.join(folder, "data"), steps,
                                                   fastest[objective])
                    measured[objective] += times
                    losses[objective], interpreted[objective] = loss, interp
            kinds = sorted({a["kind"] for a, b in zip(dumps["bytes"]["ops"], dumps["time"]["ops"])
                            if a["step_strategies"] != b["step_strategies"]})
            busy_rows.append((name, k, kinds,
                              {o: busy_by_kind(fastest[o]) for o in ("bytes", "time")}))
            for objective in ("bytes", "time"):
                dump = dumps[objective]
                rows.append((name, k, topology, objective, dump["comm_bytes"],
                             dump["predicted"]["step_seconds"],
                             dump["predicted"]["compute_seconds"],
                             statistics.median(measured[objective]), min(measured[objective]),
                             len(measured[objective]), losses[objective],
                             interpreted[objective], changed))
                print(f"{name} k={k} {objective}: {dump['comm_bytes']} bytes, predicted "
                      f"{dump['predicted']['step_seconds'] * 1e3:.2f} ms, measured "
                      f"{statistics.median(measured[objective]) * 1e3:.1f} ms",
                      file=sys.stderr, flush=True)
    print("| model | k | topology | objective | bytes | predicted step (compute) | "
          "measured median (min, n) | step-1 loss | interpreted | ops whose strategy differs |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (name, k, topology, objective, nbytes, predicted, compute, median, fastest, n,
         loss, interp, changed) in rows:
        print(f"| {name} | {k} | `{topology}` | {objective} | {nbytes} | "
              f"{predicted * 1e3:.2f} ms ({compute * 1e3:.2f}) | "
              f"{median * 1e3:.1f} ms ({fastest * 1e3:.1f}, {n}) | {loss:.6f} | {interp} | "
              f"{changed} |")
    print()
    print("Device busy time (ms): the sum over devices and instructions of each "
          "instruction's fastest run (steps 3 and later of all runs); all, the op kinds "
          "some of whose ops changed strategy, transfers")
    print()
    print("| model | k | objective | all | changed kinds | fetch + reduce | per changed kind |")
    print("|---|---|---|---|---|---|---|")
    for name, k, kinds, busy in busy_rows:
        for objective in ("bytes", "time"):
            b = busy[objective]
            per = ", ".join(f"{kind} {b.get(kind, 0) * 1e3:.1f}" for kind in kinds)
            print(f"| {name} | {k} | {objective} | {sum(b.values()) * 1e3:.1f} | "
                  f"{sum(b.get(kind, 0) for kind in kinds) * 1e3:.1f} | "
                  f"{(b.get('fetch', 0) + b.get('reduce', 0)) * 1e3:.1f} | {per} |")


if __name__ == "__main__":
    main()
