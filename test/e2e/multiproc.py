"""Launch helpers for the one-process-per-device e2e tests (tofu-run under
``mpirun -np k`` or with the torchrun environment).

* ``mpirun_available()`` / ``mpirun_prefix(k)``: the Open MPI launch line (as
  root it needs ``--allow-run-as-root``; ``--oversubscribe`` lets k exceed the
  cores of a CI machine);
* ``run_mpi(env, k, args, ...)``: ``mpirun -np k tofu-run args`` via
  ``E.run_tool``;
* ``run_torchrun_env(env, k, args, ...)``: starts k ``tofu-run`` processes
  with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT set, waits for
  all of them (bounded) and returns their ``E.Result`` objects by rank.
"""

import os
import shutil
import socket
import subprocess
import time

import e2e_common as E


def mpirun_path():
    return shutil.which("mpirun")


def mpirun_prefix(k):
    cmd = [mpirun_path(), "--oversubscribe", "-np", str(k)]
    if os.geteuid() == 0:
        cmd.insert(1, "--allow-run-as-root")
    return cmd


def run_mpi(env, k, args, expect_rc=0, timeout=300):
    return E.run_tool(mpirun_prefix(k) + [env.tofu_run, *args], expect_rc=expect_rc,
                      timeout=timeout)


def torchrun_prefix(k, log_dir, standalone=True):
    """``python3 -m torch.distributed.run`` for k local processes.

    ``--redirects 2 --tee 2``: Debian's torch 1.13 on Python 3.11 cannot
    parse the default ``0`` of these options (iterating an IntFlag skips the
    zero member), so stderr is redirected and teed explicitly.
    ``standalone=False`` uses the static rendezvous, whose store holds
    MASTER_PORT (tofu-run then meets on MASTER_PORT + 1). The agent's logs go
    to ``log_dir`` (by default it leaves a folder in /tmp per run).
    """
    cmd = ["/usr/bin/python3", "-m", "torch.distributed.run", "--nproc_per_node", str(k),
           "--redirects", "2", "--tee", "2", "--log_dir", log_dir, "--no_python"]
    if standalone:
        cmd.insert(3, "--standalone")
    else:
        cmd[3:3] = ["--master_port", str(free_port())]
    return cmd


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_torchrun_env(env, k, args, timeout=300, world_size=None, cwd=None, hung_rank=None):
    """Starts k tofu-run processes with the torchrun environment; returns
    ``(results_by_rank, seconds)``. Fails if any is still running after
    ``timeout`` seconds (a hang). ``hung_rank``: a rank told to hang; it is
    killed once all the others have ended and left out of the results."""
    port = free_port()
    cmd = [str(c) for c in [env.tofu_run, *args]]
    print(f"$ for r in 0..{k - 1}: RANK=r WORLD_SIZE={world_size or k} "
          f"MASTER_ADDR=127.0.0.1 MASTER_PORT={port} {' '.join(cmd)}", flush=True)
    procs = []
    start = time.monotonic()
    for r in range(k):
        penv = dict(os.environ, RANK=str(r), WORLD_SIZE=str(world_size or k),
                    LOCAL_RANK=str(r), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen(cmd, env=penv, cwd=cwd, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE))
    results = []
    for r, p in enumerate(procs):
        if r == hung_rank:
            continue
        left = max(1.0, timeout - (time.monotonic() - start))
        try:
            out, err = p.communicate(timeout=left)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            E.fail(f"rank {r} still running after {timeout} s (a hang): {' '.join(cmd)}")
        results.append(E.Result(cmd + [f"(rank {r})"], p.returncode,
                                out.decode(errors="replace"), err.decode(errors="replace")))
    secs = time.monotonic() - start
    if hung_rank is not None:
        procs[hung_rank].kill()
        procs[hung_rank].communicate()
    return results, secs
