"""Builds ONNX training models node by node and writes them with or without
their weights. Shared by the example generators (examples/rnn,
examples/wresnet, examples/transformer).

Conventions every generator follows:

* Initializers are the trainable weights and nothing else (BatchNorm's
  running statistics are initializers too, as in every exported model).
  Shape tensors and scalar constants are ``Constant`` nodes, so a graph-only
  model still carries everything its shapes depend on.
* Weights are reproducible: tensor number ``i`` (in creation order) is drawn
  from ``numpy.random.default_rng([seed, i])``, so changing one tensor's size
  does not change the others.
* ``save(path, weights=False)`` writes a *graph-only* model: every initializer
  is an EXTERNAL data entry (``location`` = ``<model file name>.data`` next to
  the model, ``offset`` and ``length`` set as if the file existed, tensors
  packed back to back in creation order) but the data file is not written.
  This is the convention ``tofuc --no-weights`` reads, and it lets the paper's
  largest configurations (tens of GB of weights) be written in seconds.
* ``save(path, weights=True)`` writes the weights: inline ``raw_data`` when
  they total at most ``EXTERNAL_THRESHOLD`` bytes (protobuf's 2 GB limit),
  otherwise the same external layout as above with the data file written one
  tensor at a time (the whole model is never held in memory).
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

#: Models whose weights total more than this are written with external data.
EXTERNAL_THRESHOLD = 2 * 1024 ** 3 - 64 * 1024 ** 2
#: The opset the generators write (the newest that Debian's libonnx 1.12 knows).
OPSET = 17

_NP_TYPES = {
    TensorProto.FLOAT: np.float32,
    TensorProto.INT64: np.int64,
    TensorProto.BOOL: np.bool_,
}


class _Weight:
    """A deferred initializer: its values are only drawn when written."""

    def __init__(self, name, shape, init, scale, index):
        self.name, self.shape, self.init, self.scale, self.index = (
            name, tuple(int(d) for d in shape), init, scale, index)

    @property
    def nbytes(self):
        return 4 * int(np.prod(self.shape, dtype=np.int64))

    def values(self, seed):
        if self.init == "zeros":
            return np.zeros(self.shape, np.float32)
        if self.init == "ones":
            return np.ones(self.shape, np.float32)
        rng = np.random.default_rng([seed, self.index])
        if self.init == "normal":
            return (rng.standard_normal(self.shape, np.float32) * np.float32(self.scale))
        if self.init == "uniform":
            return rng.uniform(-self.scale, self.scale, self.shape).astype(np.float32)
        raise ValueError(f"unknown init '{self.init}' for weight '{self.name}'")


class GraphBuilder:
    """Collects nodes, graph inputs/outputs and weights of one ONNX graph."""

    def __init__(self, name, seed=0):
        self.name = name
        self.seed = seed
        self.nodes = []
        self.weights = []
        self.inputs = []
        self.outputs = []
        self._names = set()

    # -- names -------------------------------------------------------------
    def _unique(self, name):
        base, n = name, 1
        while name in self._names:
            name = f"{base}_{n}"
            n += 1
        self._names.add(name)
        return name

    # -- graph interface ---------------------------------------------------
    def input(self, name, elem_type, shape):
        self._names.add(name)
        self.inputs.append(helper.make_tensor_value_info(name, elem_type, shape))
        return name

    def output(self, name, elem_type, shape):
        self.outputs.append(helper.make_tensor_value_info(name, elem_type, shape))

    def weight(self, name, shape, init="normal", scale=1.0):
        """A float32 initializer drawn from ``init`` (normal: std ``scale``;
        uniform: [-scale, scale]; zeros; ones). Returns its name."""
        name = self._unique(name)
        self.weights.append(_Weight(name, shape, init, scale, len(self.weights)))
        return name

    def constant(self, values, elem_type=TensorProto.INT64, name=None):
        """A Constant node holding ``values`` (a scalar or nested list)."""
        arr = np.asarray(values, dtype=_NP_TYPES[elem_type])
        out = self._unique(name or "const")
        tensor = helper.make_tensor(out + ".value", elem_type, arr.shape,
                                    arr.flatten().tolist())
        self.nodes.append(helper.make_node("Constant", [], [out], name=out,
                                           value=tensor))
        return out

    def op(self, op_type, inputs, name, outputs=1, **attrs):
        """Adds a node named ``name``; returns its output name (or a list of
        ``outputs`` names when ``outputs`` > 1)."""
        name = self._unique(name)
        outs = [name] if outputs == 1 else [self._unique(f"{name}:{i}")
                                            for i in range(outputs)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=name, **attrs))
        return outs[0] if outputs == 1 else outs

    # -- statistics --------------------------------------------------------
    @property
    def weight_bytes(self):
        return sum(w.nbytes for w in self.weights)

    @property
    def parameter_count(self):
        return sum(w.nbytes // 4 for w in self.weights)

    # -- writing -----------------------------------------------------------
    def save(self, path, weights=True):
        """Writes the model to ``path`` (see the module docstring); returns
        the external data file's path or None when the weights are inline."""
        path = os.path.abspath(path)
        data_name = os.path.basename(path) + ".data"
        data_path = os.path.join(os.path.dirname(path), data_name)
        external = not weights or self.weight_bytes > EXTERNAL_THRESHOLD
        initializers = []
        offset = 0
        data_file = None
        if external and weights:
            data_file = open(data_path, "wb")
        try:
            for w in self.weights:
                t = TensorProto()
                t.name = w.name
                t.data_type = TensorProto.FLOAT
                t.dims.extend(w.shape)
                if not external:
                    t.raw_data = w.values(self.seed).tobytes()
                else:
                    t.data_location = TensorProto.EXTERNAL
                    for key, value in (("location", data_name),
                                       ("offset", str(offset)),
                                       ("length", str(w.nbytes))):
                        entry = t.external_data.add()
                        entry.key, entry.value = key, value
                    if data_file:
                        data_file.write(w.values(self.seed).tobytes())
                    offset += w.nbytes
                initializers.append(t)
        finally:
            if data_file:
                data_file.close()
        if not weights and os.path.exists(data_path):
            print(f"warning: {data_path} exists from an earlier run and does not "
                  "belong to this graph-only model", file=sys.stderr)
        graph = helper.make_graph(self.nodes, self.name, self.inputs, self.outputs,
                                  initializer=initializers)
        model = helper.make_model(
            graph, producer_name="tofuc-examples",
            opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = 8
        with open(path, "wb") as f:
            f.write(model.SerializeToString())
        return data_path if external else None


def add_common_arguments(parser):
    """--seed, --no-weights and -o, shared by every generator."""
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the weights (numpy default_rng([seed, i]))")
    parser.add_argument("--no-weights", action="store_true",
                        help="write a graph-only model: initializers are external "
                             "data entries of <output>.data, which is not written")
    parser.add_argument("-o", "--output", required=True, metavar="PATH",
                        help="where to write the ONNX model")


def check_positive(parser, args, names):
    for name in names:
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be positive")


def report(builder, path, data_path, weights):
    """One line: what was written."""
    gb = builder.weight_bytes / 1e9
    where = ("inline" if data_path is None else
             (f"in {os.path.basename(data_path)}" if weights else
              f"declared in {os.path.basename(data_path)} (not written)"))
    print(f"{path}: {len(builder.nodes)} nodes, {builder.parameter_count} parameters "
          f"({gb:.3f} GB, {where})")


def check_model(path):
    """Runs the ONNX checker on a model written with its weights inline."""
    onnx.checker.check_model(onnx.load(path))
