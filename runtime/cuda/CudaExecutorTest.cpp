//===- CudaExecutorTest.cpp - The CUDA executor on a GPU against the CPU --===//
//
// GPU test (ctest label "gpu"): exits 77, which ctest reports as skipped,
// where no GPU is visible. Where one is, tofuc compiles the example models
// for its architecture and:
//
//  * MLP k = 1 and k = 8 on --devices 1 (k = 8: eight virtual devices on
//    one GPU), eager and replayed from the CUDA graph: the losses of four
//    steps equal the CPU backend's within fp32 tolerance;
//  * MLP k = 1 / 8, RNN k = 8 and GPT k = 8 on one GPU: after two steps on
//    the synthetic (random) batches, every parameter equals the CPU
//    backend's running the TDL expression programs (the interpreter), so
//    every generated kernel, cuBLAS/cuDNN call and copy of those plans is
//    checked against its TDL reference;
//  * with two or more GPUs, MLP k = 8 on 2 GPUs (peer copies) gives the
//    same losses as on one.
//
// Usage: tofu-cuda-executor-tests --tofuc T --nvcc N --python P
//          --examples DIR --workdir DIR [gtest flags]
//
// NEVER RUN YET: written and compiled on a machine without a GPU.
//
//===----------------------------------------------------------------------===//

#include "CudaExecutor.h"
#include "CudaSchedule.h"

#include "tofu/runtime/CpuBackend.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>

using namespace tofu::cuda;
using namespace tofu::plan;
using tofu::runtime::CpuExecutor;

