#!/usr/bin/python3
"""Which instructions of a training step run on the TDL interpreter (issue 16).

For every model (the project's examples as the GPU bundle builds them,
bench/gpu/prepare_plans.py; the real-model suite's models,
test/e2e/real_models.py ``make_case``, float32; the five models of
bench/cpu_step_vs_torch.py, prefixed ``i16-``) and every k of ``--k``:
``tofuc --gpus k`` then ``tofu-run PLAN --steps STEPS --report`` with
``TOFU_LOG_INTERPRETED=1``, and records per (model, k) the report's
``interpreted_instructions`` (per step), the reasons tofu-run logged and the
losses (to compare runs of two builds on the same plans).

Results go to ``--out`` (JSON lines, one per (model, k); a rerun skips the
pairs already there, so an interrupted survey continues). With ``--plans
DIR`` the plans (and the models' batches) are kept in DIR and reused: a
second survey with another build's tofu-run (``--bin``) and ``--out`` runs
the same plans. ``--table`` prints the markdown table of one or two result
files (before / after).

    /usr/bin/python3 bench/interpreted_ops.py --plans /tmp/survey --out before.jsonl
    /usr/bin/python3 bench/interpreted_ops.py --plans /tmp/survey --out after.jsonl
    /usr/bin/python3 bench/interpreted_ops.py --table before.jsonl after.jsonl
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.join(HERE, "gpu"))
sys.path.insert(0, HERE)

#: The examples: name -> generator command line under examples/ (None: the
#: committed ONNX file; "wresnet": prepare_plans.make_small_wresnet).
EXAMPLES = {
    "mlp": None,
    "cnn": None,
    "cnnbn": "cnn/make_cnn_bn.py",
    "rnn": "rnn/make_rnn.py --layers 2 --hidden 128 --batch 16 --vocab 256 --steps 16",
    "rnn-lstm": "rnn/make_rnn.py --layers 2 --hidden 64 --batch 8 --vocab 256 --steps 8 "
                "--form lstm",
    "gpt": "transformer/make_gpt.py --layers 2 --hidden 128 --heads 4 --seq 64 "
           "--vocab 512 --batch 8",
    "wresnet50": "wresnet",
}
COMMITTED = {"mlp": "mlp/mlp.onnx", "cnn": "cnn/cnn.onnx"}
KS = (1, 2, 3, 4, 6, 8)
STEPS = 2
LR = 0.01


def all_models():
    import real_models as R
    import cpu_step_vs_torch as C
    return list(EXAMPLES) + list(R.MODELS) + ["i16-" + m for m in C.ISSUE16]


def make_model(name, folder):
    """(onnx path, data folder or None, tofuc flags) of ``name`` in ``folder``."""
    import numpy as np
    import e2e_common as E
    os.makedirs(folder, exist_ok=True)
    onnx = os.path.join(folder, "model.onnx")
    if name in EXAMPLES:
        gen = EXAMPLES[name]
        if gen is None:
            return os.path.join(ROOT, "examples", COMMITTED[name]), None, ["--lr", str(LR)]
        if not os.path.exists(onnx):
            if gen == "wresnet":
                import prepare_plans as P
                P.make_small_wresnet(onnx)
            else:
                script, *args = gen.split()
                subprocess.run([sys.executable, os.path.join(ROOT, "examples", script), *args,
                                "-o", onnx], check=True, stdout=subprocess.DEVNULL)
        return onnx, None, ["--lr", str(LR)]
    data = os.path.join(folder, "data")
    if name.startswith("i16-"):
        import copy
        import cpu_step_vs_torch as C
        from tofu_export import export_for_training
        model, inputs, lr = C.issue16_case(name[4:])
        names = list(inputs)
        if not os.path.exists(onnx):
            export_for_training(copy.deepcopy(model), tuple(inputs[n] for n in names), onnx,
                                input_names=names, output_names=["loss"])
            os.makedirs(os.path.join(data, "batch_0"), exist_ok=True)
            for n, v in inputs.items():
                np.save(os.path.join(data, "batch_0", E.dump_name(n) + ".npy"), v.numpy())
        return onnx, data, ["--lr", str(lr)]
    import real_models as R
    import torch
    case = R.make_case(name)
    if not os.path.exists(onnx):
        R.export(None, case, case.model, torch.float32, onnx)
        os.makedirs(os.path.join(data, "batch_0"), exist_ok=True)
        for tensor, value in R.cast(case.batch, torch.float32).items():
            np.save(os.path.join(data, "batch_0", E.dump_name(tensor) + ".npy"), value.numpy())
    return onnx, data, ["--lr", str(case.lr), *case.tofuc_flags]


REASON = re.compile(r"^tofu: interpreted (\S+): (.*)$")


def survey_one(args, name, k, folder, model):
    onnx, data, flags = model
    plan = os.path.join(folder, f"k{k}.bin")
    compile_s = None
    if not os.path.exists(plan):
        t0 = time.time()
        r = subprocess.run([os.path.join(args.bin, "tofuc"), onnx, "--gpus", str(k), *flags,
                            "-o", plan + ".tmp"], capture_output=True, text=True)
        if r.returncode != 0:
            return {"model": name, "k": k, "error": "tofuc: " + r.stderr.strip()[-500:]}
        os.replace(plan + ".tmp", plan)
        compile_s = round(time.time() - t0, 2)
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "r.json")
        env = dict(os.environ, TOFU_LOG_INTERPRETED="1")
        t0 = time.time()
        r = subprocess.run([os.path.join(args.bin, "tofu-run"), plan, "--steps", str(STEPS),
                            "--quiet", "--report", report, *(["--data", data] if data else [])],
                           capture_output=True, text=True, env=env)
        run_s = round(time.time() - t0, 2)
        if r.returncode != 0:
            return {"model": name, "k": k, "error": "tofu-run: " + r.stderr.strip()[-500:]}
        full = json.load(open(report))
    reasons = sorted({m.group(1) + ": " + m.group(2)
                      for m in map(REASON.match, r.stderr.splitlines()) if m})
    return {"model": name, "k": k,
            "interpreted": {op: n // STEPS
                            for op, n in sorted(full.get("interpreted_instructions", {}).items())},
            "reasons": reasons, "losses": [s.get("loss") for s in full["steps"]],
            "compile_s": compile_s, "run_s": run_s}


def survey(args):
    done = set()
    if os.path.exists(args.out):
        for line in open(args.out):
            row = json.loads(line)
            done.add((row["model"], row["k"]))
    models = args.models or all_models()
    for name in models:
        todo = [k for k in args.k if (name, k) not in done]
        if not todo:
            continue
        folder = os.path.join(args.plans, name)
        try:
            model = make_model(name, folder)
        except Exception as e:  # a model that cannot be built is a row too
            model = None
            error = f"export: {type(e).__name__}: {e}"
        for k in todo:
            row = (survey_one(args, name, k, folder, model) if model
                   else {"model": name, "k": k, "error": error})
            print(json.dumps(row), file=sys.stderr, flush=True)
            with open(args.out, "a") as f:
                f.write(json.dumps(row) + "\n")


def load(path):
    rows = {}
    for line in open(path):
        row = json.loads(line)
        rows[(row["model"], row["k"])] = row
    return rows


def table(paths):
    """Markdown: per model, the ks with the same result on one row:
    instructions on the interpreter per step before (and after), the ops
    and reasons, and how the losses after compare with before."""
    before = load(paths[0])
    after = load(paths[1]) if len(paths) > 1 else {}

    def count(d):
        if d is None:
            return "-"
        return str(sum(d.values())) + (
            " (" + ", ".join(f"{o} {n}" for o, n in d.items()) + ")" if d else "")

    rows = {}  # (model, cells) -> ks, in the order of the results
    for key, row in before.items():
        ops = "; ".join(row.get("reasons", [])) or "-"
        if "error" in row:
            ops = "ERROR " + row["error"][:200].replace("\n", " ")
        diff = "-"
        if key in after and row.get("losses") and after[key].get("losses"):
            lb, la = row["losses"], after[key]["losses"]
            rel = max(abs(x - y) / max(abs(x), 1e-30) for x, y in zip(lb, la))
            diff = "identical" if lb == la else f"{rel:.1e}"
        a = after.get(key, {}).get("interpreted")
        cells = (count(row.get("interpreted")), count(a), ops, diff)
        rows.setdefault((key[0], cells), []).append(key[1])
    print("| model | k | interpreted / step before | after | op: reason (before) "
          "| losses after vs before |")
    print("|---|---|---|---|---|---|")
    for (model, cells), ks in rows.items():
        print(f"| {model} | {', '.join(map(str, ks))} | " + " | ".join(cells) + " |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--models", default="", help="comma-separated subset (default: all)")
    ap.add_argument("--k", default=",".join(map(str, KS)))
    ap.add_argument("--plans", help="where the models, batches and plans are kept")
    ap.add_argument("--out", help="results, JSON lines")
    ap.add_argument("--table", nargs="+", metavar="JSONL", help="print the table of 1-2 results")
    args = ap.parse_args()
    if args.table:
        return table(args.table)
    if not args.plans or not args.out:
        ap.error("--plans and --out are needed to survey")
    args.models = [m for m in args.models.split(",") if m]
    args.k = [int(k) for k in args.k.split(",")]
    survey(args)


if __name__ == "__main__":
    main()
