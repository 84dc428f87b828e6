#!/usr/bin/python3
"""e2e.external_weights: tofuc --external-weights keeps each device's shard in its own file.

Compiles ``mlp.onnx`` for k = 4 with the weights inside plan.bin and with
``--external-weights`` (twice, into two directories):

* the external plans and their ``<checksum>.tofu-weights`` files are
  byte-identical across the two compilations (determinism), one file per
  device with a distinct shard, and plan.bin is smaller by about the weights;
* tofu-run trains the external plan to exactly the losses of the plan with
  the weights inside;
* a missing, truncated or altered weights file is a clear error.
"""

import glob
import os
import shutil

import e2e_common as E

K = 4


def losses(env, plan, tag):
    report = env.path(f"{tag}.json")
    E.run_tool([env.tofu_run, plan, "--steps", 2, "--quiet", "--report", report])
    return E.report_losses(E.load_json(report), report)


def main():
    env = E.parse_args(__doc__.splitlines()[1])
    env.require_tools()
    inside = env.path("inside.bin")
    E.compile_plan(env, K, inside)
    dirs = [env.path("ext1"), env.path("ext2")]
    for d in dirs:
        os.makedirs(d, exist_ok=True)
        E.compile_plan(env, K, os.path.join(d, "plan.bin"), ["--external-weights"])
    files = [sorted(os.path.basename(f) for f in glob.glob(os.path.join(d, "*.tofu-weights")))
             for d in dirs]
    E.check(files[0] == files[1] and len(files[0]) == K,
            f"expected {K} weights files, the same in both compilations: {files}")
    for name in ["plan.bin"] + files[0]:
        with open(os.path.join(dirs[0], name), "rb") as a, open(os.path.join(dirs[1], name), "rb") as b:
            E.check(a.read() == b.read(), f"{name} differs between two compilations")
    shard_bytes = sum(os.path.getsize(os.path.join(dirs[0], f)) for f in files[0])
    plan = os.path.join(dirs[0], "plan.bin")
    # The PLAN section grows by the shards' file names (one per device, 37
    # characters in a FlatBuffers string) and the tables' alignment.
    E.check(os.path.getsize(inside) - os.path.getsize(plan) >= shard_bytes - 48 * (K + 1),
            f"plan.bin shrank by {os.path.getsize(inside) - os.path.getsize(plan)} bytes, "
            f"the shards hold {shard_bytes}")

    want, got = losses(env, inside, "inside"), losses(env, plan, "external")
    E.check((want == got).all(), f"losses differ: external {got} vs inside {want}")

    def expect_error(text):
        res = E.run_tool([env.tofu_run, plan, "--steps", 1, "--quiet"], expect_rc=1)
        E.check(text in res.stderr, f"expected '{text}' in the error, got: {res.stderr}")

    victim = os.path.join(dirs[0], files[0][1])
    keep = victim + ".keep"
    shutil.copy(victim, keep)
    os.remove(victim)
    expect_error("cannot open its external weights file")
    with open(keep, "rb") as f:
        data = f.read()
    with open(victim, "wb") as f:
        f.write(data[:-4])
    expect_error("(truncated or replaced)")
    with open(victim, "wb") as f:
        f.write(bytes([data[0] ^ 1]) + data[1:])
    expect_error("checksum mismatch in its weights in external weights file")
    print(f"{K} weights files ({shard_bytes} bytes), deterministic; losses {got}")


if __name__ == "__main__":
    E.main_wrapper(main)
