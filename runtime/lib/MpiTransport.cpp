//===- MpiTransport.cpp - Transport over MPI point-to-point messages ------===//
//
// Built only when CMake finds MPI (Debian: libopenmpi-dev). Every message is
// a nonblocking MPI_Isend / MPI_Irecv on MPI_COMM_WORLD with one tag, polled
// until it completes or the timeout passes; MPI keeps messages between two
// ranks in order (non-overtaking). The polling yields the CPU, so that k
// processes oversubscribed on fewer cores do not starve each other.
//
//===----------------------------------------------------------------------===//

#include "tofu/runtime/Transport.h"

#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <thread>

using namespace tofu::runtime;

namespace {

constexpr int kTag = 7;

std::string mpiError(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS)
    return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(len));
}

class MpiTransport final : public Transport {
public:
  MpiTransport(int rank, int size, double timeoutSeconds)
      : myRank(rank), size(size), timeout(timeoutSeconds) {}

  int rank() const override { return myRank; }
  int worldSize() const override { return size; }
  const char *kind() const override { return "mpi"; }

  std::string send(int peer, const void *data, size_t bytes) override {
    if (bytes > static_cast<size_t>(INT_MAX))
      return "message of " + std::to_string(bytes) +
             " bytes is too large for one MPI message";
    MPI_Request req;
    int rc = MPI_Isend(data, static_cast<int>(bytes), MPI_BYTE, peer, kTag,
                       MPI_COMM_WORLD, &req);
    if (rc != MPI_SUCCESS)
      return "MPI_Isend to rank " + std::to_string(peer) + ": " + mpiError(rc);
    return wait(req, "sending " + std::to_string(bytes) + " bytes to rank " +
                         std::to_string(peer),
                nullptr);
  }

  std::string recv(int peer, void *data, size_t bytes) override {
    if (bytes > static_cast<size_t>(INT_MAX))
      return "message of " + std::to_string(bytes) +
             " bytes is too large for one MPI message";
    MPI_Request req;
    int rc = MPI_Irecv(data, static_cast<int>(bytes), MPI_BYTE, peer, kTag,
                       MPI_COMM_WORLD, &req);
    if (rc != MPI_SUCCESS)
      return "MPI_Irecv from rank " + std::to_string(peer) + ": " +
             mpiError(rc);
    MPI_Status status;
    std::string what = "receiving " + std::to_string(bytes) +
                       " bytes from rank " + std::to_string(peer);
    if (std::string err = wait(req, what, &status); !err.empty())
      return err;
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    if (static_cast<size_t>(count) != bytes)
      return what + ": got " + std::to_string(count) +
             " bytes; the ranks disagree about the plan (run the same "
             "plan.bin on every rank)";
    return "";
  }

  std::string finish() override {
    // MPI_Finalize is collective; a barrier first keeps a rank from leaving
    // while others still wait for a message from it.
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return "";
  }

  void abortAll(int exitCode) override {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, exitCode);
  }

private:
  /// Polls `req` until it completes or `timeout` seconds pass.
  std::string wait(MPI_Request &req, const std::string &what,
                   MPI_Status *status) {
    using Clock = std::chrono::steady_clock;
    const auto deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(timeout));
    MPI_Status local;
    for (unsigned polls = 0;; ++polls) {
      int done = 0;
      int rc = MPI_Test(&req, &done, status ? status : &local);
      if (rc != MPI_SUCCESS)
        return what + ": " + mpiError(rc);
      if (done)
        return "";
      if (Clock::now() > deadline) {
        MPI_Cancel(&req);
        return what + ": no progress within " + formatSeconds(timeout) +
               " (--comm-timeout); the peer is stalled or gone";
      }
      // Spin briefly for latency, then sleep so that oversubscribed ranks
      // leave the cores to the ones computing.
      if (polls < 64)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  static std::string formatSeconds(double s) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g s", s);
    return buf;
  }

  int myRank, size;
  double timeout;
};

/// Whether this process initialized Open MPI (for __lsan_is_turned_off).
bool mpiStarted = false;

} // namespace

#if defined(__SANITIZE_ADDRESS__)
#define TOFU_ASAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TOFU_ASAN_BUILD 1
#endif
#endif
#ifdef TOFU_ASAN_BUILD
/// LeakSanitizer (scripts/sanitize.sh builds) asks this at exit. Open MPI
/// 4.1 leaves allocations of its components (about 60 per process, a few
/// KB) that it has unloaded by then, so their stacks end in "<unknown
/// module>" and no suppression can name them: the leak check is off in a
/// process that started Open MPI. The same code paths run in one process
/// (every device in one tofu-run) are still checked; bench/sanitize.md.
extern "C" int __lsan_is_turned_off() { return mpiStarted ? 1 : 0; }
#endif

std::string tofu::runtime::createMpiTransport(int &argc, char **&argv,
                                              double timeoutSeconds,
                                              std::unique_ptr<Transport> &out) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  mpiStarted = true;
  if (!initialized) {
    int rc = MPI_Init(&argc, &argv);
    if (rc != MPI_SUCCESS)
      return "MPI_Init failed: " + mpiError(rc);
  }
  // Errors come back as codes (and become tofu-run errors) instead of
  // aborting inside MPI.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  out = std::make_unique<MpiTransport>(rank, size, timeoutSeconds);
  return "";
}
