"""The nine ONNX model-zoo "light" graphs: forward, compile at k = 1, 4, 8, train.

onnx (1.13 and later) ships nine model-zoo graphs under
``onnx/backend/test/data/light/`` (resnet50, vgg19, inception_v1,
inception_v2, densenet121, shufflenet, squeezenet, bvlc_alexnet, zfnet512;
opset 9) whose float initializers were replaced by ``ConstantOfShape`` nodes
(``onnx.tools.replace_initializer_by_constant_of_shape``), with the output
``light_<name>_output_0.pb`` that onnx's ReferenceEvaluator computed. onnx's
backend test runner (``onnx/backend/test/runner/__init__.py``,
``generate_dummy_data(random=False)``) feeds every graph input that is not an
initializer ``np.arange(n).reshape(shape) / n`` in float32 and compares with
rtol 1e-3 (densenet121: 2e-3), atol 1e-7 (``onnx/backend/test/case/model``).

For each model this script

1. turns every ``ConstantOfShape`` of an initializer shape back into an
   initializer (``restore_initializers``): the constant itself for the
   forward check, seeded random values for training (a constant weight makes
   every channel identical, which hides partitioning errors);
2. **forward**: runs the model on onnx's input and compares the output with
   the shipped reference, at onnx's tolerances. tofu-run has no inference
   mode, so the forward output is read as a gradient: a zero-initialized
   probe parameter P of the output's shape is the only trainable tensor and
   the loss is ``ReduceSum(output * P)``, so ``dloss/dP`` (``--dump``'s
   ``grad.P.npy``) is the output itself, bit for bit. The check runs in
   float64 (the model's float32 weights and input held exactly): with every
   channel's weights equal, the graphs without normalization reach logits
   near 1e10 (squeezenet: 9.5e9, where a float32 ulp is 1024), so in float32
   any summation order but the reference evaluator's makes the exactly
   uniform softmax (0.001 everywhere) a random one (squeezenet: 1/512 on
   512 classes, 0 on the rest); ``--forward-float32`` shows it;
3. **compile**: ``tofuc --gpus k --loss softmax-cross-entropy`` for every k
   of ``--ks`` (the built-in loss reads the logits before the model's final
   Softmax, docs/Training.md);
4. **train**: ``tofu-run`` ``--steps`` SGD steps on one fixed batch (onnx's
   input, a fixed label) at k = 1 and every other k of ``--train-ks``, in
   float64 (``--float32`` for float32); the losses and every parameter's
   update (trained - initial, from ``--save``) must equal k = 1's (float64:
   losses 1e-12, updates 1e-9; float32: 1e-5 and 1e-3).

Run alone (the models take minutes on 2 cores)::

  /usr/bin/python3 test/e2e/model_zoo_light.py --bin build/bin --workdir /tmp/zoo \\
      --light-dir <onnx>/backend/test/data/light [--models resnet50,vgg19] \\
      [--ks 1,4,8] [--train-ks 1,4] [--steps 2]

Importable with Debian's python3 and onnx 1.12 (which reads these opset-9
graphs). ``restore_initializers`` is usable on its own.
"""

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_common as E  # noqa: E402

MODELS = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
          "shufflenet", "squeezenet", "vgg19", "zfnet512"]
# onnx/backend/test/case/model/__init__.py: (rtol, atol) per model.
ONNX_TOLERANCE = {name: (1e-3, 1e-7) for name in MODELS}
ONNX_TOLERANCE["densenet121"] = (2e-3, 1e-7)

# k = 4 (and 8) against k = 1, float32: the same step partitioned differently
# sums in another order. Losses: relative difference; updates (trained -
# initial weights): rel_diff per parameter, i.e. max |delta_k - delta_1| over
# max |delta_1|.
TOL_LOSS = 1e-5
TOL_UPDATE = 1e-3
# The same in float64 (the default): summation order moves only the last
# bits, so a partitioning error cannot hide below the tolerance (in float32
# a BatchNormalization scale of densenet121's last block, whose gradient sums
# 49 cancelling terms per channel, differs by rel 5e-3 between k = 4 and 1).
TOL64_LOSS = 1e-12
TOL64_UPDATE = 1e-9
LR = 0.001
LABEL = 7


def _consumers(graph):
    """{tensor name: [(node, input index)]} over the graph's nodes."""
    uses = {}
    for node in graph.node:
        for i, name in enumerate(node.input):
            uses.setdefault(name, []).append((node, i))
    return uses


