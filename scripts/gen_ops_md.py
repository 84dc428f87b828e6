#!/usr/bin/python3
# ===- scripts/gen_ops_md.py - Generate docs/ops.md, the ONNX op coverage table -===#
#
# Lists every ONNX operator of the default domain (latest version <= opset 17,
# from onnx.defs) with what tofuc has for it:
#
#   TDL spec     the builtin specs (`tofu-tdl` with no arguments lists them)
#   gradient     the spec has a gradient rule (`tofu-onnx-node-tests --list-ops`)
#   CPU kernel   native (a registered kernel), interpreted (the runtime evaluates
#                the lowered TDL expression) or none (`--list-ops`; specs whose
#                output is opaque(...) need a native kernel)
#   CUDA kernel  how tofu-run --backend cuda runs the op: cuBLAS / cuDNN (the
#                mappings of runtime/cuda/CudaSchedule.cpp), generated (tofuc
#                --cuda-arch generates a kernel from the spec's expression; not
#                for opaque specs), hand-written (status("Op") in runtime/cuda's
#                .cu files), or none
#   node tests   ONNX backend node tests passing on the CPU backend / single-node
#                tests of the op (the report of `tofu-onnx-node-tests --report`:
#                onnx 1.12's tests, which every machine has; a single node
#                without a spec ran as a model through the importer, so Shape
#                and the like count when they fold; bench/onnx_node_tests.md
#                has onnx 1.17's counts)
#
# and, for ops without a spec, the reason from the curated table below.
#
#   /usr/bin/python3 scripts/gen_ops_md.py --tofu-tdl build/bin/tofu-tdl \
#       --node-runner build/bin/tofu-onnx-node-tests \
#       --node-report build/test/onnx-node/node-tests.tsv \
#       --specs tdl-specs --cuda-dir runtime/cuda -o docs/ops.md
#
# With --check FILE, exits 1 (printing a diff) when FILE differs from the
# generated text. `ninja update-ops-md` regenerates docs/ops.md in place.
#
# ===------------------------------------------------------------------------===#
import argparse
import collections
import difflib
import glob
import os
import re
import subprocess
import sys
import tempfile

import onnx
import onnx.defs

MAX_OPSET = 17

# Why an ONNX op has no TDL spec (and may never have one). Ops not listed
# here and without a spec are "not specified yet".
DATA_DEPENDENT = "data-dependent output shape (the shape depends on input values)"
SHAPE_INPUT = ("output shape given by an input's values: needs that input as a "
               "compile-time constant")
SEQUENCE = "sequence/optional types (TDL describes dense tensors only)"
CONTROL = "control flow (subgraph attributes)"
QUANT = "quantization (integer types with scales/zero points; not in TDL's dtypes)"
STRING = "string tensors"
RANDOM = "random (not a function of its inputs)"
UNSIGNED = "unsigned integer types only (not in TDL's dtypes)"
RECURRENT = "unrolled at import into per-step cells of spec'd ops (docs/RecurrentUnrolling.md)"
SPARSE_OR_VALUE = "a value, not a computation (to be folded into an initializer)"
RESIZE = ("normalized at import into ResizeNearest (tdl-specs/resize.tdl: nearest upsampling "
          "by whole factors) or ResizeInterp (tdl-specs/resize-interp.tdl: linear, cubic and "
          "other nearest resizes) with constant scales or sizes; tf_crop_and_resize, cubic "
          "exclude_outside and antialias when downsampling are refused "
          "(docs/Import.md)")

