#!/usr/bin/python3
"""e2e.bf16_vs_torch_autocast: tofuc --precision bf16 follows float32 training as PyTorch's CPU autocast does.

Three small PyTorch models (an MLP of Linear/ReLU, a CNN of Conv/ReLU/
strided Conv/mean/LayerNorm/Linear, and a one-block transformer encoder of
batched MatMul attention, Softmax, LayerNorm and a GELU-free MLP) are
exported in float32 (tools/tofu_export.py) and trained for STEPS SGD steps
on fixed batches, from the same initial weights, four ways:

* tofuc float32 (the default) and tofuc --precision bf16, on the CPU backend;
* torch float32 and torch under ``torch.autocast("cpu", torch.bfloat16)``.

The tolerance is measured, not assumed: torch's own divergence
``D_torch = rel_diff(torch bf16 losses, torch float32 losses)`` on the model.
The test asserts

* tofu float32 equals torch float32 (rel LOSS_TOL_F32: the same start);
* tofu bf16 differs from tofu float32 by more than D_torch / 10 and by
  more than 10x the float32 tofu-vs-torch difference: the rewrite took
  effect (a skipped rewrite gives float32's losses exactly);
* tofu bf16 follows tofu float32 within FACTOR * D_torch, and torch's bf16
  losses within FACTOR * D_torch: tofu's bf16 is as close to float32 as
  torch's is (FACTOR = 2: two independent bf16 roundings of the same ops
  scatter around float32 with the same spread, not along one path);
* the plan keeps every parameter, gradient and optimizer value in float32
  (tofuc --dump-plan=json) and computes some activations in bf16, and the
  weights tofu-run --save writes after training are float32 values that
  bf16 cannot hold (weights stored in bf16 would all be bf16 values).

torch 1.13's CPU autocast runs only the matrix products and convolutions
in bf16 but lacks the float32 list of CUDA autocast (its layer_norm refuses
a bf16 input beside float32 weights): the modules apply that list by hand,
``.float()`` before each norm, reduction, softmax and loss, which is the
rule tofuc follows (docs/Training.md, "Mixed precision"); in float32 and in
the export ``.float()`` changes nothing.

The measured numbers are printed (bench/bf16_vs_autocast.md records them);
TOFU_LOG_INTERPRETED=1 checks that no bf16 instruction falls to the TDL
interpreter.
"""
import json
import os
import sys

import numpy as np
import onnx
import onnx.numpy_helper
import torch
import torch.nn.functional as F

import e2e_common as E

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
from tofu_export import export_for_training  # noqa: E402

STEPS = 8
LR = 0.05
LOSS_TOL_F32 = 1e-4
FACTOR = 2.0


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(64, 128)
        self.fc2 = torch.nn.Linear(128, 128)
        self.fc3 = torch.nn.Linear(128, 10)

    def forward(self, x, labels):
        h = F.relu(self.fc2(F.relu(self.fc1(x))))
        return F.cross_entropy(self.fc3(h).float(), labels)


class Cnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.c2 = torch.nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.norm = torch.nn.LayerNorm(32)
        self.fc = torch.nn.Linear(32, 10)

    def forward(self, x, labels):
        h = F.relu(self.c2(F.relu(self.c1(x))))
        h = self.norm(h.float().mean(dim=(2, 3)))
        return F.cross_entropy(self.fc(h).float(), labels)


class Encoder(torch.nn.Module):
    """One pre-norm transformer block (one head) and a mean-pooled classifier."""

    def __init__(self, d=32, ff=64, classes=10):
        super().__init__()
        self.d = d
        self.n1 = torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.out = torch.nn.Linear(d, d)
        self.n2 = torch.nn.LayerNorm(d)
        self.ff1 = torch.nn.Linear(d, ff)
        self.ff2 = torch.nn.Linear(ff, d)
        self.head = torch.nn.Linear(d, classes)

    def forward(self, x, labels):
        q, k, v = self.qkv(self.n1(x)).split(self.d, dim=-1)
        scores = torch.matmul(q, k.transpose(1, 2)).float() / self.d ** 0.5
        x = x + self.out(torch.matmul(torch.softmax(scores, dim=-1), v)).float()
        x = x + self.ff2(F.relu(self.ff1(self.n2(x)))).float()
        return F.cross_entropy(self.head(x.mean(dim=1)).float(), labels)


