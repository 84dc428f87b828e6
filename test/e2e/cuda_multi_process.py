#!/usr/bin/python3
"""e2e.cuda_multi_process[.gpu]: ``tofu-run --backend cuda`` as one process
per GPU (NCCL), under ``mpirun -np 2`` and with the torchrun environment.

The MLP is compiled with ``--gpus 2 --cuda-arch`` (needs nvcc; exit 77 =
skipped without it, or when tofu-run has no CUDA executor).

Without ``--gpu`` (runs everywhere): on a machine without a GPU, both
launches of 2 ranks end every rank with the executor's no-GPU error (not the
old "one process per GPU is not implemented" refusal) and a non-zero exit,
within a bound; a plan without CUDA kernels is refused by name first.
Unsupported (exit 77) where a GPU is visible: ``--gpu`` covers that case.

``--gpu`` (ctest label gpu; exit 77 without two GPUs — NCCL refuses two ranks
on one GPU): ``mpirun -np 2 tofu-run plan --backend cuda`` (CUDA graph, and
``--no-cuda-graph``) gives the CPU backend's 4 losses (one process) within
1e-5 + 1e-4 |loss|, and only rank 0 prints them. NEVER RUN: no GPU here.
"""

import os
import re
import shutil
import subprocess
import time

import e2e_common as E
import multiproc as M

RANKS = 2
STEPS = 4
BOUND_S = 120


def gpu_count():
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True,
                             timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def gpu_arch():
    out = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=30).stdout.split()
    return "sm_" + out[0].replace(".", "")


def nvcc_path():
    if shutil.which("nvcc"):
        return shutil.which("nvcc")
    return "/usr/local/cuda/bin/nvcc" if os.access("/usr/local/cuda/bin/nvcc", os.X_OK) else None


def losses(stdout):
    return [float(m.group(1)) for m in re.finditer(r"^step \d+\s+loss (\S+)", stdout, re.M)]


def main():
    env = E.parse_args(__doc__, extra=lambda p: p.add_argument("--gpu", action="store_true"))
    args = env.args
    nvcc = nvcc_path()
    if not nvcc:
        print("SKIPPED: no nvcc (the plan needs tofuc --cuda-arch)")
        raise SystemExit(77)
    gpus = gpu_count()
    if args.gpu and gpus < RANKS:
        print(f"SKIPPED: {gpus} GPU(s) visible; one process per GPU needs {RANKS}")
        raise SystemExit(77)
    if not args.gpu and gpus > 0:
        print("SKIPPED: a GPU is visible; the no-GPU error cannot be shown (see --gpu)")
        raise SystemExit(77)
    arch = gpu_arch() if args.gpu else "sm_80"
    plan = env.path("mlp2.bin")
    E.run_tool([env.tofuc, env.model, "--gpus", RANKS, "--cuda-arch", arch, "--nvcc", nvcc,
                "-o", plan])
    probe = E.run_tool([env.tofu_run, plan, "--backend", "cuda", "--steps", 1], expect_rc=None)
    if "built without the CUDA executor" in probe.stderr:
        print("SKIPPED: tofu-run was built without the CUDA executor")
        raise SystemExit(77)

    if not args.gpu:
        have_mpi = M.mpirun_path() is not None
        if have_mpi:
            start = time.monotonic()
            res = E.run_tool(M.mpirun_prefix(RANKS) + [env.tofu_run, plan, "--backend", "cuda",
                                                       "--steps", 2],
                             expect_rc=None, timeout=BOUND_S)
            secs = time.monotonic() - start
            text = res.stdout + res.stderr
            E.check(res.returncode != 0, f"mpirun: expected a failure:\n{res.describe()}")
            E.check("not implemented" not in text, f"mpirun: still refused:\n{text}")
            E.check(re.search(r"tofu-run: error: rank [01]: --backend cuda: no CUDA GPU found",
                              text), f"mpirun: no no-GPU error:\n{text}")
            print(f"mpirun -np {RANKS}: every rank ends with the no-GPU error in {secs:.1f} s")
        else:
            print("mpirun not found: the MPI launch is not checked")
        results, secs = M.run_torchrun_env(env, RANKS, [plan, "--backend", "cuda", "--steps", 2],
                                           timeout=BOUND_S)
        for r, res in enumerate(results):
            E.check(res.returncode != 0, f"rank {r}: expected a failure:\n{res.describe()}")
            E.check(f"tofu-run: error: rank {r}: --backend cuda: no CUDA GPU found"
                    in res.stderr, f"rank {r}: no no-GPU error:\n{res.describe()}")
        print(f"torchrun environment, {RANKS} ranks: both end with the no-GPU error "
              f"in {secs:.1f} s")
        # A plan without CUDA kernels is refused by name before any GPU.
        nocuda = env.path("mlp2-nocuda.bin")
        E.run_tool([env.tofuc, env.model, "--gpus", RANKS, "-o", nocuda])
        results, _ = M.run_torchrun_env(env, RANKS, [nocuda, "--backend", "cuda"],
                                        timeout=BOUND_S)
        for r, res in enumerate(results):
            E.check(res.returncode != 0 and "the plan has no CUDA kernels" in res.stderr,
                    f"rank {r}: expected the refusal of a plan without CUDA kernels:\n"
                    f"{res.describe()}")
        # One process per plan device, as for the CPU backend.
        results, _ = M.run_torchrun_env(env, 3, [plan, "--backend", "cuda"], timeout=BOUND_S)
        for r, res in enumerate(results):
            # (rank 2 has no device to read: its plan read fails first.)
            E.check(res.returncode != 0 and ("the plan has 2 devices but" in res.stderr
                                             or r == 2),
                    f"rank {r}: expected the world-size error:\n{res.describe()}")
        return

    # On GPUs: one process per GPU against the CPU backend.
    cpu = E.run_tool([env.tofu_run, plan, "--backend", "cpu", "--kernels", "interpreter",
                      "--steps", STEPS])
    want = losses(cpu.stdout)
    E.check(len(want) == STEPS, f"CPU run printed {len(want)} losses:\n{cpu.describe()}")
    for extra in ([], ["--no-cuda-graph"]):
        res = E.run_tool(M.mpirun_prefix(RANKS) + [env.tofu_run, plan, "--backend", "cuda",
                                                   "--steps", STEPS, "--nccl-timeout", 60,
                                                   *extra], timeout=BOUND_S * 3)
        got = losses(res.stdout)
        E.check(len(got) == STEPS, f"{extra}: {len(got)} loss lines (rank 0 only):\n"
                f"{res.describe()}")
        for s, (g, w) in enumerate(zip(got, want)):
            E.check(abs(g - w) <= 1e-5 + 1e-4 * abs(w),
                    f"{extra} step {s + 1}: loss {g} on 2 GPUs, {w} on the CPU")
        print(f"mpirun -np {RANKS} --backend cuda {' '.join(extra)}: losses {got} "
              f"(CPU {want})")


if __name__ == "__main__":
    E.main_wrapper(main)
