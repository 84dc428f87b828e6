//===- CudaNccl.h - The NCCL communicator of one process per GPU -*- C++ -*-===//
//
// `tofu-run --backend cuda` under mpirun or torchrun (one process per GPU,
// CudaNcclSchedule.h) moves the pieces between ranks with NCCL
// point-to-point calls on one communicator:
//
//  * rank 0 creates the ncclUniqueId and sends it to every rank over the
//    runtime's Transport (MPI or the TCP mesh of the torchrun environment,
//    ProcessGroup.h) — no second rendezvous;
//  * the communicator is non-blocking (ncclConfig_t::blocking = 0): every
//    call that answers ncclInProgress is polled with ncclCommGetAsyncError
//    until it is done, failed, or the timeout passed, so no call can hang;
//  * `abort()` is ncclCommAbort, for the executor's watchdog.
//
// Built only where CMake finds nccl.h and libnccl (TOFU_HAVE_NCCL); without
// them every function says that this build has no multi-process support.
//
// NEVER RUN ON A GPU: one process per GPU has not run yet; only the
// single-process executor has (one H200, bench/gpu/H200.md; docs/Cuda.md).
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_CUDA_CUDANCCL_H
#define TOFU_RUNTIME_CUDA_CUDANCCL_H

#include "tofu/runtime/Transport.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>

namespace tofu::cuda {

/// Whether the CUDA executor was built with NCCL.
bool ncclAvailable();

/// Why one process per GPU is not available in this build ("" if it is).
std::string ncclUnavailableReason();

class NcclComm {
public:
  NcclComm();
  /// Finalizes and destroys the communicator (aborts it if that does not
  /// finish within the timeout).
  ~NcclComm();

  /// Joins the communicator of `transport`'s ranks on the current CUDA
  /// device; fails after `timeoutSeconds` without it being ready.
  std::string init(tofu::runtime::Transport &transport,
                   double timeoutSeconds);
  /// Enqueues ncclSend / ncclRecv of `bytes` bytes on `stream`.
  std::string send(const void *data, uint64_t bytes, int peer,
                   cudaStream_t stream);
  std::string recv(void *data, uint64_t bytes, int peer, cudaStream_t stream);
  /// "" or the communicator's asynchronous error, with NCCL's text.
  std::string asyncError();
  /// ncclCommAbort (the communicator is unusable afterwards).
  void abort();

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

} // namespace tofu::cuda

#endif // TOFU_RUNTIME_CUDA_CUDANCCL_H
