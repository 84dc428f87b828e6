#!/usr/bin/python3
"""tofu-run's CPU step beside PyTorch eager's, same model, batch and machine.

Two sources of models:

``--suite issue16`` (the default): the models of issue 16, defined here as
torch modules and exported with tools/tofu_export.py — resnet18 (batch 8,
64x64), a torchvision VisionTransformer (2 layers, 128 wide, 64x64 images,
patch 8), nn.TransformerEncoder (2 layers, d 64, seq 32, batch 8), an LSTM
language model (2 layers, 64 wide, seq 32, batch 8, vocabulary 1000) and
convnext_tiny (batch 2, 64x64). Each is compiled with ``tofuc --gpus k``
for every k of ``--k`` (default 1,4) and run by ``tofu-run PLAN --data DIR
--steps N --report`` on one fixed batch (seed 1; weights from seed 0).

``--bundle DIR``: the real models of a GPU bundle (bench/gpu/prepare.sh;
its k = 1 plans and fixed batches).

Back to back in one run for each model: tofu-run (CPU backend; its kernels
use every core) and the same torch module (the same initial weights), fed
the same batch, trained by torch.optim.SGD with the same lr,
``torch.set_num_threads`` = the core count (tofu-run's kernels and
OpenBLAS use every core too).
Step time: the median of steps 3..N for torch; for tofu-run the median of
steps 8..N when N >= 12 (its ``--cpu-schedule auto`` times two schedules of
the virtual devices in steps 2..7), else 3..N. Prints a markdown table with the
ratio tofu-run(k) / torch and the geometric mean of the k = 1 ratios; the
step-1 losses of both are listed as a check that the two trained the same
thing (the float32 losses agree to about 1e-5 relative).

    /usr/bin/python3 bench/cpu_step_vs_torch.py                 # issue 16's models
    /usr/bin/python3 bench/cpu_step_vs_torch.py --models vit,lstm_lm --k 1
    /usr/bin/python3 bench/cpu_step_vs_torch.py --bundle .gpubundle/tofu-gpu
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))
sys.path.insert(0, os.path.join(ROOT, "tools"))

LR = 0.01


def issue16_case(name):
    """(module with forward(*inputs) -> loss, {input name: tensor}, lr)."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import torchvision
    import real_models as R

    torch.manual_seed(0)
    if name in ("resnet18", "convnext_tiny"):
        batch = 8 if name == "resnet18" else 2
        net = R.no_randomness(getattr(torchvision.models, name)(num_classes=10))
        model = R.WithLoss(net)
        inputs = {"input": torch.randn(batch, 3, 64, 64), "labels": torch.randint(0, 10, (batch,))}
    elif name == "vit":
        from torchvision.models import VisionTransformer
        net = R.no_randomness(VisionTransformer(image_size=64, patch_size=8, num_layers=2,
                                                num_heads=4, hidden_dim=128, mlp_dim=512,
                                                num_classes=10))
        model = R.WithLoss(net)
        inputs = {"input": torch.randn(8, 3, 64, 64), "labels": torch.randint(0, 10, (8,))}
    elif name == "transformer_encoder":
        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                layer = nn.TransformerEncoderLayer(64, 4, dim_feedforward=256, dropout=0.0)
                self.encoder = nn.TransformerEncoder(layer, 2)
                self.head = nn.Linear(64, 10)

            def forward(self, input, labels):  # noqa: A002 - the ONNX input name
                return F.cross_entropy(self.head(self.encoder(input).mean(0)), labels)
        model = Encoder()
        inputs = {"input": torch.randn(32, 8, 64), "labels": torch.randint(0, 10, (8,))}
    elif name == "lstm_lm":
        model = R.RecurrentLM("LSTM", vocab=1000, width=64, hidden=64, layers=2)
        inputs = {"tokens": torch.randint(0, 1000, (32, 8)),
                  "targets": torch.randint(0, 1000, (32, 8))}
    else:
        raise SystemExit(f"unknown model {name!r}; known: {', '.join(ISSUE16)}")
    torch.manual_seed(1)
    for key, value in inputs.items():
        if value.is_floating_point():
            inputs[key] = torch.randn(value.shape)
    R.onnx_epsilons(model)
    model.train()
    return model, inputs, LR


ISSUE16 = ("resnet18", "vit", "transformer_encoder", "lstm_lm", "convnext_tiny")


# The steps tofu-run's --cpu-schedule auto spends timing (docs/TofuRun.md).
TIMED_STEPS = 7


def tofu_step(bin_dir, plan, data, steps):
    """(median seconds of steps 8..steps (3..steps when fewer than 12), step-1 loss, the ops that ran on
    the TDL interpreter per step as "Op xN ...") of tofu-run."""
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "r.json")
        subprocess.run([os.path.join(bin_dir, "tofu-run"), plan, "--data", data,
                        "--steps", str(steps), "--quiet", "--report", report],
                       check=True, stdout=subprocess.DEVNULL)
        full = json.load(open(report))
    record = full["steps"]
    interpreted = " ".join(f"{op} x{n // steps}"
                           for op, n in full.get("interpreted_instructions", {}).items())
    # --cpu-schedule auto times its two schedules in steps 2..7 and keeps
    # the faster: with enough steps, only the steps after that count.
    first = TIMED_STEPS if steps >= TIMED_STEPS + 5 else 2
    schedule = full.get("cpu_schedule", "")
    if int(full.get("devices", 1)) > 1 and schedule:
        interpreted = f"{interpreted or 'none'} ({schedule})"
    return (statistics.median(s["seconds"] for s in record[first:]), record[0]["loss"],
            interpreted or "none")


