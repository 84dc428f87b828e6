# lit configuration for tofuc: every directory under test/ except unit/ and
# e2e/ holds lit tests (.mlir, .tdl, .test) checked with FileCheck.
import os
import lit.formats

config.name = "tofuc"
config.test_format = lit.formats.ShTest(not lit_config.isWindows)
config.suffixes = [".mlir", ".tdl", ".test", ".onnxtxt"]
config.excludes = ["unit", "e2e", "Inputs", "CMakeLists.txt", "lit.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.tofu_obj_root, "test")
config.environment["FILECHECK_OPTS"] = "-enable-var-scope"
config.environment["PATH"] = os.pathsep.join(
    [config.tofu_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", os.environ["PATH"])])
config.substitutions.append(("%tofu_src", config.tofu_src_root))
config.substitutions.append(("%torch_python", config.torch_python))
# nvcc (CUDA toolkit): tests that compile generated CUDA kernels need it.
import shutil
if shutil.which("nvcc") or os.access("/usr/local/cuda/bin/nvcc", os.X_OK):
    config.available_features.add("nvcc")
else:
    lit_config.note("nvcc not found: the CUDA kernel tests (REQUIRES: nvcc) are unsupported")
# tofu-run built with the CUDA executor (--backend cuda), and whether this
# machine has a GPU (the tests of the no-GPU error are unsupported there).
if getattr(config, "tofu_cuda_executor", "OFF") == "ON":
    config.available_features.add("cuda-executor")
try:
    import subprocess
    if "GPU" in subprocess.run(["nvidia-smi", "-L"], capture_output=True,
                               text=True, timeout=30).stdout:
        config.available_features.add("cuda-gpu")
except (OSError, subprocess.SubprocessError):
    pass
