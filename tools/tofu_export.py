"""Export a torch.nn.Module to ONNX for training with tofuc, recording what trains.

PyTorch exports a module's registered buffers (causal masks, positional
encodings, BatchNorm running statistics) as ONNX initializers, exactly like
its parameters; nothing in a plain ONNX file says which initializers PyTorch
would train. ``export_for_training`` exports the module in training mode and
records, in the model's ``metadata_props``, which float initializers are
frozen and which train, so that tofuc trains exactly what PyTorch trains
(``docs/Training.md``, "Which initializers train").

Usage (needs only ``torch`` and ``onnx``; nothing has to be built)::

    import sys
    sys.path.insert(0, "<tofuc checkout>/tools")   # the folder of this file
    from tofu_export import export_for_training

    export_for_training(model, (x,), "model.onnx",
                        input_names=["x"], output_names=["loss"])

It calls ``torch.onnx.export(model, args, f,
training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
**kwargs)``; keyword arguments (``opset_version``, ``input_names``,
``output_names``, ``dynamic_axes``, ...) go to ``torch.onnx.export`` and may
override those two defaults. Then it writes into the model's
``metadata_props``:

``tofu.frozen``
    a JSON list of the names of the float initializers that do not train:
    every registered buffer (``model.named_buffers()``), every parameter with
    ``requires_grad = False``, and, where the caller allows them
    (``unknown_initializers="frozen"``), every float initializer that is
    neither a buffer nor a parameter of the module, with a warning; by
    default such an initializer is an error (``record_training_lists``).
``tofu.trainable``
    a JSON list of the names of the float initializers that train: the
    parameters with ``requires_grad = True``.

``record_training_lists(model, f)`` writes the same lists into a model
that was exported already (with ``torch.onnx.export``).

Both lists hold exact initializer names, in the graph's initializer order,
and together cover every float initializer (float16, bfloat16, float32,
float64). tofuc honours them; its ``--trainable`` and ``--freeze`` flags
override them.

BatchNorm's ``running_mean`` / ``running_var`` are buffers, so they are in
``tofu.frozen``: they get no gradient and no optimizer update. In training
mode they still follow the BatchNormalization op (momentum average of the
batch statistics), as in PyTorch.

Note: exporting in training mode runs the module once, so a BatchNorm's
running statistics (in the module and in the file alike) have been updated
once by the export; compare a run of the file with the module as it is
after the export.

``f`` may be a path or an empty binary file object (``io.BytesIO``). Where the
exporter wrote the weights to external data files (models over 2 GB), the
model is re-read without them and written back in place, so the data files
and the references to them stay as they are.

Works with torch 1.13 (Debian's ``/usr/bin/python3``) and later.
"""

import json
import os
import warnings

import onnx
import torch

__all__ = ["export_for_training", "record_training_lists", "FROZEN_KEY",
           "TRAINABLE_KEY", "frozen_and_trainable"]

#: metadata_props key: JSON list of the float initializers that do not train.
FROZEN_KEY = "tofu.frozen"
#: metadata_props key: JSON list of the float initializers that train.
TRAINABLE_KEY = "tofu.trainable"

_FLOAT_TYPES = {
    onnx.TensorProto.FLOAT,
    onnx.TensorProto.DOUBLE,
    onnx.TensorProto.FLOAT16,
    onnx.TensorProto.BFLOAT16,
}


def _module_names(model):
    """Return ({trainable parameter names}, {frozen names}) of `model`.

    Names are those the exporter gives initializers: state_dict keys. Every
    alias of a tied (shared) tensor is included, since the exporter keeps one
    of them.
    """
    trainable, frozen = set(), set()
    params = {}
    named_parameters = getattr(model, "named_parameters", None)
    if named_parameters is not None:
        for name, p in named_parameters():
            params[name] = p
    buffers = set()
    named_buffers = getattr(model, "named_buffers", None)
    if named_buffers is not None:
        for name, _ in named_buffers():
            buffers.add(name)
    state_dict = getattr(model, "state_dict", None)
    if state_dict is not None:
        for name, t in state_dict(keep_vars=True).items():
            if isinstance(t, torch.nn.Parameter):
                params.setdefault(name, t)
            else:
                buffers.add(name)
    for name, p in params.items():
        (trainable if p.requires_grad else frozen).add(name)
    frozen |= buffers
    return trainable, frozen