NO_SPEC_REASONS = {
    # data-dependent output shapes
    "NonZero": DATA_DEPENDENT,
    "Unique": DATA_DEPENDENT,
    "NonMaxSuppression": DATA_DEPENDENT,
    "Compress": DATA_DEPENDENT,
    # output shape from input values
    "ConstantOfShape": SHAPE_INPUT + "; folded at import when it is one (docs/Import.md)",
    "Range": SHAPE_INPUT + "; folded at import when it is one (docs/Import.md)",
    "OneHot": SHAPE_INPUT,
    "TopK": SHAPE_INPUT,
    "Tile": SHAPE_INPUT,
    "Resize": RESIZE,
    "Upsample": RESIZE,
    "Pad": SHAPE_INPUT,
    "Expand": SHAPE_INPUT,
    "Reshape": SHAPE_INPUT,
    "Slice": SHAPE_INPUT,
    "CenterCropPad": SHAPE_INPUT,
    "HannWindow": SHAPE_INPUT,
    "HammingWindow": SHAPE_INPUT,
    "BlackmanWindow": SHAPE_INPUT,
    "MelWeightMatrix": SHAPE_INPUT,
    "DFT": SHAPE_INPUT,
    "STFT": SHAPE_INPUT,
    "EyeLike": "output is a constant pattern of the input's shape (not yet specified)",
    # sequences and optionals
    "SequenceAt": SEQUENCE,
    "SequenceConstruct": SEQUENCE,
    "SequenceEmpty": SEQUENCE,
    "SequenceErase": SEQUENCE,
    "SequenceInsert": SEQUENCE,
    "SequenceLength": SEQUENCE,
    "SequenceMap": SEQUENCE,
    "SplitToSequence": SEQUENCE,
    "ConcatFromSequence": SEQUENCE,
    "Optional": SEQUENCE,
    "OptionalGetElement": SEQUENCE,
    "OptionalHasElement": SEQUENCE,
    # control flow
    "If": CONTROL,
    "Loop": CONTROL,
    "Scan": CONTROL,
    # quantization
    "QuantizeLinear": QUANT,
    "DequantizeLinear": QUANT,
    "DynamicQuantizeLinear": QUANT,
    "QLinearConv": QUANT,
    "QLinearMatMul": QUANT,
    "ConvInteger": QUANT,
    "MatMulInteger": QUANT,
    # strings
    "StringNormalizer": STRING,
    "TfIdfVectorizer": STRING + " and n-gram tables",
    # random
    "RandomNormal": RANDOM,
    "RandomNormalLike": RANDOM,
    "RandomUniform": RANDOM,
    "RandomUniformLike": RANDOM,
    "Multinomial": RANDOM,
    "Bernoulli": RANDOM,
    # unsigned integers
    "BitShift": UNSIGNED,
    # recurrent
    "RNN": RECURRENT,
    "GRU": RECURRENT,
    "LSTM": RECURRENT,
    # values and metadata
    "Constant": SPARSE_OR_VALUE + ", as the importer does; sparse_value attributes are sparse",
    "Shape": "shape metadata: known at compile time, folded at import (docs/Import.md)",
    "Size": "shape metadata: known at compile time, folded at import (docs/Import.md)",
    # others
    "Det": "opaque linear algebra (LU factorization): needs a native kernel",
    "RoiAlign": "data-dependent input regions (boxes index the feature map)",
    "GridSample": "data-dependent input regions (the grid indexes the input)",
    "MaxUnpool": "scatter to data-dependent positions",
    "Scatter": "opsets 9-10: imported as ScatterElements",
}

CPU_KERNEL_NOTE = {
    "native": "native",
    "interpreted": "interpreted",
    "none": "none",
}


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def onnx_ops():
    """name -> since_version of the latest default-domain schema <= MAX_OPSET."""
    latest = {}
    for schema in onnx.defs.get_all_schemas_with_history():
        if schema.domain not in ("", "ai.onnx") or schema.since_version > MAX_OPSET:
            continue
        if schema.deprecated:
            continue
        old = latest.get(schema.name)
        if old is None or schema.since_version > old.since_version:
            latest[schema.name] = schema
    return {name: s.since_version for name, s in latest.items()}


def list_ops(runner):
    """op -> (spec, grad, cpu) from `tofu-onnx-node-tests --list-ops`."""
    ops = {}
    for line in run([runner, "--list-ops"]).splitlines():
        fields = line.split("\t")
        if len(fields) == 4:
            ops[fields[0]] = (fields[1] == "yes", fields[2] == "yes", fields[3])
    return ops


