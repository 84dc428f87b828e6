#!/usr/bin/python3
"""e2e.training_info: a model that carries its training algorithm trains as that algorithm says.

Each model is written with the onnx Python API (``onnx.helper.make_training_info``):
an MLP (``X [4, 3]`` -> MatMul/Add -> Relu -> MatMul/Add -> logits ``[4, 5]``)
whose TrainingInfoProto's algorithm computes the loss
(``SoftmaxCrossEntropyLoss`` of the logits against an algorithm input
``labels``), its ``Gradient`` (ai.onnx.preview.training) with respect to
the four weights, and their new values, bound by ``update_binding``:

* ``adam``: one ``Adam`` node over the four weights, with non-default
  ``alpha``, ``beta``, ``epsilon`` and ``norm_coefficient``, its moments as
  algorithm initializers and the update count ``T`` advanced by
  ``Add(T, 1)``;
* ``momentum``: one Nesterov ``Momentum`` node, likewise;
* ``adagrad``: one ``Adagrad`` node with a ``decay_factor``;
* ``sgd``: no optimizer op, ``W - lr * dW`` written with ``Mul`` and ``Sub``;
* ``adam-init``: ``adam`` with an initialization graph, which tofuc runs at
  compile time: W1 <- 0.5 * W1 (reading the initializer), B1 <- B1 - B1
  (zeros), T <- a Constant 0;
* ``two-losses``: ``sgd`` plus a second scalar the algorithm computes,
  ``reg = 0.05 * ReduceSum(W2 * W2)``, with its own ``Gradient`` (of W2
  only); W2 descends along ``dloss/dW2 + dreg/dW2`` (two backward passes in
  one step; the reported loss is the first Gradient's ``y``).

tofuc compiles each (k = 1, and k = 2 for adam) without training flags;
``tofu-run --data`` feeds ``STEPS`` fixed batches and ``--save`` writes the
trained weights. The reference replays the same steps in float64 torch
(autograd for the gradient, the ONNX operator definitions for the update).
Proves that every step's loss and each weight after ``STEPS`` steps equal
the reference's (relative difference <= 1e-4), that the weights moved, and
that tofuc refuses ``--optimizer`` for such a model.

Checkpoints (adam, k = 2): 1 step ``--save`` then ``--resume`` for 2 steps
gives the straight run's losses, weights and optimizer state bit for bit;
the saved model carries the algorithm's state (its moments ``V_*``/``H_*``
and its update count ``T`` = steps done, as update_binding updates them),
so recompiling it with tofuc and training on the remaining batches also
continues the straight run (losses and weights within 1e-6).
"""

import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import e2e_common as E

STEPS = 3
TOL = 1e-4
TRAINING = "ai.onnx.preview.training"
BATCH, FEATURES, HIDDEN, CLASSES = 4, 3, 6, 5
WEIGHTS = ("W1", "B1", "W2", "B2")
LR = {"adam": 0.01, "momentum": 0.05, "adagrad": 0.05, "sgd": 0.1, "adam-init": 0.01,
      "two-losses": 0.1}
REG = 0.05
ATTRS = {
    "adam": dict(alpha=0.8, beta=0.95, epsilon=1e-4, norm_coefficient=0.01),
    "momentum": dict(alpha=0.8, beta=0.7, mode="nesterov", norm_coefficient=0.01),
    "adagrad": dict(decay_factor=0.5, epsilon=1e-4, norm_coefficient=0.01),
}
ATTRS["adam-init"] = ATTRS["adam"]
STATES = {"adam": ("V", "H"), "momentum": ("V",), "adagrad": ("H",), "sgd": (),
          "adam-init": ("V", "H"), "two-losses": ()}


def optimizer_of(kind):
    """The ONNX optimizer op of a kind ('sgd' for plain arithmetic)."""
    return {"adam-init": "adam", "two-losses": "sgd"}.get(kind, kind)


def initial_weights():
    rng = np.random.default_rng(7)
    return {"W1": rng.normal(0, 0.5, (FEATURES, HIDDEN)), "B1": rng.normal(0, 0.1, HIDDEN),
            "W2": rng.normal(0, 0.5, (HIDDEN, CLASSES)), "B2": rng.normal(0, 0.1, CLASSES)}


def tensor(name, value, dtype=np.float32):
    return numpy_helper.from_array(np.asarray(value, dtype), name)


