#!/usr/bin/env python3
"""A training step's cuBLAS GEMMs: their shapes, their time in the step, and
the time of the same calls alone (bench/gpu/run.sh, part ``gemm.<plan>``).

* ``gemms.py shapes SCHEDULE OUT``: reads ``tofu-run PLAN --backend cuda
  --devices 1 --dump-cuda-schedule`` (written by prepare_plans.py; every
  cuBLAS call is printed with its dtype, transposes, m, n, k, leading
  dimensions, batch and strides) and writes the distinct GEMMs as the input
  of ``gemm_bench`` (bench/gpu/gemm_bench.cu).
* ``gemms.py run GEMM_BENCH SCHEDULE TRACE PREFIX``: both of these with
  gemm_bench in between (PREFIX.shapes.txt, .bench.jsonl, .json).
* ``gemms.py report SCHEDULE TRACE BENCH OUT``: joins the schedule, the
  ``--trace`` of the CUDA backend (the instruction's time in the step:
  cudaEvents around its calls, eager issue; the median over the traced steps
  after the first) and ``gemm_bench``'s JSON lines (the same call alone),
  and writes the per-GEMM table and the aggregate as JSON.

Aggregate ratio = sum over the step's GEMM instructions of the time alone
(cuBLAS back to back: its own throughput) / sum of their times in the step;
the issue's goal is at least 0.9 for GEMM-heavy steps. ``event_us`` (one call
bracketed by events on an idle stream, as --trace measures) and
``folded_us`` (a broadcast-B batched GEMM as one GEMM of m * batch rows) are
reported beside it. Standard library only.
"""

import json
import re
import statistics
import sys

CALL = re.compile(r"(cublas\w+)\((\w+) ([^)]*)\)")
ENTRY = re.compile(r"^(\d+): d(\d+) #(\d+)(?:-(\d+))? (\w+) (\S+)")
FIELDS = ("tA", "tB", "m", "n", "k", "lda", "ldb", "ldc", "batch", "sA", "sB", "sC")


def parse_schedule(text):
    """The schedule's instructions that call cuBLAS: a list of dicts with
    device, index (the plan instruction, as --trace's args.instr), kernel
    (the plan op kind), calls (every call of the entry) and gemms."""
    out = []
    for line in text.splitlines():
        m = ENTRY.match(line)
        if not m or "cublas" not in line:
            continue
        calls = line.split(" : ", 1)[1] if " : " in line else ""
        gemms = []
        for name, dtype, args in CALL.findall(calls):
            g = {"call": name, "dtype": dtype}
            kv = dict(a.split("=", 1) for a in args.split() if "=" in a)
            for f in FIELDS:
                g[f] = int(kv[f])
            g["beta"] = float(kv.get("beta", 0))
            g["key"] = " ".join([dtype] + [str(g[f]) for f in FIELDS] + [kv.get("beta", "0")])
            gemms.append(g)
        other = [c for c in re.sub(r"cublas\w+\([^)]*\)", "", calls).split() if c]
        first = int(m.group(3))
        index = int(m.group(4)) if m.group(4) else first
        out.append({"device": int(m.group(2)), "index": index, "kernel": m.group(6),
                    "gemms": gemms, "other_calls": other})
    return out


def shape_ids(entries):
    """Distinct GEMM shapes in first-seen order: key -> id."""
    ids = {}
    for e in entries:
        for g in e["gemms"]:
            ids.setdefault(g["key"], f"g{len(ids)}")
    return ids


def write_shapes(schedule_path, out_path):
    entries = parse_schedule(open(schedule_path).read())
    ids = shape_ids(entries)
    with open(out_path, "w") as f:
        f.write("# id dtype tA tB m n k lda ldb ldc batch sA sB sC beta\n")
        for key, i in ids.items():
            f.write(f"{i} {key}\n")
    return len(ids)


def trace_times(trace):
    """(device, instr) -> [(step, microseconds)] of the compute events."""
    events = trace.get("traceEvents", trace) if isinstance(trace, dict) else trace
    times = {}
    for e in events or []:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        a = e.get("args") or {}
        if "instr" not in a:
            continue
        times.setdefault((e.get("pid", 0), a["instr"]), []).append(
            (a.get("step", 0), float(e.get("dur", 0))))
    return times


def step_median(samples):
    """Median over the steps after the first (cuBLAS's first-call work and
    cold caches stay out), or over all when only one was traced."""
    steps = sorted({s for s, _ in samples})
    later = [d for s, d in samples if s != steps[0]] if len(steps) > 1 else []
    return statistics.median(later or [d for _, d in samples])