def opaque_specs(spec_dir):
    """Ops whose spec has an opaque(...) output expression."""
    opaque = set()
    for path in sorted(glob.glob(os.path.join(spec_dir, "*.tdl"))):
        text = open(path, encoding="utf-8").read()
        blocks = re.split(r"(?m)^(?=(?:op|grad)\s)", text)
        for block in blocks:
            m = re.match(r"op\s+(\w+)", block)
            if m and re.search(r"\bopaque\s*\(", block):
                opaque.add(m.group(1))
    return opaque


# Ops the CUDA schedule maps to a library (runtime/cuda/CudaSchedule.cpp,
# CudaDnnMapping.cpp); the cuDNN ones fall back to their generated kernel
# where cuDNN's mapping does not apply (MaxPoolGrad always does).
CUDA_LIBRARY = {
    "MatMul": "cuBLAS",
    "Gemm": "cuBLAS",
    "Conv": "cuDNN or generated",
    "ConvGradInput": "cuDNN or generated",
    "ConvGradWeight": "cuDNN or generated",
    "MaxPool": "cuDNN or generated",
    "AveragePool": "cuDNN or generated",
    "AveragePoolGrad": "cuDNN or generated",
    "GlobalAveragePool": "cuDNN or generated",
    "GlobalAveragePoolGrad": "cuDNN or generated",
    "BatchNormalization": "cuDNN or generated",
    "BatchNormalizationNormalized": "cuDNN or generated",
    "BatchNormalizationGrad": "cuDNN or generated",
}


def cuda_ops(cuda_dir):
    ops = set()
    for path in sorted(glob.glob(os.path.join(cuda_dir, "*.cu"))):
        ops.update(re.findall(r'status\("(\w+)"\)', open(path, encoding="utf-8").read()))
    return ops


def node_results(report):
    """op -> (passed, total) over single-node tests, and the overall counts."""
    per_op = collections.defaultdict(lambda: [0, 0])
    totals = collections.Counter()
    for line in open(report, encoding="utf-8"):
        fields = line.rstrip("\n").split("\t")
        if len(fields) != 5:
            continue
        name, op, status, how, detail = fields
        totals[status] += 1
        if op:
            per_op[op][1] += 1
            if status == "PASS":
                per_op[op][0] += 1
    return per_op, totals


