#!/usr/bin/python3
"""e2e.lm_labels_vs_torch: language models with the ``.view(-1)`` labels pattern train as in PyTorch.

An ``nn.Embedding`` (12 tokens, width 6) -> ``nn.LSTM`` or ``nn.GRU``
(hidden 8, batch_first) -> ``nn.Linear`` to the 12 tokens language model
computes its loss inside ``forward`` as language models do::

    F.cross_entropy(logits.view(-1, V), targets.view(-1))

and is exported by ``torch.onnx.export(..., training=TrainingMode.TRAINING,
do_constant_folding=False)``: the int64 ``targets`` input [B, T] reaches
SoftmaxCrossEntropyLoss through a Reshape (with ``ignore_index = -100``),
the ``tokens`` input [B, T] reaches the embedding's Gather. Before tofuc
looked through shape-only ops this import failed ("integer graph input
'targets' is neither the labels of a loss nor ...").

For each cell, at k = 1 and k = 4: 3 SGD steps (lr 0.5) on 3 fixed batches
fed with ``tofu-run --data`` (targets holding some -100: positions that do
not count, as in PyTorch) equal torch's SGD on the same batches (every
step's loss), and the step-1 gradients (``--dump``) equal torch autograd's.

Everything runs in float64 (TOL 1e-9): torch's SGD and autograd in
float64 against the float64 plan.

Out-of-range indices fed with ``--data`` stop tofu-run with an error that
names the file, the input and the value, where a kernel would otherwise
read another row or padding: a token id of 12 (the table has 12 rows) and a
label of 12 (12 classes; -100 is the only other value the loss takes). A
token id of -12 (the first row counted from the end, as ONNX Gather takes
it) is accepted.
"""
import os

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import e2e_common as E

V, EMBED, HIDDEN, B, T = 12, 6, 8, 3, 5
STEPS = 3
LR = 0.5
DTYPE = torch.float64
TOL = 1e-9


class LanguageModel(nn.Module):
    """Embedding -> LSTM/GRU -> Linear, with the loss inside forward."""

    def __init__(self, cell):
        super().__init__()
        self.emb = nn.Embedding(V, EMBED)
        self.rnn = (nn.LSTM if cell == "lstm" else nn.GRU)(EMBED, HIDDEN, batch_first=True)
        self.out = nn.Linear(HIDDEN, V)

    def forward(self, tokens, targets):
        h, _ = self.rnn(self.emb(tokens))
        logits = self.out(h)
        return F.cross_entropy(logits.view(-1, V), targets.view(-1))


def batches():
    """STEPS batches of (tokens, targets), targets with some -100."""
    rng = np.random.default_rng(14)
    out = []
    for _ in range(STEPS):
        tokens = rng.integers(0, V, size=(B, T)).astype(np.int64)
        targets = rng.integers(0, V, size=(B, T)).astype(np.int64)
        targets[rng.random((B, T)) < 0.2] = -100
        targets[0, 0] = -100
        out.append((tokens, targets))
    return out


def write_data(folder, data):
    for i, (tokens, targets) in enumerate(data):
        d = os.path.join(folder, f"batch_{i}")
        os.makedirs(d, exist_ok=True)
        np.save(os.path.join(d, "tokens.npy"), tokens)
        np.save(os.path.join(d, "targets.npy"), targets)


def torch_reference(model, data):
    """Losses of STEPS SGD steps and the step-1 gradients, in torch."""
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    losses, grads = [], None
    for tokens, targets in data:
        opt.zero_grad()
        loss = model(torch.from_numpy(tokens), torch.from_numpy(targets))
        loss.backward()
        losses.append(loss.item())
        if grads is None:
            grads = {n: p.grad.detach().double().numpy().copy()
                     for n, p in model.named_parameters()}
        opt.step()
    return np.array(losses), grads


