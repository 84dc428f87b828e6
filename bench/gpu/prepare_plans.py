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
  and PyTorch are fed (``--data``), so that their losses can be compared;
* ``<model>-k<k>.schedule.txt``: ``tofu-run --backend cuda --devices 1
  --dump-cuda-schedule`` (what the CUDA backend will issue, every cuBLAS
  call with its shape; a plan the backend would refuse fails here, not on
  the GPU); bench/gpu/gemms.py reads the k = 1 ones for the GEMM part;
* ``<model>.dump/`` and ``<model>.dump.json`` (models of ``DUMP_MODELS``):
  the CPU backend's ``--dump`` of step 1 at k = 1, its gradients (and
  inputs) only, the smallest tensors first up to ``DUMP_BYTES`` a model,
  and per tensor how far the CPU backend's own k = 8 dump is from it
  (bench/gpu/compare_dumps.py compares the CUDA backend's dumps with them).

Models marked in ``BF16_WEIGHTS`` have their initial weights rounded to
bfloat16 values (still float32 tensors, trained in float32): the archive
holds them at about a third of the size (bench/gpu/README.md).

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
    # GEMM-heavy: 1024 tokens a step through hidden 512 (GEMMs of
    # 1024 x 1536 x 512 and 1024 x 2048 x 512), for the GEMM part.
    "gpt-big": "transformer/make_gpt.py --layers 2 --hidden 512 --heads 8 --seq 128 "
               "--vocab 512 --batch 8",
    # The GPT above compiled with --precision bf16 (EXAMPLE_FLAGS): bf16
    # cuBLAS GEMMs and their gradients, float32 weights (docs/Training.md,
    # "Mixed precision"); its losses are compared with the CPU backend's
    # bf16 emulation at compare.py's bfloat16 tolerance. k = 1 only and
    # weights rounded to bf16 values (BF16_WEIGHTS): about 0.7 MB of xz,
    # where k = 1 and 8 with float32 weights would be 3.9 MB, more than the
    # archive's 60 MiB leave.
    "gpt-bf16": "transformer/make_gpt.py --layers 2 --hidden 128 --heads 4 --seq 64 "
                "--vocab 512 --batch 8",
    "rnn": "rnn/make_rnn.py --layers 2 --hidden 128 --batch 16 --vocab 256 --steps 16",
    "cnnbn": "cnn/make_cnn_bn.py",
    # WResNet-50 (examples/wresnet: the 50-layer bottleneck network with
    # BatchNorm in training mode), every width a quarter of ResNet-50's
    # (make_wresnet.py takes whole widening factors; see make_small_wresnet)
    # so that its 1.5 M weights fit the bundle, on 64x64 images, batch 8.
    "wresnet50": "wresnet",
    # Its float64 twin (bench/to_float64.py of the same model): float32
    # BatchNorm at these sizes is ill-conditioned (the CPU backend's own
    # k = 1 and k = 8 step-1 gradients part by 1e-2), so the gradients of
    # the two backends are compared in float64.
    "wresnet50-f64": "wresnet",
}
#: The ks of each example (default KS): gpt-big is there for the GEMM part
#: (k = 1).
EXAMPLE_KS = {"gpt-big": (1,), "gpt-bf16": (1,)}
#: Extra tofuc flags of an example, and the dtype its losses are compared in
#: (compare.py TOLERANCE).
EXAMPLE_FLAGS = {"gpt-bf16": ["--precision", "bf16"]}
EXAMPLE_DTYPE = {"gpt-bf16": "bfloat16"}
#: Initial weights rounded to bfloat16 values (the archive's size).
BF16_WEIGHTS = ("gpt-big", "wresnet50", "gpt-bf16")
WRESNET = {"depth": 50, "width": 0.25, "image": 64, "batch": 8, "classes": 10}

#: Models whose CPU --dump (step 1, k = 1) the bundle carries, and the bytes
#: of tensors kept a model (the smallest first: every bias and norm gradient,
#: from the last layer to the first, then weight gradients while they fit).
DUMP_MODELS = ("mlp", "gpt", "rnn", "cnnbn", "wresnet50", "wresnet50-f64",
               "shufflenet_v2_x0_5", "vit", "shufflenet_v2_x0_5-f64")
DUMP_BYTES = 1 << 20

#: Real-model-suite models (test/e2e/real_models.py), small enough to carry.
REAL_MODELS = ("shufflenet_v2_x0_5", "vit")
#: Real models also compiled in float64 (``<model>-f64``): float32 training
#: of a BatchNorm network at batch 4 is chaotic (the CPU backend's own k = 1
#: and k = 8 losses part by 2e-2 at step 3), so the multi-step comparison of
#: the CUDA and CPU backends is made in float64.
FLOAT64_MODELS = ("shufflenet_v2_x0_5",)

