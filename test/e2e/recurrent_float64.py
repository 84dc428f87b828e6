#!/usr/bin/python3
"""e2e.recurrent_float64: float64 LSTM, GRU and RNN models exported by torch train as in torch.

tofuc unrolls ONNX LSTM, GRU and RNN nodes into per-step cells
(lib/Import/RecurrentUnrolling.cpp) in the element type of their input X,
float32 or float64. Each model here is a small language model: ``nn.Embedding``
of 16 tokens (width 6) -> a 2-layer recurrent module (hidden 5, 4 time
steps, batch 3) -> ``nn.Linear`` on the last step's output -> cross-entropy
against a plain [batch] ``labels`` input. It is made float64 with
``model.double()`` and exported with ``torch.onnx.export(...,
training=TrainingMode.TRAINING, do_constant_folding=False)`` at opset 14,
so the ONNX file holds what the exporter writes (gate reordering with
Slice/Concat, Expand'ed zero initial states).

For k = 1 and k = 4, tofuc compiles it (SGD, lr 0.1), tofu-run runs 3 steps
on one fixed batch (``--data``) with ``--dump``, and

* the step-1 gradient of every parameter equals torch autograd's on the
  same weights and batch within 1e-9 (``E.rel_diff``: the largest absolute
  difference over the reference's largest magnitude);
* the 3 losses equal those of 3 torch SGD steps within 1e-9 relative.

A float32 LSTM is checked the same way (1e-4) so the float32 path stays.
Two hand-built ONNX ``GRU`` nodes without ``initial_h`` (torch's exporter
always passes one), ``linear_before_reset`` 0 and 1, train one step as the
ONNX GRU equations written out in torch (loss and gradients, 1e-9): the
importer folds the biases outside the recurrence into the input projection
and step 0 has no recurrent term. ``--only NAME`` runs one model
(``onnx_gru``: both nodes).
"""
import os

import numpy as np
import torch
from torch import nn

import e2e_common as E

VOCAB, EMBED, HIDDEN, LAYERS, STEPS, BATCH = 16, 6, 5, 2, 4, 3
LR = 0.1
SGD_STEPS = 3
TOL = {torch.float64: 1e-9, torch.float32: 1e-4}


class RecurrentLm(nn.Module):
    """Token ids [T, B] -> logits of the last step [B, VOCAB] -> cross-entropy."""

    def __init__(self, cell):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, EMBED)
        self.rnn = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}[cell](EMBED, HIDDEN, LAYERS)
        self.out = nn.Linear(HIDDEN, VOCAB)

    def forward(self, tokens, labels):
        y, _ = self.rnn(self.emb(tokens))
        return nn.functional.cross_entropy(self.out(y[-1]), labels)


MODELS = {"lstm": ("lstm", torch.float64), "gru": ("gru", torch.float64),
          "rnn": ("rnn", torch.float64), "lstm_float32": ("lstm", torch.float32)}


def torch_steps(model, tokens, labels):
    """Step-1 gradients and the losses of SGD_STEPS plain SGD steps."""
    params = dict(model.named_parameters())
    losses, grads = [], None
    for step in range(SGD_STEPS):
        model.zero_grad()
        loss = model(tokens, labels)
        loss.backward()
        losses.append(loss.item())
        if step == 0:
            grads = {p: t.grad.detach().clone().numpy() for p, t in params.items()}
        with torch.no_grad():
            for t in params.values():
                t -= LR * t.grad
    return np.array(losses), grads


