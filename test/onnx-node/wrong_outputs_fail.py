#!/usr/bin/python3
"""The node-test runner must fail a test whose output is wrong.

Copies a few passing ONNX node tests, one of each way the runner runs them
(a spec'd single node, a multi-node `*_expanded` graph compiled into a plan,
a single node folded at import, a Gradient graph), changes one element of
each expected output, and checks that tofu-onnx-node-tests reports every one
as FAIL and exits 1 under a baseline that lists them.

  wrong_outputs_fail.py RUNNER NODE_DATA SIMPLE_DATA
"""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

TESTS = [("node", "test_abs"),
         ("node", "test_softmax_example_expanded"),
         ("node", "test_shape"),
         ("simple", "test_gradient_of_add")]


def perturb(path):
    tensor = onnx.load_tensor(path)
    array = numpy_helper.to_array(tensor).copy()
    flat = array.reshape(-1)
    if array.dtype.kind == "f":
        flat[0] = flat[0] * 1.01 + 1
    else:
        flat[0] = flat[0] + 1
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(array, tensor.name).SerializeToString())


def main():
    runner, node_data, simple_data = sys.argv[1:4]
    roots = {"node": node_data, "simple": simple_data}
    with tempfile.TemporaryDirectory() as tmp:
        for kind, name in TESTS:
            dest = os.path.join(tmp, name)
            shutil.copytree(os.path.join(roots[kind], name), dest)
            for root, _, _ in os.walk(dest):
                os.chmod(root, 0o755)
            for set_dir in sorted(os.listdir(dest)):
                output = os.path.join(dest, set_dir, "output_0.pb")
                if os.path.exists(output):
                    os.chmod(output, 0o644)
                    perturb(output)
        baseline = os.path.join(tmp, "baseline.txt")
        with open(baseline, "w") as f:
            f.write("\n".join(name for _, name in TESTS) + "\n")
        run = subprocess.run([runner, "--data", tmp, "--jobs", "1",
                              "--baseline", baseline],
                             capture_output=True, text=True)
    print(run.stdout + run.stderr)
    missed = [name for _, name in TESTS
              if not any(line.startswith(f"FAIL {name} ")
                         for line in run.stdout.splitlines())]
    if missed or run.returncode != 1:
        print(f"error: wrong outputs not reported as FAIL: {missed} "
              f"(exit status {run.returncode}, expected 1)")
        return 1
    print(f"all {len(TESTS)} wrong outputs fail")
    return 0


if __name__ == "__main__":
    sys.exit(main())