KS = (1, 8)
STEPS = 5
#: tofuc's --lr when none is given (tools/tofuc/tofuc.cpp).
TOFUC_DEFAULT_LR = 0.1


def torch_model(name, flags):
    """The ``torch_model`` entry of a GPT example's plans: its make_gpt.py
    configuration, precision and learning rate, from which
    bench/gpu/torch_step.py builds the same model in PyTorch
    (examples/transformer/gpt_torch.py); None for the other examples."""
    gen = EXAMPLES.get(name)
    if not gen or not gen.startswith("transformer/make_gpt.py"):
        return None
    args = gen.split()[1:]
    config = {a[2:]: int(v) for a, v in zip(args[0::2], args[1::2])}
    config["precision"] = flags[flags.index("--precision") + 1] if "--precision" in flags \
        else "float32"
    config["lr"] = float(flags[flags.index("--lr") + 1]) if "--lr" in flags \
        else TOFUC_DEFAULT_LR
    return config


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


class _Width:
    """A fractional widening factor for make_wresnet.build, whose channel
    counts are 64 * width * 2**s (and 4 times that): 64 * _Width(0.25) is the
    int 16, so every count stays an int."""

    def __init__(self, w):
        self.w = w

    def __rmul__(self, c):
        v = c * self.w
        if v != int(v):
            raise ValueError(f"width {self.w} gives {v} channels")
        return int(v)

    def __str__(self):
        return str(self.w)


def make_small_wresnet(onnx):
    """WResNet-50 of WRESNET (make_wresnet.build, BatchNorm in training
    mode) written to ``onnx``."""
    sys.path.insert(0, os.path.join(ROOT, "examples", "wresnet"))
    import make_wresnet as W
    c = WRESNET
    g = W.build(c["depth"], _Width(c["width"]), c["image"], c["batch"], c["classes"],
                seed=0, bn_training=True)
    g.save(onnx, weights=True)


def round_weights_bf16(onnx):
    """Rounds every float32 initializer of ``onnx`` to the nearest bfloat16
    value (ties to even), in place."""
    import numpy as np
    import onnx as O
    from onnx import numpy_helper
    model = O.load(onnx)
    for t in model.graph.initializer:
        if t.data_type != O.TensorProto.FLOAT:
            continue
        u = numpy_helper.to_array(t).astype(np.float32).view(np.uint32).astype(np.uint64)
        u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
        t.CopyFrom(numpy_helper.from_array(
            u.astype(np.uint32).view(np.float32), t.name))
    O.save(model, onnx)


def model_names():
    """Every model of the bundle, in its order: the examples, the real
    models, the float64 twins."""
    return list(EXAMPLES) + list(REAL_MODELS) + [m + "-f64" for m in FLOAT64_MODELS]


def model_onnx(name, folder):
    """Writes model ``name`` of model_names() into ``folder`` as the bundle
    compiles it; (onnx path, data folder or None, tofuc flags). The MLP is the
    committed examples/mlp/mlp.onnx (not in ``folder``)."""
    base = name[:-4] if name.endswith("-f64") else name
    if name not in EXAMPLES:
        return export_real_model(base, folder, float64=name != base)
    gen = EXAMPLES[name]
    onnx = os.path.join(ROOT, "examples", name, name + ".onnx")
    if gen == "wresnet":
        onnx = os.path.join(folder, name + ".onnx")
        make_small_wresnet(onnx)
        if name.endswith("-f64"):
            run([sys.executable, os.path.join(ROOT, "bench", "to_float64.py"), onnx,
                 onnx], os.path.join(folder, name + ".f64.log"))
    elif gen:
        onnx = os.path.join(folder, name + ".onnx")
        script, *gen_args = gen.split()
        run([sys.executable, os.path.join(ROOT, "examples", script), *gen_args,
             "-o", onnx], os.path.join(folder, name + ".gen.log"))
    if name in BF16_WEIGHTS:
        round_weights_bf16(onnx)
    return onnx, None, EXAMPLE_FLAGS.get(name, [])


def cpu_dump(bin_dir, plan, folder, data_flags, log):
    """The CPU backend's --dump of step 1 into ``folder``."""
    import shutil
    shutil.rmtree(folder, ignore_errors=True)
    run([os.path.join(bin_dir, "tofu-run"), plan, "--backend", "cpu", "--steps", 1,
         "--quiet", "--dump", folder, *data_flags], log)


