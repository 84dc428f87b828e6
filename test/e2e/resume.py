#!/usr/bin/python3
"""e2e.resume: --save then --resume trains exactly like training straight through.

The MLP with a training-mode Dropout after its first Relu (its mask is drawn
from the step counter, so a resumed run must continue the counter) is
compiled for k = 2 with SGD-momentum and with Adam (whose update count T is
optimizer state). For each optimizer:

* 5 steps straight, ``--save a/model.onnx``;
* 3 steps, ``--save b/model.onnx``; then ``--resume b/model.onnx`` for 2
  steps, ``--save c/model.onnx``:
  the losses of steps 4 and 5 and every trained weight are bit-identical to
  the straight run (the goal is rel diff <= 1e-6; the runtime is
  deterministic, so equality is asserted), and so is the saved state file.
* The same checkpoint resumed by a k = 3 plan of the same model gives the
  same losses and weights within 1e-5 (state is stored as whole tensors).
* One process per device (the torchrun environment, k = 2 processes, each
  reading only its own weight shard): 3 steps + --save write the same model
  and state file bytes as one process, and resuming the one-process
  checkpoint for 2 steps gives the straight run's weights and state bit
  for bit.
* ``--save-external-data`` (momentum): the weights go to one ONNX external
  data file next to the model (``model.onnx.data-<checksum>``) that
  ``onnx.load`` reads back to the same values; resuming from it gives the
  straight run's model bit for bit; a later save removes the old data file;
  a truncated data file is a clear error.

Errors: the Adam plan refuses the momentum checkpoint (other optimizer),
the original model (no training state) and a checkpoint of another model
(the CNN's), each with a clear message.
"""

import os

import numpy as np

import e2e_common as E
import multiproc as M

K = 2
STRAIGHT, FIRST = 5, 3
LR = {"momentum": "0.05", "adam": "0.002"}


def dropout_model(src, dst):
    """The MLP with Dropout(ratio 0.25, training_mode true) after its first Relu."""
    import onnx
    from onnx import helper, TensorProto
    m = onnx.load(src)
    g = m.graph
    relu = next(n for n in g.node if n.op_type == "Relu")
    old = relu.output[0]
    new = old + "_dropped"
    for n in g.node:
        for i, name in enumerate(n.input):
            if name == old:
                n.input[i] = new
    g.initializer.extend([
        helper.make_tensor("dropout_ratio", TensorProto.FLOAT, [], [0.25]),
        helper.make_tensor("dropout_training", TensorProto.BOOL, [], [True]),
    ])
    pos = list(g.node).index(relu) + 1
    g.node.insert(pos, helper.make_node("Dropout", [old, "dropout_ratio", "dropout_training"],
                                        [new], name="dropout", seed=7))
    onnx.save(m, dst)


def run(env, plan, out, steps, resume=None):
    os.makedirs(os.path.dirname(out), exist_ok=True)
    report = out + ".report.json"
    cmd = [env.tofu_run, plan, "--steps", steps, "--quiet", "--save", out, "--report", report]
    if resume:
        cmd += ["--resume", resume]
    E.run_tool(cmd)
    return E.report_losses(E.load_json(report), report), E.initializers(E.load_onnx(out))


def k_name(out):
    return {"mp-b": "multi-process 3-step", "mp-c": "multi-process resumed"}[out]


def state_file(model_path):
    m = E.load_onnx(model_path)
    meta = {p.key: p.value for p in m.metadata_props}
    E.check("tofu.training_state" in meta, f"{model_path} names no training state: {meta}")
    path = os.path.join(os.path.dirname(model_path), meta["tofu.training_state"])
    E.check(os.path.isfile(path), f"the state file {path} was not written")
    with open(path, "rb") as f:
        return meta, f.read()


