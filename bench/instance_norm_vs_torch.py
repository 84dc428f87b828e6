"""InstanceNormalization training step: tofu-run (CPU, 1 device) beside
PyTorch's InstanceNorm2d forward + backward + SGD step on the same CPU, one
thread each (run with OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1).

    /usr/bin/python3 bench/instance_norm_vs_torch.py build/bin

Prints the median of 20 steps of each and their ratio (tofu / torch). The
loss is ReduceMean of the normalized output. Results: bench/instance_norm.md.
"""
import os
import tempfile

import subprocess, time, json, sys, numpy as np, torch, onnx
from onnx import helper, TensorProto, numpy_helper
torch.set_num_threads(1)
B = os.path.abspath(sys.argv[1])
os.chdir(tempfile.mkdtemp())
for shape in ([2, 8, 16, 16], [8, 32, 64, 64]):
    n, c = shape[0], shape[1]
    X = helper.make_tensor_value_info('x', TensorProto.FLOAT, shape)
    L = helper.make_tensor_value_info('loss', TensorProto.FLOAT, [])
    rng = np.random.default_rng(0)
    sc = numpy_helper.from_array(rng.random(c).astype(np.float32), 'scale')
    b = numpy_helper.from_array(rng.random(c).astype(np.float32), 'bias')
    nodes = [helper.make_node('InstanceNormalization', ['x', 'scale', 'bias'], ['y']),
             helper.make_node('ReduceMean', ['y'], ['loss'], keepdims=0)]
    g = helper.make_graph(nodes, 'g', [X], [L], [sc, b])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)]), 'm.onnx')
    subprocess.run([B + '/tofuc', 'm.onnx', '--gpus', '1', '-o', 'p.bin'], check=True)
    out = subprocess.run([B + '/tofu-run', 'p.bin', '--steps', '20', '--report', 'r.json', '--quiet'],
                         check=True, capture_output=True, text=True)
    rep = json.load(open('r.json'))
    # tofu: median step seconds from the report
    secs = sorted(s['seconds'] for s in rep['steps'])
    tofu = secs[len(secs) // 2]
    m = torch.nn.InstanceNorm2d(c, affine=True, eps=1e-5)
    x = torch.randn(*shape)
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    ts = []
    for i in range(20):
        t0 = time.perf_counter()
        opt.zero_grad(); m(x).mean().backward(); opt.step()
        ts.append(time.perf_counter() - t0)
    ts.sort()
    print(f"InstanceNorm {shape}: tofu-run step {tofu*1e3:.3f} ms, torch {ts[10]*1e3:.3f} ms, ratio {tofu/ts[10]:.2f}")
