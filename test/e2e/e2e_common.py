"""Shared helpers for tofuc's end-to-end tests (test/e2e/*.py).

Every e2e script is invoked by ctest as::

    /usr/bin/python3 test/e2e/<script>.py --bin BUILD/bin --model examples/mlp/mlp.onnx \
        --workdir BUILD/test/e2e/<name>

and exits 0 on success, or non-zero after printing ``FAIL: <why>`` to stderr.

This module provides:

* ``parse_args`` / ``Env``: the common command line, tool paths, a fresh workdir;
* ``run_tool``: runs tofuc / tofu-run with a timeout, treats a signal, a core
  dump, an assertion or an LLVM crash banner as a failure, and prints the full
  command, exit code, stdout and stderr when something is off;
* ``rel_diff``: max|a-b| / max(max|b|, 1e-12), the tolerance measure all tests use;
* ``TorchGraph``: rebuilds an ONNX forward+loss graph (Gemm, Relu, MatMul, Add,
  SoftmaxCrossEntropyLoss, ...) as torch operations so gradients can be
  computed by ``loss.backward()`` — the independent oracle for tofuc's autodiff.
"""

import argparse
import errno
import json
import os
import shlex
import shutil
import subprocess
import sys

import numpy as np

# Strings that mean a tool crashed or hit an internal invariant instead of
# reporting a user error. Any of them on stderr is a failure. (abort() and
# signals are caught by the negative return code; "Aborted (core dumped)" is
# printed by a shell, not by the process, so it is not listed.)
CRASH_MARKERS = (
    "Segmentation fault",
    "Assertion `",             # glibc assert()
    "terminate called",        # uncaught C++ exception
    "LLVM ERROR",
    "PLEASE submit a bug report",
    "Stack dump:",
    "AddressSanitizer",
    "UndefinedBehaviorSanitizer",
)

DEFAULT_TIMEOUT_S = 600


class TestFailure(Exception):
    """Raised by checks; ``main_wrapper`` turns it into exit code 1."""


def fail(msg):
    """Aborts the current test with ``msg``."""
    raise TestFailure(msg)


def check(cond, msg):
    """Fails with ``msg`` unless ``cond``."""
    if not cond:
        fail(msg)


class Env:
    """Command-line options shared by all e2e tests, plus tool paths."""

    def __init__(self, args):
        self.bin = os.path.abspath(args.bin)
        self.model = os.path.abspath(args.model)
        self.workdir = os.path.abspath(args.workdir)
        self.tofuc = os.path.join(self.bin, "tofuc")
        self.tofu_run = os.path.join(self.bin, "tofu-run")

    def require_tools(self, *tools):
        """Fails clearly when a tool binary is missing (not built yet)."""
        for tool in tools or (self.tofuc, self.tofu_run):
            check(os.path.isfile(tool) and os.access(tool, os.X_OK),
                  f"tool not found or not executable: {tool} (is the build complete?)")
        check(os.path.isfile(self.model), f"model not found: {self.model}")

    def path(self, *parts):
        """A path inside the workdir; parent folders are created."""
        p = os.path.join(self.workdir, *parts)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        return p


