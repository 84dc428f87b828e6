#!/usr/bin/python3
"""e2e.rank_killed.<launcher>: a rank killed mid-training is named by the survivors.

For the MLP compiled with --gpus 4, started as 4 processes, one rank is
killed with SIGKILL once training is under way (rank 0 has printed step
lines), in turn each of ranks 0..3 (``--victims``). Proves that:

* ``--launcher tcp`` (the RANK/WORLD_SIZE environment, TCP transport): every
  survivor ends within 60 s with a non-zero exit and exactly one line on
  stderr, ``tofu-run: error: rank r: ...`` naming the killed rank as the one
  that closed its connection ("rank V closed its connection (it ended or
  died)"), and no survivor blames another rank. (Before the abort notes of
  TcpTransport.cpp a survivor that waited on the rank that noticed the death
  blamed that one: "rank 0 closed its connection".)
* ``--launcher mpi`` (``mpirun -np 4``): mpirun ends the survivors with
  SIGTERM before they notice anything themselves (Open MPI's shared-memory
  transport does not report a dead peer); a survivor prints its own one-line
  ``tofu-run: error: rank r: ended by SIGTERM from mpirun ...`` (at least
  one does: mpirun's SIGKILL follows its SIGTERM within milliseconds and can
  end a survivor first), mpirun's message names the killed rank ("process
  rank V ... exited on signal 9"), and mpirun ends within 60 s with a
  non-zero exit.
"""

import os
import re
import select
import signal
import subprocess
import time

import e2e_common as E
import multiproc as M

K = 4
BOUND_S = 60


def wait_for_training(proc, what):
    """Waits until ``proc`` (rank 0, or mpirun relaying it) has written step
    lines to its stdout pipe: tofu-run's stdout is block-buffered, so the
    first bytes arrive after some dozens of steps. Fails after BOUND_S."""
    deadline = time.monotonic() + BOUND_S
    seen = b""
    while b"step " not in seen:
        left = deadline - time.monotonic()
        E.check(left > 0 and proc.poll() is None,
                f"{what}: no step line within {BOUND_S} s (exit code {proc.poll()}):\n{seen!r}")
        ready, _, _ = select.select([proc.stdout], [], [], min(left, 1.0))
        if ready:
            seen += os.read(proc.stdout.fileno(), 65536)


