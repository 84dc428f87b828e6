#!/usr/bin/python3
"""e2e.dump_plan_json: the machine-readable plan summary and run report are complete.

1. ``tofuc mlp.onnx --gpus 4 --dump-plan=json`` prints one JSON object on stdout with
   ``devices`` (== 4), ``search_seconds`` (number >= 0), ``comm_bytes`` (int >= 0),
   ``peak_bytes`` (4 ints > 0), ``live_bytes_lower_bound`` (4 ints in (0, peak]), ``tensors`` (list of {name, shape, tiling}; the
   model's initializers appear by their ONNX names with their shapes) and ``ops``
   (non-empty list of {name, kind, strategy}).
2. ``tofu-run plan.bin --steps 2 --report r.json`` writes ``steps`` (2 x {loss,
   seconds}), ``samples_per_second`` (> 0), ``peak_bytes`` (4 x {planned, measured})
   and ``comm_bytes`` {planned, measured} with measured == planned (DESIGN.md §3:
   reported bytes are those of the materialized program, so they match exactly),
   and every device's measured peak lies within 5% below its planned peak.
   The report's planned bytes equal the --dump-plan numbers for the same model and flags.
"""

import json
import math

import e2e_common as E

K = 4
STEPS = 2


def check_keys(obj, keys, where):
    E.check(isinstance(obj, dict), f"{where}: expected an object, got {type(obj).__name__}: {str(obj)[:300]}")
    missing = [k for k in keys if k not in obj]
    E.check(not missing, f"{where}: missing keys {missing}; has {sorted(obj)}")


def check_dump(env):
    res = E.run_tool([env.tofuc, env.model, "--gpus", K, "--dump-plan=json"])
    try:
        plan = json.loads(res.stdout)
    except ValueError as e:
        E.fail(f"--dump-plan=json stdout is not one JSON document ({e}):\n{res.describe()}")
    check_keys(plan, ("devices", "search_seconds", "comm_bytes", "peak_bytes", "tensors", "ops"),
               "--dump-plan=json")
    E.check(E.is_int(plan["devices"]) and plan["devices"] == K,
            f"devices = {plan['devices']!r}, expected {K}")
    E.check(E.is_number(plan["search_seconds"]) and plan["search_seconds"] >= 0
            and math.isfinite(plan["search_seconds"]),
            f"search_seconds = {plan['search_seconds']!r}, expected a number >= 0")
    E.check(E.is_int(plan["comm_bytes"]) and plan["comm_bytes"] >= 0,
            f"comm_bytes = {plan['comm_bytes']!r}, expected an int >= 0")
    peak = plan["peak_bytes"]
    E.check(isinstance(peak, list) and len(peak) == K and all(E.is_int(p) and p > 0 for p in peak),
            f"peak_bytes = {peak!r}, expected {K} ints > 0")
    # The liveness lower bound: no memory plan can use less than the most
    # bytes live at one moment (bench/memory.md compares the two).
    bound = plan.get("live_bytes_lower_bound")
    E.check(isinstance(bound, list) and len(bound) == K
            and all(E.is_int(b) and 0 < b <= p for b, p in zip(bound, peak)),
            f"live_bytes_lower_bound = {bound!r}, expected {K} ints in (0, peak_bytes {peak}]")

    tensors = plan["tensors"]
    E.check(isinstance(tensors, list) and tensors, "tensors is not a non-empty list")
    by_name = {}
    for i, t in enumerate(tensors):
        check_keys(t, ("name", "shape", "tiling"), f"tensors[{i}]")
        E.check(isinstance(t["name"], str) and t["name"], f"tensors[{i}].name = {t['name']!r}")
        E.check(isinstance(t["shape"], list) and all(E.is_int(d) and d >= 0 for d in t["shape"]),
                f"tensors[{i}] ({t['name']}).shape = {t['shape']!r}, expected a list of ints")
        by_name[t["name"]] = t
    for name, init in E.initializers(E.load_onnx(env.model)).items():
        E.check(name in by_name, f"initializer {name} is not among the dumped tensors "
                                 f"(first names: {list(by_name)[:12]})")
        E.check(by_name[name]["shape"] == list(init.shape),
                f"tensor {name}: dumped shape {by_name[name]['shape']}, model says {list(init.shape)}")

    ops = plan["ops"]
    E.check(isinstance(ops, list) and ops, "ops is not a non-empty list")
    for i, op in enumerate(ops):
        check_keys(op, ("name", "kind", "strategy"), f"ops[{i}]")
        E.check(isinstance(op["kind"], str) and op["kind"], f"ops[{i}].kind = {op['kind']!r}")
    print(f"--dump-plan=json: {len(tensors)} tensors, {len(ops)} ops, comm_bytes {plan['comm_bytes']}, "
          f"peak_bytes {peak}, search {plan['search_seconds']}s")
    return plan