def torch_step(model, loss_fn, lr, steps):
    """(median seconds of steps 3..steps, step-1 loss) of torch eager + SGD."""
    import torch
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    times, first = [], None
    for step in range(steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        if step == 0:
            first = float(loss)
    return statistics.median(times[2:]), first


def run_issue16(args, threads):
    """Rows (model, k, tofu s, torch s, tofu loss, torch loss, compile s)."""
    import copy
    import numpy as np
    import e2e_common as E
    from tofu_export import export_for_training
    rows = []
    for name in args.models:
        model, inputs, lr = issue16_case(name)
        names = list(inputs)
        with tempfile.TemporaryDirectory() as scratch:
            tmp = os.path.join(args.keep, name) if args.keep else scratch
            os.makedirs(tmp, exist_ok=True)
            onnx_path = os.path.join(tmp, "model.onnx")
            export_for_training(copy.deepcopy(model), tuple(inputs[n] for n in names),
                                onnx_path, input_names=names, output_names=["loss"])
            data = os.path.join(tmp, "data")
            os.makedirs(os.path.join(data, "batch_0"), exist_ok=True)
            for n, v in inputs.items():
                np.save(os.path.join(data, "batch_0", E.dump_name(n) + ".npy"), v.numpy())
            torch_s, torch_loss = torch_step(copy.deepcopy(model),
                                             lambda m: m(*(inputs[n] for n in names)),
                                             lr, args.steps)
            for k in args.k:
                plan = os.path.join(tmp, f"k{k}.bin")
                t0 = time.perf_counter()
                subprocess.run([os.path.join(args.bin, "tofuc"), onnx_path, "--gpus", str(k),
                                "--lr", str(lr), "-o", plan], check=True,
                               stdout=subprocess.DEVNULL)
                compile_s = time.perf_counter() - t0
                tofu_s, tofu_loss, interp = tofu_step(args.bin, plan, data, args.steps)
                rows.append((name, k, tofu_s, torch_s, tofu_loss, torch_loss, compile_s, interp))
                print(f"{name} k={k}: tofu-run {tofu_s * 1e3:.1f} ms, torch {torch_s * 1e3:.1f} ms",
                      file=sys.stderr, flush=True)
    return rows


def run_bundle(args, threads):
    """Rows for the real models of a GPU bundle (k = 1 plans)."""
    import numpy as np
    import torch
    import e2e_common as E
    import real_models as R
    plans = os.path.join(args.bundle, "plans")
    rows = []
    for entry in json.load(open(os.path.join(plans, "index.json"))):
        if not entry.get("real_model") or entry["k"] != 1:
            continue
        data = os.path.join(plans, entry["data"])
        tofu_s, tofu_loss, interp = tofu_step(args.bin, os.path.join(plans, entry["plan"]),
                                              data, args.steps)
        base = entry["model"][:-4] if entry["model"].endswith("-f64") else entry["model"]
        dtype = torch.float64 if entry.get("dtype") == "float64" else torch.float32
        case = R.make_case(base)
        for name in case.batch:
            case.batch[name] = torch.from_numpy(
                np.load(os.path.join(data, "batch_0", E.dump_name(name) + ".npy")))
        torch_s, torch_loss = torch_step(case.model.to(dtype),
                                         lambda m: case.loss(m, case.batch), case.lr, args.steps)
        rows.append((entry["model"], 1, tofu_s, torch_s, tofu_loss, torch_loss, None, interp))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bundle", help="the unpacked GPU bundle folder (instead of issue 16's models)")
    ap.add_argument("--models", default=",".join(ISSUE16),
                    help=f"comma-separated subset of {','.join(ISSUE16)}")
    ap.add_argument("--k", default="1,4", help="device counts to compile for (default 1,4)")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--keep", help="keep each model's model.onnx, data/ and k<k>.bin in KEEP/<model>")
    args = ap.parse_args()
    args.models = [m for m in args.models.split(",") if m]
    args.k = [int(k) for k in args.k.split(",")]
    import torch
    threads = os.cpu_count()
    torch.set_num_threads(threads)
    rows = run_bundle(args, threads) if args.bundle else run_issue16(args, threads)

    print(f"threads: torch {threads}, tofu-run {threads} (every core); torch {torch.__version__}; "
          f"{args.steps} steps, median of steps 3..{args.steps} (tofu-run: "
          f"{TIMED_STEPS + 1 if args.steps >= TIMED_STEPS + 5 else 3}..{args.steps})\n")
    print("| model | k | tofu-run ms | torch eager ms | tofu / torch | tofuc s "
          "| step-1 loss tofu | torch | interpreted ops per step (k > 1: schedule) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for model, k, t, p, lt, lp, c, interp in rows:
        compile_s = f"{c:.1f}" if c is not None else "-"
        print(f"| {model} | {k} | {t * 1e3:.1f} | {p * 1e3:.1f} | {t / p:.2f} | {compile_s} "
              f"| {lt:.7g} | {lp:.7g} | {interp} |")
    for k in sorted({r[1] for r in rows}):
        ratios = [r[2] / r[3] for r in rows if r[1] == k]
        geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        print(f"\nk = {k}: geometric mean tofu / torch {geo:.2f}, worst {max(ratios):.2f}")


if __name__ == "__main__":
    main()
