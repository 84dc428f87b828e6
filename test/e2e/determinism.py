#!/usr/bin/python3
"""e2e.determinism: the same model and flags give a byte-identical plan.bin.

Compiles ``mlp.onnx`` with ``--gpus 4`` twice to the same output path (copying
the first result aside) and requires the two files to be identical. Proves that
tofuc's output depends on nothing but its input (no hash-map iteration order,
timestamps, addresses or unseeded randomness), as DESIGN.md §3 requires.
"""

import shutil

import e2e_common as E


def main():
    env = E.parse_args(__doc__.splitlines()[1])
    env.require_tools()
    plan = env.path("plan.bin")
    first = env.path("plan.first.bin")
    E.compile_plan(env, 4, plan)
    shutil.move(plan, first)
    E.compile_plan(env, 4, plan)
    with open(first, "rb") as f:
        a = f.read()
    with open(plan, "rb") as f:
        b = f.read()
    E.check(len(a) > 0, "plan.bin is empty")
    if a != b:
        n = min(len(a), len(b))
        diffs = [i for i in range(n) if a[i] != b[i]]
        first_diff = diffs[0] if diffs else n
        E.fail(f"two compilations differ: sizes {len(a)} vs {len(b)} bytes, "
               f"{len(diffs)} differing bytes in the common prefix, first at offset {first_diff} "
               f"(0x{first_diff:x}): {a[first_diff:first_diff + 16].hex()} vs "
               f"{b[first_diff:first_diff + 16].hex()}")
    print(f"identical: {len(a)} bytes")


if __name__ == "__main__":
    E.main_wrapper(main)