def parse_args(description, argv=None, extra=None):
    """Parses --bin/--model/--workdir and returns an ``Env`` with a fresh workdir."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--bin", required=True, help="folder holding tofuc and tofu-run")
    parser.add_argument("--model", required=True, help="the MLP ONNX model")
    parser.add_argument("--workdir", required=True, help="scratch folder (recreated)")
    if extra:
        extra(parser)
    args = parser.parse_args(argv)
    env = Env(args)
    env.args = args
    shutil.rmtree(env.workdir, ignore_errors=True)
    os.makedirs(env.workdir)
    _WORKDIRS.append(env.workdir)
    return env


# Workdirs made by ``parse_args``; ``main_wrapper`` removes them when the test
# passes. The e2e suite writes about 12 GB of models, plans and dumps; kept
# for every test, they filled the disk of a CI machine, and the tests that ran
# last failed on "No space left on device". A failing test keeps its workdir
# (what to look at); TOFU_E2E_KEEP_WORKDIR=1 keeps every one.
_WORKDIRS = []


def _disk_free(path):
    """Free bytes on the file system holding ``path`` (or its nearest existing
    parent), or None when it cannot be read."""
    while path and not os.path.exists(path):
        path = os.path.dirname(path)
    try:
        return shutil.disk_usage(path or ".").free
    except OSError:
        return None


class Result:
    """Outcome of one tool invocation."""

    def __init__(self, cmd, returncode, stdout, stderr):
        self.cmd = cmd
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr

    def describe(self):
        """Full text of the invocation for failure messages."""
        return (f"  command: {shlex.join(self.cmd)}\n"
                f"  exit code: {self.returncode}\n"
                f"  stdout:\n{_indent(self.stdout)}\n"
                f"  stderr:\n{_indent(self.stderr)}")

    def crash_reason(self):
        """Why this run counts as a crash, or None."""
        if self.returncode < 0:
            return f"killed by signal {-self.returncode}"
        if self.returncode >= 128:
            return f"exit code {self.returncode} (looks like a signal/abort)"
        for marker in CRASH_MARKERS:
            if marker in self.stderr:
                return f"stderr contains crash marker {marker!r}"
        return None


def _indent(text, limit=6000):
    if len(text) > limit:
        text = text[:limit // 2] + "\n    [... truncated ...]\n" + text[-limit // 2:]
    return "\n".join("    | " + line for line in text.splitlines()) or "    | <empty>"


def run_tool(cmd, expect_rc=0, cwd=None, timeout=DEFAULT_TIMEOUT_S, quiet=False):
    """Runs ``cmd``; fails unless it exits with ``expect_rc`` without crashing.

    ``expect_rc=None`` accepts any non-crash exit code. Returns a ``Result``.
    """
    cmd = [str(c) for c in cmd]
    if not quiet:
        print("$", shlex.join(cmd), flush=True)
    try:
        proc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=timeout)
    except subprocess.TimeoutExpired as e:
        fail(f"timed out after {timeout}s: {shlex.join(cmd)}\n"
             f"  stdout so far:\n{_indent((e.stdout or b'').decode(errors='replace'))}\n"
             f"  stderr so far:\n{_indent((e.stderr or b'').decode(errors='replace'))}")
    except OSError as e:
        fail(f"cannot execute {cmd[0]}: {e}")
    res = Result(cmd, proc.returncode, proc.stdout.decode(errors="replace"),
                 proc.stderr.decode(errors="replace"))
    crash = res.crash_reason()
    if crash:
        fail(f"tool crashed ({crash}):\n{res.describe()}")
    if expect_rc is not None and res.returncode != expect_rc:
        fail(f"expected exit code {expect_rc}, got {res.returncode}:\n{res.describe()}")
    return res


def compile_plan(env, k, out, extra=()):
    """``tofuc MODEL --gpus k -o out``; returns the Result."""
    return run_tool([env.tofuc, env.model, "--gpus", str(k), "-o", out, *extra])


def load_json(path, what="report"):
    """Reads a JSON file, failing with a clear message when absent or invalid."""
    check(os.path.isfile(path), f"{what} was not written: {path}")
    with open(path) as f:
        text = f.read()
    try:
        return json.loads(text)
    except ValueError as e:
        fail(f"{what} {path} is not valid JSON ({e}):\n{_indent(text)}")


def report_losses(report, path="report"):
    """The per-step losses of a tofu-run --report, as a float64 array."""
    check(isinstance(report, dict) and isinstance(report.get("steps"), list),
          f"{path}: expected an object with a 'steps' list, got: {str(report)[:500]}")
    losses = []
    for i, step in enumerate(report["steps"]):
        check(isinstance(step, dict) and _is_number(step.get("loss")),
              f"{path}: steps[{i}] has no numeric 'loss': {step!r}")
        losses.append(float(step["loss"]))
    return np.asarray(losses, dtype=np.float64)


def _is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def is_number(x):
    """True for JSON numbers (int or float, not bool)."""
    return _is_number(x)


def is_int(x):
    """True for JSON integers (not bool)."""
    return isinstance(x, int) and not isinstance(x, bool)


def rel_diff(a, b):
    """max|a-b| / max(max|b|, 1e-12): ``b`` is the reference."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return float("inf")
    if a.size == 0:
        return 0.0
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return float("inf")
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-12))


def dump_name(onnx_name):
    """File-name form of an ONNX tensor name used by ``tofu-run --dump``."""
    return onnx_name.replace("/", "_")


def initializers(model):
    """{name: numpy array} of an ONNX model's initializers, in graph order."""
    from onnx import numpy_helper
    return {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}


