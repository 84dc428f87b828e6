#!/usr/bin/python3
"""Writes RNN-L-H: an L-layer LSTM language model with hidden size H,
unrolled over a fixed number of time steps (20 by default), as in
Józefowicz et al. 2016 and the Tofu paper's RNN benchmark (§7: RNN-6..10,
hidden 4K..8K, 20 steps).

Graph (opset 17), per layer l and time step t, an explicit LSTM cell::

    gates = x_t · W_l + h_{t-1} · R_l + b_l                 [B, 4H]  (MatMul, Add)
    i, f, g, o = Slice(gates) (four column blocks)             (i f g o, PyTorch order)
    c_t = Sigmoid(f) * c_{t-1} + Sigmoid(i) * Tanh(g)        (Mul, Add)
    h_t = Sigmoid(o) * Tanh(c_t)

with h_0 = c_0 = 0 (so step 0 has no recurrent terms). The input is
``input`` [B, T, E] (float32, the embedded tokens: tofuc takes integer graph
inputs only as class labels, so the embedding lookup is left to the data
pipeline), split into T steps. The last layer's h_t are stacked to
[B, T, H], projected to the vocabulary (Gemm, [B*T, V]) and scored with
SoftmaxCrossEntropyLoss against ``labels`` [B*T] (int64, the next token of
each position); the graph's single output is the scalar ``loss``.

Weights: W_l [E or H, 4H], R_l [H, 4H], b_l [4H] uniform in ±1/sqrt(H)
(PyTorch's LSTM init); the projection [V, H] + [V]. Node names are
``l<l>.t<t>.<what>`` so each cell's ops can be told apart.

``--form cells`` (the default) writes the explicit cells above, built only
from ops with TDL specs. ``--form lstm`` writes one ONNX ``LSTM`` node per
layer instead (weights in ONNX's layout and i, o, f, c gate order:
``lstm.l<l>.W`` [1, 4H, E], ``.R`` [1, 4H, H], ``.B`` [1, 8H]); tofuc unrolls
each into per-step cells tagged ``tofu.timestep`` (docs/RecurrentUnrolling.md).

Usage::

    /usr/bin/python3 examples/rnn/make_rnn.py --layers 2 --hidden 64 -o rnn-2-64.onnx
    /usr/bin/python3 examples/rnn/make_rnn.py --layers 8 --hidden 8192 --batch 512 \\
        --no-weights -o rnn-8-8k.onnx      # 17 GB of weights, graph only
"""
import argparse
import os
import sys

from onnx import TensorProto

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import onnx_builder as ob  # noqa: E402


def build(layers, hidden, steps, batch, embed, vocab, seed=0, form="cells"):
    """The RNN-L-H language model as a GraphBuilder."""
    g = ob.GraphBuilder(f"rnn_{layers}_{hidden}", seed)
    H, T, B = hidden, steps, batch
    x = g.input("input", TensorProto.FLOAT, [B, T, embed])
    labels = g.input("labels", TensorProto.INT64, [B * T])
    bound = 1.0 / H ** 0.5
    proj_w = g.weight("proj.weight", [vocab, H], "uniform", bound)
    proj_b = g.weight("proj.bias", [vocab], "zeros")
    if form == "lstm":
        seq = _onnx_lstm_layers(g, x, layers, H, T, B, embed, bound)
        return _head(g, seq, labels, proj_w, proj_b, B, T, H)
    W = [g.weight(f"lstm.l{l}.W", [embed if l == 0 else H, 4 * H], "uniform", bound)
         for l in range(layers)]
    R = [g.weight(f"lstm.l{l}.R", [H, 4 * H], "uniform", bound) for l in range(layers)]
    bias = [g.weight(f"lstm.l{l}.b", [4 * H], "uniform", bound) for l in range(layers)]

    # Time steps of the input: Split along T, squeeze the unit dimension.
    ones = g.constant([1] * T, name="split.steps")
    axis1 = g.constant([1], name="axes.1")
    pieces = g.op("Split", [x, ones], "input.split", outputs=T, axis=1) if T > 1 else [x]
    seq = [g.op("Squeeze", [p, axis1], f"input.t{t}") for t, p in enumerate(pieces)]

    # Gate q is columns [qH, (q+1)H) of the gates (Slice, not one 4-way
    # Split: step 0 does not use f, and tofuc's Split gradient needs every
    # output's gradient).
    starts = [g.constant([q * H], name=f"gate{q}.start") for q in range(4)]
    ends = [g.constant([(q + 1) * H], name=f"gate{q}.end") for q in range(4)]
    for l in range(layers):
        h = c = None
        outs = []
        for t in range(T):
            p = f"l{l}.t{t}"
            gates = g.op("MatMul", [seq[t], W[l]], f"{p}.xW")
            if h is not None:
                gates = g.op("Add", [gates, g.op("MatMul", [h, R[l]], f"{p}.hR")],
                             f"{p}.xW_hR")
            gates = g.op("Add", [gates, bias[l]], f"{p}.gates")
            i, f, cand, o = (g.op("Slice", [gates, starts[q], ends[q], axis1], f"{p}.{what}")
                             for q, what in enumerate(("gate_i", "gate_f", "gate_g", "gate_o")))
            i = g.op("Sigmoid", [i], f"{p}.i")
            o = g.op("Sigmoid", [o], f"{p}.o")
            cand = g.op("Tanh", [cand], f"{p}.g")
            c_new = g.op("Mul", [i, cand], f"{p}.ig")
            if c is not None:
                f = g.op("Sigmoid", [f], f"{p}.f")
                c_new = g.op("Add", [g.op("Mul", [f, c], f"{p}.fc"), c_new], f"{p}.c")
            c = c_new
            h = g.op("Mul", [o, g.op("Tanh", [c], f"{p}.tanh_c")], f"{p}.h")
            outs.append(h)
        seq = outs

    axis1 = g.constant([1], name="axes.out")
    stacked = [g.op("Unsqueeze", [h, axis1], f"out.t{t}") for t, h in enumerate(seq)]
    hs = g.op("Concat", stacked, "out.stack", axis=1) if T > 1 else stacked[0]
    return _head(g, hs, labels, proj_w, proj_b, B, T, H)


