#!/usr/bin/python3
"""e2e.cnn_vs_torch: a PyTorch CNN trains under tofu exactly as under PyTorch.

examples/cnn/cnn.onnx (Conv, ReLU, strided Conv, GlobalAveragePool, Flatten,
LayerNorm (an op with three outputs), Linear, cross-entropy; exported by
examples/cnn/make_cnn.py) runs these operators through the whole compiler:
TDL strategies for convolution,
partitioning, materialized fetches (halos and weight shards), and the
runtime's native convolution kernels and expression interpreter. For
k in 1, 2, 3 and 4 it checks

* step 1's loss and every parameter gradient (tofu-run --dump) against
  PyTorch autograd on the same weights and batch (relative difference 1e-4),
* that 3 training steps give the same losses for every k as for k = 1
  (relative difference 1e-5), and
* that measured communication equals the plan's.
"""
import os
import sys

import numpy as np
import torch

import e2e_common as E

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "cnn"))
import make_cnn  # noqa: E402

KS = (1, 2, 3, 4)
GRAD_TOL = 1e-4
LOSS_TOL = 1e-5


def torch_reference(model_path, dump):
    """Loss and gradients of the exported CNN in float64 PyTorch."""
    inits = E.initializers(E.load_onnx(model_path))
    weight = inits["net.0.weight"]
    net = make_cnn.build_cnn(weight.shape[1], weight.shape[0],
                             inits["net.7.weight"].shape[0]).double()
    # The export wraps the classifier as `net`, so ONNX names are "net." + name.
    state = {name: torch.from_numpy(np.load(os.path.join(dump, f"param.net.{name}.npy"))
                                    .astype(np.float64))
             for name in net.state_dict()}
    net.load_state_dict(state)
    x = torch.from_numpy(np.load(os.path.join(dump, "input.input.npy")).astype(np.float64))
    y = torch.from_numpy(np.load(os.path.join(dump, "input.labels.npy")))
    loss = torch.nn.functional.cross_entropy(net(x), y)
    loss.backward()
    return loss.item(), {"net." + n: p.grad.numpy() for n, p in net.named_parameters()}


def main():
    env = E.parse_args(__doc__.splitlines()[1])
    env.require_tools()
    losses = {}
    for k in KS:
        plan, dump = env.path(f"k{k}", "plan.bin"), env.path(f"k{k}", "dump", "x")
        dump = os.path.dirname(dump)
        E.compile_plan(env, k, plan)
        report = env.path(f"k{k}", "r1.json")
        E.run_tool([env.tofu_run, plan, "--steps", 1, "--dump", dump, "--report", report])
        tofu_loss = E.report_losses(E.load_json(report), report)[0]
        ref_loss, ref_grads = torch_reference(env.model, dump)
        d = abs(tofu_loss - ref_loss) / abs(ref_loss)
        E.check(d <= GRAD_TOL, f"k={k}: loss {tofu_loss} vs PyTorch {ref_loss} (rel {d:.2e})")
        for name, ref in ref_grads.items():
            got = np.load(os.path.join(dump, f"grad.{E.dump_name(name)}.npy"))
            d = E.rel_diff(got, ref)
            E.check(d <= GRAD_TOL, f"k={k}: gradient of {name} differs from PyTorch by rel {d:.3e}")
        print(f"k={k}: loss and {len(ref_grads)} gradients match PyTorch", flush=True)

        report3 = env.path(f"k{k}", "r3.json")
        E.run_tool([env.tofu_run, plan, "--steps", 3, "--report", report3])
        r = E.load_json(report3)
        losses[k] = E.report_losses(r, report3)
        E.check(r["comm_bytes"]["measured"] == r["comm_bytes"]["planned"],
                f"k={k}: measured comm {r['comm_bytes']['measured']} != planned {r['comm_bytes']['planned']}")
        d = E.rel_diff(losses[k], losses[1])
        E.check(d <= LOSS_TOL, f"k={k}: losses {losses[k]} vs k=1 {losses[1]} (rel {d:.2e})")
        print(f"k={k}: 3-step losses match k=1 (rel {d:.2e}); comm {r['comm_bytes']['planned']} bytes",
              flush=True)


if __name__ == "__main__":
    E.main_wrapper(main)
