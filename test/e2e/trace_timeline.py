#!/usr/bin/python3
"""e2e.trace_timeline: tofu-run --trace writes a Chrome/Perfetto timeline of a real plan.

Compiles ``mlp.onnx`` for 4 devices, runs 3 steps with ``--trace trace.json
--report r.json`` and checks that the trace

* is valid JSON in the trace-event format (``traceEvents``; every event has
  ``name``/``ph``/``pid``/``tid``; complete events ``ph: X`` have numeric
  ``ts``/``dur`` >= 0),
* names 4 device processes (``process_name`` "device d") with two tracks each
  (``thread_name`` "compute" on tid 0, "communication" on tid 1),
* has compute events only on tid 0 and fetch/reduce events only on tid 1,
  every device computing in every step, the same events (names, in order) in
  every step, and events of one track that never overlap in time,
* carries, summed over each step's fetch/reduce events, exactly the bytes
  the report measured for that step (per device as well, for the last step),
  and the report's measured bytes per device equal the planned ones.

``--launcher mpi`` / ``--launcher tcp`` (e2e.trace_timeline.mpi / .tcp): the
same run as 4 processes, one per device (``mpirun -np 4``, or the torchrun
environment over TCP). Rank 0 gathers every rank's events into the one
trace file, which must pass the same checks; the runs also pass ``--dump``,
and every file it writes (initial parameters, step-1 and later inputs and
gradients) must equal, byte for byte, the one-process run's.
"""

import collections
import filecmp
import os

import e2e_common as E
import multiproc as M

K = 4
STEPS = 3


def check_same_dump(one, multi):
    """Every .npy file under `one` exists under `multi` with the same bytes."""
    files = sorted(os.path.relpath(os.path.join(root, f), one)
                   for root, _, names in os.walk(one) for f in names)
    E.check(len(files) > 0 and any(f.startswith("grad.") for f in files)
            and any(f.startswith("param.") for f in files)
            and any(f.startswith(f"step{STEPS}/") for f in files),
            f"the one-process --dump wrote too little: {files}")
    got = sorted(os.path.relpath(os.path.join(root, f), multi)
                 for root, _, names in os.walk(multi) for f in names)
    E.check(got == files, f"multi-process --dump wrote {got}, one process {files}")
    for f in files:
        E.check(filecmp.cmp(os.path.join(one, f), os.path.join(multi, f), shallow=False),
                f"--dump file {f} differs between one process and one process per device")
    print(f"--dump: {len(files)} files equal to one process's")