def _onnx_lstm_layers(g, x, layers, H, T, B, embed, bound):
    """One ONNX LSTM node per layer (tofuc unrolls them into cells tagged with
    their time step). Weights in ONNX's layout and gate order (i, o, f, c):
    W [1, 4H, E or H], R [1, 4H, H], B [1, 8H] (input and recurrent biases).
    Returns the last layer's output as [B, T, H]."""
    seq = g.op("Transpose", [x], "input.time_major", perm=[1, 0, 2])   # [T, B, E]
    axis1 = g.constant([1], name="axes.dir")
    for l in range(layers):
        W = g.weight(f"lstm.l{l}.W", [1, 4 * H, embed if l == 0 else H], "uniform", bound)
        R = g.weight(f"lstm.l{l}.R", [1, 4 * H, H], "uniform", bound)
        b = g.weight(f"lstm.l{l}.B", [1, 8 * H], "uniform", bound)
        y = g.op("LSTM", [seq, W, R, b], f"lstm.l{l}", hidden_size=H)   # [T, 1, B, H]
        seq = g.op("Squeeze", [y, axis1], f"lstm.l{l}.Y")                # [T, B, H]
    return g.op("Transpose", [seq], "out.batch_major", perm=[1, 0, 2])


def _head(g, hs, labels, proj_w, proj_b, B, T, H):
    """[B, T, H] -> projection -> cross-entropy; the scalar output ``loss``."""
    flat = g.op("Reshape", [hs, g.constant([B * T, H], name="shape.BT_H")], "out.flat")
    logits = g.op("Gemm", [flat, proj_w, proj_b], "proj", transB=1)
    g.op("SoftmaxCrossEntropyLoss", [logits, labels], "loss", reduction="mean")
    g.output("loss", TensorProto.FLOAT, [])
    return g


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=2, help="LSTM layers L")
    parser.add_argument("--hidden", type=int, default=64, help="hidden size H")
    parser.add_argument("--steps", type=int, default=20, help="unrolled time steps T")
    parser.add_argument("--batch", type=int, default=8, help="batch size B")
    parser.add_argument("--embed", type=int, default=0,
                        help="input (embedding) size E; 0 means E = H")
    parser.add_argument("--vocab", type=int, default=1000, help="vocabulary size V")
    parser.add_argument("--form", choices=["cells", "lstm"], default="cells",
                        help="how the LSTM is written (see the docstring)")
    ob.add_common_arguments(parser)
    args = parser.parse_args(argv)
    if args.embed == 0:
        args.embed = args.hidden
    ob.check_positive(parser, args, ["layers", "hidden", "steps", "batch", "embed", "vocab"])
    g = build(args.layers, args.hidden, args.steps, args.batch, args.embed, args.vocab,
              args.seed, args.form)
    data = g.save(args.output, weights=not args.no_weights)
    ob.report(g, args.output, data, not args.no_weights)
    return 0


if __name__ == "__main__":
    sys.exit(main())