def check_report(env, dumped):
    plan, report_path = env.path("plan.bin"), env.path("r.json")
    E.compile_plan(env, K, plan)
    E.run_tool([env.tofu_run, plan, "--steps", STEPS, "--report", report_path])
    report = E.load_json(report_path)
    check_keys(report, ("steps", "samples_per_second", "peak_bytes", "comm_bytes"), report_path)

    steps = report["steps"]
    E.check(isinstance(steps, list) and len(steps) == STEPS,
            f"steps has {len(steps) if isinstance(steps, list) else steps!r} entries, expected {STEPS}")
    for i, s in enumerate(steps):
        check_keys(s, ("loss", "seconds"), f"steps[{i}]")
        E.check(E.is_number(s["loss"]) and math.isfinite(s["loss"]), f"steps[{i}].loss = {s['loss']!r}")
        E.check(E.is_number(s["seconds"]) and s["seconds"] >= 0, f"steps[{i}].seconds = {s['seconds']!r}")
    sps = report["samples_per_second"]
    E.check(E.is_number(sps) and sps > 0 and math.isfinite(sps), f"samples_per_second = {sps!r}")

    peak = report["peak_bytes"]
    E.check(isinstance(peak, list) and len(peak) == K, f"peak_bytes = {peak!r}, expected {K} entries")
    for i, p in enumerate(peak):
        check_keys(p, ("planned", "measured"), f"peak_bytes[{i}]")
        E.check(E.is_int(p["planned"]) and p["planned"] > 0, f"peak_bytes[{i}].planned = {p['planned']!r}")
        E.check(E.is_int(p["measured"]) and p["measured"] >= 0, f"peak_bytes[{i}].measured = {p['measured']!r}")
    comm = report["comm_bytes"]
    check_keys(comm, ("planned", "measured"), "comm_bytes")
    E.check(E.is_int(comm["planned"]) and comm["planned"] >= 0, f"comm_bytes.planned = {comm['planned']!r}")
    E.check(comm["measured"] == comm["planned"],
            f"comm_bytes: measured {comm['measured']!r} != planned {comm['planned']!r}")
    print(f"report: losses {[s['loss'] for s in steps]}, {sps:.1f} samples/s, peak {peak}, comm {comm}")

    # The executor touches its arena up to the planned peak: measured within
    # 5% below planned (never above; alignment padding of the topmost buffer
    # is the only slack on this model).
    for d, p in enumerate(peak):
        E.check(0.95 * p["planned"] <= p["measured"] <= p["planned"],
                f"device {d}: measured peak {p['measured']} is not within 5% below the "
                f"planned {p['planned']}")
    planned_peaks = [p["planned"] for p in peak]
    E.check(planned_peaks == dumped["peak_bytes"],
            f"report peak_bytes planned {planned_peaks} != --dump-plan peak_bytes {dumped['peak_bytes']}")
    E.check(comm["planned"] == dumped["comm_bytes"],
            f"report comm_bytes planned {comm['planned']} != --dump-plan comm_bytes {dumped['comm_bytes']}")


def main():
    env = E.parse_args(__doc__.splitlines()[1])
    env.require_tools()
    dumped = check_dump(env)
    check_report(env, dumped)


if __name__ == "__main__":
    E.main_wrapper(main)