def check_model(env, name):
    cell, dtype = MODELS[name]
    tol = TOL[dtype]
    torch.manual_seed(0)
    model = RecurrentLm(cell).to(dtype)
    model.train()
    rng = np.random.default_rng(1)
    tokens = rng.integers(0, VOCAB, size=(STEPS, BATCH)).astype(np.int64)
    labels = rng.integers(0, VOCAB, size=(BATCH,)).astype(np.int64)
    path = env.path(name, "model.onnx")
    torch.onnx.export(model, (torch.from_numpy(tokens), torch.from_numpy(labels)), path,
                      input_names=["input", "labels"], output_names=["loss"],
                      opset_version=14, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)
    exported = E.load_onnx(path)
    kinds = {n.op_type for n in exported.graph.node}
    E.check(cell.upper() in kinds, f"{name}: the export has no {cell.upper()} node: {kinds}")
    data = env.path(name, "data", "batch_0")
    os.makedirs(data, exist_ok=True)
    np.save(os.path.join(data, "input.npy"), tokens)
    np.save(os.path.join(data, "labels.npy"), labels)

    params = dict(model.named_parameters())
    losses = {}
    for k in (1, 4):
        plan, dump = env.path(name, f"k{k}", "plan.bin"), env.path(name, f"k{k}", "dump")
        report = env.path(name, f"k{k}", "report.json")
        E.run_tool([env.tofuc, path, "--gpus", k, "--lr", LR, "-o", plan])
        E.run_tool([env.tofu_run, plan, "--steps", SGD_STEPS, "--data", env.path(name, "data"),
                    "--dump", dump, "--report", report, "--quiet"])
        losses[k] = E.report_losses(E.load_json(report), report)
        if k == 1:
            # torch from the weights tofu-run started with (its dump).
            with torch.no_grad():
                for p, t in params.items():
                    f = os.path.join(dump, f"param.{E.dump_name(p)}.npy")
                    E.check(os.path.exists(f), f"{name}: tofu-run dumped no parameter {p}")
                    t.copy_(torch.from_numpy(np.load(f)))
            ref_losses, ref_grads = torch_steps(model, torch.from_numpy(tokens),
                                                torch.from_numpy(labels))
        for p, ref in ref_grads.items():
            got = np.load(os.path.join(dump, f"grad.{E.dump_name(p)}.npy"))
            E.check(got.dtype == ref.dtype,
                    f"{name} k={k}: gradient of {p} is {got.dtype}, the model {ref.dtype}")
            d = E.rel_diff(got, ref)
            E.check(d <= tol, f"{name} k={k}: gradient of {p} differs from torch by rel "
                    f"{d:.3e} (tolerance {tol:.0e})")
        d = float(np.max(np.abs(losses[k] - ref_losses) / np.abs(ref_losses)))
        E.check(d <= tol, f"{name} k={k}: losses {losses[k].tolist()} vs torch "
                f"{ref_losses.tolist()} (rel {d:.2e}, tolerance {tol:.0e})")
        print(f"{name} k={k}: {len(ref_grads)} step-1 gradients and {SGD_STEPS} SGD losses "
              f"match torch (loss rel {d:.1e})", flush=True)


def onnx_gru_reference(x, W, R, B, Wout, labels, lbr):
    """ONNX GRU (gate order z, r, h; no initial_h: h0 = 0), the last state
    through Wout, cross-entropy; in torch float64, with autograd."""
    H = R.shape[-1]
    Wz, Wr, Wh = W[0].split(H)
    Rz, Rr, Rh = R[0].split(H)
    Wbz, Wbr, Wbh, Rbz, Rbr, Rbh = B[0].split(H)
    h = torch.zeros(x.shape[1], H, dtype=x.dtype)
    for t in range(x.shape[0]):
        z = torch.sigmoid(x[t] @ Wz.T + h @ Rz.T + Wbz + Rbz)
        r = torch.sigmoid(x[t] @ Wr.T + h @ Rr.T + Wbr + Rbr)
        if lbr:
            cand = torch.tanh(x[t] @ Wh.T + r * (h @ Rh.T + Rbh) + Wbh)
        else:
            cand = torch.tanh(x[t] @ Wh.T + (r * h) @ Rh.T + Rbh + Wbh)
        h = (1 - z) * cand + z * h
    return nn.functional.cross_entropy(h @ Wout, labels)