MODELS = {
    "mlp": (Mlp, (64, 64)),
    "cnn": (Cnn, (16, 3, 12, 12)),
    "encoder": (Encoder, (16, 8, 32)),
}


def batches(shape, steps):
    g = torch.Generator().manual_seed(7)
    return [(torch.randn(*shape, generator=g),
             torch.randint(0, 10, (shape[0],), generator=g)) for _ in range(steps)]


def torch_losses(module, params0, data, autocast):
    """STEPS torch SGD steps from params0, in float32 or under CPU autocast."""
    state = module.state_dict()
    with torch.no_grad():
        for n, v in params0.items():
            state[n].copy_(torch.from_numpy(v))
    opt = torch.optim.SGD(module.parameters(), lr=LR)
    losses = []
    for x, labels in data:
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = module(x, labels)
        loss.backward()
        losses.append(loss.item())
        opt.step()
    for p in module.parameters():
        E.check(p.dtype == torch.float32, "torch's master weights are float32")
    return np.array(losses)


def tofu_run(env, name, tag, model, data_dir, extra):
    plan = env.path(name, tag, "plan.bin")
    dump = os.path.dirname(env.path(name, tag, "dump", "x"))
    report = env.path(name, tag, "r.json")
    saved = env.path(name, tag, "trained.onnx")
    E.run_tool([env.tofuc, model, "--optimizer", "sgd", "--lr", LR, "-o", plan, *extra])
    old = os.environ.get("TOFU_LOG_INTERPRETED")
    os.environ["TOFU_LOG_INTERPRETED"] = "1"
    try:
        r = E.run_tool([env.tofu_run, plan, "--data", data_dir, "--steps", STEPS, "--dump",
                        dump, "--report", report, "--save", saved, "--quiet"])
    finally:
        if old is None:
            del os.environ["TOFU_LOG_INTERPRETED"]
        else:
            os.environ["TOFU_LOG_INTERPRETED"] = old
    E.check("tofu: interpreted" not in r.stderr,
            f"{name} {tag}: instructions ran on the TDL interpreter:\n{r.stderr[:3000]}")
    return plan, dump, E.report_losses(E.load_json(report), report), saved


def plan_tensors(env, model, extra):
    """The tensors of tofuc --dump-plan=json (docs/PlanJson.md)."""
    r = E.run_tool([env.tofuc, model, "--optimizer", "sgd", "--lr", LR, "--dump-plan=json",
                    *extra], quiet=True)
    return json.loads(r.stdout)["tensors"]