def vinfo(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def starting_weights(kind):
    """The weights training starts from (after the initialization graph)."""
    weights = initial_weights()
    if kind == "adam-init":
        weights["W1"] = weights["W1"].astype(np.float32) * np.float32(0.5)
        weights["B1"] = np.zeros_like(weights["B1"])
    return weights


def make_model(kind):
    weights = initial_weights()
    opt = optimizer_of(kind)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["X", "W1"], ["h0"], name="fc1"),
         helper.make_node("Add", ["h0", "B1"], ["h1"], name="fc1_bias"),
         helper.make_node("Relu", ["h1"], ["h2"], name="relu"),
         helper.make_node("MatMul", ["h2", "W2"], ["h3"], name="fc2"),
         helper.make_node("Add", ["h3", "B2"], ["logits"], name="fc2_bias")],
        "mlp", [vinfo("X", [BATCH, FEATURES])], [vinfo("logits", [BATCH, CLASSES])],
        [tensor(n, v) for n, v in weights.items()])
    grads = [f"d{n}" for n in WEIGHTS]
    nodes = [helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "labels"], ["loss"],
                              name="xent"),
             helper.make_node("Gradient", list(WEIGHTS) + ["X", "labels"], grads, name="grad",
                              domain=TRAINING, xs=list(WEIGHTS), zs=["X", "labels"], y="loss")]
    inits = [tensor("lr", LR[kind])]
    outputs, bindings = [], []
    news = [f"{n}_new" for n in WEIGHTS]
    if kind == "two-losses":
        nodes += [helper.make_node("Mul", ["W2", "W2"], ["W2sq"], name="square"),
                  helper.make_node("ReduceSum", ["W2sq"], ["W2sum"], name="sum_sq", keepdims=0),
                  helper.make_node("Mul", ["W2sum", "reg_scale"], ["reg"], name="reg"),
                  helper.make_node("Gradient", ["W2"], ["dW2_reg"], name="grad_reg",
                                   domain=TRAINING, xs=["W2"], y="reg"),
                  helper.make_node("Add", ["dW2", "dW2_reg"], ["dW2_total"], name="total")]
        inits.append(tensor("reg_scale", REG))
        grads[WEIGHTS.index("W2")] = "dW2_total"
    if opt == "sgd":
        for n, g in zip(WEIGHTS, grads):
            nodes += [helper.make_node("Mul", [g, "lr"], [f"{n}_step"], name=f"{n}_scale"),
                      helper.make_node("Sub", [n, f"{n}_step"], [f"{n}_new"], name=f"{n}_descend")]
    else:
        states = [f"{s}_{n}" for s in STATES[kind] for n in WEIGHTS]
        nodes += [helper.make_node(opt.capitalize(), ["lr", "T"] + list(WEIGHTS) + grads + states,
                                   news + [f"{s}_new" for s in states], name=opt,
                                   domain=TRAINING, **ATTRS[kind]),
                  helper.make_node("Add", ["T", "one"], ["T_new"], name="count")]
        inits += [tensor("T", 0, np.int64), tensor("one", 1, np.int64)]
        inits += [tensor(s, np.zeros_like(weights[s.split("_", 1)[1]])) for s in states]
        outputs += [vinfo(f"{s}_new", list(weights[s.split("_", 1)[1]].shape)) for s in states]
        outputs.append(vinfo("T_new", [], TensorProto.INT64))
        bindings += [(s, f"{s}_new") for s in states] + [("T", "T_new")]
    outputs += [vinfo(f"{n}_new", list(weights[n].shape)) for n in WEIGHTS]
    bindings = [(n, f"{n}_new") for n in WEIGHTS] + bindings
    algorithm = helper.make_graph(nodes, "algorithm",
                                  [vinfo("labels", [BATCH], TensorProto.INT64)], outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14),
                                                    helper.make_opsetid(TRAINING, 1)])
    initialization, init_bindings = None, None
    if kind == "adam-init":
        initialization = helper.make_graph(
            [helper.make_node("Constant", [], ["half"], value=tensor("half", 0.5)),
             helper.make_node("Mul", ["W1", "half"], ["W1_init"], name="halve"),
             helper.make_node("Sub", ["B1", "B1"], ["B1_init"], name="zero"),
             helper.make_node("Constant", [], ["T_init"], value=tensor("T0", 0, np.int64))],
            "initialization", [],
            [vinfo("W1_init", [FEATURES, HIDDEN]), vinfo("B1_init", [HIDDEN]),
             vinfo("T_init", [], TensorProto.INT64)])
        init_bindings = [("W1", "W1_init"), ("B1", "B1_init"), ("T", "T_init")]
    model.training_info.append(helper.make_training_info(algorithm, bindings, initialization,
                                                         init_bindings))
    onnx.checker.check_model(model)
    return model


