#!/usr/bin/python3
"""e2e.nan_propagates: a NaN in the model is never reported as a finite loss.

Builds a copy of ``mlp.onnx`` whose last bias ``net.4.bias[0]`` is NaN. In ONNX
(and PyTorch, onnxruntime) ``Relu(NaN) = NaN``, so the loss is NaN. tofuc
refuses to train a NaN weight (docs/Errors.md); with ``--freeze net.4.bias``
it compiles, and the test proves that for k = 1 and 4 tofu-run, after one
step, either

* reports the step-1 loss as NaN (JSON ``NaN`` or ``null``), or
* stops with a clean error (exit 1, stderr says "error" and mentions nan /
  non-finite / inf),

and never reports a finite loss — diverged training must not look healthy.
"""

import math

import numpy as np

import e2e_common as E

KS = (1, 4)


def make_nan_model(src, dst):
    import onnx
    from onnx import numpy_helper
    model = onnx.load(src)
    for i, init in enumerate(model.graph.initializer):
        if init.name == "net.4.bias":
            a = numpy_helper.to_array(init).copy()
            a[0] = np.nan
            model.graph.initializer[i].CopyFrom(numpy_helper.from_array(a, init.name))
            break
    else:
        E.fail("mlp.onnx has no initializer net.4.bias")
    onnx.save(model, dst)


def torch_loss(model_path):
    """The reference: torch's loss for the NaN model (must be NaN)."""
    import torch
    model = E.load_onnx(model_path)
    params = {n: torch.tensor(v, dtype=torch.float64) for n, v in E.initializers(model).items()}
    x = torch.zeros(64, 64, dtype=torch.float64)
    y = torch.zeros(64, dtype=torch.int64)
    return E.TorchGraph(model).loss(dict(params, input=x, labels=y)).item()


def main():
    env = E.parse_args(__doc__.splitlines()[1])
    env.require_tools()
    nan_model = env.path("mlp_nan.onnx")
    make_nan_model(env.model, nan_model)
    ref = torch_loss(nan_model)
    E.check(math.isnan(ref), f"oracle: torch's loss for the NaN model is {ref}, expected NaN")
    failures = []
    for k in KS:
        plan, report = env.path(f"k{k}", "plan.bin"), env.path(f"k{k}", "r.json")
        # A NaN weight that would train is refused at compile time
        # (docs/Errors.md); frozen, it is a constant the loss must show.
        res = E.run_tool([env.tofuc, nan_model, "--gpus", k, "-o", plan], expect_rc=1)
        E.check("parameter 'net.4.bias' holds NaN" in res.stderr
                and "--freeze net.4.bias" in res.stderr,
                f"tofuc did not refuse the NaN weight clearly:\n{res.describe()}")
        E.run_tool([env.tofuc, nan_model, "--gpus", k, "--freeze", "net.4.bias", "-o", plan])
        res = E.run_tool([env.tofu_run, plan, "--steps", 1, "--report", report], expect_rc=None)
        if res.returncode != 0:
            err = res.stderr.lower()
            if not (res.returncode == 1 and "error" in err
                    and any(w in err for w in ("nan", "non-finite", "not finite", "inf"))):
                failures.append(f"k={k}: tofu-run failed without a clean non-finite error:\n{res.describe()}")
            else:
                print(f"k={k}: clean error: {res.stderr.strip()}")
            continue
        rep = E.load_json(report)
        loss = rep.get("steps", [{}])[0].get("loss", "<missing>") if isinstance(rep, dict) else rep
        print(f"k={k}: tofu-run step-1 loss {loss!r} (torch: {ref})")
        if not (loss is None or (E.is_number(loss) and math.isnan(loss))):
            failures.append(f"k={k}: the model has a NaN weight (torch's loss is NaN) but tofu-run "
                            f"reports a step-1 loss of {loss!r} with exit 0")
    E.check(not failures, "\n".join(failures))


if __name__ == "__main__":
    E.main_wrapper(main)
