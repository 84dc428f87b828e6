#!/usr/bin/python3
"""e2e.save_killed: killing tofu-run in the middle of --save leaves the previous file intact.

Compiles ``mlp.onnx`` (a ~100 KB model) for 2 devices and saves the weights
after 2 steps (``trained.onnx``). Then ``trained.onnx.tmp`` -- where --save
writes before it renames over the target -- is made a FIFO, and a second run
(3 steps, ``--save trained.onnx``) is killed with SIGKILL while it is blocked
writing the model into it: the pipe holds at most 64 KB, and this test reads
only the first 4 KB, so the writer is provably in the middle of the file.
``trained.onnx`` must still be byte-identical to the first save and load as
ONNX. Finally, without the FIFO, the same run replaces it with other weights.
"""

import os
import select
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
    E.check(len(before) > 70000, f"the saved model is {len(before)} bytes; the test needs "
            "more than a pipe buffer (64 KB)")

    fifo = target + ".tmp"
    os.mkfifo(fifo)
    cmd = [env.tofu_run, plan, "--steps", 3, "--quiet", "--save", target]
    print("$", " ".join(map(str, cmd)), "(killed while saving)", flush=True)
    proc = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    got = b""
    deadline = time.monotonic() + 60
    try:
        while len(got) < 4096:
            E.check(time.monotonic() < deadline, "tofu-run never wrote into the .tmp file")
            if proc.poll() is not None:
                E.fail(f"tofu-run exited ({proc.returncode}) before writing the model: "
                       f"{proc.stderr.read().decode(errors='replace')}")
            select.select([fd], [], [], 0.1)
            try:
                chunk = os.read(fd, 4096 - len(got))
            except BlockingIOError:
                chunk = b""
            if not chunk:
                time.sleep(0.02)  # no writer yet (EOF) or nothing written yet
            got += chunk
        time.sleep(0.2)
        E.check(proc.poll() is None, "tofu-run finished writing into a full pipe (impossible)")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(fd)
    E.check(proc.returncode == -signal.SIGKILL, f"tofu-run exit status {proc.returncode}")
    E.check(got[:8] == before[:8], "the .tmp file does not start like an ONNX model")
    with open(target, "rb") as f:
        after = f.read()
    E.check(after == before, f"the previous {target} changed after the kill "
            f"({len(before)} -> {len(after)} bytes)")
    E.load_onnx(target, "the previous model")
    E.check(stat.S_ISFIFO(os.stat(fifo).st_mode), "the .tmp FIFO was replaced")
    print(f"killed after {len(got)} of {len(before)} bytes; {target} intact")

    os.remove(fifo)
    E.run_tool(cmd)
    with open(target, "rb") as f:
        E.check(f.read() != before, "a complete --save did not replace the model")
    E.check(not os.path.exists(fifo), "a complete --save left its .tmp file behind")


if __name__ == "__main__":
    E.main_wrapper(main)