def main():
    env = E.parse_args(__doc__.splitlines()[1])
    env.require_tools()
    model = env.path("dropout_mlp.onnx")
    dropout_model(env.model, model)
    initial = E.initializers(E.load_onnx(model))
    plans = {}
    for opt in ("momentum", "adam"):
        for k in (K, 3):
            plans[opt, k] = env.path(f"{opt}.k{k}.bin")
            E.run_tool([env.tofuc, model, "--gpus", k, "-o", plans[opt, k],
                        "--optimizer", opt, "--lr", LR[opt]])

    for opt in ("momentum", "adam"):
        d = env.path(opt)
        plan = plans[opt, K]
        a_loss, a_w = run(env, plan, os.path.join(d, "a", "model.onnx"), STRAIGHT)
        b_loss, b_w = run(env, plan, os.path.join(d, "b", "model.onnx"), FIRST)
        c_loss, c_w = run(env, plan, os.path.join(d, "c", "model.onnx"), STRAIGHT - FIRST,
                          resume=os.path.join(d, "b", "model.onnx"))
        E.check(np.array_equal(b_loss, a_loss[:FIRST]),
                f"{opt}: the first {FIRST} losses differ: {b_loss} vs {a_loss}")
        E.check(np.array_equal(c_loss, a_loss[FIRST:]),
                f"{opt}: resumed losses {c_loss} differ from straight {a_loss[FIRST:]} "
                f"(rel diff {E.rel_diff(c_loss, a_loss[FIRST:]):.3g})")
        E.check(set(c_w) == set(a_w), f"{opt}: different initializers saved")
        moved = 0
        for name, w in a_w.items():
            E.check(np.array_equal(c_w[name], w),
                    f"{opt}: weight {name} differs after resuming "
                    f"(rel diff {E.rel_diff(c_w[name], w):.3g})")
            moved += not np.array_equal(w, initial[name])
        E.check(moved >= 6, f"{opt}: only {moved} weights changed in training")
        a_meta, a_state = state_file(os.path.join(d, "a", "model.onnx"))
        c_meta, c_state = state_file(os.path.join(d, "c", "model.onnx"))
        E.check(a_meta == c_meta and a_state == c_state,
                f"{opt}: the resumed optimizer state differs from the straight run's")
        E.check(a_meta["tofu.training_step"] == str(STRAIGHT), f"{opt}: step {a_meta}")

        # Another k resumes the same checkpoint (whole tensors in the files).
        k3_loss, k3_w = run(env, plans[opt, 3], os.path.join(d, "k3", "model.onnx"),
                            STRAIGHT - FIRST, resume=os.path.join(d, "b", "model.onnx"))
        E.check(E.rel_diff(k3_loss, a_loss[FIRST:]) <= 1e-5,
                f"{opt}: k = 3 resumed losses {k3_loss} vs {a_loss[FIRST:]}")
        for name, w in a_w.items():
            E.check(E.rel_diff(k3_w[name], w) <= 1e-5,
                    f"{opt}: k = 3 resumed weight {name}: rel diff {E.rel_diff(k3_w[name], w):.3g}")
        # One process per device: the same checkpoints (State gathered on rank
        # 0 for --save; every rank restores it for --resume).
        def multi(out, steps, resume=None):
            os.makedirs(os.path.dirname(out), exist_ok=True)
            args = [plan, "--steps", steps, "--quiet", "--save", out]
            if resume:
                args += ["--resume", resume]
            results, _ = M.run_torchrun_env(env, K, args, timeout=120)
            E.check(all(r.returncode == 0 for r in results),
                    "\n".join(r.describe() for r in results))
            return os.path.join(os.path.dirname(out), "model.onnx")

        for single, out, steps, resume in (
                ("b", "mp-b", FIRST, None),
                ("a", "mp-c", STRAIGHT - FIRST, os.path.join(d, "b", "model.onnx"))):
            got = multi(os.path.join(d, out, "model.onnx"), steps, resume)
            want = os.path.join(d, single, "model.onnx")
            with open(got, "rb") as f1, open(want, "rb") as f2:
                E.check(f1.read() == f2.read(),
                        f"{opt}: {k_name(out)} model differs from the one-process {single}")
            E.check(state_file(got) == state_file(want),
                    f"{opt}: {k_name(out)} state differs from the one-process {single}")
        print(f"{opt}: losses {a_loss}; resumed steps 4-5 and weights bit-identical; "
              f"k = 3 resume within 1e-5; one process per device bit-identical")

    # External data (momentum).
    d = env.path("momentum")
    ext_b = os.path.join(d, "ext-b", "model.onnx")
    os.makedirs(os.path.dirname(ext_b), exist_ok=True)
    E.run_tool([env.tofu_run, plans["momentum", K], "--steps", FIRST, "--quiet", "--save", ext_b,
                "--save-external-data"])
    data = [f for f in os.listdir(os.path.dirname(ext_b)) if f.startswith("model.onnx.data-")]
    E.check(len(data) == 1, f"expected one external data file, found {data}")
    E.check(os.path.getsize(ext_b) < 20000,
            f"the model with external data is {os.path.getsize(ext_b)} bytes")
    b_w = E.initializers(E.load_onnx(os.path.join(d, "b", "model.onnx")))
    ext_w = E.initializers(E.load_onnx(ext_b))  # onnx.load reads the external data
    for name, w in b_w.items():
        E.check(np.array_equal(ext_w[name], w), f"external data of {name} differs")
    ext_c = os.path.join(d, "ext-c", "model.onnx")
    run(env, plans["momentum", K], ext_c, STRAIGHT - FIRST, resume=ext_b)
    with open(ext_c, "rb") as f1, open(os.path.join(d, "a", "model.onnx"), "rb") as f2:
        E.check(f1.read() == f2.read(), "resuming from external data differs from straight")
    E.run_tool([env.tofu_run, plans["momentum", K], "--steps", 1, "--quiet", "--save", ext_b,
                "--save-external-data"])
    now = [f for f in os.listdir(os.path.dirname(ext_b)) if f.startswith("model.onnx.data-")]
    E.check(len(now) == 1 and now != data, f"data files after a second save: {now} (was {data})")
    path = os.path.join(os.path.dirname(ext_b), now[0])
    with open(path, "rb") as f:
        blob = f.read()
    with open(path, "wb") as f:
        f.write(blob[:-8])

    def expect_error(plan, ckpt, text):
        res = E.run_tool([env.tofu_run, plan, "--steps", 1, "--quiet", "--resume", ckpt],
                         expect_rc=1)
        E.check(text in res.stderr, f"expected '{text}' in the error, got: {res.stderr}")

    expect_error(plans["adam", K], env.path("momentum", "b", "model.onnx"),
                 "the checkpoint was trained with optimizer 'momentum', this plan uses 'adam'")
    expect_error(plans["adam", K], model, "carries no tofu training state")
    expect_error(plans["momentum", K], ext_b, "bytes; truncated?)")
    cnn = os.path.join(os.path.dirname(env.model), "..", "cnn", "cnn.onnx")
    cnn_plan, cnn_ckpt = env.path("cnn.bin"), env.path("cnn", "model.onnx")
    E.run_tool([env.tofuc, cnn, "--gpus", 1, "-o", cnn_plan, "--optimizer", "adam"])
    os.makedirs(os.path.dirname(cnn_ckpt), exist_ok=True)
    E.run_tool([env.tofu_run, cnn_plan, "--steps", 1, "--quiet", "--save", cnn_ckpt])
    expect_error(plans["adam", K], cnn_ckpt, "the checkpoint belongs to another model")


if __name__ == "__main__":
    E.main_wrapper(main)