def _random_weight(name, shape, uses, rng):
    """A seeded random value for a restored weight, scaled by its use so a
    deep network stays finite: He-normal for convolution and matrix weights,
    a positive scale near 1 for BatchNormalization's scale / variance and for
    a Mul operand, small values for biases and means."""
    shape = tuple(int(d) for d in shape)
    seen = set()
    frontier = [name]
    while frontier:  # look through the shape-only ops (densenet's Unsqueeze)
        t = frontier.pop()
        for node, i in uses.get(t, []):
            if node.op_type in ("Unsqueeze", "Reshape", "Flatten", "Identity") and i == 0:
                frontier.extend(node.output)
                continue
            seen.add((node.op_type, i))
    if len(shape) >= 2:
        fan_in = int(np.prod(shape[1:])) if len(shape) > 2 else min(shape)
        return rng.normal(0.0, np.sqrt(2.0 / max(fan_in, 1)), shape).astype(np.float32)
    if seen & {("BatchNormalization", 1), ("BatchNormalization", 4), ("Mul", 0), ("Mul", 1)}:
        return rng.uniform(0.8, 1.2, shape).astype(np.float32)
    return rng.uniform(-0.1, 0.1, shape).astype(np.float32)


def restore_initializers(model, seed=None):
    """Replaces each ``ConstantOfShape`` whose shape is an initializer by an
    initializer of that shape: the node's constant (seed None) or seeded
    random values (``_random_weight``). The shape initializers go too.
    Returns the names of the restored weights."""
    from onnx import helper, numpy_helper
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    uses = _consumers(graph)
    rng = np.random.default_rng(seed) if seed is not None else None
    restored, keep_nodes, dropped = [], [], set()
    for node in graph.node:
        if node.op_type != "ConstantOfShape" or node.input[0] not in inits:
            keep_nodes.append(node)
            continue
        shape = numpy_helper.to_array(inits[node.input[0]])
        value = np.zeros((1,), np.float32)
        for attr in node.attribute:
            if attr.name == "value":
                value = numpy_helper.to_array(attr.t)
        if value.dtype != np.float32:
            keep_nodes.append(node)
            continue
        name = node.output[0]
        if rng is None:
            array = np.full(tuple(int(d) for d in shape), value.reshape(-1)[0], np.float32)
        else:
            array = _random_weight(name, shape, uses, rng)
        graph.initializer.append(numpy_helper.from_array(array, name))
        # IR version 3 lists every initializer among the graph inputs.
        graph.input.append(helper.make_tensor_value_info(name, 1, list(array.shape)))
        dropped.add(node.input[0])
        restored.append(name)
    del graph.node[:]
    graph.node.extend(keep_nodes)
    still_used = {x for n in graph.node for x in n.input}
    dropped -= still_used
    kept = [t for t in graph.initializer if t.name not in dropped]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    kept_inputs = [i for i in graph.input if i.name not in dropped]
    del graph.input[:]
    graph.input.extend(kept_inputs)
    return restored


def to_float64(model):
    """Makes every float32 tensor of ``model`` float64: initializers, graph
    inputs and outputs, value_info (the light models hold no Constant or
    Cast)."""
    from onnx import TensorProto, numpy_helper
    graph = model.graph
    for i, t in enumerate(graph.initializer):
        if t.data_type == TensorProto.FLOAT:
            graph.initializer[i].CopyFrom(numpy_helper.from_array(
                numpy_helper.to_array(t).astype(np.float64), t.name))
    for v in list(graph.input) + list(graph.output) + list(graph.value_info):
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            v.type.tensor_type.elem_type = TensorProto.DOUBLE
    for node in graph.node:
        E.check(node.op_type not in ("Constant", "Cast", "ConstantOfShape"),
                f"to_float64: node {node.name!r} ({node.op_type}) is not converted")


def onnx_input(model):
    """onnx's dummy input: {name: arange(n).reshape(shape) / n} in float32 for
    every graph input that is not an initializer (dims without a value: 1)."""
    inits = {t.name for t in model.graph.initializer}
    feeds = {}
    for x in model.graph.input:
        if x.name in inits:
            continue
        shape = tuple(d.dim_value if d.HasField("dim_value") else 1
                      for d in x.type.tensor_type.shape.dim)
        n = int(np.prod(shape))
        feeds[x.name] = (np.arange(n).reshape(shape) / n).astype(np.float32)
    return feeds


def add_probe(model):
    """Adds parameter ``tofu_probe`` (zeros, the output's shape) and output
    ``tofu_probe_loss = ReduceSum(output * tofu_probe)``; d loss / d probe is
    the model's output. Returns the output's name."""
    from onnx import helper, numpy_helper
    graph = model.graph
    check_outputs = [o.name for o in graph.output]
    E.check(len(check_outputs) == 1, f"expected one graph output, got {check_outputs}")
    out = graph.output[0]
    shape = [d.dim_value for d in out.type.tensor_type.shape.dim]
    graph.initializer.append(numpy_helper.from_array(np.zeros(shape, np.float32), "tofu_probe"))
    graph.input.append(helper.make_tensor_value_info("tofu_probe", 1, shape))
    graph.node.append(helper.make_node("Mul", [out.name, "tofu_probe"], ["tofu_probe_prod"]))
    graph.node.append(helper.make_node("ReduceSum", ["tofu_probe_prod"], ["tofu_probe_loss"],
                                       keepdims=0))
    graph.output.append(helper.make_tensor_value_info("tofu_probe_loss", 1, []))
    return out.name


