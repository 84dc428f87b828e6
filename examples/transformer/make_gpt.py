#!/usr/bin/python3
"""Writes a GPT-style Transformer decoder language model (GPT-2 layout:
pre-LayerNorm blocks of causal multi-head self-attention and a 4x MLP).

Graph (opset 17), for ``input`` [B, S, D] (float32, the embedded tokens:
tofuc takes integer graph inputs only as class labels, so the token
embedding lookup is left to the data pipeline)::

    x = input + pos                                   (learned positions [S, D])
    per layer:
      a   = LayerNormalization(x)
      qkv = a · Wqkv + bqkv, split into q, k, v       [B, S, D] each
      q, k, v -> Reshape [B, S, heads, D/heads] -> Transpose to [B, heads, S, D/heads]
      s   = (q · kᵀ) * 1/sqrt(D/heads)                [B, heads, S, S]
      s   = Where(causal, s, -1e4)                    (causal = lower-triangular [S, S] > 0.5)
      ctx = Softmax(s) · v -> Transpose, Reshape [B, S, D]
      x   = x + ctx · Wo + bo
      m   = LayerNormalization(x) · W1 + b1           [B, S, 4D]
      m   = 0.5 · m · (1 + Erf(m / sqrt 2))           (exact GELU)
      x   = x + m · W2 + b2
    logits = LayerNormalization(x) · Wvocab           [B*S, V]
    loss   = SoftmaxCrossEntropyLoss(logits, labels [B*S])

Every matrix product is a MatMul (plus Add for the bias), so the
partitioner sees the plain GEMMs. Weights: normal with std 0.02 (GPT-2),
output projections std 0.02/sqrt(2·layers), biases 0, LayerNorm scale 1,
bias 0.

Usage::

    /usr/bin/python3 examples/transformer/make_gpt.py --layers 2 --hidden 64 \\
        --heads 4 --seq 16 --vocab 256 --batch 2 -o gpt-tiny.onnx
    /usr/bin/python3 examples/transformer/make_gpt.py --layers 48 --hidden 1600 \\
        --heads 25 --seq 1024 --vocab 50257 --no-weights -o gpt2-xl.onnx
"""
import argparse
import os
import sys

import numpy as np
from onnx import TensorProto

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import onnx_builder as ob  # noqa: E402


