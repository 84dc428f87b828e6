#!/usr/bin/env python3
"""The CUDA backend's --dump of step 1 against the CPU backend's
(bench/gpu/run.sh, part ``dump.<plan>``).

    compare_dumps.py --tofu-run BIN --plan PLAN --ref DIR --index JSON
                     --dtype float32 --workdir DIR --out JSON [-- tofu-run flags]

Runs ``tofu-run PLAN --backend cuda --devices 1 --steps 1 --quiet --dump
WORKDIR`` (with the flags after ``--``, e.g. ``--data``), then compares every
tensor of the bundle's reference dump ``DIR`` (the CPU backend at k = 1: the
gradients and inputs prepare_plans.py kept, with ``JSON`` its index) with the
file of the same name in WORKDIR, and deletes WORKDIR (a GPU dump holds
every tensor of the plan). Without ``--tofu-run`` it only compares (how it
is tested without a GPU: two CPU-backend dumps).

Tolerance per tensor, with err = max |gpu - cpu| / max |cpu|:

* float32: err <= 1e-4; float64: err <= 1e-9; float16/bfloat16: 1e-2;
  integer and bool tensors (labels, masks) must be equal;
* except where the CPU backend's own dump at k = 8 is already further from
  its k = 1 dump than that (``cpu_k_err`` in the index: float32 BatchNorm at
  small batches): there err <= 10 * cpu_k_err, and the tensor is counted as
  ill-conditioned.

Exits 0 when every reference tensor is present and within tolerance, 1
otherwise. Standard library only (reads .npy itself).
"""

import argparse
import array
import ast
import json
import os
import shutil
import subprocess
import sys

RTOL = {"float32": 1e-4, "float64": 1e-9, "float16": 1e-2, "bfloat16": 1e-2}
#: How much further than the CPU backend's own k = 1 / k = 8 disagreement
#: the CUDA backend may be on an ill-conditioned tensor.
CPU_SPREAD_FACTOR = 10.0

_CODES = {"f4": "f", "f8": "d", "i8": "q", "i4": "i", "i2": "h", "i1": "b",
          "u1": "B", "u2": "H", "u4": "I", "u8": "Q", "b1": "B"}


def read_npy(path):
    """(dtype string, shape, flat list of values) of a .npy file."""
    with open(path, "rb") as f:
        magic = f.read(6)
        if magic != b"\x93NUMPY":
            raise ValueError(f"{path}: not a .npy file")
        major = f.read(2)[0]
        hlen = int.from_bytes(f.read(2 if major == 1 else 4), "little")
        header = ast.literal_eval(f.read(hlen).decode("latin1"))
        raw = f.read()
    descr = header["descr"]
    shape = tuple(header["shape"])
    if header.get("fortran_order"):
        raise ValueError(f"{path}: Fortran order")
    kind = descr[1:]
    if kind == "f2":
        import struct
        values = list(struct.unpack(f"<{len(raw) // 2}e", raw))
    elif kind in _CODES:
        a = array.array(_CODES[kind])
        a.frombytes(raw)
        if descr[0] == ">":
            a.byteswap()
        values = a.tolist()
    else:  # bfloat16 is written as raw 2-byte words ('<V2' or similar)
        import struct
        words = struct.unpack(f"<{len(raw) // 2}H", raw)
        values = [struct.unpack("<f", struct.pack("<I", w << 16))[0] for w in words]
    return descr, shape, values


def compare(ref_dir, index, got_dir, dtype):
    rtol = RTOL.get(dtype, 1e-4)
    rows, failed, missing = [], [], []
    for name in sorted(index.get("tensors", {})):
        meta = index["tensors"][name]
        row = {"tensor": name, "shape": meta.get("shape")}
        got_path = os.path.join(got_dir, name)
        if not os.path.exists(got_path):
            missing.append(name)
            row["status"] = "missing"
            rows.append(row)
            continue
        try:
            rd, rs, rv = read_npy(os.path.join(ref_dir, name))
            gd, gs, gv = read_npy(got_path)
        except (OSError, ValueError, SyntaxError) as e:
            row["status"] = f"unreadable: {e}"
            failed.append(name)
            rows.append(row)
            continue
        if rs != gs or len(rv) != len(gv):
            row["status"] = f"shape {list(gs)} != {list(rs)}"
            failed.append(name)
            rows.append(row)
            continue
        is_float = rd[1:] in ("f2", "f4", "f8") or rd[1] == "V"
        if not is_float:
            ok = rv == gv
            row.update({"status": "equal" if ok else "differs", "exact": True})
        else:
            scale = max((abs(v) for v in rv), default=0.0)
            err = max((abs(a - b) for a, b in zip(rv, gv)), default=0.0)
            if any(b != b for b in gv):  # NaN
                err = float("inf")
            rel = err / scale if scale > 0 else err
            spread = meta.get("cpu_k_err")
            allowed = rtol
            if spread is not None and spread > rtol:
                allowed = CPU_SPREAD_FACTOR * spread
                row["ill_conditioned"] = True
            ok = rel <= allowed
            row.update({"status": "ok" if ok else "differs", "err": rel,
                        "allowed": allowed, "cpu_k_err": spread})
        if not ok:
            failed.append(name)
        rows.append(row)
    errs = [r["err"] for r in rows if isinstance(r.get("err"), float)]
    worst = max((r for r in rows if isinstance(r.get("err"), float)),
                key=lambda r: r["err"] / r["allowed"], default=None)
    return {"tensors": len(rows), "compared": len(rows) - len(missing),
            "missing": missing, "failed": failed,
            "ill_conditioned": sum(1 for r in rows if r.get("ill_conditioned")),
            "max_err": max(errs) if errs else None,
            "worst": worst and {k: worst[k] for k in ("tensor", "err", "allowed")},
            "rtol": rtol, "pass": not failed and not missing and bool(rows),
            "rows": rows}


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tofu-run")
    ap.add_argument("--plan")
    ap.add_argument("--backend", default="cuda", help="cpu: test this script without a GPU")
    ap.add_argument("--ref", required=True)
    ap.add_argument("--index", required=True)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    result = {}
    if args.tofu_run:
        shutil.rmtree(args.workdir, ignore_errors=True)
        cmd = [args.tofu_run, args.plan, "--backend", args.backend, "--steps", "1",
               "--quiet", "--dump", args.workdir, *extra]
        if args.backend == "cuda":
            cmd[4:4] = ["--devices", "1"]
        print(" ".join(cmd), flush=True)
        rc = subprocess.call(cmd)
        result["tofu_run_rc"] = rc
        if rc != 0:
            result.update({"pass": False, "error": f"tofu-run exited {rc}"})
    if "error" not in result:
        with open(args.index) as f:
            index = json.load(f)
        result.update(compare(args.ref, index, args.workdir, args.dtype))
    if args.tofu_run:
        shutil.rmtree(args.workdir, ignore_errors=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"compare_dumps: {result.get('compared', 0)}/{result.get('tensors', 0)} tensors, "
          f"failed {len(result.get('failed', []))}, missing {len(result.get('missing', []))}, "
          f"max err {result.get('max_err')}, worst {result.get('worst')}, "
          f"pass {result.get('pass')}")
    return 0 if result.get("pass") else 1


if __name__ == "__main__":
    sys.exit(main())
