#!/usr/bin/env python3
"""Which models of onnx's model suites tofuc imports, and why not the rest.

Runs ``tofuc model.onnx --compile-to=import`` on every ``*/model.onnx`` of
the suites (default: onnx 1.17's ``pytorch-converted``, ``pytorch-operator``
and ``simple``, test material nobody here wrote, opsets 6 to 12) and prints
per suite how many import, then the reasons of the rest grouped ("missing op
X", "opset N", "element type T", ...), and with ``--list`` each model's
outcome.

``--forward`` also checks the forward output of every model that imports
against the reference output stored beside it (``test_data_set_0``): tofuc
has no forward-only plan yet, so the model is wrapped into a training step
whose loss is the squared error to the reference, ``sum_k sum((Y_k -
ref_k)^2)``, with the graph inputs turned into initializers holding
``input_*.pb``; ``tofuc`` compiles it (k = 1) and ``tofu-run --steps 1``
reports step 1's loss, computed before any update. A model "matches" when
``sqrt(loss) <= TOL * ||ref||`` (TOL = 1e-5 in float32, relative L2 error;
1e-12 in float64). Models whose wrapper tofuc cannot train (an op on the
path without a gradient rule, integer outputs) are listed with the reason.

Usage (from the repository root, after a build):

    /usr/bin/python3 bench/opsets.py [--forward] [--list] \
        [--data /work/onnx117/onnx/backend/test/data] [--bin build/bin]

Results: bench/opsets.md.
"""
import argparse
import collections
import glob
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import helper, numpy_helper

SUITES = ("pytorch-converted", "pytorch-operator", "simple")
TOL = {np.float32: 1e-5, np.float64: 1e-12}