def generate(args):
    specs = set(run([args.tofu_tdl]).split())
    listed = list_ops(args.node_runner)
    opaque = opaque_specs(args.specs)
    cuda = cuda_ops(args.cuda_dir)
    report = args.node_report
    tmp = None
    if not report or not os.path.exists(report):
        tmp = tempfile.NamedTemporaryFile(suffix=".tsv", delete=False)
        tmp.close()
        report = tmp.name
        subprocess.run([args.node_runner, "--report", report], check=False,
                       capture_output=True)
    per_op, totals = node_results(report)
    if tmp:
        os.unlink(tmp.name)
    ops = onnx_ops()

    def cuda_of(op):
        if op in CUDA_LIBRARY:
            return CUDA_LIBRARY[op]
        if op in specs and op not in opaque:
            return "generated"
        if op in cuda:
            return "hand-written"
        return "—"

    def cpu_of(op):
        kind = listed.get(op, (False, False, "none"))[2]
        if kind == "interpreted" and op in opaque:
            return "none (opaque spec)"
        return kind

    rows = []
    counts = collections.Counter()
    for op in sorted(ops):
        has_spec = op in specs
        has_grad = listed.get(op, (False, False, "none"))[1]
        cpu = cpu_of(op)
        passed, total = per_op.get(op, (0, 0))
        tests = f"{passed}/{total}" if total else "—"
        if has_spec:
            note = ""
        else:
            note = NO_SPEC_REASONS.get(op, "not specified yet")
        counts["ops"] += 1
        counts["spec"] += has_spec
        counts["grad"] += has_grad
        counts["cpu"] += cpu in ("native", "interpreted")
        counts["native"] += cpu == "native"
        counts["cuda"] += cuda_of(op) != "—"
        counts["tested"] += total > 0
        counts["fully passing"] += total > 0 and passed == total
        rows.append(f"| {op} | {ops[op]} | {'yes' if has_spec else '—'} | "
                    f"{'yes' if has_grad else '—'} | {cpu} | "
                    f"{cuda_of(op)} | {tests} | {note} |")

    internal = sorted(set(specs) - set(ops))
    out = []
    out.append("<!-- Generated by scripts/gen_ops_md.py; do not edit. "
               "Regenerate: ninja -C <build> update-ops-md -->")
    out.append("# ONNX operator coverage")
    out.append("")
    out.append(f"Every operator of the default ONNX domain (latest version up to "
               f"opset {MAX_OPSET}) and what tofuc has for it. An op needs a TDL "
               f"spec (`tdl-specs/`, see [TDL.md](TDL.md)) to be imported, "
               f"partitioned and trained; a gradient rule to be trained through; "
               f"a CPU kernel to run on tofu-run's CPU backend: *native* (a "
               f"hand-written kernel) or *interpreted* (the runtime evaluates the "
               f"spec's lowered expression). *CUDA kernel* says how "
               f"`tofu-run --backend cuda` runs it (generated kernels take float32, "
               f"int64 and bool operands); the executor has run on one H200 for the "
               f"ops of the GPU check's models only ([Cuda.md](Cuda.md), "
               f"[bench/gpu/H200.md](../bench/gpu/H200.md)).")
    out.append("")
    out.append("*Node tests*: onnx 1.12's backend node tests "
               "(`/usr/share/libonnx-testdata/data/node`) passing on the CPU "
               "backend / single-node tests of the op (`tofu-onnx-node-tests`; "
               "ctest test `onnx-node.cpu` keeps `test/onnx-node/passing.txt` "
               "passing). A node without a TDL spec runs as a model through "
               "tofuc's importer and a forward plan, so ops folded at import "
               "pass; the summary counts the multi-node (`*_expanded`) tests "
               "too. onnx 1.17's tests (opsets to 22): "
               "[bench/onnx_node_tests.md](../bench/onnx_node_tests.md).")
    out.append("")
    out.append(f"Summary: {counts['ops']} ops; {counts['spec']} with a TDL spec, "
               f"{counts['grad']} with a gradient rule, {counts['cpu']} runnable "
               f"on the CPU ({counts['native']} native), {counts['cuda']} with a "
               f"CUDA kernel. Node tests: {totals['PASS']} pass, "
               f"{totals['FAIL']} fail, {totals['SKIP']} skipped of "
               f"{sum(totals.values())}.")
    out.append("")
    out.append("| ONNX op | opset | TDL spec | gradient | CPU kernel | CUDA kernel "
               "| node tests | why no spec |")
    out.append("|---|---|---|---|---|---|---|---|")
    out.extend(rows)
    out.append("")
    out.append("## tofu-internal ops")
    out.append("")
    out.append("TDL specs that are not ONNX operators (gradient and optimizer "
               "ops produced by the training pass).")
    out.append("")
    out.append("| op | gradient | CPU kernel | CUDA kernel |")
    out.append("|---|---|---|---|")
    for op in internal:
        has_grad = listed.get(op, (False, False, "none"))[1]
        out.append(f"| {op} | {'yes' if has_grad else '—'} | {cpu_of(op)} | "
                   f"{cuda_of(op)} |")
    out.append("")
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1] if __doc__ else None)
    parser.add_argument("--tofu-tdl", required=True)
    parser.add_argument("--node-runner", required=True)
    parser.add_argument("--node-report", default="")
    parser.add_argument("--specs", required=True)
    parser.add_argument("--cuda-dir", required=True)
    parser.add_argument("-o", "--output", required=True)
    parser.add_argument("--check", help="compare with this file; exit 1 if it differs")
    args = parser.parse_args()
    text = generate(args)
    with open(args.output, "w", encoding="utf-8") as f:
        f.write(text)
    if args.check:
        old = open(args.check, encoding="utf-8").read() if os.path.exists(args.check) else ""
        if old != text:
            sys.stdout.writelines(difflib.unified_diff(
                old.splitlines(True), text.splitlines(True), args.check, args.output))
            print(f"\n{args.check} is out of date: regenerate it with "
                  f"`ninja -C <build> update-ops-md` (or copy {args.output})")
            return 1
        print(f"{args.check} is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