def reference(kind, batches):
    """Losses and final weights of STEPS steps of the algorithm, float64 torch."""
    import torch
    params = {n: torch.tensor(np.asarray(v, np.float32), dtype=torch.float64)
              for n, v in starting_weights(kind).items()}
    state = {n: {} for n in WEIGHTS}
    attrs = ATTRS.get(kind, {})
    r, losses = LR[kind], []
    opt = optimizer_of(kind)
    for t, (x, y) in enumerate(batches):
        leaves = {n: p.clone().requires_grad_(True) for n, p in params.items()}
        h = torch.relu(torch.tensor(x, dtype=torch.float64) @ leaves["W1"] + leaves["B1"])
        logits = h @ leaves["W2"] + leaves["B2"]
        loss = torch.nn.functional.cross_entropy(logits, torch.tensor(y))
        losses.append(loss.item())
        if kind == "two-losses":
            loss = loss + REG * (leaves["W2"] ** 2).sum()
        loss.backward()
        with torch.no_grad():
            for n in WEIGHTS:
                x0, s = params[n], state[n]
                g = attrs.get("norm_coefficient", 0.0) * x0 + leaves[n].grad
                if opt == "sgd":
                    params[n] = x0 - r * leaves[n].grad
                elif opt == "momentum":
                    v = attrs["alpha"] * s.get("v", 0) + (attrs["beta"] if t > 0 else 1.0) * g
                    s["v"] = v
                    params[n] = x0 - r * (g + attrs["alpha"] * v)
                elif opt == "adam":
                    a, b, eps = attrs["alpha"], attrs["beta"], attrs["epsilon"]
                    v = a * s.get("v", 0) + (1 - a) * g
                    hh = b * s.get("h", 0) + (1 - b) * g * g
                    s["v"], s["h"] = v, hh
                    ra = r * np.sqrt(1 - b ** t) / (1 - a ** t) if t > 0 else r
                    params[n] = x0 - ra * (v / (torch.sqrt(hh) + eps))
                else:
                    hh = s.get("h", 0) + g * g
                    s["h"] = hh
                    params[n] = x0 - r / (1 + t * attrs["decay_factor"]) * g / (
                        torch.sqrt(hh) + attrs["epsilon"])
    return np.asarray(losses), {n: p.numpy() for n, p in params.items()}


def check_checkpoints(env, data, batches):
    """--save / --resume, and recompiling the saved model, continue adam."""
    model = env.path("adam", "model.onnx")
    plan = env.path("ckpt", "plan.bin")
    E.run_tool([env.tofuc, model, "--gpus", 2, "-o", plan])

    def train(plan_path, steps, data_dir, save, extra=()):
        report = save + ".json"
        E.run_tool([env.tofu_run, plan_path, "--steps", steps, "--data", data_dir,
                    "--save", save, "--report", report, "--quiet", *extra])
        return E.report_losses(E.load_json(report), report), E.load_onnx(save, "saved model")

    def algorithm_state(saved):
        from onnx import numpy_helper
        return {t.name: numpy_helper.to_array(t)
                for t in saved.training_info[0].algorithm.initializer}

    straight_losses, straight = train(plan, STEPS, data, env.path("ckpt", "straight", "m.onnx"))
    first_losses, first = train(plan, 1, data, env.path("ckpt", "first", "m.onnx"))
    E.check(algorithm_state(first)["T"] == 1,
            f"the saved model's update count T is {algorithm_state(first)['T']}, expected 1")
    E.check(np.any(algorithm_state(first)["V_W1"] != 0),
            "the saved model's Adam moment V_W1 is still zero after a step")
    resumed_losses, resumed = train(plan, STEPS - 1, data, env.path("ckpt", "resumed", "m.onnx"),
                                    ("--resume", env.path("ckpt", "first", "m.onnx")))
    losses = np.concatenate([first_losses, resumed_losses])
    print(f"checkpoint: straight {straight_losses} save+resume {losses}")
    E.check(np.array_equal(losses, straight_losses),
            f"save + resume losses {losses} differ from the straight run's {straight_losses}")
    for name, value in E.initializers(straight).items():
        E.check(np.array_equal(E.initializers(resumed)[name], value),
                f"after save + resume, weight {name} differs from the straight run's")
    for name, value in algorithm_state(straight).items():
        E.check(np.array_equal(algorithm_state(resumed)[name], value),
                f"after save + resume, algorithm state {name} differs from the straight run's")
    E.check(algorithm_state(straight)["T"] == STEPS,
            f"the saved update count T is {algorithm_state(straight)['T']}, expected {STEPS}")

    # The saved model alone (recompiled, no --resume) continues too: the
    # remaining batches renumbered from 0.
    rest = env.path("ckpt", "rest-data")
    for s, (x, y) in enumerate(batches[1:]):
        os.makedirs(os.path.join(rest, f"batch_{s}"), exist_ok=True)
        np.save(os.path.join(rest, f"batch_{s}", "X.npy"), x)
        np.save(os.path.join(rest, f"batch_{s}", "labels.npy"), y)
    replan = env.path("ckpt", "replan.bin")
    E.run_tool([env.tofuc, env.path("ckpt", "first", "m.onnx"), "--gpus", 2, "-o", replan])
    again_losses, again = train(replan, STEPS - 1, rest, env.path("ckpt", "again", "m.onnx"))
    d = E.rel_diff(again_losses, straight_losses[1:])
    print(f"checkpoint: recompiled saved model losses {again_losses} (rel {d:.2e})")
    E.check(d <= 1e-6, f"the recompiled saved model's losses {again_losses} differ from the "
            f"straight run's {straight_losses[1:]} (rel {d:.2e})")
    for name, value in E.initializers(straight).items():
        d = E.rel_diff(E.initializers(again)[name], value)
        E.check(d <= 1e-6, f"recompiled saved model: weight {name} differs (rel {d:.2e})")
    for name, value in algorithm_state(straight).items():
        d = E.rel_diff(algorithm_state(again)[name], value)
        E.check(d <= 1e-6, f"recompiled saved model: state {name} differs (rel {d:.2e})")


