"""Predicted against measured GPU step, without a GPU: bench/gpu's plans at k = 1.

bench/gpu/H200-run11.md measured tofu-run's CUDA backend on one H200
(CUDA graphs, median of steps 2-5). This script compiles the same models at
k = 1 (bench/gpu/prepare_plans.py's generators and flags, without
--cuda-arch) with ``--device bench/devices/h200.json`` and prints the
prediction beside those measurements.

    /usr/bin/python3 bench/simulate_gpu.py --build build --work /tmp/simgpu
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = sys.executable

# model -> (generator, tofuc flags, measured GPU step ms at k = 1 in
# bench/gpu/H200-run11.md)
MODELS = {
    "mlp": (None, [], 0.41),
    "gpt": ("transformer/make_gpt.py --layers 2 --hidden 128 --heads 4 --seq 64 "
            "--vocab 512 --batch 8", [], 2.75),
    "gpt-big": ("transformer/make_gpt.py --layers 2 --hidden 512 --heads 8 --seq 128 "
                "--vocab 512 --batch 8", [], 12.0),
    "gpt-bf16": ("transformer/make_gpt.py --layers 2 --hidden 128 --heads 4 --seq 64 "
                 "--vocab 512 --batch 8", ["--precision", "bf16"], 3.23),
    "rnn": ("rnn/make_rnn.py --layers 2 --hidden 128 --batch 16 --vocab 256 --steps 16",
            [], 6.81),
    "cnnbn": ("cnn/make_cnn_bn.py", [], 0.326),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--work", default="/tmp/tofu-simulate-gpu")
    ap.add_argument("--device", default=os.path.join(ROOT, "bench", "devices", "h200.json"))
    args = ap.parse_args()
    tofuc = os.path.join(args.build, "bin", "tofuc")
    os.makedirs(args.work, exist_ok=True)
    print("| model | predicted step | compute / copies | largest kernels (predicted) | "
          "measured GPU step (H200-run11) | predicted / measured |")
    print("|---|---|---|---|---|---|")
    for name, (gen, flags, measured_ms) in MODELS.items():
        if gen:
            onnx = os.path.join(args.work, name + ".onnx")
            script, *gen_args = gen.split()
            subprocess.run([PY, os.path.join(ROOT, "examples", script), *gen_args, "-o",
                            onnx], check=True, capture_output=True)
        else:
            onnx = os.path.join(ROOT, "examples", "mlp", "mlp.onnx")
        out = subprocess.run([tofuc, onnx, "--gpus", "1", *flags, "--device", args.device,
                              "--dump-plan=json"], capture_output=True, text=True)
        if out.returncode:
            sys.exit(out.stderr)
        p = json.loads(out.stdout)["predicted"]
        top = sorted(p["compute_seconds_by_kernel"].items(), key=lambda kv: -kv[1])[:3]
        tops = ", ".join(f"{k} {v * 1e3:.2f}" for k, v in top)
        step_ms = p["step_seconds"] * 1e3
        print(f"| {name} | {step_ms:.3f} ms | {p['compute_seconds'] * 1e3:.3f} / "
              f"{p['copy_seconds'] * 1e3:.3f} ms | {tops} | {measured_ms} ms | "
              f"{step_ms / measured_ms:.2f} |", flush=True)


if __name__ == "__main__":
    main()
