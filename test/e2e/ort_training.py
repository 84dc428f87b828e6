#!/usr/bin/env python3
"""e2e.ort_training: tofu's gradients equal onnxruntime-training's.

A second reference, independent of PyTorch: the example MLP
(examples/mlp/mlp.onnx, whose output is its cross-entropy loss) is compiled
by tofuc for k = 1 and run for one step by tofu-run --dump; the same model
goes through onnxruntime-training's artifact generation (PyPI
``onnxruntime-training`` 1.19.2: gradient graph of the model's loss output,
every float initializer trainable) and one forward/backward of its training
Module on the batch tofu-run used. The loss and the gradient of every
parameter must agree (relative difference 1e-4), and the weights tofu-run
started from must be the model's.

It runs with a Python that has ``onnxruntime.training`` and ``onnx`` (not
Debian's plain interpreter: scripts/setup.sh installs the wheel into a venv
over it); ctest runs it with that venv's Python when configure found one,
else with Debian's, and the script exits 77 (skipped) if the import fails.
"""
import os
import sys

import numpy as np

import e2e_common as E

TOL = 1e-4


def main():
    env = E.parse_args(__doc__.splitlines()[1])
    try:
        import onnx
        from onnxruntime.training import artifacts
        from onnxruntime.training.api import CheckpointState, Module
    except ImportError as e:
        print(f"SKIP: onnxruntime-training is not importable here ({e})", flush=True)
        sys.exit(77)
    env.require_tools()
    plan, dump = env.path("plan.bin"), env.path("dump")
    E.run_tool([env.tofuc, env.model, "--gpus", 1, "-o", plan])
    report = env.path("report.json")
    E.run_tool([env.tofu_run, plan, "--steps", 1, "--dump", dump, "--report", report,
                "--quiet"])
    tofu_loss = E.report_losses(E.load_json(report), report)[0]

    model = onnx.load(env.model)
    weights = E.initializers(model)
    trainable = [n for n, v in weights.items() if v.dtype == np.float32]
    for name in trainable:
        start = np.load(os.path.join(dump, f"param.{E.dump_name(name)}.npy"))
        E.check(np.array_equal(start, weights[name]),
                f"tofu-run's initial {name} is not the model's")
    # ORT's SoftmaxCrossEntropyLoss gradient reads the node's optional
    # log_prob output: name it (the loss is unchanged).
    for node in model.graph.node:
        if node.op_type == "SoftmaxCrossEntropyLoss" and len(node.output) == 1:
            node.output.append(node.output[0] + ".log_prob")
    out = env.path("ort")
    os.makedirs(out, exist_ok=True)
    artifacts.generate_artifacts(model, requires_grad=trainable, frozen_params=[],
                                 loss=None, optimizer=artifacts.OptimType.SGD,
                                 artifact_directory=out)
    state = CheckpointState.load_checkpoint(os.path.join(out, "checkpoint"))
    module = Module(os.path.join(out, "training_model.onnx"), state,
                    os.path.join(out, "eval_model.onnx"))
    module.train()
    feeds = [np.load(os.path.join(dump, f"input.{E.dump_name(i.name)}.npy"))
             for i in model.graph.input if i.name not in weights]
    ort_loss = float(np.asarray(module(*feeds)))
    d = abs(tofu_loss - ort_loss) / abs(ort_loss)
    E.check(d <= TOL, f"loss {tofu_loss} vs onnxruntime-training {ort_loss} (rel {d:.2e})")
    for name in trainable:
        ref = state.parameters[name].grad
        got = np.load(os.path.join(dump, f"grad.{E.dump_name(name)}.npy"))
        d = E.rel_diff(got, ref)
        E.check(d <= TOL, f"gradient of {name} differs from onnxruntime-training's by rel "
                          f"{d:.3e}")
    print(f"loss and {len(trainable)} gradients match onnxruntime-training", flush=True)


if __name__ == "__main__":
    E.main_wrapper(main)