def report(schedule_text, trace, bench_lines):
    entries = parse_schedule(schedule_text)
    ids = shape_ids(entries)
    bench = {}
    for line in bench_lines:
        line = line.strip()
        if line.startswith("{"):
            try:
                row = json.loads(line)
            except ValueError:
                continue
            bench[row.get("id")] = row
    times = trace_times(trace) if trace is not None else {}
    # Every compute instruction of device 0 (k = 1), per step, for the share.
    per_step = {}
    for (dev, _), samples in times.items():
        for s, d in samples:
            per_step[s] = per_step.get(s, 0.0) + d
    steps = sorted(per_step)
    traced_step_us = (statistics.median([per_step[s] for s in steps[1:]] or
                                        [per_step[s] for s in steps]) if steps else None)
    rows = []
    for e in entries:
        samples = times.get((e["device"], e["index"]))
        in_step = step_median(samples) if samples else None
        alone = thr = ev = folded = flops = 0.0
        errors = []
        complete = True
        for g in e["gemms"]:
            b = bench.get(ids[g["key"]], {})
            if "error" in b:
                errors.append(b["error"])
            if b.get("throughput_us") is None:
                complete = False
                continue
            thr += b["throughput_us"]
            ev += b.get("event_us") or 0.0
            folded += b.get("folded_us") or b["throughput_us"]
            flops += b.get("flops", 0.0)
        flops = sum(2.0 * g["m"] * g["n"] * g["k"] * g["batch"] for g in e["gemms"])
        g0 = e["gemms"][0] if e["gemms"] else {}
        row = {"device": e["device"], "instr": e["index"], "kernel": e["kernel"],
               "shape_ids": [ids[g["key"]] for g in e["gemms"]],
               "shape": "; ".join(
                   f"{g['call']} {g['dtype']} {'T' if g['tA'] else 'N'}{'T' if g['tB'] else 'N'} "
                   f"m={g['m']} n={g['n']} k={g['k']}" + (f" batch={g['batch']}"
                                                         + (" (B broadcast)" if g["sB"] == 0 else "")
                                                         if g["batch"] > 1 else "")
                   for g in e["gemms"]),
               "other_calls": e["other_calls"], "flops": flops,
               "in_step_us": in_step,
               "alone_us": thr if complete else None,
               "alone_event_us": ev if complete else None,
               "alone_folded_us": folded if complete else None}
        if errors:
            row["errors"] = errors
        if in_step and complete and in_step > 0:
            row["ratio"] = thr / in_step
            row["in_step_tflops"] = flops / in_step / 1e6
            row["alone_tflops"] = flops / thr / 1e6 if thr > 0 else None
        rows.append(row)
    timed = [r for r in rows if r.get("ratio") is not None]
    traced = [r["in_step_us"] for r in rows if r["in_step_us"] is not None]
    agg = {"gemm_instructions": len(rows), "timed": len(timed),
           "distinct_shapes": len(ids), "traced_step_us": traced_step_us,
           "all_gemms_in_step_us": sum(traced) if traced else None}
    if traced and traced_step_us:
        agg["gemm_share_of_traced_step"] = sum(traced) / traced_step_us
    if timed:
        in_step = sum(r["in_step_us"] for r in timed)
        agg.update({
            "in_step_us": in_step,
            "alone_us": sum(r["alone_us"] for r in timed),
            "alone_event_us": sum(r["alone_event_us"] for r in timed),
            "alone_folded_us": sum(r["alone_folded_us"] for r in timed),
            "flops": sum(r["flops"] for r in timed)})
        agg["ratio"] = agg["alone_us"] / in_step
        agg["ratio_vs_folded"] = agg["alone_folded_us"] / in_step
        agg["in_step_tflops"] = agg["flops"] / in_step / 1e6
        agg["alone_tflops"] = agg["flops"] / agg["alone_us"] / 1e6
        pure = [r for r in timed if not r["other_calls"]]
        if pure:
            agg["ratio_gemm_only_instructions"] = (
                sum(r["alone_us"] for r in pure) / sum(r["in_step_us"] for r in pure))
    return {"aggregate": agg, "gemms": rows}


def main(argv):
    if len(argv) >= 3 and argv[0] == "shapes":
        n = write_shapes(argv[1], argv[2])
        print(f"gemms.py: {n} distinct GEMM shapes in {argv[2]}")
        return 0 if n else 3
    if len(argv) >= 5 and argv[0] == "report":
        schedule = open(argv[1]).read()
        try:
            trace = json.load(open(argv[2]))
        except (OSError, ValueError):
            trace = None
        try:
            bench = open(argv[3]).read().splitlines()
        except OSError:
            bench = []
        r = report(schedule, trace, bench)
        with open(argv[4], "w") as f:
            json.dump(r, f, indent=1)
        a = r["aggregate"]
        print(f"gemms.py: {a['timed']}/{a['gemm_instructions']} GEMM instructions timed; "
              f"ratio alone/in-step {a.get('ratio')}")
        return 0 if a["timed"] == a["gemm_instructions"] and a["timed"] else 1
    if len(argv) >= 5 and argv[0] == "run":
        # run GEMM_BENCH SCHEDULE TRACE OUTPREFIX: shapes, gemm_bench, report.
        bench_bin, schedule, trace, prefix = argv[1:5]
        if not write_shapes(schedule, prefix + ".shapes.txt"):
            print(f"gemms.py: no cuBLAS call in {schedule}")
            return 3
        import subprocess
        with open(prefix + ".bench.jsonl", "w") as f:
            rc = subprocess.call([bench_bin, prefix + ".shapes.txt"], stdout=f)
        print(open(prefix + ".bench.jsonl").read(), end="")
        report_rc = main(["report", schedule, trace, prefix + ".bench.jsonl", prefix + ".json"])
        return rc or report_rc
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
