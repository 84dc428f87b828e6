"""The GPT of make_gpt.py as a PyTorch module, for step-time comparisons.

``Gpt(layers, hidden, heads, seq, vocab, batch)`` computes what
``make_gpt.build`` writes as ONNX, op for op: learned positions added to the
embedded input, pre-LayerNorm blocks of causal multi-head self-attention
(explicit ``q @ kᵀ``, ``Where`` mask with -1e4, ``Softmax``, ``@ v``: the
graph's ops, not a fused attention kernel) and a 4x MLP with exact GELU, a
final LayerNorm, the vocabulary projection and the mean softmax
cross-entropy. Weights are stored as in the ONNX graph ([in, out] matrices,
the parameter names of its initializers), so ``load_onnx_weights`` copies a
make_gpt model's weights in and the two can be compared
(test/e2e/example_models.py checks loss and gradients against the ONNX graph
evaluated op by op). GELU and LayerNorm use PyTorch's own functions, as a
PyTorch user would write them (same values).

bench/gpu/torch_step.py times its SGD step on the GPU against the bundle's
gpt plans. Works with torch 1.13 (this machine) and 2.x.
"""
import math

import torch
import torch.nn.functional as F


class Gpt(torch.nn.Module):
    """make_gpt.build's decoder; ``forward(input [B, S, D], labels [B*S])``
    returns the mean cross-entropy loss."""

    def __init__(self, layers, hidden, heads, seq, vocab, batch, seed=0):
        super().__init__()
        if hidden % heads:
            raise ValueError(f"heads {heads} must divide hidden {hidden}")
        self.layers, self.D, self.nh, self.S, self.V, self.B = (
            layers, hidden, heads, seq, vocab, batch)
        g = torch.Generator().manual_seed(seed)
        std, out_std = 0.02, 0.02 / (2 * layers) ** 0.5
        D = hidden

        def normal(shape, s):
            return torch.nn.Parameter(torch.randn(*shape, generator=g) * s)

        def const(shape, v):
            return torch.nn.Parameter(torch.full(shape, float(v)))

        # Parameters by their ONNX initializer names (self.onnx_names); a
        # ParameterDict key may not hold ".", so it is stored with "_".
        p = {"pos": normal((seq, D), std)}
        for l in range(layers):
            h = f"h{l}"
            for ln in ("ln1", "ln2"):
                p[f"{h}.{ln}.weight"] = const((D,), 1)
                p[f"{h}.{ln}.bias"] = const((D,), 0)
            for name, fi, fo, s in (("attn.qkv", D, 3 * D, std), ("attn.proj", D, D, out_std),
                                    ("mlp.fc", D, 4 * D, std), ("mlp.proj", 4 * D, D, out_std)):
                p[f"{h}.{name}.weight"] = normal((fi, fo), s)
                p[f"{h}.{name}.bias"] = const((fo,), 0)
        p["ln_f.weight"] = const((D,), 1)
        p["ln_f.bias"] = const((D,), 0)
        p["lm_head.weight"] = normal((D, vocab), std)
        self.onnx_names = list(p)
        self.p = torch.nn.ParameterDict({k.replace(".", "_"): v for k, v in p.items()})
        # Where(causal, s, -1e4) as masked_fill of the positions above the
        # diagonal (no scalar tensor to copy to the device every step).
        self.register_buffer("above", torch.tril(torch.ones(seq, seq)) <= 0.5,
                             persistent=False)

    def load_onnx_weights(self, initializers):
        """Copies {onnx name: numpy array} (make_gpt's initializers) in; every
        parameter must be there with its shape."""
        if sorted(initializers) != sorted(self.onnx_names):
            raise ValueError(f"initializers {sorted(initializers)} are not make_gpt's "
                             f"{sorted(self.onnx_names)}")
        with torch.no_grad():
            for name in self.onnx_names:
                self._w(name).copy_(torch.from_numpy(initializers[name]))

    def _w(self, name):
        return self.p[name.replace(".", "_")]

    def _ln(self, x, name):
        return F.layer_norm(x, (self.D,), self._w(name + ".weight"), self._w(name + ".bias"),
                            eps=1e-5)

    def _linear(self, x, name):
        return x @ self._w(name + ".weight") + self._w(name + ".bias")

    def forward(self, input, labels):
        B, S, D, nh = self.B, self.S, self.D, self.nh
        dh = D // nh
        x = input + self.p["pos"]
        for l in range(self.layers):
            h = f"h{l}"
            qkv = self._linear(self._ln(x, f"{h}.ln1"), f"{h}.attn.qkv")
            q, k, v = qkv.split(D, dim=2)
            q = q.reshape(B, S, nh, dh).permute(0, 2, 1, 3)
            k = k.reshape(B, S, nh, dh).permute(0, 2, 3, 1)
            v = v.reshape(B, S, nh, dh).permute(0, 2, 1, 3)
            s = (q @ k) * (1.0 / math.sqrt(dh))
            s = s.masked_fill(self.above, -1e4)
            ctx = torch.softmax(s, dim=-1) @ v
            ctx = ctx.permute(0, 2, 1, 3).reshape(B, S, D)
            x = x + self._linear(ctx, f"{h}.attn.proj")
            m = F.gelu(self._linear(self._ln(x, f"{h}.ln2"), f"{h}.mlp.fc"))
            x = x + self._linear(m, f"{h}.mlp.proj")
        logits = self._ln(x, "ln_f").reshape(B * S, D) @ self.p["lm_head_weight"]
        return F.cross_entropy(logits, labels)
