//===- CudaArch.h - CUDA architecture names -----------------------*- C++ -*-===//
//
// The architecture a plan's CUDA kernels were compiled for (`tofuc
// --cuda-arch sm_90`, plan::CudaModule::arch) and whether a device can run
// them. Std only: the plan reader and tofu-run use it without CUDA.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_CUDAARCH_H
#define TOFU_RUNTIME_CUDAARCH_H

#include <string>

namespace tofu::plan {

/// A parsed `sm_<major><minor>[a|f]` (sm_90 = 9.0, sm_90a = 9.0 with the
/// architecture-specific features, sm_100f = 10.0 family-specific).
struct CudaArch {
  int major = 0, minor = 0;
  char suffix = 0; ///< 0, 'a' or 'f'
};

/// Parses an architecture name; false when `name` is not sm_<digits>[a|f]
/// with at least two digits (the last is the minor version).
bool parseCudaArch(const std::string &name, CudaArch &arch);

/// Whether a cubin for `plan` runs on a device of compute capability
/// `device`: SASS is compatible with later minor versions of the same major
/// (sm_80 runs on 8.6 and 8.9), except architecture-specific `a` code, which
/// needs exactly its version; family `f` code needs the same major.
bool cudaArchRunsOn(const CudaArch &plan, int deviceMajor, int deviceMinor);

} // namespace tofu::plan

#endif // TOFU_RUNTIME_CUDAARCH_H
