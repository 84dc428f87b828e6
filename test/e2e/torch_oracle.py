#!/usr/bin/python3
"""e2e.torch_oracle: the torch oracle used by grads_vs_torch is itself right.

Needs no tofuc/tofu-run, so it runs (and guards the other tests) even before
the tools exist. It proves that:

1. ``examples/mlp/make_mlp.py`` is deterministic: two exports with the default
   flags are byte-identical, and equal to the committed ``mlp.onnx``.
2. The committed model has the expected structure: Gemm(transB=1)+Relu x3 then
   SoftmaxCrossEntropyLoss(reduction=mean), inputs ``input``/``labels``, output ``loss``.
3. ``TorchGraph`` (the ONNX -> torch rebuild in e2e_common) reproduces the loss and
   every parameter gradient of the original ``torch.nn`` model that was exported,
   on a random batch, to float32 round-off.
"""

import os
import sys

import numpy as np

import e2e_common as E

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                        "examples", "mlp")


def main():
    env = E.parse_args(__doc__.splitlines()[1])
    import onnx
    import torch
    sys.path.insert(0, os.path.abspath(EXAMPLES))
    import make_mlp

    # 1. determinism of the generator and freshness of the committed file.
    a, b = env.path("a.onnx"), env.path("b.onnx")
    make_mlp.main(["-o", a])
    make_mlp.main(["-o", b])
    with open(a, "rb") as f:
        bytes_a = f.read()
    with open(b, "rb") as f:
        bytes_b = f.read()
    E.check(bytes_a == bytes_b, "make_mlp.py is not deterministic: two exports differ")
    E.check(os.path.isfile(env.model), f"model not found: {env.model}")
    with open(env.model, "rb") as f:
        committed = f.read()
    E.check(committed == bytes_a,
            f"{env.model} differs from a fresh `make_mlp.py` export with the defaults; "
            "regenerate it")

    # 2. structure.
    model = E.load_onnx(env.model)
    onnx.checker.check_model(model)
    ops = [n.op_type for n in model.graph.node]
    E.check(ops == ["Gemm", "Relu"] * 3 + ["SoftmaxCrossEntropyLoss"], f"unexpected ops {ops}")
    for n in model.graph.node:
        attrs = {x.name: onnx.helper.get_attribute_value(x) for x in n.attribute}
        if n.op_type == "Gemm":
            E.check(attrs.get("transB") == 1, f"{n.name}: transB != 1")
        if n.op_type == "SoftmaxCrossEntropyLoss":
            E.check(attrs.get("reduction") == b"mean", f"{n.name}: reduction != mean")
    E.check([i.name for i in model.graph.input][:2] == ["input", "labels"],
            f"inputs {[i.name for i in model.graph.input]}")
    E.check([o.name for o in model.graph.output] == ["loss"], "output is not 'loss'")

    # 3. TorchGraph == the torch.nn model it was exported from.
    torch.manual_seed(0)
    net = make_mlp.MLPWithLoss(make_mlp.build_mlp(64, 128, 10))
    x = torch.randn(64, 64)
    y = torch.randint(0, 10, (64,))
    ref_loss = net(x, y)
    ref_loss.backward()
    ref_grads = {name: p.grad.detach().numpy() for name, p in net.named_parameters()}

    inits = E.initializers(model)
    E.check(sorted(inits) == sorted(ref_grads),
            f"initializer names {sorted(inits)} != module parameters {sorted(ref_grads)}")
    for name, p in net.named_parameters():
        E.check(np.array_equal(inits[name], p.detach().numpy()),
                f"initializer {name} differs from the module's parameter")

    params = {n: torch.tensor(v, dtype=torch.float64, requires_grad=True)
              for n, v in inits.items()}
    tensors = dict(params, input=x.double(), labels=y)
    loss = E.TorchGraph(model).loss(tensors)
    loss.backward()
    d = E.rel_diff(loss.item(), ref_loss.item())
    print(f"loss: TorchGraph(float64) {loss.item():.8f}  torch.nn {ref_loss.item():.8f}  rel {d:.2e}")
    E.check(d <= 1e-6, f"TorchGraph loss differs from torch.nn: rel {d:.3e}")
    worst = max((E.rel_diff(params[n].grad.numpy(), g), n) for n, g in ref_grads.items())
    print(f"worst gradient rel diff: {worst[0]:.2e} ({worst[1]})")
    E.check(worst[0] <= 1e-5, f"TorchGraph gradient {worst[1]} differs: rel {worst[0]:.3e}")


if __name__ == "__main__":
    E.main_wrapper(main)
