#!/usr/bin/python3
"""e2e.example_models: the example generators' models compile and train.

Small configurations of examples/rnn/make_rnn.py (RNN-2-16, 20 steps),
examples/wresnet/make_wresnet.py (WResNet-50-1 on 32x32 images, batch 2,
inference-mode BatchNormalization: in training mode, at this size, stage 4's
BatchNorms normalize 2 values per channel and the gradients reach 1e8, so
float32 cannot match the float64 oracle (rel 2.9e-3) nor one k another
(bench/batchnorm_conditioning.md); training mode is covered by
e2e.batchnorm_running_stats and e2e.torch_exported.wide_resnet50_2) and
examples/transformer/make_gpt.py (GPT, 2 layers) are written with weights and

* for k = 1: tofuc compiles them, tofu-run runs one step (--dump), and the
  step's loss and every parameter gradient equal PyTorch autograd's on the
  ONNX graph evaluated op by op in float64 (e2e_common.TorchGraph);
* for k = 4: two steps give the same losses as k = 1;
* the RNN's explicit cells equal torch.nn.LSTM on the same weights (so the
  generator really writes an LSTM, gate order included);
* the GPT's PyTorch module (examples/transformer/gpt_torch.py, which
  bench/gpu/torch_step.py times against the GPU plans) gives the ONNX
  graph's loss and gradients on the same weights and batch, in float64.

Each is also written with --no-weights and the graph-only file is checked:
same graph, every initializer an EXTERNAL entry of <model>.data with
back-to-back offsets and lengths equal to the tensor sizes, the data file
absent.
"""
import os
import sys

import numpy as np
import torch

import e2e_common as E

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "examples")
sys.path.insert(0, os.path.join(EXAMPLES, "rnn"))
sys.path.insert(0, os.path.join(EXAMPLES, "wresnet"))
sys.path.insert(0, os.path.join(EXAMPLES, "transformer"))
import gpt_torch  # noqa: E402
import make_gpt  # noqa: E402
import make_rnn  # noqa: E402
import make_wresnet  # noqa: E402

GRAD_TOL = 1e-4
LOSS_TOL = 1e-5

# name: (generator, its arguments, tofuc arguments). Without batch statistics
# the WResNet's activations grow block by block (loss ~70 at step 1), so it
# trains with a small learning rate to stay finite at step 2.
CONFIGS = {
    "rnn-2-16": (make_rnn, ["--layers", "2", "--hidden", "16", "--batch", "4",
                            "--vocab", "32"], []),
    "wresnet-50-1": (make_wresnet, ["--depth", "50", "--width", "1", "--image", "32",
                                    "--batch", "2", "--classes", "10", "--batchnorm", "inference"],
                     ["--lr", "1e-4"]),
    "gpt-2": (make_gpt, ["--layers", "2", "--hidden", "16", "--heads", "2", "--seq", "8",
                         "--vocab", "32", "--batch", "2"], []),
}


def check_graph_only(with_weights, graph_only, data_path):
    """The --no-weights model equals the weighted one but for external entries."""
    import onnx
    from onnx import TensorProto
    E.check(not os.path.exists(data_path), f"--no-weights wrote {data_path}")
    a, b = E.load_onnx(with_weights), onnx.load(graph_only, load_external_data=False)
    E.check(a.graph.node == b.graph.node, "--no-weights changed the graph's nodes")
    offset = 0
    for wa, wb in zip(a.graph.initializer, b.graph.initializer):
        entries = {e.key: e.value for e in wb.external_data}
        size = np.prod(wa.dims, dtype=np.int64) * 4
        E.check(wb.data_location == TensorProto.EXTERNAL and not wb.raw_data,
                f"{wb.name}: not an external entry without data")
        E.check(list(wa.dims) == list(wb.dims) and wa.name == wb.name,
                f"{wb.name}: dims or name differ from the weighted model")
        E.check(entries == {"location": os.path.basename(data_path),
                            "offset": str(offset), "length": str(size)},
                f"{wb.name}: external entries {entries}, expected offset {offset} "
                f"length {size}")
        offset += size
    E.check(len(a.graph.initializer) == len(b.graph.initializer),
            "--no-weights changed the number of initializers")