def first_error(stderr):
    """The first line of tofuc's stderr that says 'error:' (or the first)."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    for line in lines:
        if "error:" in line:
            return line
    return lines[0] if lines else "(no message)"


def reason_group(message):
    """A short group for an import error message."""
    patterns = [
        (r"opset (\d+) of the default domain is not supported",
         lambda m: f"opset {m.group(1)} not supported"),
        (r"operator '([^']+)'(?: \(opset \d+\))? has no TDL spec",
         lambda m: f"missing op {m.group(1)}"),
        (r"has ONNX element type (\S+),", lambda m: f"element type {m.group(1)}"),
        (r"has a symbolic dimension", lambda m: "symbolic input dim (needs --shape)"),
        (r"\((\w+)\)(?: at opset \d+)?: input '[^']*' \(operand \d+\) must be known "
         r"at compile time",
         lambda m: f"{m.group(1)}: const operand computed at run time"),
    ]
    for pattern, group in patterns:
        m = re.search(pattern, message)
        if m:
            return group(m)
    # The message without the path and node names.
    text = re.sub(r"^.*?error: \S+: ", "", message)
    return re.sub(r"node '[^']*'", "node N", text)


def run(cmd, timeout=600):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=timeout)
    return proc.returncode, proc.stdout.decode(errors="replace"), \
        proc.stderr.decode(errors="replace")


def wrap_with_error_loss(model_dir, path):
    """Writes the squared-error wrapper of model_dir's model to `path`;
    returns (float dtype, ||ref||) or raises ValueError with the reason."""
    model = onnx.load(os.path.join(model_dir, "model.onnx"))
    graph = model.graph
    data_dir = os.path.join(model_dir, "test_data_set_0")
    inits = {i.name for i in graph.initializer}
    for k, value in enumerate(graph.input):
        if value.name in inits:
            continue
        tensor = onnx.TensorProto()
        with open(os.path.join(data_dir, f"input_{k}.pb"), "rb") as f:
            tensor.ParseFromString(f.read())
        tensor.name = value.name
        graph.initializer.append(tensor)
    # The former inputs stay listed as inputs: before IR version 4 every
    # initializer must be one.
    refs, dtype, norms = [], None, []
    for k, value in enumerate(graph.output):
        tensor = onnx.TensorProto()
        with open(os.path.join(data_dir, f"output_{k}.pb"), "rb") as f:
            tensor.ParseFromString(f.read())
        ref = numpy_helper.to_array(tensor)
        if ref.dtype not in (np.float32, np.float64):
            raise ValueError(f"output {k} is {ref.dtype}, not float")
        if not np.all(np.isfinite(ref)):
            raise ValueError(f"reference output {k} holds inf or nan")
        if dtype is not None and ref.dtype != dtype:
            raise ValueError("outputs of different float types")
        dtype = ref.dtype.type
        peak = float(np.max(np.abs(ref), initial=0.0))
        if peak > 0:  # scaled: some references hold values near 1e308
            norms.append(peak * math.sqrt(float(np.sum((ref.astype(np.float64) / peak) ** 2))))
        refs.append((value.name, ref))
    terms = []
    for k, (name, ref) in enumerate(refs):
        const = numpy_helper.from_array(ref, f"tofu_bench_ref{k}")
        graph.initializer.append(const)
        graph.input.append(helper.make_tensor_value_info(
            const.name, const.data_type, list(ref.shape)))
        graph.node.extend([
            helper.make_node("Sub", [name, const.name], [f"tofu_bench_d{k}"]),
            helper.make_node("Mul", [f"tofu_bench_d{k}"] * 2, [f"tofu_bench_sq{k}"]),
            helper.make_node("ReduceSum", [f"tofu_bench_sq{k}"], [f"tofu_bench_l{k}"],
                             keepdims=0),
        ])
        terms.append(f"tofu_bench_l{k}")
    loss = terms[0]
    for k, term in enumerate(terms[1:]):
        graph.node.append(helper.make_node("Add", [loss, term], [f"tofu_bench_s{k}"]))
        loss = f"tofu_bench_s{k}"
    del graph.output[:]
    del graph.value_info[:]
    elem = onnx.TensorProto.FLOAT if dtype == np.float32 else onnx.TensorProto.DOUBLE
    graph.output.append(helper.make_tensor_value_info(loss, elem, []))
    onnx.save(model, path)
    return dtype, math.hypot(*norms)


def forward_check(args, model_dir, workdir):
    """'match (rel ...)', 'MISMATCH (rel ...)' or 'not run: <why>'."""
    wrapped = os.path.join(workdir, "wrapped.onnx")
    try:
        dtype, norm = wrap_with_error_loss(model_dir, wrapped)
    except (ValueError, OSError) as e:
        return f"not run: {e}"
    plan = os.path.join(workdir, "plan.bin")
    rc, _, err = run([args.tofuc, wrapped, "--gpus", "1", "-o", plan])
    if rc != 0:
        return "not run: " + reason_group(first_error(err))
    report = os.path.join(workdir, "report.json")
    rc, _, err = run([args.tofu_run, plan, "--steps", "1", "--quiet",
                      "--report", report])
    if rc != 0:
        return "not run: tofu-run: " + first_error(err)
    import json
    with open(report) as f:
        loss = json.load(f)["steps"][0]["loss"]
    if loss is None or not math.isfinite(loss):
        return f"MISMATCH (loss {loss})"
    rel = math.sqrt(max(loss, 0.0)) / max(norm, 1e-30)
    ok = rel <= TOL[dtype] and math.isfinite(loss)
    return f"{'match' if ok else 'MISMATCH'} (rel L2 error {rel:.1e})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="/work/onnx117/onnx/backend/test/data")
    parser.add_argument("--suites", default=",".join(SUITES))
    parser.add_argument("--bin", default="build/bin")
    parser.add_argument("--forward", action="store_true")
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()
    args.tofuc = os.path.join(args.bin, "tofuc")
    args.tofu_run = os.path.join(args.bin, "tofu-run")
    workdir = tempfile.mkdtemp(prefix="tofu-opsets-")
    try:
        total_ok = total = 0
        groups = collections.Counter()
        forward = collections.Counter()
        lines = []
        for suite in args.suites.split(","):
            models = sorted(glob.glob(os.path.join(args.data, suite, "*", "model.onnx")))
            imported = 0
            for path in models:
                name = f"{suite}/{os.path.basename(os.path.dirname(path))}"
                opset = max((o.version for o in onnx.load(path).opset_import
                             if o.domain in ("", "ai.onnx")), default=0)
                rc, _, err = run([args.tofuc, path, "--compile-to=import"])
                if rc == 0:
                    imported += 1
                    outcome = "imports"
                    if args.forward:
                        check = forward_check(args, os.path.dirname(path), workdir)
                        forward[re.sub(r" \(.*", "", check) if not check.startswith("not run")
                                else check] += 1
                        outcome += "; forward " + check
                else:
                    message = first_error(err)
                    groups[reason_group(message)] += 1
                    outcome = message
                lines.append(f"{name} (opset {opset}): {outcome}")
            print(f"{suite}: {imported} of {len(models)} import")
            total_ok += imported
            total += len(models)
        print(f"all: {total_ok} of {total} import")
        print("not imported, by reason:")
        for reason, count in sorted(groups.items(), key=lambda kv: (-kv[1], kv[0])):
            print(f"  {count:3d}  {reason[:160]}")
        if args.forward:
            print("forward output vs the reference (imported models):")
            for what, count in sorted(forward.items(), key=lambda kv: (-kv[1], kv[0])):
                print(f"  {count:3d}  {what[:160]}")
        if args.list:
            print("models:")
            for line in lines:
                print("  " + line)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