def main():
    env = E.parse_args(__doc__.splitlines()[1], extra=lambda p: p.add_argument(
        "--launcher", choices=("one", "mpi", "tcp"), default="one"))
    env.require_tools()
    plan, report_path, trace_path = env.path("plan.bin"), env.path("r.json"), env.path("trace.json")
    E.compile_plan(env, K, plan)
    launcher = env.args.launcher
    if launcher == "one":
        E.run_tool([env.tofu_run, plan, "--steps", STEPS, "--quiet", "--report", report_path,
                    "--trace", trace_path])
    else:
        # The reference dump from one process, then the traced and dumped
        # multi-process run.
        one_dump, multi_dump = env.path("dump-one"), env.path("dump-multi")
        E.run_tool([env.tofu_run, plan, "--steps", STEPS, "--quiet", "--dump", one_dump])
        args = [plan, "--steps", STEPS, "--quiet", "--report", report_path, "--trace",
                trace_path, "--dump", multi_dump]
        if launcher == "mpi":
            E.check(M.mpirun_path(), "mpirun not found (scripts/setup.sh installs openmpi-bin)")
            M.run_mpi(env, K, args, timeout=120)
        else:
            results, _ = M.run_torchrun_env(env, K, args, timeout=120)
            for r in results:
                E.check(r.returncode == 0, "a rank failed:\n" + r.describe())
        check_same_dump(one_dump, multi_dump)
    report = E.load_json(report_path)
    trace = E.load_json(trace_path, "trace")
    E.check(isinstance(trace, dict) and isinstance(trace.get("traceEvents"), list),
            f"trace: expected an object with a 'traceEvents' list, got keys {list(trace)[:10]}")
    events = trace["traceEvents"]
    processes, threads = {}, {}
    complete = []
    for i, ev in enumerate(events):
        E.check(isinstance(ev, dict) and all(k in ev for k in ("name", "ph", "pid", "tid")),
                f"traceEvents[{i}] lacks name/ph/pid/tid: {ev!r}")
        if ev["ph"] == "M":
            if ev["name"] == "process_name":
                processes[ev["pid"]] = ev["args"]["name"]
            elif ev["name"] == "thread_name":
                threads[(ev["pid"], ev["tid"])] = ev["args"]["name"]
            continue
        E.check(ev["ph"] == "X", f"traceEvents[{i}]: unexpected phase {ev['ph']!r}")
        E.check(E.is_number(ev.get("ts")) and E.is_number(ev.get("dur")) and ev["dur"] >= 0
                and ev["ts"] >= 0, f"traceEvents[{i}]: bad ts/dur: {ev!r}")
        E.check(E.is_int(ev.get("args", {}).get("step")),
                f"traceEvents[{i}]: no integer args.step: {ev!r}")
        complete.append(ev)
    E.check(processes == {d: f"device {d}" for d in range(K)},
            f"process names: {processes}")
    want_threads = {}
    for d in range(K):
        want_threads[(d, 0)] = "compute"
        want_threads[(d, 1)] = "communication"
    E.check(threads == want_threads, f"thread names: {threads}")

    per_step = collections.defaultdict(list)
    bytes_step = collections.Counter()
    bytes_dev_last = collections.Counter()
    for ev in complete:
        cat, step, d = ev.get("cat"), ev["args"]["step"], ev["pid"]
        E.check(0 <= d < K, f"event on unknown device: {ev!r}")
        if cat == "compute":
            E.check(ev["tid"] == 0, f"compute event off the compute track: {ev!r}")
            E.check("bytes" not in ev["args"], f"compute event with bytes: {ev!r}")
        else:
            E.check(cat in ("fetch", "reduce") and ev["tid"] == 1,
                    f"communication event of category {cat!r} on tid {ev['tid']}: {ev!r}")
            E.check(ev["name"].startswith(cat + " "), f"event name {ev['name']!r} for {cat}")
            E.check(E.is_int(ev["args"].get("bytes")) and ev["args"]["bytes"] >= 0,
                    f"communication event without integer bytes: {ev!r}")
            bytes_step[step] += ev["args"]["bytes"]
            if step == STEPS:
                bytes_dev_last[d] += ev["args"]["bytes"]
        per_step[step].append((d, ev["tid"], ev["name"]))
    E.check(sorted(per_step) == list(range(1, STEPS + 1)), f"steps in trace: {sorted(per_step)}")
    for s in range(2, STEPS + 1):
        E.check(per_step[s] == per_step[1], f"step {s} ran other instructions than step 1")
    for d in range(K):
        n = sum(1 for (dd, tid, _) in per_step[1] if dd == d and tid == 0)
        E.check(n > 0, f"device {d} has no compute events in step 1")
    print(f"{len(complete)} events, {len(per_step[1])} per step")

    # Events of one track never overlap (the CPU backend runs one at a time).
    tracks = collections.defaultdict(list)
    for ev in complete:
        tracks[(ev["pid"], ev["tid"])].append((ev["ts"], ev["dur"]))
    for key, spans in tracks.items():
        spans.sort()
        for (t0, d0), (t1, _) in zip(spans, spans[1:]):
            E.check(t0 + d0 <= t1 + 1e-3, f"overlapping events on track {key}: {t0}+{d0} > {t1}")

    steps = report["steps"]
    for s in range(1, STEPS + 1):
        E.check(bytes_step[s] == steps[s - 1]["comm_bytes"],
                f"step {s}: trace bytes {bytes_step[s]} != report {steps[s - 1]['comm_bytes']}")
    E.check(bytes_step[1] > 0, "the 4-device plan moved no bytes")
    for entry in report["comm_bytes"]["per_device"]:
        d = entry["device"]
        E.check(bytes_dev_last[d] == entry["measured"],
                f"device {d}: trace bytes {bytes_dev_last[d]} != report {entry['measured']}")
        E.check(entry["measured"] == entry["planned"],
                f"device {d}: measured {entry['measured']} bytes != planned {entry['planned']}")
    print(f"bytes per step: {bytes_step[1]}")


if __name__ == "__main__":
    E.main_wrapper(main)
