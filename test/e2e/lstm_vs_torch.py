#!/usr/bin/python3
"""e2e.lstm_vs_torch: ONNX LSTM nodes, unrolled by the importer, train as torch.nn.LSTM.

examples/rnn/make_rnn.py --form lstm writes a 2-layer LSTM language model
with one ONNX ``LSTM`` node per layer (8 time steps, hidden 16). The test

* checks that ``tofuc --compile-to=import`` expands each node into per-step
  cells whose ops carry ``tofu.timestep`` 0..T-1, ``tofu.direction`` 0 and
  ``tofu.recurrence`` = the node's name, and that no ``LSTM`` op is left;
* runs one training step (k = 1, tofu-run --dump) and compares the loss and
  the gradients of every weight with torch.nn.LSTM + Linear + cross-entropy
  autograd in float64 on the same weights and batch (ONNX's i, o, f, c gate
  order converted to torch's i, f, g, o), relative difference 1e-4;
* runs two steps for k = 1 and k = 4 and compares the losses (rel 1e-5).
"""
import os
import re
import sys

import numpy as np
import torch

import e2e_common as E

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "rnn"))
import make_rnn  # noqa: E402

LAYERS, HIDDEN, STEPS, BATCH, VOCAB = 2, 16, 8, 4, 32
GRAD_TOL = 1e-4
LOSS_TOL = 1e-5
# torch's gate blocks (i, f, g, o) taken from ONNX's (i, o, f, c), and back.
ONNX_TO_TORCH = [0, 2, 3, 1]
TORCH_TO_ONNX = [0, 3, 1, 2]


def blocks(a, order, axis=0):
    parts = np.split(a, 4, axis=axis)
    return np.concatenate([parts[i] for i in order], axis=axis)


def check_tags(env, model):
    ir = E.run_tool([env.tofuc, model, "--compile-to=import"], quiet=True).stdout
    E.check('"LSTM"' not in ir, "an LSTM op is left after import")
    for l in range(LAYERS):
        node = f"lstm.l{l}"
        steps = set()
        for line in ir.splitlines():
            if f'tofu.recurrence = "{node}"' in line and "tofu.timestep" in line:
                m = re.search(r"tofu\.timestep = (\d+)", line)
                steps.add(int(m.group(1)))
                E.check("tofu.direction = 0" in line,
                        f"{node}: a cell op without tofu.direction = 0: {line.strip()}")
        E.check(steps == set(range(STEPS)),
                f"{node}: tofu.timestep values {sorted(steps)}, expected 0..{STEPS - 1}")


def torch_reference(dump):
    def load(kind, name):
        return np.load(os.path.join(dump, f"{kind}.{E.dump_name(name)}.npy")).astype(np.float64)
    lstm = torch.nn.LSTM(HIDDEN, HIDDEN, LAYERS).double()
    with torch.no_grad():
        for l in range(LAYERS):
            W, R, B = (load("param", f"lstm.l{l}.{w}")[0] for w in "WRB")
            getattr(lstm, f"weight_ih_l{l}").copy_(torch.from_numpy(blocks(W, ONNX_TO_TORCH)))
            getattr(lstm, f"weight_hh_l{l}").copy_(torch.from_numpy(blocks(R, ONNX_TO_TORCH)))
            getattr(lstm, f"bias_ih_l{l}").copy_(
                torch.from_numpy(blocks(B[:4 * HIDDEN], ONNX_TO_TORCH)))
            getattr(lstm, f"bias_hh_l{l}").copy_(
                torch.from_numpy(blocks(B[4 * HIDDEN:], ONNX_TO_TORCH)))
    proj_w = torch.from_numpy(load("param", "proj.weight")).requires_grad_()
    proj_b = torch.from_numpy(load("param", "proj.bias")).requires_grad_()
    x = torch.from_numpy(load("input", "input"))                    # [B, T, E]
    labels = torch.from_numpy(np.load(os.path.join(dump, "input.labels.npy")))
    y, _ = lstm(x.transpose(0, 1))                                  # [T, B, H]
    logits = y.transpose(0, 1).reshape(BATCH * STEPS, HIDDEN) @ proj_w.T + proj_b
    loss = torch.nn.functional.cross_entropy(logits, labels)
    loss.backward()
    grads = {"proj.weight": proj_w.grad.numpy(), "proj.bias": proj_b.grad.numpy()}
    for l in range(LAYERS):
        gi = getattr(lstm, f"weight_ih_l{l}").grad.numpy()
        gh = getattr(lstm, f"weight_hh_l{l}").grad.numpy()
        gb = getattr(lstm, f"bias_ih_l{l}").grad.numpy()  # == bias_hh's gradient
        grads[f"lstm.l{l}.W"] = blocks(gi, TORCH_TO_ONNX)[None]
        grads[f"lstm.l{l}.R"] = blocks(gh, TORCH_TO_ONNX)[None]
        grads[f"lstm.l{l}.B"] = np.concatenate([blocks(gb, TORCH_TO_ONNX)] * 2)[None]
    return loss.item(), grads


def main():
    env = E.parse_args(__doc__.splitlines()[1])
    env.require_tools()
    model = env.path("rnn-lstm.onnx")
    E.check(make_rnn.main(["--form", "lstm", "--layers", str(LAYERS), "--hidden", str(HIDDEN),
                           "--steps", str(STEPS), "--batch", str(BATCH), "--vocab", str(VOCAB),
                           "-o", model]) == 0, "make_rnn failed")
    check_tags(env, model)
    print(f"import: {LAYERS} LSTM nodes unrolled into {STEPS} tagged steps each", flush=True)

    losses = {}
    for k in (1, 4):
        plan = env.path(f"k{k}", "plan.bin")
        E.run_tool([env.tofuc, model, "--gpus", k, "-o", plan])
        report = env.path(f"k{k}", "report.json")
        cmd = [env.tofu_run, plan, "--steps", 2, "--report", report, "--quiet"]
        dump = env.path(f"k{k}", "dump")
        if k == 1:
            cmd += ["--dump", dump]
        E.run_tool(cmd)
        losses[k] = E.report_losses(E.load_json(report), report)
        if k == 1:
            ref_loss, ref_grads = torch_reference(dump)
            d = abs(losses[1][0] - ref_loss) / abs(ref_loss)
            E.check(d <= GRAD_TOL, f"loss {losses[1][0]} vs torch {ref_loss} (rel {d:.2e})")
            for name, ref in ref_grads.items():
                got = np.load(os.path.join(dump, f"grad.{E.dump_name(name)}.npy"))
                d = E.rel_diff(got, ref)
                E.check(d <= GRAD_TOL, f"gradient of {name} differs from torch by rel {d:.3e}")
            print(f"k=1: loss and {len(ref_grads)} gradients match torch.nn.LSTM", flush=True)
    d = E.rel_diff(losses[4], losses[1])
    E.check(d <= LOSS_TOL, f"k=4 losses {losses[4]} vs k=1 {losses[1]} (rel {d:.2e})")
    print(f"k=4: two-step losses match k=1 (rel {d:.1e})", flush=True)


if __name__ == "__main__":
    E.main_wrapper(main)
