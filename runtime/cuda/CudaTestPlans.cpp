//===- CudaTestPlans.cpp - Example plans for the CUDA executor tests ------===//
//
// See CudaTestPlans.h.
//
//===----------------------------------------------------------------------===//

#include "CudaTestPlans.h"

#include "tofu/runtime/ElementAccess.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>

using namespace tofu::plan;
using namespace tofu::test;

CudaTestArgs tofu::test::cudaTestArgs;

namespace {

/// name -> plan ("mlp-1", "mlp-8", ...); absent when compiling failed.
std::map<std::string, Plan> plans;
std::map<std::string, std::string> planErrors;

} // namespace

std::string tofu::test::parseCudaTestArgs(int argc, char **argv) {
  CudaTestArgs &a = cudaTestArgs;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--tofuc")
      a.tofuc = value;
    else if (flag == "--nvcc")
      a.nvcc = value;
    else if (flag == "--python")
      a.python = value;
    else if (flag == "--examples")
      a.examples = value;
    else if (flag == "--workdir")
      a.workdir = value;
    else if (flag == "--host-cxx")
      a.hostCxx = value;
    else if (flag == "--plans")
      a.plansDir = value;
    else if (flag == "--compile-only")
      a.compileOnlyArch = value;
    else
      return "unknown argument " + flag;
  }
  if (!a.plansDir.empty())
    return "";
  if (a.tofuc.empty() || a.python.empty() || a.examples.empty() ||
      a.workdir.empty())
    return "usage: --tofuc T --nvcc N --python P --examples DIR --workdir DIR "
           "[--host-cxx CXX] [--compile-only ARCH], or --plans DIR";
  return "";
}

bool tofu::test::haveNvcc() {
  if (!cudaTestArgs.plansDir.empty())
    return true; // the plans were compiled elsewhere
  return !cudaTestArgs.nvcc.empty() &&
         cudaTestArgs.nvcc.find("NOTFOUND") == std::string::npos;
}

int tofu::test::shell(const std::string &cmd) {
  std::fprintf(stderr, "+ %s\n", cmd.c_str());
  return std::system(cmd.c_str());
}

void tofu::test::compileExamplePlans(const std::vector<ExampleModel> &models,
                                     const std::string &arch) {
  const CudaTestArgs &a = cudaTestArgs;
  if (!a.plansDir.empty()) {
    for (const ExampleModel &m : models)
      for (int k : m.ks) {
        std::string name = m.name + "-" + std::to_string(k);
        Plan plan;
        if (std::string err = readPlan(a.plansDir + "/" + name + ".bin", plan);
            !err.empty())
          planErrors[name] = err;
        else
          plans[name] = std::move(plan);
      }
    return;
  }
  std::filesystem::create_directories(a.workdir);
  // The generated models, small (WResNet-50 is left out: nvcc needs over a
  // minute for its kernels).
  const std::map<std::string, std::string> generators = {
      // The MLP exported in float64 (model.double()).
      {"mlp64", "mlp/make_mlp.py --double --batch 16 --features 12 "
                "--hidden 16 --classes 5"},
      {"rnn", "rnn/make_rnn.py --layers 2 --hidden 16 --batch 4 --vocab 32 "
              "--steps 4"},
      {"gpt", "transformer/make_gpt.py --layers 2 --hidden 16 --heads 2 "
              "--seq 8 --vocab 32 --batch 2"},
      // Training-mode BatchNormalization, MaxPool and AveragePool.
      {"cnnbn", "cnn/make_cnn_bn.py"},
      // The same with a 1x1 stride-2 shortcut convolution, whose X the plan
      // holds without its last row and column.
      {"cnnbnsc", "cnn/make_cnn_bn.py --shortcut"},
  };
  // Models compiled with extra tofuc flags: name -> (model, flags).
  const std::map<std::string, std::pair<std::string, std::string>> variants =
      {
          // Mixed precision (docs/Training.md): bf16 GEMMs and their
          // gradients, float32 weights.
          {"mlpbf16", {"mlp", " --precision bf16"}},
          {"gptbf16", {"gpt", " --precision bf16"}},
      };
  for (const ExampleModel &m : models) {
    std::string model = m.name, flags;
    if (auto variant = variants.find(m.name); variant != variants.end()) {
      model = variant->second.first;
      flags = variant->second.second;
    }
    std::string onnx = a.workdir + "/" + m.name + ".onnx";
    auto generator = generators.find(model);
    if (generator == generators.end()) {
      onnx = a.examples + "/" + model + "/" + model + ".onnx";
    } else if (shell(a.python + " " + a.examples + "/" + generator->second +
                     " -o " + onnx + " > " + a.workdir + "/" + m.name +
                     ".gen.log 2>&1") != 0) {
      for (int k : m.ks)
        planErrors[m.name + "-" + std::to_string(k)] =
            "the generator failed (" + a.workdir + "/" + m.name + ".gen.log)";
      continue;
    }
    for (int k : m.ks) {
      std::string name = m.name + "-" + std::to_string(k);
      std::string out = a.workdir + "/" + name + ".bin";
      std::string log = a.workdir + "/" + name + ".log";
      if (shell(a.tofuc + " " + onnx + " --gpus " + std::to_string(k) +
                flags + " --cuda-arch " + arch + " --nvcc " + a.nvcc +
                " -o " + out +
                " > " + log + " 2>&1") != 0) {
        planErrors[name] = "tofuc failed (" + log + ")";
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

const Plan &tofu::test::planNamed(const std::string &name) {
  auto it = plans.find(name);
  if (it == plans.end()) {
    ADD_FAILURE() << name << ": " << planErrors[name];
    static Plan empty;
    return empty;
  }
  return it->second;
}

double tofu::test::parameterTolerance(DType type) {
  return type == DType::F64 ? 1e-10 : 1e-4;
}

void tofu::test::expectParametersMatch(const Plan &plan,
                                       const runtime::BufferSource &got,
                                       const runtime::BufferSource &want,
                                       const std::string &what) {
  size_t compared = 0;
  for (size_t d = 0; d < plan.devices.size(); ++d) {
    const auto &buffers = plan.devices[d].buffers;
    for (size_t b = 0; b < buffers.size(); ++b) {
      const TensorInfo &t = plan.tensors[buffers[b].tensor];
      // An empty tile (a [5] bias split 8 ways leaves devices without an
      // element) has no bytes to compare.
      if (t.role != TensorRole::Param || !buffers[b].owned ||
          (t.dtype != DType::F32 && t.dtype != DType::F64) ||
          buffers[b].region.numElements() == 0)
        continue;
      const uint8_t *g = got(static_cast<int32_t>(d), static_cast<int32_t>(b));
      const uint8_t *w =
          want(static_cast<int32_t>(d), static_cast<int32_t>(b));
      ASSERT_NE(g, nullptr) << what << ": device " << d << " " << t.name;
      ASSERT_NE(w, nullptr) << what << ": device " << d << " " << t.name;
      const double tol = parameterTolerance(t.dtype);
      for (int64_t i = 0; i < buffers[b].region.numElements(); ++i) {
        const double gv = runtime::loadElement(g, t.dtype, i),
                     wv = runtime::loadElement(w, t.dtype, i);
        ASSERT_NEAR(gv, wv, tol * (0.1 + std::fabs(wv)))
            << what << ": device " << d << " " << t.name << " element " << i;
      }
      ++compared;
    }
  }
  EXPECT_GT(compared, 0u) << what;
}
