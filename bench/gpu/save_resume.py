#!/usr/bin/env python3
"""--save and --resume on the CUDA backend against the CPU backend's
(bench/gpu/run.sh, part ``save.<plan>``).

    save_resume.py --tofu-run BIN --plan PLAN --workdir DIR --out JSON
                   [--backend cuda] [--dtype float32] [-- tofu-run flags]

With the flags after ``--`` (e.g. ``--data``) on every run:

1. the CPU backend trains 3 steps and ``--save``s a checkpoint (cpu.onnx);
   the CUDA backend (``--devices 1``) does the same (gpu.onnx);
2. reference: the CPU backend ``--resume``s cpu.onnx for 1 step with
   ``--dump`` (step 4: the parameters it starts from, the inputs, the
   gradients) and ``--report`` (step 4's loss);
3. ``resume``: the CUDA backend resumes cpu.onnx the same way: its
   parameters and inputs must equal the reference bit for bit (the
   checkpoint read onto the GPU and dumped back unchanged), its gradients
   and loss within the dtype's tolerance;
4. ``save``: the CPU backend resumes gpu.onnx (the CUDA backend's saved
   weights and optimizer state, read by the other backend): parameters,
   gradients and loss within the dtype's tolerance of the reference (3
   steps trained on the GPU against 3 on the CPU).

Tolerances as compare_dumps.py (per tensor max |a - b| / max |ref|: float32
1e-4, float64 1e-9) and compare.py (loss: 1e-5 + 1e-4 |ref| in float32).
Without a GPU, ``--backend cpu`` runs the CPU backend in the CUDA backend's
place (run.sh's TOFU_GPU_SIMULATE_CPU=1), which checks this script. Exits 0
when both checks pass. Standard library only.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_dumps  # noqa: E402

LOSS_TOL = {"float32": (1e-4, 1e-5), "float64": (1e-9, 1e-12)}
STEPS = 3


def run(cmd):
    print(" ".join(cmd), flush=True)
    return subprocess.call(cmd)


def loss_of(report_path):
    with open(report_path) as f:
        return json.load(f)["steps"][-1]["loss"]


def check(ref_dir, got_dir, dtype, exact_prefixes):
    """compare_dumps.compare over every tensor of the reference dump;
    tensors whose name starts with one of exact_prefixes must be equal."""
    names = sorted(n for n in os.listdir(ref_dir) if n.endswith(".npy"))
    tolerant = {n: {} for n in names if not n.startswith(exact_prefixes)}
    exact = [n for n in names if n.startswith(exact_prefixes)]
    result = compare_dumps.compare(ref_dir, {"tensors": tolerant}, got_dir, dtype) \
        if tolerant else {"pass": True, "failed": [], "missing": [], "tensors": 0,
                          "compared": 0, "max_err": None}
    unequal = []
    for n in exact:
        path = os.path.join(got_dir, n)
        with open(os.path.join(ref_dir, n), "rb") as a:
            want = a.read()
        got = open(path, "rb").read() if os.path.exists(path) else None
        if got != want:
            unequal.append(n)
    result["exact_compared"] = len(exact)
    result["not_bit_equal"] = unequal
    result["pass"] = bool(result["pass"]) and not unequal and bool(names)
    result.pop("rows", None)
    return result


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tofu-run", required=True)
    ap.add_argument("--plan", required=True)
    ap.add_argument("--backend", default="cuda", help="cpu: test this script without a GPU")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    w = args.workdir
    shutil.rmtree(w, ignore_errors=True)
    os.makedirs(w)
    cpu = [args.tofu_run, args.plan, "--backend", "cpu", "--quiet"]
    gpu = [args.tofu_run, args.plan, "--backend", args.backend, "--quiet"]
    if args.backend == "cuda":
        gpu += ["--devices", "1"]
    result = {"plan": os.path.basename(args.plan), "steps_saved": STEPS}
    steps = [
        ("cpu_save", cpu + ["--steps", str(STEPS), "--save", f"{w}/cpu.onnx"]),
        ("gpu_save", gpu + ["--steps", str(STEPS), "--save", f"{w}/gpu.onnx"]),
        ("reference", cpu + ["--resume", f"{w}/cpu.onnx", "--steps", "1",
                             "--dump", f"{w}/ref", "--report", f"{w}/ref.json"]),
        ("resume", gpu + ["--resume", f"{w}/cpu.onnx", "--steps", "1",
                          "--dump", f"{w}/resume", "--report", f"{w}/resume.json"]),
        ("save", cpu + ["--resume", f"{w}/gpu.onnx", "--steps", "1",
                        "--dump", f"{w}/save", "--report", f"{w}/save.json"]),
    ]
    for name, cmd in steps:
        rc = run(cmd + extra)
        if rc != 0:
            result.update({"pass": False, "error": f"{name}: tofu-run exited {rc}"})
            break
    if "error" not in result:
        rtol, atol = LOSS_TOL.get(args.dtype, LOSS_TOL["float32"])
        ref_loss = loss_of(f"{w}/ref.json")
        result["reference_loss"] = ref_loss
        for name, exact in (("resume", ("param.", "input.")), ("save", ("input.",))):
            r = check(f"{w}/ref", f"{w}/{name}", args.dtype, exact)
            loss = loss_of(f"{w}/{name}.json")
            r["loss"] = loss
            r["loss_match"] = abs(loss - ref_loss) <= atol + rtol * abs(ref_loss)
            r["pass"] = r["pass"] and r["loss_match"]
            result[name] = r
        # A checkpoint is the model and its training state (docs/TofuRun.md).
        result["gpu_state_file"] = any(n.startswith("gpu.onnx.tofu-state-")
                                       for n in os.listdir(w))
        result["pass"] = (result["resume"]["pass"] and result["save"]["pass"]
                          and result["gpu_state_file"])
    shutil.rmtree(w, ignore_errors=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print("save_resume: " + json.dumps({k: result.get(k) for k in
                                        ("pass", "error", "reference_loss")}))
    for name in ("resume", "save"):
        if name in result:
            r = result[name]
            print(f"  {name}: pass {r['pass']}, loss {r['loss']}, "
                  f"{r.get('compared', 0)}/{r.get('tensors', 0)} tensors compared "
                  f"(max err {r.get('max_err')}, {len(r['failed'])} failed {r['failed'][:5]}, "
                  f"missing {r['missing'][:5]}), {r['exact_compared']} bit for bit "
                  f"({len(r['not_bit_equal'])} unequal {r['not_bit_equal'][:5]})")
    return 0 if result.get("pass") else 1


if __name__ == "__main__":
    sys.exit(main())
