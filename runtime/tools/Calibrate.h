//===- Calibrate.h - tofu-run --calibrate: measure this machine -*- C++ -*-===//
//
// `tofu-run --calibrate FILE` times tofu-run's own CPU kernels (GEMM,
// convolution, element-wise, reduction) and the copies between virtual
// devices on this machine, and writes a device description
// (docs/DeviceModel.md, format tofu-device/1) that `tofuc --device FILE`
// reads. Each rate is the median of repeated runs; the sources list every
// measurement with its size, so the file says how it was made.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUN_CALIBRATE_H
#define TOFU_RUN_CALIBRATE_H

#include <ostream>
#include <string>

namespace tofu::runtime {

/// Measures this machine and writes its description to `path` (atomically);
/// progress lines go to `log`. Returns an error message, or "" on success.
std::string calibrateDevice(const std::string &path, std::ostream &log);

} // namespace tofu::runtime

#endif // TOFU_RUN_CALIBRATE_H