def frozen_and_trainable(onnx_model, model):
    """Return (frozen, trainable, unknown): lists of the float initializer
    names of `onnx_model` (a ModelProto) that do not train, that train, and
    that are neither a buffer nor a parameter of `model` (also in frozen)."""
    trainable_names, frozen_names = _module_names(model)
    frozen, trainable, unknown = [], [], []
    for init in onnx_model.graph.initializer:
        if init.data_type not in _FLOAT_TYPES:
            continue
        if init.name in trainable_names:
            trainable.append(init.name)
        else:
            frozen.append(init.name)
            if init.name not in frozen_names:
                unknown.append(init.name)
    return frozen, trainable, unknown


def _set_metadata(onnx_model, key, value):
    for prop in onnx_model.metadata_props:
        if prop.key == key:
            prop.value = value
            return
    prop = onnx_model.metadata_props.add()
    prop.key = key
    prop.value = value


def export_for_training(model, args, f, *, unknown_initializers="error",
                        **kwargs):
    """Export `model` with torch.onnx.export in training mode to `f` (a path
    or a binary file object) and record its frozen and trainable initializers
    in the model's metadata_props (keys ``tofu.frozen``, ``tofu.trainable``).
    `unknown_initializers`: see record_training_lists.

    Returns (frozen, trainable): the two lists written.
    """
    kwargs.setdefault("training", torch.onnx.TrainingMode.TRAINING)
    kwargs.setdefault("do_constant_folding", False)
    with warnings.catch_warnings():
        # BatchNorm's num_batches_tracked counter is a buffer (listed frozen
        # below); the exporter drops its in-place increment with one
        # warning per BatchNorm, hundreds for a DenseNet, which buried
        # everything else a test or a user's script printed.
        warnings.filterwarnings(
            "ignore", message=r"ONNX Preprocess - Removing mutation from node "
            r"aten::add_ on block input: '[^']*num_batches_tracked'")
        torch.onnx.export(model, args, f, **kwargs)
    return record_training_lists(model, f,
                                 unknown_initializers=unknown_initializers)


def record_training_lists(model, f, *, unknown_initializers="error"):
    """Record in the ONNX model `f` (a path or a binary file object, already
    exported from `model`) which float initializers train, as
    export_for_training does after exporting. Returns (frozen, trainable).

    A float initializer that is neither a parameter nor a buffer of `model`
    is most likely a parameter that constant folding transformed (``x @
    w.t()`` exported with do_constant_folding=True becomes an initializer
    ``onnx::MatMul_5`` holding w transposed): PyTorch trains the parameter,
    and neither training nor freezing the folded value is the same in
    general. With ``unknown_initializers="error"`` (the default) that is a
    ValueError naming them and the file keeps no lists; with ``"frozen"``
    they are listed as frozen, with a warning.
    """
    if unknown_initializers not in ("error", "frozen"):
        raise ValueError("unknown_initializers must be 'error' or 'frozen', "
                         "not %r" % (unknown_initializers,))
    is_path = isinstance(f, (str, os.PathLike))
    if is_path:
        # Leave external data where the exporter wrote it: the initializers
        # keep their references and onnx.save skips tensors without data.
        onnx_model = onnx.load(os.fspath(f), load_external_data=False)
    else:
        f.seek(0)
        onnx_model = onnx.load_model_from_string(f.read())

    frozen, trainable, unknown = frozen_and_trainable(onnx_model, model)
    if unknown and unknown_initializers == "error":
        raise ValueError(
            "tofu_export: float initializers that are neither a parameter "
            "nor a buffer of the module: " + ", ".join(unknown) + "; they "
            "are most likely parameters transformed by constant folding, "
            "which PyTorch trains as the parameters: export with "
            "do_constant_folding=False (export_for_training's default), or "
            "pass unknown_initializers='frozen' to keep them fixed")
    if unknown:
        warnings.warn("tofu_export: float initializers that are neither a "
                      "parameter nor a buffer of the module are listed as "
                      "frozen: " + ", ".join(unknown))
    _set_metadata(onnx_model, FROZEN_KEY, json.dumps(frozen))
    _set_metadata(onnx_model, TRAINABLE_KEY, json.dumps(trainable))

    if is_path:
        onnx.save(onnx_model, os.fspath(f))
    else:
        f.seek(0)
        f.truncate()
        f.write(onnx_model.SerializeToString())
    return frozen, trainable
