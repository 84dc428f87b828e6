#!/usr/bin/python3
"""e2e.embedded_weights: weights inside the model reach plan.bin unchanged, uncopied.

tofuc leaves the raw_data of large float initializers in the mapped model
file and points the contiguous weight tiles at it (docs/Import.md, "Weights
inside the model: left in the file"). A three-layer MLP with two large
trained weights (128 KiB, 64 KiB), a large frozen one (64 KiB) and a small
trained one (dense, copied as before), compiled for k = 1 and k = 4 with the
tofu partitioner and with equal-chop (tiles that are not contiguous runs):

* the initial parameters tofu-run dumps equal the model's initializers
  exactly, and at least one compilation has a tile that is not a contiguous
  run (the copy path) and all have ones that are (the borrowed path);
* the same model saved with external data trains to exactly the same losses;
* `--save` writes back the input model with only the trained initializers
  replaced: the frozen one keeps its bytes (restored into the plan's MODEL
  section), every other field is unchanged;
* two compilations give byte-identical plans.
"""

import os

import numpy as np

import e2e_common as E


def build_model(path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)
    w1 = rng.standard_normal((256, 128)).astype(np.float32) * 0.05  # 128 KiB
    w2 = rng.standard_normal((128, 128)).astype(np.float32) * 0.05  # 64 KiB, frozen
    w3 = rng.standard_normal((128, 128)).astype(np.float32) * 0.05  # 64 KiB
    w4 = rng.standard_normal((128, 10)).astype(np.float32) * 0.05   # 5 KiB
    inits = [numpy_helper.from_array(a, n) for a, n in
             [(w1, "w1"), (w2, "w2"), (w3, "w3"), (w4, "w4")]]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["r1"]),
        helper.make_node("MatMul", ["r1", "w2"], ["h2"]),
        helper.make_node("Relu", ["h2"], ["r2"]),
        helper.make_node("MatMul", ["r2", "w3"], ["h3"]),
        helper.make_node("Relu", ["h3"], ["r3"]),
        helper.make_node("MatMul", ["r3", "w4"], ["logits"]),
    ]
    graph = helper.make_graph(
        nodes, "embedded",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 256])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [8, 10])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    helper.set_model_props(model, {"tofu.frozen": '["w2"]',
                                   "tofu.trainable": '["w1", "w3", "w4"]'})
    onnx.save(model, path)
    return model


def main():
    import onnx

    env = E.parse_args(__doc__.splitlines()[1])
    env.require_tools()
    inside = env.path("model.onnx")
    want = E.initializers(build_model(inside))
    loss = ["--loss", "softmax-cross-entropy", "--lr", "0.01"]

    ext_dir = env.path("ext", "model.onnx")
    # (onnx.save with external data changes the model it is given.)
    onnx.save(E.load_onnx(inside), ext_dir, save_as_external_data=True,
              all_tensors_to_one_file=True, location="model.data", size_threshold=0)

    contiguous = {True: 0, False: 0}
    for k, partitioner in [(1, "tofu"), (4, "tofu"), (4, "equal-chop")]:
        tag = f"k{k}-{partitioner}"
        plan = env.path(f"{tag}.bin")
        again = env.path(f"{tag}.again.bin")
        for out in (plan, again):
            E.run_tool([env.tofuc, inside, "--gpus", k, "--partitioner", partitioner,
                        "-o", out, *loss])
        with open(plan, "rb") as a, open(again, "rb") as b:
            E.check(a.read() == b.read(), f"{tag}: two compilations differ")

        # Which tiles are contiguous runs of their weight (--dump-plan json).
        summary_path = env.path(f"{tag}.plan.json")
        with open(summary_path, "w") as f:
            f.write(E.run_tool([env.tofuc, inside, "--gpus", k, "--partitioner", partitioner,
                                "--dump-plan=json", *loss], quiet=True).stdout)
        for tensor in E.load_json(summary_path, f"{tag} --dump-plan=json")["tensors"]:
            if tensor["name"] in want and k > 1:
                # A tile is a contiguous run when only the first dim is cut.
                dims = sorted({dim for dim, parts in tensor["tiling"] if parts > 1})
                contiguous[dims in ([], [0])] += 1

        dump = env.path(f"{tag}-dump")
        report = env.path(f"{tag}.json")
        E.run_tool([env.tofu_run, plan, "--steps", 2, "--quiet", "--dump", dump,
                    "--report", report])
        for name, value in want.items():
            got = np.load(os.path.join(dump, f"param.{E.dump_name(name)}.npy"))
            E.check(got.dtype == value.dtype and got.shape == value.shape and
                    np.array_equal(got, value),
                    f"{tag}: initial {name} differs from the model's initializer")
        losses = E.report_losses(E.load_json(report), report)

        ext_plan = env.path(f"{tag}.ext.bin")
        E.run_tool([env.tofuc, ext_dir, "--gpus", k, "--partitioner", partitioner,
                    "-o", ext_plan, *loss])
        ext_report = env.path(f"{tag}.ext.json")
        E.run_tool([env.tofu_run, ext_plan, "--steps", 2, "--quiet", "--report", ext_report])
        ext_losses = E.report_losses(E.load_json(ext_report), ext_report)
        E.check((losses == ext_losses).all(),
                f"{tag}: losses {losses} differ from the external-data model's {ext_losses}")

        saved = env.path(f"{tag}.saved.onnx")
        E.run_tool([env.tofu_run, plan, "--steps", 1, "--quiet", "--save", saved])
        back = E.load_onnx(saved, "the saved model")
        got = E.initializers(back)
        E.check(np.array_equal(got["w2"], want["w2"]),
                f"{tag}: the frozen w2 changed in the saved model")
        for name in ("w1", "w3", "w4"):
            E.check(got[name].shape == want[name].shape and
                    not np.array_equal(got[name], want[name]),
                    f"{tag}: the trained {name} was not written back")
        # Everything but the trained initializers and the training metadata
        # is the input model's.
        model = E.load_onnx(inside)
        for m in (back, model):
            for init in m.graph.initializer:
                if init.name != "w2":
                    init.ClearField("raw_data")
                    init.ClearField("data_location")
            for prop in list(m.metadata_props):
                if prop.key.startswith("tofu.training"):
                    m.metadata_props.remove(prop)
        E.check(back.graph == model.graph,
                f"{tag}: the saved model's graph differs beyond the trained weights")

    E.check(contiguous[True] > 0 and contiguous[False] > 0,
            f"expected both contiguous and non-contiguous weight tiles at k = 4, got "
            f"{contiguous}")
    print(f"embedded weights: initial values, losses and --save exact; "
          f"tiles {contiguous}")


if __name__ == "__main__":
    E.main_wrapper(main)