def main():
    env = E.parse_args(__doc__.splitlines()[1])
    env.require_tools()
    failures = []
    rows = []
    for name, (cls, shape) in MODELS.items():
        torch.manual_seed(1)
        module = cls()
        data = batches(shape, STEPS)
        model = env.path(name, "model.onnx")
        export_for_training(module, data[0], model, input_names=["input", "labels"],
                            output_names=["loss"], opset_version=14)
        data_dir = os.path.dirname(os.path.dirname(env.path(name, "data", "batch_0", "x")))
        for s, (x, labels) in enumerate(data):
            os.makedirs(os.path.join(data_dir, f"batch_{s}"), exist_ok=True)
            np.save(os.path.join(data_dir, f"batch_{s}", "input.npy"), x.numpy())
            np.save(os.path.join(data_dir, f"batch_{s}", "labels.npy"), labels.numpy())

        _, dump, tofu_f32, _ = tofu_run(env, name, "f32", model, data_dir, [])
        _, bf16_dump, tofu_bf16, saved = tofu_run(env, name, "bf16", model, data_dir,
                                          ["--precision", "bf16"])
        params0 = {n: np.load(os.path.join(dump, f"param.{E.dump_name(n)}.npy"))
                   for n, _ in module.named_parameters()}
        torch_f32 = torch_losses(module, params0, data, autocast=False)
        torch_bf16 = torch_losses(module, params0, data, autocast=True)

        d_f32 = E.rel_diff(tofu_f32, torch_f32)
        d_torch = E.rel_diff(torch_bf16, torch_f32)
        d_tofu = E.rel_diff(tofu_bf16, tofu_f32)
        d_cross = E.rel_diff(tofu_bf16, torch_bf16)
        tol = FACTOR * d_torch
        rows.append((name, d_f32, d_torch, d_tofu, d_cross, tol))
        print(f"{name}: tofu f32 {tofu_f32}\n  torch f32 {torch_f32}\n  tofu bf16 {tofu_bf16}\n"
              f"  torch bf16 {torch_bf16}\n  rel: tofu-f32 vs torch-f32 {d_f32:.2e}; "
              f"torch bf16 vs f32 (D_torch) {d_torch:.2e}; tofu bf16 vs f32 {d_tofu:.2e}; "
              f"tofu bf16 vs torch bf16 {d_cross:.2e}; tolerance {FACTOR} * D_torch = {tol:.2e}",
              flush=True)
        if d_f32 > LOSS_TOL_F32:
            failures.append(f"{name}: tofu float32 losses differ from torch's by {d_f32:.2e}")
        if not (d_tofu > d_torch / 10 and d_tofu > 10 * d_f32):
            failures.append(f"{name}: bf16 losses differ from float32 by only {d_tofu:.2e} "
                            "(was the bf16 rewrite skipped?)")
        if d_tofu > tol:
            failures.append(f"{name}: tofu bf16 vs float32 {d_tofu:.2e} > {FACTOR} * torch's "
                            f"autocast divergence {d_torch:.2e}")
        if d_cross > tol:
            failures.append(f"{name}: tofu bf16 vs torch autocast {d_cross:.2e} > {FACTOR} * "
                            f"torch's autocast divergence {d_torch:.2e}")

        # Master weights, gradients and optimizer values in float32; compute in bf16.
        tensors = plan_tensors(env, model, ["--precision", "bf16"])
        for t in tensors:
            if t["role"] in ("param", "updated", "loss") and t["dtype"] in ("bf16", "f16",
                                                                           "f64"):
                failures.append(f"{name}: plan tensor {t['name']} ({t['role']}) is "
                                f"{t['dtype']}, not f32")
        for n in params0:
            g = np.load(os.path.join(bf16_dump, f"grad.{E.dump_name(n)}.npy"))
            if g.dtype != np.float32:
                failures.append(f"{name}: the gradient of {n} is {g.dtype}, not float32")
        n_bf16 = sum(t["dtype"] == "bf16" for t in tensors)
        if n_bf16 == 0:
            failures.append(f"{name}: the bf16 plan has no bf16 tensor")
        trained = {i.name: onnx.numpy_helper.to_array(i)
                   for i in onnx.load(saved).graph.initializer}
        for n in params0:
            w = trained[n]
            if w.dtype != np.float32:
                failures.append(f"{name}: trained {n} is {w.dtype}")
                continue
            low = (w.view(np.uint32) & 0xffff) != 0
            if not low.any():
                failures.append(f"{name}: every trained value of {n} is a bf16 value: "
                                "the weights were not kept in float32")
            if np.array_equal(w, params0[n]):
                failures.append(f"{name}: {n} did not train")
    print("\nmodel    tofu-f32-vs-torch  D_torch(bf16 vs f32)  tofu bf16 vs f32  "
          "tofu bf16 vs torch bf16  tolerance")
    for name, d_f32, d_torch, d_tofu, d_cross, tol in rows:
        print(f"{name:8} {d_f32:.2e}           {d_torch:.2e}              {d_tofu:.2e}"
              f"          {d_cross:.2e}                 {tol:.2e}")
    E.check(not failures, "\n  " + "\n  ".join(failures))


if __name__ == "__main__":
    E.main_wrapper(main)
