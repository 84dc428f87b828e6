#!/usr/bin/python3
"""e2e.cuda_outputs_vs_cpu: --save, --dump, --trace and --report of --backend cuda equal the CPU backend's.

GPU test (ctest label ``gpu``): exits 77, which ctest reports as skipped,
where ``nvidia-smi -L`` lists no GPU or nvcc is missing. NEVER RUN YET:
written on a machine without a GPU (docs/Cuda.md).

Compiles ``mlp.onnx`` for 8 devices with ``--cuda-arch`` of the first GPU,
runs 2 steps with ``--backend cuda --devices 1`` (eight virtual devices on
one GPU) and with ``--backend cpu``, each with ``--save``, ``--dump``,
``--trace``, ``--report`` (and ``--kernels native`` on CUDA), and checks:

* ``--dump``: the same .npy files; inputs and labels bit for bit, initial
  parameters bit for bit, gradients within fp32 tolerance;
* ``--save``: the same initializers in the ONNX model within fp32
  tolerance, and a training-state file next to each;
* ``--trace``: valid trace-event JSON with one process per device; every
  CUDA event is an instruction of the CPU trace (same device, step and
  instruction index; the CUDA trace has fewer where kernels are fused), and
  each fetch/reduce event carries the CPU event's bytes;
* ``--report``: the same measured bytes per device, and the CUDA memory per
  device at least the planned peak.
"""

import glob
import os
import shutil
import subprocess
import sys

import numpy as np

import e2e_common as E

K = 8
STEPS = 2


def gpu_arch():
    """sm_XY of the first GPU, or None without one."""
    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap",
                              "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = out.stdout.split()
    if out.returncode != 0 or not lines:
        return None
    return "sm_" + lines[0].replace(".", "")


def nvcc():
    for candidate in (shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def npy_files(folder):
    return sorted(os.path.relpath(p, folder)
                  for p in glob.glob(os.path.join(folder, "**", "*.npy"), recursive=True))


def check_dumps(cpu, cuda):
    files = npy_files(cpu)
    E.check(files, f"the CPU run dumped nothing into {cpu}")
    E.check(files == npy_files(cuda),
            f"--dump wrote other files on CUDA: {npy_files(cuda)} vs {files}")
    for f in files:
        a, b = np.load(os.path.join(cuda, f)), np.load(os.path.join(cpu, f))
        E.check(a.shape == b.shape and a.dtype == b.dtype, f"{f}: shape/dtype differ")
        name = os.path.basename(f)
        if name.startswith("grad."):
            E.check(np.allclose(a, b, rtol=1e-4, atol=1e-5),
                    f"{f}: max difference {np.max(np.abs(a - b))}")
        else:
            E.check(np.array_equal(a, b), f"{f}: differs (expected bit for bit)")
    print(f"dump: {len(files)} files agree")


def check_saves(cpu, cuda):
    a, b = E.initializers(E.load_onnx(cuda)), E.initializers(E.load_onnx(cpu))
    E.check(sorted(a) == sorted(b), "--save wrote other initializers on CUDA")
    for name in b:
        E.check(np.allclose(a[name], b[name], rtol=1e-4, atol=1e-5),
                f"saved {name}: max difference {np.max(np.abs(a[name] - b[name]))}")
    for path in (cpu, cuda):
        E.check(glob.glob(path + ".tofu-state-*"), f"no training state next to {path}")
    print(f"save: {len(b)} initializers agree")


def events(trace):
    out = {}
    for e in trace["traceEvents"]:
        if e.get("ph") != "X":
            continue
        E.check(e["dur"] >= 0 and e["ts"] >= 0, f"negative time in {e}")
        out[(e["pid"], e["args"]["step"], e["args"]["instr"])] = e
    return out


def check_traces(cpu, cuda):
    a, b = events(E.load_json(cuda, "CUDA trace")), events(E.load_json(cpu, "CPU trace"))
    E.check(a, "the CUDA trace has no instruction events")
    E.check({pid for pid, _, _ in a} == set(range(K)), "the CUDA trace lacks devices")
    for key, e in a.items():
        E.check(key in b, f"CUDA event {e} is no instruction of the CPU trace")
        if "bytes" in b[key]["args"]:
            E.check(e["args"].get("bytes") == b[key]["args"]["bytes"],
                    f"bytes differ: CUDA {e} vs CPU {b[key]}")
    print(f"trace: {len(a)} CUDA events, {len(b)} CPU events")


def check_reports(cpu, cuda):
    a, b = E.load_json(cuda), E.load_json(cpu)
    E.check(a["backend"] == "cuda", f"report backend {a['backend']}")
    E.check(a["comm_bytes"] == b["comm_bytes"],
            f"comm_bytes {a['comm_bytes']} vs {b['comm_bytes']}")
    E.check(len(a["peak_bytes"]) == K, "the CUDA report has no memory per device")
    for p in a["peak_bytes"]:
        E.check(p["measured"] >= p["planned"], f"CUDA memory below the plan: {p}")
    paths = a.get("copy_bytes_by_path", {})
    E.check(set(paths) == {"same device", "same GPU", "peer"} and paths["peer"] == 0,
            f"copy bytes by path on one GPU: {paths}")


def main():
    env = E.parse_args(__doc__.splitlines()[1])
    env.require_tools()
    arch, compiler = gpu_arch(), nvcc()
    if arch is None or compiler is None:
        print("SKIPPED: " + ("no GPU (nvidia-smi lists none)" if arch is None else "no nvcc"))
        sys.exit(77)
    plan = env.path("plan.bin")
    E.compile_plan(env, K, plan, ["--cuda-arch", arch, "--nvcc", compiler])
    runs = {}
    for backend in ("cpu", "cuda"):
        out = {"save": env.path(backend, "trained.onnx"), "dump": env.path(backend, "dump"),
               "trace": env.path(backend, "trace.json"), "report": env.path(backend, "r.json")}
        cmd = [env.tofu_run, plan, "--backend", backend, "--steps", STEPS,
               "--save", out["save"], "--dump", out["dump"], "--trace", out["trace"],
               "--report", out["report"]]
        if backend == "cuda":
            cmd += ["--devices", 1, "--kernels", "native"]
        E.run_tool(cmd)
        runs[backend] = out
    check_dumps(runs["cpu"]["dump"], runs["cuda"]["dump"])
    check_saves(runs["cpu"]["save"], runs["cuda"]["save"])
    check_traces(runs["cpu"]["trace"], runs["cuda"]["trace"])
    check_reports(runs["cpu"]["report"], runs["cuda"]["report"])


if __name__ == "__main__":
    E.main_wrapper(main)
