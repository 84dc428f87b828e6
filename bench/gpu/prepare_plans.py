#!/usr/bin/python3
"""Compiles the GPU bundle's plans and their CPU-backend references.

Called by ``bench/gpu/prepare.sh`` (see bench/gpu/README.md); runs here, with
no GPU. For every model of ``MODELS`` and every k of ``KS`` it writes into
``OUT/plans``:

* ``<model>-k<k>.bin``: ``tofuc --gpus k --cuda-arch ARCH`` (the generated
  kernels compiled by nvcc into the plan);
* ``<model>-k<k>.ref.json``: ``tofu-run --backend cpu --steps STEPS --report``,
  the losses the CUDA backend must reproduce (bench/gpu/compare.py);
* ``<model>.data/`` for the real models: the fixed batch that both backends
  and PyTorch are fed (``--data``), so that their losses can be compared.

The real models are those of the project's real-model suite
(test/e2e/real_models.py ``make_case``: torchvision / torch.nn modules with
seeded weights, exported by tools/tofu_export.py); bench/gpu/torch_step.py
builds the same modules on the GPU machine for the speed comparison.
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))
sys.path.insert(0, os.path.join(ROOT, "tools"))

#: Generated example models: name -> generator command line (relative to
#: examples/). Sizes are kept small enough for the bundle's 60 MiB.
EXAMPLES = {
    "mlp": None,  # examples/mlp/mlp.onnx as committed
    "gpt": "transformer/make_gpt.py --layers 2 --hidden 128 --heads 4 --seq 64 "
           "--vocab 512 --batch 8",
    "rnn": "rnn/make_rnn.py --layers 2 --hidden 128 --batch 16 --vocab 256 --steps 16",
    "cnnbn": "cnn/make_cnn_bn.py",
}

#: Real-model-suite models (test/e2e/real_models.py), small enough to carry.
REAL_MODELS = ("shufflenet_v2_x0_5", "vit")
#: Real models also compiled in float64 (``<model>-f64``): float32 training
#: of a BatchNorm network at batch 4 is chaotic (the CPU backend's own k = 1
#: and k = 8 losses part by 2e-2 at step 3), so the multi-step comparison of
#: the CUDA and CPU backends is made in float64.
FLOAT64_MODELS = ("shufflenet_v2_x0_5",)

KS = (1, 8)
STEPS = 5


def run(cmd, log):
    """Runs ``cmd`` with its output in ``log``; raises with the log's tail."""
    t0 = time.time()
    with open(log, "w") as f:
        rc = subprocess.call([str(c) for c in cmd], stdout=f, stderr=subprocess.STDOUT)
    if rc != 0:
        with open(log) as f:
            tail = f.read()[-2000:]
        raise SystemExit(f"prepare_plans: {' '.join(map(str, cmd))} failed (rc {rc}):\n{tail}")
    return time.time() - t0


def export_real_model(name, folder, float64=False):
    """Exports real model ``name`` (float32, or float64) and writes its batch
    as .npy; (onnx path, data folder, tofuc flags)."""
    import numpy as np
    import real_models as R
    import e2e_common as E
    import torch
    dtype = torch.float64 if float64 else torch.float32
    tag = name + ("-f64" if float64 else "")
    case = R.make_case(name)
    onnx = os.path.join(folder, tag + ".onnx")
    R.export(None, case, case.model, dtype, onnx)
    data = os.path.join(folder, tag + ".data", "batch_0")
    os.makedirs(data, exist_ok=True)
    for tensor, value in R.cast(case.batch, dtype).items():
        np.save(os.path.join(data, E.dump_name(tensor) + ".npy"), value.numpy())
    return onnx, os.path.dirname(data), ["--lr", str(case.lr), *case.tofuc_flags]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True, help="the build's bin/ (tofuc, tofu-run)")
    ap.add_argument("--out", required=True, help="the bundle folder")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--nvcc", default="/usr/local/cuda/bin/nvcc")
    ap.add_argument("--models", default="", help="comma-separated subset")
    args = ap.parse_args()
    plans = os.path.join(args.out, "plans")
    os.makedirs(plans, exist_ok=True)
    wanted = set(filter(None, args.models.split(",")))
    index = []
    for name in list(EXAMPLES) + list(REAL_MODELS) + [m + "-f64" for m in FLOAT64_MODELS]:
        if wanted and name not in wanted:
            continue
        base = name[:-4] if name.endswith("-f64") else name
        print(f"prepare_plans: {name}", flush=True)
        flags, data = [], None
        if name in EXAMPLES:
            gen = EXAMPLES[name]
            onnx = os.path.join(ROOT, "examples", name, name + ".onnx")
            if gen:
                onnx = os.path.join(plans, name + ".onnx")
                script, *gen_args = gen.split()
                run([sys.executable, os.path.join(ROOT, "examples", script), *gen_args,
                     "-o", onnx], os.path.join(plans, name + ".gen.log"))
        else:
            onnx, data, flags = export_real_model(base, plans, float64=name != base)
        for k in KS:
            tag = f"{name}-k{k}"
            plan = os.path.join(plans, tag + ".bin")
            compile_s = run([os.path.join(args.bin, "tofuc"), onnx, "--gpus", k,
                             "--cuda-arch", args.arch, "--nvcc", args.nvcc, *flags,
                             "-o", plan], os.path.join(plans, tag + ".tofuc.log"))
            ref = os.path.join(plans, tag + ".ref.json")
            data_flags = ["--data", data] if data else []
            run([os.path.join(args.bin, "tofu-run"), plan, "--backend", "cpu",
                 "--steps", STEPS, "--report", ref, "--quiet", *data_flags],
                os.path.join(plans, tag + ".ref.log"))
            index.append({"name": tag, "model": name, "k": k, "plan": tag + ".bin",
                          "reference": tag + ".ref.json",
                          "data": os.path.basename(data) if data else None,
                          "steps": STEPS, "arch": args.arch,
                          "real_model": base in REAL_MODELS,
                          "dtype": "float64" if name != base else "float32",
                          "compile_seconds": round(compile_s, 2)})
        if os.path.exists(onnx) and onnx.startswith(plans):
            os.remove(onnx)  # the plan holds the model
    with open(os.path.join(plans, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
    print(f"prepare_plans: {len(index)} plans in {plans}")


if __name__ == "__main__":
    main()