def write_batch(env, folder, feeds, labels=None):
    """``folder``/batch_0/<input>.npy (and labels.npy); returns ``folder``."""
    for name, value in feeds.items():
        np.save(env.path(folder, "batch_0", E.dump_name(name) + ".npy"), value)
    if labels is not None:
        np.save(env.path(folder, "batch_0", "labels.npy"), labels)
    return env.path(folder)


def check_forward(env, name, path, float64):
    """Step 2: the output on onnx's input equals light_<name>_output_0.pb
    (computed in float64 with ``float64``: the same weights and input, held
    exactly)."""
    import onnx
    from onnx import numpy_helper
    model = E.load_onnx(path, name)
    restore_initializers(model)
    feeds = onnx_input(model)
    out_name = add_probe(model)
    if float64:
        to_float64(model)
        feeds = {n: v.astype(np.float64) for n, v in feeds.items()}
    fwd = env.path(name, "forward.onnx")
    onnx.save(model, fwd)
    plan = env.path(name, "forward.bin")
    E.run_tool([env.tofuc, fwd, "--gpus", "1", "--loss", "tofu_probe_loss",
                "--trainable", "tofu_probe", "-o", plan])
    data = write_batch(env, os.path.join(name, "forward-data"), feeds)
    dump = env.path(name, "forward-dump", "x")
    dump = os.path.dirname(dump)
    E.run_tool([env.tofu_run, plan, "--data", data, "--steps", "1", "--dump", dump])
    got = np.load(os.path.join(dump, "grad.tofu_probe.npy"))
    ref_path = os.path.join(os.path.dirname(path), f"light_{name}_output_0.pb")
    ref = numpy_helper.to_array(onnx.load_tensor(ref_path))
    rtol, atol = ONNX_TOLERANCE[name]
    E.check(got.shape == ref.shape, f"{name}: forward output {out_name} has shape "
            f"{got.shape}, the reference {ref.shape}")
    err = np.abs(got.astype(np.float64) - ref)
    bound = atol + rtol * np.abs(ref)
    worst = int(np.argmax(err - bound))
    ok = bool(np.all(err <= bound))
    print(f"{name}: forward ({'float64' if float64 else 'float32'}) {out_name} "
          f"{list(ref.shape)} vs {os.path.basename(ref_path)}: "
          f"max |diff| {err.max():.3e} (rtol {rtol:g}, atol {atol:g}) "
          f"{'ok' if ok else 'FAILS'}", flush=True)
    E.check(ok, f"{name}: forward output differs from the reference at flat index {worst}: "
            f"{got.reshape(-1)[worst]!r} vs {ref.reshape(-1)[worst]!r} "
            f"(rtol {rtol:g}, atol {atol:g})")


def train_model(env, name, path, seed, float64):
    """The model with seeded random weights and onnx's input as one batch
    (in float64 with ``float64``)."""
    import onnx
    model = E.load_onnx(path, name)
    restore_initializers(model, seed=seed)
    feeds = onnx_input(model)
    if float64:
        to_float64(model)
        feeds = {n: v.astype(np.float64) for n, v in feeds.items()}
    out = env.path(name, "train.onnx")
    onnx.save(model, out)
    batch = next(iter(feeds.values())).shape[0]
    data = write_batch(env, os.path.join(name, "train-data"), feeds,
                       labels=np.full((batch,), LABEL, np.int64))
    return out, data


