"""The Tofu paper's Table 3 on paper: predicted RNN-L-4K throughput on 8 K80s.

For RNN-6/8/10 with hidden size 4096 (``--hidden``: also 6144, 8192, the
sizes of the paper's Figure 9; graph only, no weights), compiles
tofuc's plan for 8 devices with ``--device k80`` at the largest batch among
512, 256, 128 whose plan fits a K80 (12 GB less the 10% margin), as the
paper's Tofu runs used the largest batch that fits; and the paper's ideal
baseline: the single-GPU plan at batch 512 (memory ignored), its predicted
throughput times 8. Prints a markdown table beside the paper's measured
Tofu throughput (Table 3: 210, 154, 122 samples/s).

    /usr/bin/python3 bench/paper_k80.py --build build --work /tmp/paper \
        [--hidden 4096,6144,8192] [--wresnet 50-4,152-10]
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAPER = {6: 210, 8: 154, 10: 122}


def predict(tofuc, model, k, device):
    out = subprocess.run([tofuc, model, "--no-weights", "--gpus", str(k), "--device",
                          device, "--dump-plan=json"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(out.stderr)
    return json.loads(out.stdout)["predicted"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--work", default="/tmp/tofu-paper")
    parser.add_argument("--steps", type=int, default=20, help="unrolled time steps")
    parser.add_argument("--hidden", default="4096",
                        help="comma-separated RNN hidden sizes (Table 3 is 4096)")
    parser.add_argument("--wresnet", default="",
                        help="also Figure 8's WResNets, e.g. 50-4,152-10 (depth-width)")
    args = parser.parse_args()
    tofuc = os.path.join(args.build, "bin", "tofuc")
    os.makedirs(args.work, exist_ok=True)
    print("| model | Tofu batch (fits 8 K80s) | predicted step | predicted samples/s "
          "| compute / transfers / copies | ideal (8 x 1 GPU, batch 512) | "
          "predicted / ideal | paper Tofu (Table 3) |")
    print("|---|---|---|---|---|---|---|---|")
    for hidden in [int(h) for h in args.hidden.split(",")]:
        for layers in (6, 8, 10):
            rnn_row(tofuc, args, layers, hidden)
    if args.wresnet:
        wresnet(tofuc, args.work, [tuple(int(x) for x in c.split("-"))
                                   for c in args.wresnet.split(",")])


def rnn_row(tofuc, args, layers, hidden):
    """One row: RNN-layers-hidden at the largest batch that fits 8 K80s."""
    chosen, ideal = None, None
    for batch in (512, 256, 128):
        name = f"rnn-{layers}-{hidden // 1024}k-b{batch}.onnx"
        model = os.path.join(args.work, name)
        if not os.path.exists(model):
            subprocess.run([sys.executable, os.path.join(ROOT, "examples/rnn/make_rnn.py"),
                            "--layers", str(layers), "--hidden", str(hidden), "--batch",
                            str(batch), "--steps", str(args.steps), "--no-weights",
                            "-o", model], check=True, capture_output=True)
        if chosen is None:
            p = predict(tofuc, model, 8, "k80")
            if p["fit"]["fits"]:
                chosen = (batch, p)
        if batch == 512:
            ideal = predict(tofuc, model, 1, "k80")
    label = f"RNN-{layers}-{hidden // 1024}K"
    paper = PAPER[layers] if hidden == 4096 else "-"
    if chosen is None:
        print(f"| {label} | none fits | | | | | | {paper} |", flush=True)
        return
    batch, p = chosen
    ideal_rate = 8 * ideal["samples_per_second"]
    print(f"| {label} | {batch} | {p['step_seconds']:.3f} s | "
          f"{p['samples_per_second']:.0f} | {p['compute_seconds']:.3f} / "
          f"{p['comm_seconds']:.3f} / {p['copy_seconds']:.3f} s | {ideal_rate:.0f} | "
          f"{p['samples_per_second'] / ideal_rate:.2f} | {paper} |", flush=True)


def wresnet(tofuc, work, configs):
    """Figure 8: WResNet-L-W on 224 x 224 images, the largest batch of 128,
    64, 32, 16, 8 that fits 8 K80s; ideal = the 1-GPU plan at batch 128."""
    print("\n| model | Tofu batch (fits 8 K80s) | predicted step | predicted samples/s "
          "| compute / transfers / copies | ideal (8 x 1 GPU, batch 128) | "
          "predicted / ideal |")
    print("|---|---|---|---|---|---|---|")
    for depth, width in configs:
        chosen, ideal = None, None
        for batch in (128, 64, 32, 16, 8):
            model = os.path.join(work, f"wresnet-{depth}-{width}-b{batch}.onnx")
            if batch != 128 and chosen is not None:
                break
            if not os.path.exists(model):
                subprocess.run([sys.executable,
                                os.path.join(ROOT, "examples/wresnet/make_wresnet.py"),
                                "--depth", str(depth), "--width", str(width), "--batch",
                                str(batch), "--no-weights", "-o", model], check=True,
                               capture_output=True)
            if batch == 128:
                ideal = predict(tofuc, model, 1, "k80")
            if chosen is None:
                p = predict(tofuc, model, 8, "k80")
                if p["fit"]["fits"]:
                    chosen = (batch, p)
        if chosen is None:
            print(f"| WResNet-{depth}-{width} | none fits | | | | | |", flush=True)
            continue
        batch, p = chosen
        ideal_rate = 8 * ideal["samples_per_second"]
        print(f"| WResNet-{depth}-{width} | {batch} | {p['step_seconds']:.3f} s | "
              f"{p['samples_per_second']:.1f} | {p['compute_seconds']:.3f} / "
              f"{p['comm_seconds']:.3f} / {p['copy_seconds']:.3f} s | {ideal_rate:.1f} | "
              f"{p['samples_per_second'] / ideal_rate:.2f} |", flush=True)


if __name__ == "__main__":
    main()