def check_cell(env, cell, data):
    torch.manual_seed(3)
    model = LanguageModel(cell).to(DTYPE)
    model.train()
    path = env.path(cell, "model.onnx")
    tokens, targets = (torch.from_numpy(a) for a in data[0])
    torch.onnx.export(model, (tokens, targets), path, input_names=["tokens", "targets"],
                      output_names=["loss"], opset_version=14,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    ops = [n.op_type for n in E.load_onnx(path).graph.node]
    E.check("Reshape" in ops and "SoftmaxCrossEntropyLoss" in ops,
            f"{cell}: the export lacks the Reshape -> SoftmaxCrossEntropyLoss pattern: {ops}")
    ref_losses, ref_grads = torch_reference(model, data)
    folder = env.path(cell, "data", "x")[:-2]
    write_data(folder, data)
    for k in (1, 4):
        plan = env.path(cell, f"k{k}", "plan.bin")
        dump = env.path(cell, f"k{k}", "dump")
        report = env.path(cell, f"k{k}", "r.json")
        E.run_tool([env.tofuc, path, "--gpus", k, "--lr", LR, "-o", plan])
        if k == 1:
            listing = E.run_tool([env.tofu_run, plan, "--dump-plan"], quiet=True).stdout
            E.check(any(line.split()[:2] == ["targets", "label"] for line in listing.splitlines()),
                    f"{cell}: 'targets' is not a label tensor of the plan:\n{listing}")
        E.run_tool([env.tofu_run, plan, "--steps", STEPS, "--data", folder, "--dump", dump,
                    "--report", report, "--quiet"])
        losses = E.report_losses(E.load_json(report), report)
        d = E.rel_diff(losses, ref_losses)
        print(f"{cell} k={k}: losses {losses} torch {ref_losses} rel {d:.2e}")
        E.check(d <= TOL, f"{cell} k={k}: losses {losses} differ from torch's {ref_losses} "
                f"(rel {d:.2e} > {TOL})")
        worst = (0.0, None)
        for name, ref in ref_grads.items():
            got = np.load(os.path.join(dump, f"grad.{E.dump_name(name)}.npy"))
            worst = max(worst, (E.rel_diff(got.astype(np.float64), ref), name),
                        key=lambda w: w[0])
        print(f"{cell} k={k}: step-1 gradients, worst rel {worst[0]:.2e} ({worst[1]})")
        E.check(worst[0] <= TOL, f"{cell} k={k}: gradient of {worst[1]} differs from torch "
                f"autograd by rel {worst[0]:.2e} > {TOL}")
    return env.path(cell, "k1", "plan.bin")


def check_out_of_range(env, plan, data):
    """Token ids and labels outside their range stop tofu-run clearly."""
    def run(tag, batch1, expect_rc):
        folder = env.path("range", tag, "x")[:-2]
        write_data(folder, [data[0], batch1])
        return E.run_tool([env.tofu_run, plan, "--steps", 2, "--data", folder, "--quiet"],
                          expect_rc=expect_rc), folder

    tokens, targets = (a.copy() for a in data[1])
    tokens[1, 2] = V  # element 7
    res, folder = run("token", (tokens, targets), 1)
    want = (f"--data: '{folder}/batch_1/tokens.npy': token id {V} at index 7 of input "
            f"'tokens' is outside [-{V}, {V})")
    E.check(want in res.stderr and "error: step 2: " in res.stderr,
            f"out-of-range token id: expected step 2 and {want!r} in:\n{res.describe()}")

    tokens, targets = (a.copy() for a in data[1])
    targets[2, 4] = V  # element 14
    res, folder = run("label", (tokens, targets), 1)
    want = (f"--data: '{folder}/batch_1/targets.npy': label {V} at index 14 is outside "
            f"[0, {V}) (labels 'targets', {V} classes; the loss ignores only -100)")
    E.check(want in res.stderr and "error: step 2: " in res.stderr,
            f"out-of-range label: expected step 2 and {want!r} in:\n{res.describe()}")

    tokens, targets = (a.copy() for a in data[1])
    tokens[0, 0] = -V  # row 0, counted from the end
    run("negative", (tokens, targets), 0)
    print("out-of-range token ids and labels are refused; -V and -100 are accepted")


def main():
    env = E.parse_args(__doc__.splitlines()[1])
    env.require_tools()
    data = batches()
    plans = {cell: check_cell(env, cell, data) for cell in ("lstm", "gru")}
    check_out_of_range(env, plans["lstm"], data)


if __name__ == "__main__":
    E.main_wrapper(main)