namespace {

std::string tofuc, nvcc, python, examples, workdir, arch;
int gpuCount = 0;
std::map<std::string, Plan> plans;
std::map<std::string, std::string> planErrors;

int shell(const std::string &cmd) {
  std::fprintf(stderr, "+ %s\n", cmd.c_str());
  return std::system(cmd.c_str());
}

void compilePlans() {
  std::filesystem::create_directories(workdir);
  struct Model {
    std::string name, generator, args;
    std::vector<int> ks;
  };
  const std::vector<Model> models = {
      {"mlp", "", "", {1, 8}},
      {"rnn", "rnn/make_rnn.py",
       "--layers 2 --hidden 16 --batch 4 --vocab 32 --steps 4", {8}},
      {"gpt", "transformer/make_gpt.py",
       "--layers 2 --hidden 16 --heads 2 --seq 8 --vocab 32 --batch 2", {8}},
  };
  for (const Model &m : models) {
    std::string onnx = m.name == "mlp" ? examples + "/mlp/mlp.onnx"
                                       : workdir + "/" + m.name + ".onnx";
    if (m.name != "mlp" &&
        shell(python + " " + examples + "/" + m.generator + " " + m.args +
              " -o " + onnx) != 0) {
      for (int k : m.ks)
        planErrors[m.name + "-" + std::to_string(k)] = "the generator failed";
      continue;
    }
    for (int k : m.ks) {
      std::string name = m.name + "-" + std::to_string(k);
      std::string out = workdir + "/" + name + ".bin";
      if (shell(tofuc + " " + onnx + " --gpus " + std::to_string(k) +
                " --cuda-arch " + arch + " --nvcc " + nvcc + " -o " + out) !=
          0) {
        planErrors[name] = "tofuc failed";
        continue;
      }
      Plan plan;
      if (std::string err = readPlan(out, plan); !err.empty()) {
        planErrors[name] = err;
        continue;
      }
      plans[name] = std::move(plan);
    }
  }
}

const Plan *planNamed(const std::string &name) {
  auto it = plans.find(name);
  if (it == plans.end()) {
    ADD_FAILURE() << name << ": " << planErrors[name];
    return nullptr;
  }
  return &it->second;
}

std::vector<double> cpuLosses(const Plan &plan, int steps, bool interpret,
                              CpuExecutor *keep = nullptr) {
  CpuExecutor local(plan);
  CpuExecutor &exec = keep ? *keep : local;
  exec.preferInterpreter(interpret);
  std::vector<double> losses;
  EXPECT_EQ(exec.init(), "");
  EXPECT_EQ(exec.watchLoss(), "");
  for (int s = 0; s < steps; ++s) {
    EXPECT_EQ(exec.runStep(s), "");
    double loss = 0;
    EXPECT_EQ(exec.lastLoss(loss), "");
    losses.push_back(loss);
  }
  return losses;
}

std::vector<double> gpuLosses(CudaExecutor &exec, int steps) {
  std::vector<double> losses;
  std::string err = exec.init();
  EXPECT_EQ(err, "");
  if (!err.empty())
    return losses;
  for (int s = 0; s < steps; ++s) {
    EXPECT_EQ(exec.runStep(s), "");
    double loss = 0;
    EXPECT_EQ(exec.lastLoss(loss), "");
    losses.push_back(loss);
  }
  return losses;
}

void expectClose(const std::vector<double> &a, const std::vector<double> &b,
                 const std::string &what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_NEAR(a[i], b[i], 1e-5 + 1e-4 * std::fabs(b[i]))
        << what << " step " << i + 1;
}

TEST(CudaExecutor, MlpLossesMatchTheCpuBackend) {
  for (const char *name : {"mlp-1", "mlp-8"}) {
    const Plan *plan = planNamed(name);
    if (!plan)
      continue;
    std::vector<double> cpu = cpuLosses(*plan, 4, false);
    for (bool graph : {false, true}) {
      CudaRunOptions options;
      options.numGpus = 1;
      options.useGraph = graph;
      CudaExecutor exec(*plan, options);
      std::vector<double> gpu = gpuLosses(exec, 4);
      expectClose(gpu, cpu,
                  std::string(name) + (graph ? " graph" : " eager"));
      EXPECT_EQ(exec.graphReplays(), graph ? 3 : 0);
    }
  }
}

TEST(CudaExecutor, ParametersMatchTheTdlInterpreter) {
  for (const char *name : {"mlp-1", "mlp-8", "rnn-8", "gpt-8"}) {
    const Plan *plan = planNamed(name);
    if (!plan)
      continue;
    CpuExecutor cpu(*plan);
    cpuLosses(*plan, 2, /*interpret=*/true, &cpu);
    CudaRunOptions options;
    options.numGpus = 1;
    CudaExecutor gpu(*plan, options);
    gpuLosses(gpu, 2);
    size_t compared = 0;
    for (size_t d = 0; d < plan->devices.size(); ++d) {
      const auto &buffers = plan->devices[d].buffers;
      for (size_t b = 0; b < buffers.size(); ++b) {
        const TensorInfo &t = plan->tensors[buffers[b].tensor];
        if (t.role != TensorRole::Param || !buffers[b].owned ||
            t.dtype != DType::F32)
          continue;
        std::vector<uint8_t> bytes;
        ASSERT_EQ(gpu.readBuffer(static_cast<int32_t>(d),
                                 static_cast<int32_t>(b), bytes),
                  "");
        const float *g = reinterpret_cast<const float *>(bytes.data());
        const float *c = reinterpret_cast<const float *>(
            cpu.bufferData(static_cast<int32_t>(d), static_cast<int32_t>(b)));
        for (size_t i = 0; i < bytes.size() / 4; ++i)
          ASSERT_NEAR(g[i], c[i], 1e-5 + 1e-4 * std::fabs(c[i]))
              << name << " device " << d << " " << t.name << " element " << i;
        ++compared;
      }
    }
    EXPECT_GT(compared, 0u) << name;
  }
}

TEST(CudaExecutor, TwoGpusGiveTheSameLosses) {
  if (gpuCount < 2)
    GTEST_SKIP() << "needs 2 GPUs, " << gpuCount << " visible";
  const Plan *plan = planNamed("mlp-8");
  if (!plan)
    return;
  CudaRunOptions one, two;
  one.numGpus = 1;
  two.numGpus = 2;
  CudaExecutor a(*plan, one), b(*plan, two);
  expectClose(gpuLosses(b, 3), gpuLosses(a, 3), "mlp-8 on 2 GPUs");
}

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--tofuc")
      tofuc = value;
    else if (flag == "--nvcc")
      nvcc = value;
    else if (flag == "--python")
      python = value;
    else if (flag == "--examples")
      examples = value;
    else if (flag == "--workdir")
      workdir = value;
    else {
      std::fprintf(stderr, "unknown argument %s\n", flag.c_str());
      return 2;
    }
  }
  std::string why = describeGpus(gpuCount);
  if (gpuCount == 0) {
    std::printf("SKIPPED: no GPU (%s)\n", why.c_str());
    return 77;
  }
  if (nvcc.empty() || nvcc.find("NOTFOUND") != std::string::npos) {
    std::printf("SKIPPED: no nvcc; the plans need tofuc --cuda-arch\n");
    return 77;
  }
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    std::fprintf(stderr, "cudaGetDeviceProperties(0) failed\n");
    return 1;
  }
  arch = "sm_" + std::to_string(prop.major) + std::to_string(prop.minor);
  std::printf("GPUs:\n%s(plans compiled for %s)\n", why.c_str(), arch.c_str());
  compilePlans();
  return RUN_ALL_TESTS();
}
