//===- CudaArch.cpp - CUDA architecture names -----------------------------===//
#include "tofu/runtime/CudaArch.h"

using namespace tofu::plan;

bool tofu::plan::parseCudaArch(const std::string &name, CudaArch &arch) {
  if (name.compare(0, 3, "sm_") != 0)
    return false;
  std::string digits = name.substr(3);
  char suffix = 0;
  if (!digits.empty() && (digits.back() == 'a' || digits.back() == 'f')) {
    suffix = digits.back();
    digits.pop_back();
  }
  if (digits.size() < 2 || digits.size() > 4)
    return false;
  for (char c : digits)
    if (c < '0' || c > '9')
      return false;
  int number = std::stoi(digits);
  arch.major = number / 10;
  arch.minor = number % 10;
  arch.suffix = suffix;
  return arch.major > 0;
}

bool tofu::plan::cudaArchRunsOn(const CudaArch &plan, int deviceMajor,
                                int deviceMinor) {
  if (plan.suffix == 'a')
    return deviceMajor == plan.major && deviceMinor == plan.minor;
  return deviceMajor == plan.major && deviceMinor >= plan.minor;
}