def main():
    env = E.parse_args(__doc__.splitlines()[1])
    env.require_tools()
    rng = np.random.default_rng(3)
    data = env.path("data")
    batches = []
    for s in range(STEPS):
        x = rng.normal(0, 1, (BATCH, FEATURES)).astype(np.float32)
        y = rng.integers(0, CLASSES, BATCH).astype(np.int64)
        os.makedirs(os.path.join(data, f"batch_{s}"), exist_ok=True)
        np.save(os.path.join(data, f"batch_{s}", "X.npy"), x)
        np.save(os.path.join(data, f"batch_{s}", "labels.npy"), y)
        batches.append((x, y))
    failures = []
    for kind in ("adam", "momentum", "adagrad", "sgd", "adam-init", "two-losses"):
        path = env.path(kind, "model.onnx")
        onnx.save(make_model(kind), path)
        ref_losses, ref_params = reference(kind, batches)
        for k in ((1, 2) if kind == "adam" else (1,)):
            plan, report, saved = (env.path(kind, f"k{k}", f)
                                   for f in ("plan.bin", "r.json", "t.onnx"))
            E.run_tool([env.tofuc, path, "--gpus", k, "-o", plan])
            E.run_tool([env.tofu_run, plan, "--steps", STEPS, "--data", data, "--save", saved,
                        "--report", report, "--quiet"])
            losses = E.report_losses(E.load_json(report), report)
            d = E.rel_diff(losses, ref_losses)
            print(f"{kind} k={k}: losses {np.round(losses, 6)} ref {np.round(ref_losses, 6)} "
                  f"rel {d:.2e}")
            if d > TOL:
                failures.append(f"{kind} k={k}: losses differ (rel {d:.2e})")
            trained = E.initializers(E.load_onnx(saved, "trained model"))
            for n in WEIGHTS:
                d = E.rel_diff(trained[n], ref_params[n])
                moved = E.rel_diff(ref_params[n], starting_weights(kind)[n])
                print(f"{kind} k={k}: {n} rel {d:.2e} (moved {moved:.2e})")
                if d > TOL:
                    failures.append(f"{kind} k={k}: {n} after {STEPS} steps differs from the "
                                    f"reference (rel {d:.2e} > {TOL})")
                if moved < 1e-3:
                    failures.append(f"{kind}: {n} did not move ({moved:.2e})")
    check_checkpoints(env, data, batches)
    # The model's algorithm is the training step: training flags are refused.
    r = E.run_tool([env.tofuc, env.path("adam", "model.onnx"), "--optimizer", "momentum",
                    "-o", env.path("refused.bin")], expect_rc=1)
    E.check("carries its own training algorithm" in r.stderr and "--optimizer" in r.stderr,
            f"tofuc --optimizer on a model with training_info: {r.stderr}")
    E.check(not failures, "\n  " + "\n  ".join(failures))


if __name__ == "__main__":
    E.main_wrapper(main)