def check_onnx_gru(env, lbr):
    """An ONNX GRU node without initial_h (linear_before_reset = lbr) trains
    as its equations in torch: the unrolled cells fold the biases outside
    the recurrence into the input projection, and step 0 has no h."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    name = f"onnx_gru_lbr{lbr}"
    rng = np.random.default_rng(2 + lbr)
    T, N, I, H, V = 3, 4, 5, 6, 7
    init = {"W": rng.normal(0, 0.5, (1, 3 * H, I)), "R": rng.normal(0, 0.5, (1, 3 * H, H)),
            "B": rng.normal(0, 0.5, (1, 6 * H)), "Wout": rng.normal(0, 0.5, (H, V))}
    x = rng.normal(0, 1, (T, N, I))
    labels = rng.integers(0, V, size=(N,)).astype(np.int64)
    graph = helper.make_graph(
        [helper.make_node("GRU", ["x", "W", "R", "B"], ["Y", "Y_h"], name="gru",
                          hidden_size=H, linear_before_reset=lbr),
         helper.make_node("Reshape", ["Y_h", "shape"], ["h2d"], name="flat"),
         helper.make_node("MatMul", ["h2d", "Wout"], ["logits"], name="out"),
         helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "labels"], ["loss"],
                          name="xent")],
        name, [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [T, N, I]),
               helper.make_tensor_value_info("labels", TensorProto.INT64, [N])],
        [helper.make_tensor_value_info("loss", TensorProto.DOUBLE, [])],
        [numpy_helper.from_array(v.astype(np.float64), k) for k, v in init.items()] +
        [numpy_helper.from_array(np.array([N, H], dtype=np.int64), "shape")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    path = env.path(name, "model.onnx")
    onnx.save(model, path)
    data = env.path(name, "data", "batch_0")
    os.makedirs(data, exist_ok=True)
    np.save(os.path.join(data, "x.npy"), x)
    np.save(os.path.join(data, "labels.npy"), labels)
    params = {k: torch.from_numpy(v.copy()).requires_grad_() for k, v in init.items()}
    loss = onnx_gru_reference(torch.from_numpy(x), params["W"], params["R"], params["B"],
                              params["Wout"], torch.from_numpy(labels), lbr)
    loss.backward()
    tol = TOL[torch.float64]
    for k in (1, 4):
        plan, dump = env.path(name, f"k{k}", "plan.bin"), env.path(name, f"k{k}", "dump")
        report = env.path(name, f"k{k}", "report.json")
        E.run_tool([env.tofuc, path, "--gpus", k, "--lr", LR, "-o", plan])
        E.run_tool([env.tofu_run, plan, "--steps", 1, "--data", env.path(name, "data"),
                    "--dump", dump, "--report", report, "--quiet"])
        got = E.report_losses(E.load_json(report), report)[0]
        d = abs(got - loss.item()) / abs(loss.item())
        E.check(d <= tol, f"{name} k={k}: loss {got} vs torch {loss.item()} (rel {d:.2e})")
        for p, t in params.items():
            g = np.load(os.path.join(dump, f"grad.{E.dump_name(p)}.npy"))
            d = E.rel_diff(g, t.grad.numpy())
            E.check(d <= tol, f"{name} k={k}: gradient of {p} differs from torch by rel "
                    f"{d:.3e} (tolerance {tol:.0e})")
        print(f"{name} k={k}: loss and {len(params)} gradients match the GRU equations "
              f"in torch", flush=True)


def main():
    def extra(parser):
        parser.add_argument("--only", choices=sorted(MODELS) + ["onnx_gru"],
                            help="check this model only")
    env = E.parse_args(__doc__.splitlines()[1], extra=extra)
    env.require_tools()
    for name in MODELS:
        if not env.args.only or env.args.only == name:
            check_model(env, name)
    if not env.args.only or env.args.only == "onnx_gru":
        for lbr in (0, 1):
            check_onnx_gru(env, lbr)


if __name__ == "__main__":
    E.main_wrapper(main)