def build(layers, hidden, heads, seq, vocab, batch, seed=0):
    """The GPT decoder as a GraphBuilder."""
    g = ob.GraphBuilder(f"gpt_{layers}_{hidden}", seed)
    B, S, D, nh = batch, seq, hidden, heads
    dh = D // nh
    x = g.input("input", TensorProto.FLOAT, [B, S, D])
    labels = g.input("labels", TensorProto.INT64, [B * S])
    std, out_std = 0.02, 0.02 / (2 * layers) ** 0.5
    x = g.op("Add", [x, g.weight("pos", [S, D], "normal", std)], "embed.pos")

    heads_shape = g.constant([B, S, nh, dh], name="shape.heads")
    model_shape = g.constant([B, S, D], name="shape.model")
    qkv_sizes = g.constant([D, D, D], name="split.qkv")
    scale = g.constant(1.0 / dh ** 0.5, TensorProto.FLOAT, name="attn.scale")
    # The causal mask is computed from a float Constant:
    # causal[i, j] = lower[i, j] > 0.5.
    lower = g.constant(np.tril(np.ones((S, S), dtype=np.float32)), TensorProto.FLOAT,
                       name="attn.lower")
    causal = g.op("Greater", [lower, g.constant(0.5, TensorProto.FLOAT, name="attn.half")],
                  "attn.causal")
    masked = g.constant(-1e4, TensorProto.FLOAT, name="attn.masked")
    half = g.constant(0.5, TensorProto.FLOAT, name="gelu.half")
    one = g.constant(1.0, TensorProto.FLOAT, name="gelu.one")
    sqrt2 = g.constant(2.0 ** 0.5, TensorProto.FLOAT, name="gelu.sqrt2")

    def layer_norm(v, name):
        return g.op("LayerNormalization",
                    [v, g.weight(f"{name}.weight", [D], "ones"),
                     g.weight(f"{name}.bias", [D], "zeros")],
                    name, axis=-1, epsilon=1e-5)

    def linear(v, fan_in, fan_out, name, w_std):
        y = g.op("MatMul", [v, g.weight(f"{name}.weight", [fan_in, fan_out], "normal", w_std)],
                 f"{name}.matmul")
        return g.op("Add", [y, g.weight(f"{name}.bias", [fan_out], "zeros")], name)

    for l in range(layers):
        p = f"h{l}"
        a = layer_norm(x, f"{p}.ln1")
        qkv = linear(a, D, 3 * D, f"{p}.attn.qkv", std)
        q, k, v = g.op("Split", [qkv, qkv_sizes], f"{p}.attn.split", outputs=3, axis=2)
        q = g.op("Transpose", [g.op("Reshape", [q, heads_shape], f"{p}.attn.q.heads")],
                 f"{p}.attn.q", perm=[0, 2, 1, 3])
        k = g.op("Transpose", [g.op("Reshape", [k, heads_shape], f"{p}.attn.k.heads")],
                 f"{p}.attn.kT", perm=[0, 2, 3, 1])
        v = g.op("Transpose", [g.op("Reshape", [v, heads_shape], f"{p}.attn.v.heads")],
                 f"{p}.attn.v", perm=[0, 2, 1, 3])
        s = g.op("Mul", [g.op("MatMul", [q, k], f"{p}.attn.qk"), scale], f"{p}.attn.scaled")
        s = g.op("Where", [causal, s, masked], f"{p}.attn.masked")
        prob = g.op("Softmax", [s], f"{p}.attn.softmax", axis=-1)
        ctx = g.op("MatMul", [prob, v], f"{p}.attn.ctx")
        ctx = g.op("Reshape", [g.op("Transpose", [ctx], f"{p}.attn.ctx.T", perm=[0, 2, 1, 3]),
                               model_shape], f"{p}.attn.merge")
        x = g.op("Add", [x, linear(ctx, D, D, f"{p}.attn.proj", out_std)], f"{p}.res1")
        m = linear(layer_norm(x, f"{p}.ln2"), D, 4 * D, f"{p}.mlp.fc", std)
        erf = g.op("Erf", [g.op("Div", [m, sqrt2], f"{p}.mlp.scaled")], f"{p}.mlp.erf")
        m = g.op("Mul", [g.op("Mul", [m, half], f"{p}.mlp.half"),
                         g.op("Add", [erf, one], f"{p}.mlp.erf1")], f"{p}.mlp.gelu")
        x = g.op("Add", [x, linear(m, 4 * D, D, f"{p}.mlp.proj", out_std)], f"{p}.res2")

    x = layer_norm(x, "ln_f")
    flat = g.op("Reshape", [x, g.constant([B * S, D], name="shape.tokens")], "tokens")
    logits = g.op("MatMul", [flat, g.weight("lm_head.weight", [D, vocab], "normal", std)],
                  "lm_head")
    g.op("SoftmaxCrossEntropyLoss", [logits, labels], "loss", reduction="mean")
    g.output("loss", TensorProto.FLOAT, [])
    return g


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=2, help="decoder blocks")
    parser.add_argument("--hidden", type=int, default=64, help="model width D")
    parser.add_argument("--heads", type=int, default=4, help="attention heads (divides D)")
    parser.add_argument("--seq", type=int, default=16, help="sequence length S")
    parser.add_argument("--vocab", type=int, default=256, help="vocabulary size V")
    parser.add_argument("--batch", type=int, default=2, help="batch size B")
    ob.add_common_arguments(parser)
    args = parser.parse_args(argv)
    ob.check_positive(parser, args, ["layers", "hidden", "heads", "seq", "vocab", "batch"])
    if args.hidden % args.heads:
        parser.error(f"--heads {args.heads} must divide --hidden {args.hidden}")
    g = build(args.layers, args.hidden, args.heads, args.seq, args.vocab, args.batch,
              args.seed)
    data = g.save(args.output, weights=not args.no_weights)
    ob.report(g, args.output, data, not args.no_weights)
    return 0


if __name__ == "__main__":
    sys.exit(main())