def keep_dump(full, other, out, budget):
    """Copies the gradients and inputs of dump ``full`` into ``out``, the
    smallest first while they fit ``budget`` bytes; returns the index
    {file: {dtype, shape, cpu_k_err}} where cpu_k_err is max |full - other| /
    max |full| against dump ``other`` (the same model at another k)."""
    import numpy as np
    import shutil
    os.makedirs(out, exist_ok=True)
    files = sorted((f for f in os.listdir(full)
                    if f.endswith(".npy") and f.startswith(("grad.", "input."))),
                   key=lambda f: (os.path.getsize(os.path.join(full, f)), f))
    index, used = {}, 0
    for f in files:
        size = os.path.getsize(os.path.join(full, f))
        if used + size > budget:
            continue
        a = np.load(os.path.join(full, f))
        row = {"dtype": str(a.dtype), "shape": list(a.shape)}
        o = os.path.join(other, f)
        if os.path.exists(o):
            b = np.load(o)
            if b.shape == a.shape and a.dtype.kind == "f":
                scale = float(np.max(np.abs(a))) if a.size else 0.0
                err = float(np.max(np.abs(a.astype(np.float64) - b))) if a.size else 0.0
                row["cpu_k_err"] = err / scale if scale > 0 else err
            elif b.shape == a.shape:
                row["cpu_k_err"] = 0.0 if np.array_equal(a, b) else None
        shutil.copy(os.path.join(full, f), os.path.join(out, f))
        index[f] = row
        used += size
    return index, used, len(files)


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
    for name in model_names():
        if wanted and name not in wanted:
            continue
        base = name[:-4] if name.endswith("-f64") else name
        print(f"prepare_plans: {name}", flush=True)
        onnx, data, flags = model_onnx(name, plans)
        data_flags = ["--data", data] if data else []
        dumps = {}
        for k in EXAMPLE_KS.get(name, KS):
            tag = f"{name}-k{k}"
            plan = os.path.join(plans, tag + ".bin")
            compile_s = run([os.path.join(args.bin, "tofuc"), onnx, "--gpus", k,
                             "--cuda-arch", args.arch, "--nvcc", args.nvcc, *flags,
                             "-o", plan], os.path.join(plans, tag + ".tofuc.log"))
            ref = os.path.join(plans, tag + ".ref.json")
            run([os.path.join(args.bin, "tofu-run"), plan, "--backend", "cpu",
                 "--steps", STEPS, "--report", ref, "--quiet", *data_flags],
                os.path.join(plans, tag + ".ref.log"))
            # What the CUDA backend will issue on one GPU: a plan it refuses
            # fails here. Its cuBLAS calls are the GEMM part's shapes.
            run([os.path.join(args.bin, "tofu-run"), plan, "--backend", "cuda",
                 "--devices", 1, "--dump-cuda-schedule"],
                os.path.join(plans, tag + ".schedule.txt"))
            if name in DUMP_MODELS:
                dumps[k] = os.path.join(plans, tag + ".fulldump")
                cpu_dump(args.bin, plan, dumps[k], data_flags,
                         os.path.join(plans, tag + ".dump.log"))
            index.append({"name": tag, "model": name, "k": k, "plan": tag + ".bin",
                          "reference": tag + ".ref.json",
                          "schedule": tag + ".schedule.txt",
                          "data": os.path.basename(data) if data else None,
                          "steps": STEPS, "arch": args.arch,
                          "real_model": base in REAL_MODELS,
                          "dtype": EXAMPLE_DTYPE.get(name, "float64" if name != base
                                                     else "float32"),
                          "bf16_weights": name in BF16_WEIGHTS,
                          "compile_seconds": round(compile_s, 2)})
            if torch_model(name, flags):
                index[-1]["torch_model"] = torch_model(name, flags)
        if 1 in dumps:
            import shutil
            other = dumps.get(max(dumps))
            tensors, used, total = keep_dump(dumps[1], other, os.path.join(plans, name + ".dump"),
                                             DUMP_BYTES)
            with open(os.path.join(plans, name + ".dump.json"), "w") as f:
                json.dump({"model": name, "step": 1, "from": f"{name}-k1",
                           "cpu_k_err_against": f"{name}-k{max(dumps)}",
                           "bytes": used, "tensors_in_full_dump": total,
                           "tensors": tensors}, f, indent=1)
            for entry in index:
                if entry["model"] == name:
                    entry["dump"] = name + ".dump"
            print(f"prepare_plans: {name}: {len(tensors)} of {total} dumped tensors kept "
                  f"({used} bytes)", flush=True)
            for d in dumps.values():
                shutil.rmtree(d, ignore_errors=True)
        if os.path.exists(onnx) and onnx.startswith(plans):
            os.remove(onnx)  # the plan holds the model
    with open(os.path.join(plans, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
    print(f"prepare_plans: {len(index)} plans in {plans}")


if __name__ == "__main__":
    main()