def torch_step(model_path, dump):
    """Loss and {param: grad} of the ONNX graph in float64 torch, on the
    weights and batch tofu-run dumped."""
    model = E.load_onnx(model_path)
    graph = E.TorchGraph(model)
    tensors, params = {}, {}
    for name in E.initializers(model):
        t = torch.from_numpy(np.load(os.path.join(dump, f"param.{E.dump_name(name)}.npy"))
                             .astype(np.float64)).requires_grad_()
        tensors[name] = params[name] = t
    for inp in model.graph.input:
        if inp.name in tensors:
            continue
        v = np.load(os.path.join(dump, f"input.{E.dump_name(inp.name)}.npy"))
        tensors[inp.name] = torch.from_numpy(v.astype(np.float64) if v.dtype == np.float32
                                             else v)
    # Float Constant nodes must compute in float64 too.
    orig = E.TorchGraph._eval_more

    def eval64(node, attrs, ins):
        outs = orig(node, attrs, ins)
        return [o.double() if o.dtype == torch.float32 else o for o in outs]
    E.TorchGraph._eval_more = staticmethod(eval64)
    try:
        loss = graph.loss(tensors)
    finally:
        E.TorchGraph._eval_more = staticmethod(orig)
    loss.backward()
    return loss.item(), {n: (p.grad.numpy() if p.grad is not None else np.zeros(p.shape))
                         for n, p in params.items()}


def check_rnn_is_lstm(model_path):
    """The explicit cells compute what torch.nn.LSTM computes."""
    model = E.load_onnx(model_path)
    w = E.initializers(model)
    layers = sum(1 for n in w if n.endswith(".R"))
    H = w["lstm.l0.R"].shape[0]
    x_info = model.graph.input[0].type.tensor_type.shape.dim
    B, T, I = (d.dim_value for d in x_info)
    lstm = torch.nn.LSTM(I, H, layers, batch_first=True).double()
    with torch.no_grad():
        for l in range(layers):
            getattr(lstm, f"weight_ih_l{l}").copy_(torch.from_numpy(w[f"lstm.l{l}.W"].T.copy()))
            getattr(lstm, f"weight_hh_l{l}").copy_(torch.from_numpy(w[f"lstm.l{l}.R"].T.copy()))
            getattr(lstm, f"bias_ih_l{l}").copy_(torch.from_numpy(w[f"lstm.l{l}.b"]))
            getattr(lstm, f"bias_hh_l{l}").zero_()
    rng = np.random.default_rng(1)
    x = torch.from_numpy(rng.standard_normal((B, T, I)))
    labels = torch.from_numpy(rng.integers(0, w["proj.bias"].shape[0], B * T))
    h, _ = lstm(x)
    logits = h.reshape(B * T, H) @ torch.from_numpy(w["proj.weight"]).double().T \
        + torch.from_numpy(w["proj.bias"]).double()
    ref = torch.nn.functional.cross_entropy(logits, labels).item()
    tensors = {n: torch.from_numpy(v.astype(np.float64)) for n, v in w.items()}
    tensors.update(input=x, labels=labels)
    got = E.TorchGraph(model).loss(tensors).item()
    d = abs(got - ref) / abs(ref)
    E.check(d <= 1e-6, f"make_rnn's cells give loss {got}, nn.LSTM {ref} (rel {d:.2e})")


