#!/usr/bin/python3
"""e2e.save_killed: what a killed --save leaves behind is harmless and cleaned up by the next one.

Compiles ``mlp.onnx`` (a ~100 KB model) for 2 devices and saves the weights
after 2 steps (``trained.onnx``). --save writes each file to ``<file>.tmp``
and renames it over the target (runtime/include/tofu/runtime/AtomicFile.h),
so a run killed with SIGKILL at any point leaves the previous model intact
and, at worst, a ``.tmp`` file and a state file no model names. Those
leftovers are made by hand here (a SIGKILL cannot be timed into a 100 KB
write): ``trained.onnx.tmp`` as a FIFO -- before the fix the writer opened
it, blocked, and then renamed the FIFO over the model -- and an orphan
``trained.onnx.tofu-state-*`` file. A run killed with SIGKILL during training
and one ended with SIGTERM must leave the model byte-identical. The next
complete --save must not block on the FIFO, must replace the model with a
regular file, and must remove both leftovers.
"""

import os
import signal
import stat
import subprocess
import time

import e2e_common as E

K = 2


def main():
    env = E.parse_args(__doc__.splitlines()[1])
    env.require_tools()
    plan, target = env.path("plan.bin"), env.path("trained.onnx")
    E.compile_plan(env, K, plan)
    E.run_tool([env.tofu_run, plan, "--steps", 2, "--quiet", "--save", target])
    with open(target, "rb") as f:
        before = f.read()

    # Runs killed before they save: the model stays as it was.
    for sig in (signal.SIGKILL, signal.SIGTERM):
        cmd = [env.tofu_run, plan, "--steps", 100000000, "--quiet", "--save", target]
        print("$", " ".join(map(str, cmd)), f"(ended with {sig.name})", flush=True)
        proc = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        time.sleep(1.0)
        E.check(proc.poll() is None, "tofu-run ended before it was killed")
        proc.send_signal(sig)
        proc.wait(timeout=30)
        E.check(proc.returncode == -sig, f"tofu-run exit status {proc.returncode}")
        with open(target, "rb") as f:
            E.check(f.read() == before, f"{target} changed after {sig.name}")
        E.check(not os.path.exists(target + ".tmp"), f"{sig.name} left {target}.tmp")

    # The leftovers of a save killed in the middle.
    fifo = target + ".tmp"
    os.mkfifo(fifo)
    orphan = target + ".tofu-state-0123456789abcdef"
    with open(orphan, "wb") as f:
        f.write(b"TOFUSTAT left by a killed save")
    cmd = [env.tofu_run, plan, "--steps", 3, "--quiet", "--save", target]
    E.run_tool(cmd, timeout=120)
    E.check(stat.S_ISREG(os.lstat(target).st_mode), f"{target} is no longer a regular file")
    with open(target, "rb") as f:
        E.check(f.read() != before, "a complete --save did not replace the model")
    E.load_onnx(target, "the saved model")
    E.check(not os.path.lexists(fifo), "a complete --save left the .tmp FIFO behind")
    E.check(not os.path.exists(orphan), "a complete --save left an orphan state file")
    print(f"{target} replaced; the .tmp FIFO and the orphan state file are gone")


if __name__ == "__main__":
    E.main_wrapper(main)