def load_onnx(path, what="model"):
    """onnx.load with a clear failure message."""
    import onnx
    check(os.path.isfile(path), f"{what} was not written: {path}")
    try:
        return onnx.load(path)
    except Exception as e:  # protobuf DecodeError and friends
        fail(f"cannot load {what} {path}: {type(e).__name__}: {e}")


# --------------------------------------------------------------------------
# ONNX graph -> torch
# --------------------------------------------------------------------------

class TorchGraph:
    """Evaluates an ONNX forward+loss graph with torch ops, so autograd applies.

    The graph's nodes are followed in file order (ONNX requires topological
    order). Parameters and inputs are passed as torch tensors by ONNX name.
    Supported ops are those the example models export; anything else raises
    ``NotImplementedError`` naming the op, so the oracle never silently guesses.
    """

    def __init__(self, model):
        from onnx import helper
        self.model = model
        self.graph = model.graph
        self.outputs = [o.name for o in self.graph.output]
        self._attrs = [
            {a.name: helper.get_attribute_value(a) for a in node.attribute}
            for node in self.graph.node
        ]

    def forward(self, tensors):
        """Runs the graph. ``tensors``: {name: torch.Tensor} for inputs and
        initializers. Returns {name: torch.Tensor} of every value computed."""
        env = dict(tensors)
        for node, attrs in zip(self.graph.node, self._attrs):
            ins = [env[name] if name else None for name in node.input]
            outs = self._eval(node, attrs, ins)
            for name, value in zip(node.output, outs):
                if name:
                    env[name] = value
        return env

    def loss(self, tensors):
        """The graph's single output (the scalar loss)."""
        check(len(self.outputs) == 1,
              f"expected one graph output (the loss), found {self.outputs}")
        return self.forward(tensors)[self.outputs[0]]

    @staticmethod
    def _eval(node, attrs, ins):
        import torch
        import torch.nn.functional as F
        op = node.op_type
        if op == "Gemm":
            a, b = ins[0], ins[1]
            c = ins[2] if len(ins) > 2 else None
            if attrs.get("transA", 0):
                a = a.t()
            if attrs.get("transB", 0):
                b = b.t()
            y = attrs.get("alpha", 1.0) * (a @ b)
            if c is not None:
                y = y + attrs.get("beta", 1.0) * c
            return [y]
        if op == "MatMul":
            return [torch.matmul(ins[0], ins[1])]
        if op == "Add":
            return [ins[0] + ins[1]]
        if op == "Mul":
            return [ins[0] * ins[1]]
        if op == "Relu":
            return [torch.relu(ins[0])]
        if op == "Identity":
            return [ins[0]]
        if op == "SoftmaxCrossEntropyLoss":
            scores, labels = ins[0], ins[1].long()
            weight = ins[2] if len(ins) > 2 else None
            reduction = attrs.get("reduction", b"mean")
            if isinstance(reduction, bytes):
                reduction = reduction.decode()
            ignore_index = attrs.get("ignore_index")
            if ignore_index is None:
                # ONNX: no ignore index; torch's default -100 is equivalent
                # as long as no label is -100.
                check(not bool((labels == -100).any()), "label -100 without ignore_index")
                ignore_index = -100
            loss = F.cross_entropy(scores, labels, weight=weight,
                                   ignore_index=int(ignore_index), reduction=reduction)
            outs = [loss]
            if len(node.output) > 1:
                outs.append(F.log_softmax(scores, dim=1))
            return outs
        return TorchGraph._eval_more(node, attrs, ins)

    @staticmethod
    def _eval_more(node, attrs, ins):
        """The ops of the generated example models (examples/rnn, wresnet,
        transformer): each follows the ONNX operator definition (opset 17)."""
        import torch
        import torch.nn.functional as F
        from onnx import numpy_helper
        op = node.op_type
        unary = {"Sigmoid": torch.sigmoid, "Tanh": torch.tanh, "Erf": torch.erf}
        if op in unary:
            return [unary[op](ins[0])]
        if op == "Sub":
            return [ins[0] - ins[1]]
        if op == "Div":
            return [ins[0] / ins[1]]
        if op == "Constant":
            return [torch.from_numpy(numpy_helper.to_array(attrs["value"]).copy())]
        if op == "Split":
            axis = attrs.get("axis", 0)
            if len(ins) > 1 and ins[1] is not None:
                sizes = [int(v) for v in ins[1].tolist()]
            else:
                n = len(node.output)
                sizes = [ins[0].shape[axis] // n] * n
            return list(torch.split(ins[0], sizes, dim=axis))
        if op == "Squeeze":
            y = ins[0]
            for a in sorted((int(v) % y.dim() for v in ins[1].tolist()), reverse=True):
                y = y.squeeze(a)
            return [y]
        if op == "Unsqueeze":
            y = ins[0]
            rank = y.dim() + ins[1].numel()
            for a in sorted(int(v) % rank for v in ins[1].tolist()):
                y = y.unsqueeze(a)
            return [y]
        if op == "Slice":
            y = ins[0]
            starts, ends = ins[1].tolist(), ins[2].tolist()
            axes = ins[3].tolist() if len(ins) > 3 and ins[3] is not None \
                else list(range(len(starts)))
            steps = ins[4].tolist() if len(ins) > 4 and ins[4] is not None \
                else [1] * len(starts)
            index = [slice(None)] * y.dim()
            for a, b, e, st in zip(axes, starts, ends, steps):
                check(st == 1, f"TorchGraph: Slice {node.name!r}: only step 1")
                index[int(a) % y.dim()] = slice(int(b), int(e))
            return [y[tuple(index)]]
        if op == "Greater":
            return [ins[0] > ins[1]]
        if op == "Concat":
            return [torch.cat(ins, dim=attrs["axis"])]
        if op == "Reshape":
            shape = [int(v) for v in ins[1].tolist()]
            shape = [ins[0].shape[i] if d == 0 else d for i, d in enumerate(shape)]
            return [ins[0].reshape(shape)]
        if op == "Flatten":
            axis = attrs.get("axis", 1)
            return [ins[0].reshape(int(np.prod(ins[0].shape[:axis])), -1)]
        if op == "Transpose":
            return [ins[0].permute(*attrs["perm"])]
        if op == "Softmax":
            return [torch.softmax(ins[0], dim=attrs.get("axis", -1))]
        if op == "Where":
            return [torch.where(ins[0].bool(), ins[1], ins[2])]
        if op == "LayerNormalization":
            axis = attrs.get("axis", -1) % ins[0].dim()
            shape = list(ins[0].shape[axis:])
            return [F.layer_norm(ins[0], shape, ins[1], ins[2] if len(ins) > 2 else None,
                                 eps=attrs.get("epsilon", 1e-5))]
        if op == "Conv":
            check(attrs.get("group", 1) == 1 and attrs.get("auto_pad", b"NOTSET") == b"NOTSET",
                  f"TorchGraph: Conv {node.name!r}: only group 1 with explicit pads")
            pads = attrs.get("pads", [0, 0, 0, 0])
            check(pads[:2] == pads[2:], f"TorchGraph: Conv {node.name!r}: asymmetric pads")
            return [F.conv2d(ins[0], ins[1], ins[2] if len(ins) > 2 else None,
                             stride=attrs.get("strides", [1, 1]), padding=pads[:2],
                             dilation=attrs.get("dilations", [1, 1]))]
        if op == "BatchNormalization":
            training = bool(attrs.get("training_mode", 0))
            eps, momentum = attrs.get("epsilon", 1e-5), attrs.get("momentum", 0.9)
            # torch's momentum weighs the new statistic; ONNX's the old one.
            # Running statistics are not trained (no gradient), as in tofuc.
            y = F.batch_norm(ins[0], ins[3].detach().clone(), ins[4].detach().clone(),
                             ins[1], ins[2],
                             training=training, momentum=1 - momentum, eps=eps)
            return [y]
        if op == "MaxPool":
            pads = attrs.get("pads", [0, 0, 0, 0])
            check(pads[:2] == pads[2:], f"TorchGraph: MaxPool {node.name!r}: asymmetric pads")
            return [F.max_pool2d(ins[0], attrs["kernel_shape"],
                                 stride=attrs.get("strides", [1, 1]), padding=pads[:2],
                                 ceil_mode=bool(attrs.get("ceil_mode", 0)))]
        if op == "GlobalAveragePool":
            return [ins[0].mean(dim=tuple(range(2, ins[0].dim())), keepdim=True)]
        raise NotImplementedError(
            f"TorchGraph: op {op} (node {node.name!r}) is not supported by the oracle")


def torch_sgd_steps(module, params0, args, lr, steps):
    """Losses of ``steps`` torch SGD steps of the loss ``module(*args)`` from
    the parameters ``params0`` ({name: ndarray}, e.g. tofu's dumped initial
    values), and the step-1 gradients ({name: ndarray})."""
    import torch
    state = module.state_dict()
    with torch.no_grad():
        for n, v in params0.items():
            state[n].copy_(torch.from_numpy(v))
    opt = torch.optim.SGD(module.parameters(), lr=lr)
    losses, grads = [], None
    for step in range(steps):
        opt.zero_grad()
        loss = module(*args)
        loss.backward()
        if step == 0:
            grads = {n: p.grad.detach().numpy().copy()
                     for n, p in module.named_parameters()}
        losses.append(loss.item())
        opt.step()
    return np.array(losses), grads


def train_vs_torch(env, tag, onnx_path, data_dir, module, x, labels, k, *, lr, steps,
                   tol, loss_tol, failures, reference_steps=None):
    """tofuc ``onnx_path`` (a loss of inputs ``input`` and ``labels``) at
    ``k`` devices with SGD, ``steps`` tofu-run steps on the batch in
    ``data_dir`` (written from ``x`` and ``labels``), against torch from
    the same initial parameters: appends to ``failures`` every step-1
    gradient off by more than ``tol`` (rel_diff) and losses off by more than
    ``loss_tol``. ``reference_steps(module, params0, x, labels)`` replaces
    ``torch_sgd_steps`` where the torch side needs more (a flag on the
    module). The folders are ``<tag>/k<k>/`` in the workdir."""
    plan = env.path(tag, f"k{k}", "plan.bin")
    dump = os.path.dirname(env.path(tag, f"k{k}", "dump", "x"))
    report = env.path(tag, f"k{k}", "r.json")
    run_tool([env.tofuc, onnx_path, "--gpus", k, "--optimizer", "sgd", "--lr", lr,
              "-o", plan])
    run_tool([env.tofu_run, plan, "--data", data_dir, "--steps", steps, "--dump", dump,
              "--report", report, "--quiet"])
    losses = report_losses(load_json(report), report)
    fed = np.load(os.path.join(dump, "input.input.npy"))
    check(fed.dtype == np.float64 and np.array_equal(fed, x.numpy()),
          f"{tag} k={k}: tofu-run did not feed the fixed float64 batch")
    params0 = {n: np.load(os.path.join(dump, f"param.{dump_name(n)}.npy"))
               for n, _ in module.named_parameters()}
    if reference_steps:
        ref_losses, ref_grads = reference_steps(module, params0, x, labels)
    else:
        ref_losses, ref_grads = torch_sgd_steps(module, params0, (x, labels), lr, steps)
    for n, ref in ref_grads.items():
        got = np.load(os.path.join(dump, f"grad.{dump_name(n)}.npy"))
        d = rel_diff(got, ref)
        if d > tol:
            worst = np.unravel_index(np.argmax(np.abs(got - ref)), ref.shape)
            failures.append(f"{tag} k={k}: step-1 gradient of {n} differs from torch by "
                            f"rel {d:.3e}, worst at {worst}: tofu {got[worst]!r}, torch "
                            f"{ref[worst]!r}")
    d = rel_diff(losses, ref_losses)
    if d > loss_tol:
        failures.append(f"{tag} k={k}: losses {losses} vs torch {ref_losses} (rel {d:.2e})")
    print(f"{tag} k={k}: losses {losses} (torch {ref_losses}, rel {d:.1e}); "
          f"{len(ref_grads)} step-1 gradients checked", flush=True)


def main_wrapper(fn):
    """Runs ``fn()``; prints PASS or ``FAIL: ...`` and exits 0 / 1."""
    name = os.path.basename(sys.argv[0])
    try:
        fn()
    except TestFailure as e:
        print(f"FAIL: {name}: {e}", file=sys.stderr, flush=True)
        sys.exit(1)
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
        where = e.filename or (_WORKDIRS[0] if _WORKDIRS else ".")
        free = _disk_free(where)
        free_text = "unknown" if free is None else f"{free / 2**30:.2f} GiB"
        print(f"FAIL: {name}: no space left on the device holding {where} ({free_text} "
              "free): free some disk space (each e2e test removes its workdir when it "
              "passes) and run the test again", file=sys.stderr, flush=True)
        sys.exit(1)
    if not os.environ.get("TOFU_E2E_KEEP_WORKDIR"):
        for workdir in _WORKDIRS:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"PASS: {name}", flush=True)
    sys.exit(0)
