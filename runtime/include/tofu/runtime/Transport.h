//===- Transport.h - Point-to-point messages between processes --*- C++ -*-===//
//
// When a plan runs as one process per device (`mpirun -np k tofu-run ...`, or
// k processes started with the torchrun environment), the processes exchange
// the pieces of Fetch/Reduce instructions through a Transport: blocking,
// ordered byte messages between two ranks, each wait bounded by a timeout.
// One implementation per file:
//
//   MpiTransport.cpp   Open MPI (built only when CMake finds MPI)
//   TcpTransport.cpp   TCP sockets, rendezvous at MASTER_ADDR:MASTER_PORT
//
// ProcessGroup.h picks one from the launch environment.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_TRANSPORT_H
#define TOFU_RUNTIME_TRANSPORT_H

#include <cstddef>
#include <memory>
#include <string>

namespace tofu::runtime {

class Transport {
public:
  virtual ~Transport() = default;

  /// This process's rank (= the device it runs) and the number of processes.
  virtual int rank() const = 0;
  virtual int worldSize() const = 0;
  /// "mpi" or "tcp" (for messages and the report).
  virtual const char *kind() const = 0;

  /// Sends `bytes` bytes to rank `peer`. Returns when `data` may be reused,
  /// or an error (timeout, peer gone). Messages between two ranks arrive in
  /// the order they were sent.
  virtual std::string send(int peer, const void *data, size_t bytes) = 0;
  /// Receives exactly `bytes` bytes from rank `peer` (the next message it
  /// sent to this rank, which must have that size), or an error (timeout,
  /// peer gone, size mismatch).
  virtual std::string recv(int peer, void *data, size_t bytes) = 0;

  /// Ends the run cleanly after every rank has reached this point (the last
  /// call on a transport that succeeded everywhere).
  virtual std::string finish() = 0;
  /// Makes every other process end with an error as soon as possible after
  /// a fatal error here (MPI_Abort; TCP: an abort note to every peer naming
  /// the rank at fault, then closing every connection, so that a rank that
  /// hears of a failure second-hand still names the rank that failed). Does
  /// not return for MPI.
  virtual void abortAll(int exitCode) = 0;
};

#ifdef TOFU_HAVE_MPI
/// Initializes MPI (the process must have been started by mpirun). Every
/// send and receive fails after `timeoutSeconds` without progress.
std::string createMpiTransport(int &argc, char **&argv, double timeoutSeconds,
                               std::unique_ptr<Transport> &out);
#endif

/// Connects `worldSize` processes over TCP: rank 0 listens on
/// `masterAddr:masterPort` and tells every rank where the others listen; then
/// every pair is connected (full mesh). Fails after `timeoutSeconds` without
/// progress; a peer that closes its connection is an error on the next
/// message to or from it.
std::string createTcpTransport(int rank, int worldSize,
                               const std::string &masterAddr, int masterPort,
                               double timeoutSeconds,
                               std::unique_ptr<Transport> &out);

} // namespace tofu::runtime

#endif // TOFU_RUNTIME_TRANSPORT_H