def check_compile_and_train(env, name, path, ks, train_ks, steps, seed, float64, timings):
    # Compiled only (no k to train at): the model as shipped, in float32.
    float64 = float64 and bool(train_ks)
    model_path, data = train_model(env, name, path, seed, float64)
    tol_loss, tol_update = (TOL64_LOSS, TOL64_UPDATE) if float64 else (TOL_LOSS, TOL_UPDATE)
    initial = E.initializers(E.load_onnx(model_path, name))
    losses, updates = {}, {}
    for k in sorted(set(ks) | set(train_ks)):
        plan = env.path(name, f"k{k}", "plan.bin")
        t0 = time.time()
        E.run_tool([env.tofuc, model_path, "--gpus", str(k), "--loss", "softmax-cross-entropy",
                    "--lr", str(LR), "-o", plan])
        timings[f"tofuc k={k}"] = time.time() - t0
        if k not in train_ks:
            os.remove(plan)
            continue
        report = env.path(name, f"k{k}", "r.json")
        saved = env.path(name, f"k{k}", "trained.onnx")
        t0 = time.time()
        E.run_tool([env.tofu_run, plan, "--data", data, "--steps", str(steps),
                    "--report", report, "--save", saved])
        timings[f"tofu-run k={k}"] = time.time() - t0
        losses[k] = E.report_losses(E.load_json(report), report)
        E.check(np.all(np.isfinite(losses[k])), f"{name}: k={k}: non-finite loss {losses[k]}")
        trained = E.initializers(E.load_onnx(saved, f"{name} k={k} saved model"))
        updates[k] = {n: trained[n].astype(np.float64) - initial[n]
                      for n in initial if n in trained and initial[n].dtype.kind == "f"}
        for f in (plan, saved):
            os.remove(f)
        print(f"{name}: k={k}: losses {' '.join(f'{x:.7f}' for x in losses[k])}", flush=True)
    for k in ks:
        if k not in train_ks:
            print(f"{name}: k={k}: compiled", flush=True)
    if not train_ks:
        return
    base = min(train_ks)
    moved = [n for n, d in updates[base].items() if np.any(d != 0)]
    E.check(moved, f"{name}: k={base}: no parameter changed in {steps} steps")
    failures = []
    for k in train_ks:
        if k == base:
            continue
        d = E.rel_diff(losses[k], losses[base])
        worst = max((E.rel_diff(updates[k][n], updates[base][n]), n) for n in moved)
        print(f"{name}: k={k} vs k={base}: losses rel {d:.2e}, worst update {worst[1]} "
              f"rel {worst[0]:.2e} ({len(moved)} parameters)", flush=True)
        if not d <= tol_loss:
            failures.append(f"k={k}: losses {losses[k].tolist()} vs k={base} "
                            f"{losses[base].tolist()} (rel {d:.2e} > {tol_loss:g})")
        if not worst[0] <= tol_update:
            failures.append(f"k={k}: the update of {worst[1]} differs from k={base}'s by rel "
                            f"{worst[0]:.2e} > {tol_update:g}")
    E.check(not failures, f"{name}:\n  " + "\n  ".join(failures))


def _children_cpu():
    """User + system CPU seconds of the finished child processes."""
    import resource
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main():
    def extra(p):
        p.add_argument("--light-dir", required=True,
                       help="onnx's backend/test/data/light folder")
        p.add_argument("--models", default=",".join(MODELS))
        p.add_argument("--ks", default="1,4,8", help="k values to compile at")
        p.add_argument("--train-ks", default="1,4", help="k values to train at (the "
                       "smallest is the reference)")
        p.add_argument("--steps", type=int, default=2)
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--float32", action="store_true",
                       help="train in float32 (default: float64, where k = 4 must "
                       "equal k = 1 to 1e-9)")
        p.add_argument("--no-forward", action="store_true")
        p.add_argument("--forward-float32", action="store_true",
                       help="run the forward check in float32 (default: float64; see "
                       "the docstring)")
        p.add_argument("--no-train", action="store_true")
    env = E.parse_args(__doc__.splitlines()[0], extra=extra)
    args = env.args
    env.require_tools(env.tofuc, env.tofu_run)
    ks = [int(k) for k in args.ks.split(",") if k]
    train_ks = [] if args.no_train else [int(k) for k in args.train_ks.split(",") if k]
    failures = []
    for name in [m for m in args.models.split(",") if m]:
        E.check(name in MODELS, f"unknown model {name!r}; the light models are {MODELS}")
        path = os.path.join(args.light_dir, f"light_{name}.onnx")
        E.check(os.path.isfile(path), f"{path} not found")
        timings = {}
        t0 = time.time()
        cpu0 = _children_cpu()
        try:
            if not args.no_forward:
                check_forward(env, name, path, not args.forward_float32)
                timings["forward"] = time.time() - t0
            if ks or train_ks:
                check_compile_and_train(env, name, path, ks, train_ks, args.steps,
                                        args.seed, not args.float32, timings)
        except E.TestFailure as e:
            failures.append(str(e))
            print(f"{name}: FAIL: {e}", flush=True)
        timings["total"] = time.time() - t0
        print(f"{name}: wall seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items())
              + f"; CPU seconds of tofuc and tofu-run: {_children_cpu() - cpu0:.1f}", flush=True)
        import shutil
        shutil.rmtree(os.path.join(env.workdir, name), ignore_errors=True)
    E.check(not failures, f"{len(failures)} model(s) failed:\n" + "\n".join(failures))


if __name__ == "__main__":
    E.main_wrapper(main)
