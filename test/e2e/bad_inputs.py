#!/usr/bin/python3
"""e2e.bad_inputs: bad user input is a clean error (exit 1), never a crash.

Fixtures are generated in the workdir from ``mlp.onnx`` and a freshly compiled
plan. Proves that:

tofuc
  1. a truncated ONNX file (first 100 bytes; first half) -> exit 1, stderr says
     "error" and names the file; an empty file -> exit 1 with "error";
  2. a valid ONNX model whose op has no TDL spec (``Det``, node ``unsupported_det``)
     -> exit 1, stderr names the op type and the node;
  4. a non-existent model path -> exit 1 with "error".
tofu-run
  3. plan.bin with one byte flipped in the middle, and plan.bin truncated to
     half -> exit 1, stderr says "error" and mentions corrupt/checksum/truncated;
     an empty plan and a plan with a wrong magic -> exit 1 with "error";
  4. a non-existent plan path -> exit 1 with "error".

A crash (killed by a signal, core dump, assertion/LLVM crash banner on stderr)
is always a failure. Every case runs; all failures are listed at the end.
"""

import os

import e2e_common as E

CORRUPTION_WORDS = ("corrupt", "checksum", "truncat")


def make_det_model(path):
    """input[4,8] -> Gemm(W[4,8], transB=1) -> [4,4] -> Det -> scalar 'loss'.

    Gemm is supported (the MLP uses it); Det has no TDL spec."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 8)).astype(np.float32), "w")
    b = numpy_helper.from_array(np.zeros(4, np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["input", "w", "b"], ["h"], name="proj", transB=1),
         helper.make_node("Det", ["h"], ["loss"], name="unsupported_det")],
        "det_model",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
        initializer=[w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="tofuc-e2e")
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)


def write_bytes(path, data):
    with open(path, "wb") as f:
        f.write(data)


def expect_error(cmd, what, must_contain=(), any_of=()):
    """Runs cmd; requires exit 1, 'error' on stderr, every string of
    ``must_contain`` and at least one of ``any_of`` (case-insensitive)."""
    res = E.run_tool(cmd, expect_rc=1)
    err = res.stderr.lower()
    missing = [s for s in ("error",) + tuple(must_contain) if s.lower() not in err]
    if any_of and not any(s.lower() in err for s in any_of):
        missing.append(" or ".join(repr(s) for s in any_of))
    E.check(not missing, f"{what}: stderr lacks {', '.join(map(str, missing))}:\n{res.describe()}")
    print(f"  ok: {what}: {res.stderr.strip().splitlines()[0] if res.stderr.strip() else ''}")


def main():
    env = E.parse_args(__doc__.splitlines()[1])
    env.require_tools()
    with open(env.model, "rb") as f:
        model_bytes = f.read()
    plan = env.path("plan.bin")
    E.compile_plan(env, 2, plan)
    with open(plan, "rb") as f:
        plan_bytes = f.read()
    E.check(len(plan_bytes) > 16, f"plan.bin is only {len(plan_bytes)} bytes")

    cases = []

    # 1. truncated / empty ONNX files.
    for name, data in (("mlp_first100.onnx", model_bytes[:100]),
                       ("mlp_half.onnx", model_bytes[:len(model_bytes) // 2])):
        p = env.path(name)
        write_bytes(p, data)
        cases.append((f"tofuc on truncated model {name}",
                      lambda p=p, name=name: expect_error(
                          [env.tofuc, p, "--gpus", "2", "-o", env.path("out", name + ".bin")],
                          f"tofuc on truncated model {name}", must_contain=(name,))))
    empty_model = env.path("empty.onnx")
    write_bytes(empty_model, b"")
    cases.append(("tofuc on empty model", lambda: expect_error(
        [env.tofuc, empty_model, "--gpus", "2", "-o", env.path("out", "empty.bin")],
        "tofuc on empty model")))

    # 2. op without a TDL spec.
    det = env.path("det.onnx")
    make_det_model(det)
    cases.append(("tofuc on a Det model", lambda: expect_error(
        [env.tofuc, det, "--gpus", "2", "-o", env.path("out", "det.bin")],
        "tofuc on a model with op Det (node unsupported_det)",
        must_contain=("Det", "unsupported_det"))))

    # 3. corrupted plans.
    flipped = bytearray(plan_bytes)
    flipped[len(flipped) // 2] ^= 0xFF
    wrong_magic = bytearray(plan_bytes)
    wrong_magic[0:4] = b"XXXX" if plan_bytes[0:4] != b"XXXX" else b"YYYY"
    for name, data, words in (
            ("plan_flipped.bin", bytes(flipped), CORRUPTION_WORDS),
            ("plan_half.bin", plan_bytes[:len(plan_bytes) // 2], CORRUPTION_WORDS),
            ("plan_empty.bin", b"", ()),
            ("plan_wrong_magic.bin", bytes(wrong_magic), ())):
        p = env.path(name)
        write_bytes(p, data)
        cases.append((f"tofu-run on {name}", lambda p=p, name=name, words=words: expect_error(
            [env.tofu_run, p, "--steps", "1"], f"tofu-run on {name}", any_of=words)))

    # 4. missing inputs.
    missing_model = env.path("does_not_exist.onnx")
    missing_plan = env.path("does_not_exist.bin")
    cases.append(("tofuc on a missing model", lambda: expect_error(
        [env.tofuc, missing_model, "--gpus", "2", "-o", env.path("out", "missing.bin")],
        "tofuc on a missing model")))
    cases.append(("tofu-run on a missing plan", lambda: expect_error(
        [env.tofu_run, missing_plan, "--steps", "1"], "tofu-run on a missing plan")))

    failures = []
    for what, fn in cases:
        try:
            fn()
        except E.TestFailure as e:
            print(f"  FAILED: {what}", flush=True)
            failures.append(str(e))
    E.check(not failures, f"{len(failures)} of {len(cases)} cases failed:\n\n" + "\n\n".join(failures))


if __name__ == "__main__":
    E.main_wrapper(main)
