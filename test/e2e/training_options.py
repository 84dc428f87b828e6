#!/usr/bin/python3
"""e2e.training_options: --loss=softmax-cross-entropy and --freeze on the MLP.

* ``--loss=softmax-cross-entropy``: the MLP without its loss node (its
  output is the logits) compiled with the built-in loss trains exactly like
  the MLP with its own SoftmaxCrossEntropyLoss node: the added labels input is
  named ``labels`` like the MLP's, so it gets the same synthetic labels, and
  every step's loss and the trained weights are bit-identical (k = 1 and 4).
* ``--freeze net.0.*``: after 3 steps the frozen weight and bias are
  bit-identical to the model's initializers while every other parameter
  moved, and their gradients are not computed (no grad dump), for k = 1
  and 4; an unknown name is an error that lists the parameters.
* ``--loss`` naming a missing output is an error listing the outputs.
"""

import os

import numpy as np

import e2e_common as E

STEPS = 3


def logits_model(model, path):
    """The MLP without its loss node and labels input (output: the logits)."""
    import onnx
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    loss = g.node[-1]
    E.check(loss.op_type == "SoftmaxCrossEntropyLoss", f"unexpected last node {loss.op_type}")
    logits = loss.input[0]
    del g.node[-1]
    inputs = [i for i in g.input if i.name != "labels"]
    del g.input[:]
    g.input.extend(inputs)
    del g.output[:]
    g.output.extend([onnx.helper.make_tensor_value_info(logits, onnx.TensorProto.FLOAT, [64, 10])])
    onnx.save(m, path)


def train(env, model_path, k, tag, flags):
    d = os.path.dirname(env.path(tag, f"k{k}", "x"))
    plan, report, saved, dump = (os.path.join(d, f) for f in ("plan.bin", "r.json", "t.onnx", "dump"))
    E.run_tool([env.tofuc, model_path, "--gpus", k, "-o", plan, *flags])
    E.run_tool([env.tofu_run, plan, "--steps", STEPS, "--save", saved, "--report", report,
                "--dump", dump, "--quiet"])
    return (E.report_losses(E.load_json(report), report),
            E.initializers(E.load_onnx(saved, "trained model")), dump)


def main():
    env = E.parse_args(__doc__.splitlines()[1])
    env.require_tools()
    model = E.load_onnx(env.model)
    initial = E.initializers(model)
    logits = env.path("logits.onnx")
    logits_model(model, logits)

    for k in (1, 4):
        ref_losses, ref_params, _ = train(env, env.model, k, "builtin", [])
        losses, params, _ = train(env, logits, k, "sce", ["--loss=softmax-cross-entropy"])
        print(f"k={k}: losses {losses} vs the model's own loss node {ref_losses}")
        E.check(np.array_equal(losses, ref_losses),
                f"k={k}: --loss=softmax-cross-entropy losses {losses} != {ref_losses}")
        for n in ref_params:
            E.check(np.array_equal(params[n], ref_params[n]),
                    f"k={k}: {n} trained differently with --loss=softmax-cross-entropy")
        named, _, _ = train(env, logits, k, "sce-named",
                            ["--loss=softmax-cross-entropy:/net/net.5/Relu_output_0"])
        E.check(np.array_equal(named, ref_losses), f"k={k}: named logits give other losses")

        losses, params, dump = train(env, env.model, k, "freeze", ["--freeze", "net.0.*"])
        E.check(np.all(np.isfinite(losses)), f"k={k}: a loss is not finite with --freeze")
        for n, init in initial.items():
            frozen = n.startswith("net.0.")
            same = np.array_equal(params[n], init)
            grad = os.path.isfile(os.path.join(dump, f"grad.{n}.npy"))
            print(f"k={k} --freeze net.0.*: {n:<14} unchanged={same} gradient dumped={grad}")
            if frozen:
                E.check(same, f"k={k}: frozen {n} changed")
                E.check(not grad, f"k={k}: frozen {n} got a gradient")
            else:
                E.check(not same, f"k={k}: {n} did not train with net.0.* frozen")
                E.check(grad, f"k={k}: {n} has no gradient")

    res = E.run_tool([env.tofuc, env.model, "-o", env.path("bad.bin"), "--freeze", "net.9.weight"],
                     expect_rc=1)
    E.check("--freeze: 'net.9.weight' matches no parameter (parameters: 'net.0.weight'" in res.stderr,
            f"unexpected --freeze error:\n{res.stderr}")
    res = E.run_tool([env.tofuc, env.model, "-o", env.path("bad.bin"), "--loss", "logits"],
                     expect_rc=1)
    E.check("--loss names 'logits', which is not a model output (outputs: 'loss' (tensor<f32>))"
            in res.stderr, f"unexpected --loss error:\n{res.stderr}")


if __name__ == "__main__":
    E.main_wrapper(main)
