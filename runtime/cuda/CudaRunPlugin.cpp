//===- CudaRunPlugin.cpp - tofu-run's --backend cuda, as a plugin ---------===//
//
// See CudaRunPlugin.h. The step loop of tofu-run for CudaExecutor.
//
//===----------------------------------------------------------------------===//

#include "CudaRunPlugin.h"

#include "CudaExecutor.h"
#include "CudaSchedule.h"

#include "tofu/runtime/NpyData.h"
#include "tofu/runtime/RunReport.h"

#include <chrono>
#include <cstdio>

using namespace tofu::cuda;
using namespace tofu::plan;
using namespace tofu::runtime;

namespace {

int64_t batchSizeOf(const Plan &plan) {
  if (plan.batchSize > 0)
    return plan.batchSize;
  for (const TensorInfo &t : plan.tensors)
    if (t.role == TensorRole::Input && !t.shape.empty())
      return t.shape[0];
  return 0;
}

int run(const CudaRunRequest &request, std::string &error) {
  const Plan &plan = *request.plan;
  const int64_t startStep = request.startStep;
  auto failed = [&error](const std::string &msg) {
    error = msg;
    return 1;
  };
  CudaRunOptions options;
  options.numGpus = request.devices;
  options.useGraph = request.useGraph;
  CudaExecutor exec(plan, options);
  NpyDataset dataset(plan);
  if (!request.dataDir.empty()) {
    if (std::string err = dataset.open(request.dataDir); !err.empty())
      return failed(err);
    exec.setDataSource([&dataset](int32_t tensor, const Box &region,
                                  int64_t step, void *out) {
      return dataset.fill(tensor, region, step, out);
    });
  }
  if (std::string err = exec.init(); !err.empty())
    return failed(err);
  const int64_t batch = batchSizeOf(plan);
  const DeviceMapping &mapping = exec.schedule().mapping;
  if (!request.quiet) {
    std::printf("tofu-run: %s (producer '%s', partitioner '%s')\n",
                request.planPath.c_str(), plan.producer.c_str(),
                plan.partitioner.c_str());
    std::printf("devices %u on %d GPU%s  tensors %zu  batch %lld  backend "
                "cuda (%s)\n",
                plan.numDevices, mapping.numGpus,
                mapping.numGpus == 1 ? "" : "s", plan.tensors.size(),
                static_cast<long long>(batch),
                !request.useGraph ? "eager" : "CUDA graph from step 2");
    std::printf("allocated bytes per GPU:");
    for (uint64_t b : mapping.gpuBytes)
      std::printf(" %llu", static_cast<unsigned long long>(b));
    std::printf("\n");
  }
  RunReport report;
  report.devices = plan.numDevices;
  report.backend = "cuda";
  report.batchSize = batch;
  double totalSeconds = 0;
  for (int64_t s = 0; s < request.steps; ++s) {
    auto t0 = std::chrono::steady_clock::now();
    if (std::string err = exec.runStep(startStep + s); !err.empty())
      return failed("step " + std::to_string(startStep + s + 1) + ": " + err);
    double secs = std::chrono::duration<double>(
                      std::chrono::steady_clock::now() - t0)
                      .count();
    totalSeconds += secs;
    double loss = 0;
    if (std::string err = exec.lastLoss(loss); !err.empty())
      return failed("step " + std::to_string(startStep + s + 1) + ": " + err);
    report.steps.push_back({loss, secs, plan.commBytes});
    if (!request.quiet)
      std::printf("step %lld  loss %.6f  %.4f s\n",
                  static_cast<long long>(startStep + s + 1), loss, secs);
  }
  report.samplesPerSecond =
      totalSeconds > 0 ? static_cast<double>(batch) * request.steps / totalSeconds
                       : 0;
  if (!request.quiet)
    std::printf("samples/s %.1f  (%lld steps, %.4f s, %lld replayed from the "
                "CUDA graph)\n",
                report.samplesPerSecond, static_cast<long long>(request.steps),
                totalSeconds, static_cast<long long>(exec.graphReplays()));
  if (!request.reportPath.empty())
    if (std::string err = report.write(request.reportPath); !err.empty())
      return failed(err);
  return 0;
}

} // namespace

extern "C" int tofuCudaRun(const CudaRunRequest &request, std::string &error) {
  try {
    return run(request, error);
  } catch (const std::exception &e) {
    error = std::string("--backend cuda: ") + e.what();
    return 1;
  }
}
