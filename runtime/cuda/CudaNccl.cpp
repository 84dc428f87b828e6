//===- CudaNccl.cpp - The NCCL communicator of one process per GPU --------===//
//
// See CudaNccl.h. Compiled here and in CI; never run on a GPU (one process
// per GPU has never run; the single-process executor ran on an H200,
// bench/gpu/H200.md).
//
//===----------------------------------------------------------------------===//

#include "CudaNccl.h"

#include <chrono>
#include <thread>

#ifdef TOFU_HAVE_NCCL
#include <nccl.h>
#endif

using namespace tofu::cuda;

#ifdef TOFU_HAVE_NCCL

namespace {

std::string ncclText(ncclResult_t r, ncclComm_t comm) {
  std::string s = ncclGetErrorString(r);
  if (comm) {
    const char *last = ncclGetLastError(comm);
    if (last && *last)
      s += std::string(": ") + last;
  }
  return s;
}

} // namespace

struct NcclComm::Impl {
  ncclComm_t comm = nullptr;
  double timeoutSeconds = 300;
  bool aborted = false;

  /// Polls a non-blocking communicator until its pending work is enqueued
  /// (or the communicator is ready), failed, or the timeout passed.
  std::string settle(ncclResult_t r, const std::string &what) {
    auto start = std::chrono::steady_clock::now();
    while (r == ncclInProgress) {
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                        start)
              .count() > timeoutSeconds)
        return what + " did not finish within " +
               std::to_string(timeoutSeconds) + " s (--nccl-timeout)";
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      ncclResult_t state = ncclSuccess;
      ncclResult_t q = ncclCommGetAsyncError(comm, &state);
      if (q != ncclSuccess)
        return what + ": ncclCommGetAsyncError failed: " + ncclText(q, comm);
      r = state;
    }
    if (r != ncclSuccess)
      return what + " failed: " + ncclText(r, comm);
    return "";
  }
};

NcclComm::NcclComm() : impl(std::make_unique<Impl>()) {}

NcclComm::~NcclComm() {
  if (!impl->comm)
    return;
  if (!impl->aborted) {
    ncclResult_t r = ncclCommFinalize(impl->comm);
    if (!impl->settle(r, "ncclCommFinalize").empty()) {
      ncclCommAbort(impl->comm);
      return;
    }
  }
  if (!impl->aborted)
    ncclCommDestroy(impl->comm);
}

bool tofu::cuda::ncclAvailable() { return true; }
std::string tofu::cuda::ncclUnavailableReason() { return ""; }

std::string NcclComm::init(tofu::runtime::Transport &transport,
                           double timeoutSeconds) {
  impl->timeoutSeconds = timeoutSeconds;
  const int rank = transport.rank(), size = transport.worldSize();
  ncclUniqueId id;
  if (rank == 0) {
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess)
      return std::string("ncclGetUniqueId failed: ") + ncclGetErrorString(r);
    for (int peer = 1; peer < size; ++peer)
      if (std::string err = transport.send(peer, &id, sizeof(id));
          !err.empty())
        return "sending the NCCL id to rank " + std::to_string(peer) + ": " +
               err;
  } else if (std::string err = transport.recv(0, &id, sizeof(id));
             !err.empty()) {
    return "receiving the NCCL id from rank 0: " + err;
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclResult_t r =
      ncclCommInitRankConfig(&impl->comm, size, id, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress)
    return "ncclCommInitRankConfig (rank " + std::to_string(rank) + " of " +
           std::to_string(size) + ") failed: " + ncclText(r, impl->comm);
  if (std::string err = impl->settle(r, "ncclCommInitRankConfig");
      !err.empty()) {
    abort();
    return err;
  }
  return "";
}

std::string NcclComm::send(const void *data, uint64_t bytes, int peer,
                           cudaStream_t stream) {
  ncclResult_t r = ncclSend(data, bytes, ncclUint8, peer, impl->comm, stream);
  return impl->settle(r, "ncclSend of " + std::to_string(bytes) +
                             " bytes to rank " + std::to_string(peer));
}

std::string NcclComm::recv(void *data, uint64_t bytes, int peer,
                           cudaStream_t stream) {
  ncclResult_t r = ncclRecv(data, bytes, ncclUint8, peer, impl->comm, stream);
  return impl->settle(r, "ncclRecv of " + std::to_string(bytes) +
                             " bytes from rank " + std::to_string(peer));
}

std::string NcclComm::asyncError() {
  if (!impl->comm || impl->aborted)
    return "";
  ncclResult_t state = ncclSuccess;
  ncclResult_t q = ncclCommGetAsyncError(impl->comm, &state);
  if (q != ncclSuccess)
    return "ncclCommGetAsyncError failed: " + ncclText(q, impl->comm);
  if (state != ncclSuccess && state != ncclInProgress)
    return ncclText(state, impl->comm);
  return "";
}

void NcclComm::abort() {
  if (impl->comm && !impl->aborted) {
    ncclCommAbort(impl->comm);
    impl->aborted = true;
  }
}

#else // !TOFU_HAVE_NCCL

struct NcclComm::Impl {};

NcclComm::NcclComm() : impl(std::make_unique<Impl>()) {}
NcclComm::~NcclComm() = default;

bool tofu::cuda::ncclAvailable() { return false; }
std::string tofu::cuda::ncclUnavailableReason() {
  return "this tofu-run's CUDA executor was built without NCCL (CMake found "
         "no nccl.h and libnccl), so it cannot run one process per GPU: run "
         "the plan in one process (tofu-run plan.bin --backend cuda "
         "[--devices N], without mpirun/torchrun), or install NCCL and "
         "rebuild";
}

std::string NcclComm::init(tofu::runtime::Transport &, double) {
  return ncclUnavailableReason();
}
std::string NcclComm::send(const void *, uint64_t, int, cudaStream_t) {
  return ncclUnavailableReason();
}
std::string NcclComm::recv(void *, uint64_t, int, cudaStream_t) {
  return ncclUnavailableReason();
}
std::string NcclComm::asyncError() { return ""; }
void NcclComm::abort() {}

#endif