def drain(proc):
    """Reads a finished-or-finishing process's pipes (bounded)."""
    try:
        out, err = proc.communicate(timeout=BOUND_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        E.fail(f"{proc.args[0]} still running {BOUND_S} s after the kill (a hang)")
    return out.decode(errors="replace"), err.decode(errors="replace")


def kill_tcp(env, plan, victim):
    port = M.free_port()
    cmd = [env.tofu_run, plan, "--steps", "1000000", "--comm-timeout", "30"]
    print(f"$ for r in 0..{K - 1}: RANK=r WORLD_SIZE={K} MASTER_ADDR=127.0.0.1 "
          f"MASTER_PORT={port} {' '.join(cmd)}; kill -9 rank {victim}", flush=True)
    procs = []
    for r in range(K):
        penv = dict(os.environ, RANK=str(r), WORLD_SIZE=str(K), LOCAL_RANK=str(r),
                    MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen(cmd, env=penv, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE))
    try:
        wait_for_training(procs[0], "rank 0")
        procs[victim].send_signal(signal.SIGKILL)
        start = time.monotonic()
        for r, p in enumerate(procs):
            _, err = drain(p)
            if r == victim:
                E.check(p.returncode == -signal.SIGKILL, f"rank {victim} was not killed")
                continue
            lines = [ln for ln in err.splitlines() if ln.strip()]
            E.check(p.returncode not in (0, None) and p.returncode > 0,
                    f"survivor rank {r}: exit code {p.returncode}, expected an error exit\n{err}")
            E.check(len(lines) == 1 and lines[0].startswith(f"tofu-run: error: rank {r}: "),
                    f"survivor rank {r} must print one error line, printed:\n{err}")
            E.check(f"rank {victim} closed its connection (it ended or died)" in lines[0],
                    f"survivor rank {r} does not name the killed rank {victim}:\n{lines[0]}")
            blamed = set(re.findall(r"rank (\d+) closed its connection", lines[0]))
            E.check(blamed == {str(victim)},
                    f"survivor rank {r} blames rank(s) {sorted(blamed)}, rank {victim} died:\n"
                    f"{lines[0]}")
            print(f"  rank {r}: {lines[0]}")
        secs = time.monotonic() - start
        E.check(secs < BOUND_S, f"the survivors took {secs:.1f} s to end")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()


def rank_pid(mpirun, rank):
    """The pid of mpirun's child that runs ``rank`` (OMPI_COMM_WORLD_RANK)."""
    deadline = time.monotonic() + BOUND_S
    while time.monotonic() < deadline:
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                if ppid != mpirun.pid:
                    continue
                with open(f"/proc/{pid}/environ", "rb") as f:
                    envs = f.read().split(b"\0")
            except (OSError, ValueError, IndexError):
                continue
            if f"OMPI_COMM_WORLD_RANK={rank}".encode() in envs:
                return int(pid)
        time.sleep(0.1)
    E.fail(f"no process of mpirun runs rank {rank}")


def kill_mpi(env, plan, victim):
    cmd = M.mpirun_prefix(K) + [env.tofu_run, plan, "--steps", "1000000",
                                "--comm-timeout", "30"]
    print(f"$ {' '.join(map(str, cmd))}; kill -9 rank {victim}", flush=True)
    mpirun = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    try:
        wait_for_training(mpirun, "mpirun")
        os.kill(rank_pid(mpirun, victim), signal.SIGKILL)
        start = time.monotonic()
        _, err = drain(mpirun)
        secs = time.monotonic() - start
        E.check(mpirun.returncode != 0, f"mpirun exited 0 after rank {victim} was killed")
        E.check(secs < BOUND_S, f"mpirun took {secs:.1f} s to end the run")
        E.check(re.search(rf"process rank {victim} .*signal 9", err),
                f"mpirun's message does not name rank {victim}:\n{err}")
        # mpirun sends SIGCONT, waits odls_base_sigkill_timeout (1 s), then
        # SIGTERM and SIGKILL milliseconds apart: a survivor that the loaded
        # machine does not schedule in between dies without its line (6 of
        # 120 lines in bench/rank_death.md). So: at least one survivor
        # speaks, every line that arrives is right, and nothing else
        # claims to be a tofu-run error.
        spoke = [r for r in range(K) if r != victim and
                 f"tofu-run: error: rank {r}: ended by SIGTERM from mpirun, which ends "
                 "every rank once one has failed (mpirun's message names that rank)" in err]
        E.check(spoke, f"no survivor printed a message of its own:\n{err}")
        errors = [ln for ln in err.splitlines() if ln.startswith("tofu-run: error:")]
        E.check(len(errors) == len(spoke) and f"rank {victim}:" not in "".join(errors),
                f"unexpected tofu-run errors (survivors that spoke: {spoke}):\n{err}")
        print(f"  survivors {spoke} said so; mpirun named rank {victim}")
    finally:
        if mpirun.poll() is None:
            mpirun.kill()
            mpirun.communicate()


def main():
    env = E.parse_args(__doc__.splitlines()[1], extra=lambda p: (
        p.add_argument("--launcher", choices=("mpi", "tcp"), required=True),
        p.add_argument("--victims", default="0,1,2,3")))
    env.require_tools()
    plan = env.path("plan.bin")
    E.compile_plan(env, K, plan)
    if env.args.launcher == "mpi":
        E.check(M.mpirun_path(), "mpirun not found (scripts/setup.sh installs openmpi-bin)")
    for victim in (int(v) for v in env.args.victims.split(",")):
        (kill_mpi if env.args.launcher == "mpi" else kill_tcp)(env, plan, victim)
        print(f"{env.args.launcher}: rank {victim} killed: the survivors name it")


if __name__ == "__main__":
    E.main_wrapper(main)