def check_gpt_torch_module(model_path, args):
    """gpt_torch.Gpt computes the ONNX graph's loss and gradients (float64)."""
    model = E.load_onnx(model_path)
    w = E.initializers(model)
    opts = dict(zip(args[0::2], args[1::2]))
    B, S, D = int(opts["--batch"]), int(opts["--seq"]), int(opts["--hidden"])
    V = int(opts["--vocab"])
    net = gpt_torch.Gpt(int(opts["--layers"]), D, int(opts["--heads"]), S, V, B).double()
    net.load_onnx_weights({n: v.copy() for n, v in w.items()})
    rng = np.random.default_rng(2)
    x = torch.from_numpy(rng.standard_normal((B, S, D)))
    labels = torch.from_numpy(rng.integers(0, V, B * S))
    got = net(x, labels)
    got.backward()
    tensors = {n: torch.from_numpy(v.astype(np.float64)).requires_grad_() for n, v in w.items()}
    ref = E.TorchGraph(model).loss({**tensors, "input": x, "labels": labels})
    ref.backward()
    # The graph's float Constants (1/sqrt(dh), sqrt 2) are float32 values, the
    # module's exact: they part by ~5e-9 (a wrong mask, transpose or weight
    # by far more).
    tol = 1e-7
    d = abs(got.item() - ref.item()) / abs(ref.item())
    E.check(d <= tol, f"gpt_torch.Gpt gives loss {got.item()}, the ONNX graph {ref.item()} "
                        f"(rel {d:.2e})")
    for name in net.onnx_names:
        g = net._w(name).grad.numpy()
        d = E.rel_diff(g, tensors[name].grad.numpy())
        E.check(d <= tol, f"gpt_torch.Gpt: gradient of {name} differs from the ONNX "
                            f"graph's by rel {d:.2e}")
    print(f"gpt_torch.Gpt: loss and {len(net.onnx_names)} gradients equal the ONNX graph's",
          flush=True)


def main():
    def extra(parser):
        parser.add_argument("--only", choices=sorted(CONFIGS),
                            help="check this configuration only (ctest runs one each)")
    env = E.parse_args(__doc__.splitlines()[1], extra=extra)
    env.require_tools()
    for name, (gen, args, tofuc_args) in CONFIGS.items():
        if env.args.only and name != env.args.only:
            continue
        model = env.path(name, "model.onnx")
        E.check(gen.main(args + ["-o", model]) == 0, f"{name}: generator failed")
        bare = env.path(name, "bare", "model.onnx")
        E.check(gen.main(args + ["--no-weights", "-o", bare]) == 0,
                f"{name}: generator --no-weights failed")
        check_graph_only(model, bare, bare + ".data")
        if gen is make_rnn:
            check_rnn_is_lstm(model)
        if gen is make_gpt:
            check_gpt_torch_module(model, args)

        losses = {}
        for k in (1, 4):
            plan = env.path(name, f"k{k}", "plan.bin")
            E.run_tool([env.tofuc, model, "--gpus", k, "-o", plan, *tofuc_args])
            report = env.path(name, f"k{k}", "report.json")
            cmd = [env.tofu_run, plan, "--steps", 2, "--report", report, "--quiet"]
            dump = env.path(name, f"k{k}", "dump")
            if k == 1:
                cmd += ["--dump", dump]
            E.run_tool(cmd)
            losses[k] = E.report_losses(E.load_json(report), report)
            if k == 1:
                ref_loss, ref_grads = torch_step(model, dump)
                d = abs(losses[1][0] - ref_loss) / abs(ref_loss)
                E.check(d <= GRAD_TOL, f"{name}: loss {losses[1][0]} vs torch {ref_loss} "
                                       f"(rel {d:.2e})")
                for p, ref in ref_grads.items():
                    f = os.path.join(dump, f"grad.{E.dump_name(p)}.npy")
                    if not os.path.exists(f):
                        # No gradient file: the parameter does not influence
                        # the loss (BatchNorm's running statistics).
                        E.check(not np.any(ref), f"{name}: no gradient dumped for {p}, "
                                                 "but torch's is non-zero")
                        continue
                    d = E.rel_diff(np.load(f), ref)
                    E.check(d <= GRAD_TOL, f"{name}: gradient of {p} differs from torch "
                                           f"by rel {d:.3e}")
                print(f"{name}: k=1 loss and {len(ref_grads)} gradients match torch",
                      flush=True)
        d = E.rel_diff(losses[4], losses[1])
        E.check(d <= LOSS_TOL, f"{name}: k=4 losses {losses[4]} vs k=1 {losses[1]} "
                               f"(rel {d:.2e})")
        print(f"{name}: k=4 two-step losses match k=1 (rel {d:.1e})", flush=True)


if __name__ == "__main__":
    E.main_wrapper(main)
