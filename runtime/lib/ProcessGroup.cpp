//===- ProcessGroup.cpp - One process per device: launch and gathers ------===//

#include "tofu/runtime/ProcessGroup.h"
#include "ParallelFor.h"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

using namespace tofu::runtime;
using namespace tofu::plan;

namespace {

const char *env(const char *name) {
  const char *v = std::getenv(name);
  return v && *v ? v : nullptr;
}

/// The variable that shows an MPI launcher started this process, or null.
const char *mpiLaunchVariable() {
  for (const char *name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"})
    if (env(name))
      return name;
  return nullptr;
}

/// True when torchrun (torch.distributed.run) started this process: it sets
/// TORCHELASTIC_RUN_ID for every worker. A launcher that only sets RANK,
/// WORLD_SIZE, MASTER_ADDR and MASTER_PORT (a shell script, a scheduler) is
/// not torchrun, and messages must not say it is.
bool startedByTorchrun() { return env("TORCHELASTIC_RUN_ID") != nullptr; }

/// The launch as messages name it: "torchrun" or "the RANK/WORLD_SIZE
/// environment".
std::string envLaunchName() {
  return startedByTorchrun() ? "torchrun" : "the RANK/WORLD_SIZE environment";
}

std::string parseInt(const char *name, long lo, long hi, int &out) {
  const char *v = env(name);
  if (!v)
    return "one process per device started through " + envLaunchName() +
           " needs " + std::string(name) +
           " (set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT)";
  char *end = nullptr;
  errno = 0;
  long n = std::strtol(v, &end, 10);
  if (*end != '\0' || errno != 0 || n < lo || n > hi)
    return std::string(name) + "='" + v + "' is not an integer in [" +
           std::to_string(lo) + ", " + std::to_string(hi) + "]";
  out = static_cast<int>(n);
  return "";
}

/// What SIGTERM prints (composed before the handler is installed: the
/// handler may only write it) and the action it replaced.
char terminationMessage[512];
size_t terminationLength = 0;
struct sigaction previousTermAction;

void announceTermination(int sig) {
  ssize_t ignored =
      ::write(STDERR_FILENO, terminationMessage, terminationLength);
  (void)ignored;
  ::sigaction(sig, &previousTermAction, nullptr);
  ::raise(sig); // delivered when this handler returns
}

} // namespace

void ProcessGroup::reportTerminationBySignal() const {
  if (!transport)
    return;
  std::string why;
  if (launchedBy == "mpirun")
    why = " from mpirun, which ends every rank once one has failed (mpirun's "
          "message names that rank) or when it is interrupted";
  else if (launchedBy == "torchrun")
    why = " from torchrun's agent, which ends every rank once one has failed "
          "(torchrun's message names that rank) or when it is interrupted";
  else
    why = " (not from tofu-run: a launcher or a user ended this rank)";
  std::string line = "tofu-run: error: rank " +
                     std::to_string(transport->rank()) + ": ended by SIGTERM" +
                     why + "\n";
  if (line.size() > sizeof(terminationMessage))
    return;
  std::memcpy(terminationMessage, line.data(), line.size());
  terminationLength = line.size();
  struct sigaction action {};
  action.sa_handler = announceTermination;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGTERM, &action, &previousTermAction);
}

ProcessGroup::~ProcessGroup() {
  if (transport && !finished)
    transport->abortAll(1);
}

std::string ProcessGroup::start(int &argc, char **&argv,
                                double timeoutSeconds) {
  // One process per device: the processes share the host's CPUs, and each
  // pinning its threads to the first allowed ones would stack them there
  // (ParallelFor.h).
  if (mpiLaunchVariable() || env("RANK") || env("WORLD_SIZE"))
    setThreadPinning(false);
  if (const char *var = mpiLaunchVariable()) {
    launchedBy = "mpirun";
#ifdef TOFU_HAVE_MPI
    return createMpiTransport(argc, argv, timeoutSeconds, transport);
#else
    (void)argc;
    (void)argv;
    return std::string("tofu-run was started by an MPI launcher (") + var +
           "=" + env(var) +
           ") but was built without MPI support: install Open MPI "
           "(apt-get install openmpi-bin libopenmpi-dev) and rebuild so that "
           "CMake finds MPI, launch the k processes with the torchrun "
           "environment instead (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), "
           "or run tofu-run without mpirun (one process runs all devices)";
#endif
  }
  if (env("RANK") || env("WORLD_SIZE")) {
    launchedBy = startedByTorchrun() ? "torchrun" : "RANK/WORLD_SIZE";
    int size = 0, rank = 0, port = 0;
    if (std::string err = parseInt("WORLD_SIZE", 1, 1 << 16, size);
        !err.empty())
      return err;
    if (std::string err = parseInt("RANK", 0, size - 1, rank); !err.empty())
      return err;
    if (std::string err = parseInt("MASTER_PORT", 1, 65535, port);
        !err.empty())
      return err;
    const char *addr = env("MASTER_ADDR");
    if (!addr)
      return "one process per device started through " + envLaunchName() +
             " needs MASTER_ADDR (the host where rank 0 listens)";
    // torchrun's static rendezvous keeps its own key-value store listening
    // on MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True); tofu-run then
    // meets on the next port.
    if (const char *agentStore = env("TORCHELASTIC_USE_AGENT_STORE");
        agentStore && std::string(agentStore) == "True") {
      if (port == 65535)
        return "MASTER_PORT=65535 is held by torchrun's store and tofu-run "
               "needs the next port; choose a lower --master_port";
      ++port;
    }
    return createTcpTransport(rank, size, addr, port, timeoutSeconds,
                              transport);
  }
  return "";
}

std::string ProcessGroup::checkWorldSize(uint32_t numDevices) const {
  if (!transport || static_cast<uint32_t>(worldSize()) == numDevices)
    return "";
  const std::string started =
      launchedBy == "RANK/WORLD_SIZE"
          ? "WORLD_SIZE=" + std::to_string(worldSize()) + " gives "
          : launchedBy + " started ";
  return "the plan has " + std::to_string(numDevices) + " device" +
         (numDevices == 1 ? "" : "s") + " but " + started +
         std::to_string(worldSize()) + " process" +
         (worldSize() == 1 ? "" : "es") +
         "; start exactly one process per device (mpirun -np " +
         std::to_string(numDevices) + ", or WORLD_SIZE=" +
         std::to_string(numDevices) + "), or compile the plan with tofuc "
         "--gpus " + std::to_string(worldSize());
}

std::string ProcessGroup::gather(uint64_t mine, std::vector<uint64_t> &all) {
  all.clear();
  if (!transport) {
    all.push_back(mine);
    return "";
  }
  if (rank() != 0)
    return transport->send(0, &mine, sizeof(mine));
  all.assign(static_cast<size_t>(worldSize()), 0);
  all[0] = mine;
  for (int r = 1; r < worldSize(); ++r)
    if (std::string err = transport->recv(r, &all[r], sizeof(uint64_t));
        !err.empty())
      return err;
  return "";
}

std::string ProcessGroup::barrier() {
  if (!transport)
    return "";
  uint8_t token = 1;
  if (rank() != 0) {
    if (std::string err = transport->send(0, &token, 1); !err.empty())
      return err;
    return transport->recv(0, &token, 1);
  }
  for (int r = 1; r < worldSize(); ++r)
    if (std::string err = transport->recv(r, &token, 1); !err.empty())
      return err;
  for (int r = 1; r < worldSize(); ++r)
    if (std::string err = transport->send(r, &token, 1); !err.empty())
      return err;
  return "";
}

std::string ProcessGroup::gatherText(const std::string &mine,
                                     std::vector<std::string> &all) {
  all.clear();
  if (!transport) {
    all.push_back(mine);
    return "";
  }
  if (rank() != 0) {
    uint64_t length = mine.size();
    if (std::string err = transport->send(0, &length, sizeof(length));
        !err.empty())
      return err;
    return length ? transport->send(0, mine.data(), mine.size()) : "";
  }
  all.resize(static_cast<size_t>(worldSize()));
  all[0] = mine;
  for (int r = 1; r < worldSize(); ++r) {
    uint64_t length = 0;
    if (std::string err = transport->recv(r, &length, sizeof(length));
        !err.empty())
      return err;
    all[r].resize(length);
    if (length)
      if (std::string err = transport->recv(r, all[r].data(), length);
          !err.empty())
        return err;
  }
  return "";
}

std::string ProcessGroup::gatherOwnedBuffers(
    const Plan &plan, const std::function<bool(int32_t tensor)> &wanted,
    const LocalBuffer &local,
    std::map<std::pair<int32_t, int32_t>, std::vector<uint8_t>> &out) {
  out.clear();
  if (!transport)
    return "gathering buffers needs one process per device";
  // Every rank walks devices and buffers in the same order, so the messages
  // from each rank arrive in the order rank 0 expects them.
  for (size_t d = 0; d < plan.devices.size(); ++d) {
    const auto &buffers = plan.devices[d].buffers;
    for (size_t b = 0; b < buffers.size(); ++b) {
      const Buffer &buf = buffers[b];
      if (!buf.owned || !wanted(buf.tensor))
        continue;
      auto key = std::make_pair(static_cast<int32_t>(d),
                                static_cast<int32_t>(b));
      if (static_cast<int>(d) == rank()) {
        const uint8_t *p = local(static_cast<int32_t>(b));
        if (!p && buf.bytes)
          return "device " + std::to_string(d) + " has no data for its " +
                 "buffer " + std::to_string(b) + " of tensor '" +
                 plan.tensors[buf.tensor].name + "'";
        if (rank() == 0) {
          out[key].assign(p, p + buf.bytes);
        } else if (buf.bytes) {
          if (std::string err = transport->send(0, p, buf.bytes);
              !err.empty())
            return err;
        }
      } else if (rank() == 0) {
        std::vector<uint8_t> &bytes = out[key];
        bytes.resize(buf.bytes);
        if (buf.bytes)
          if (std::string err = transport->recv(static_cast<int>(d),
                                                bytes.data(), buf.bytes);
              !err.empty())
            return err;
      }
    }
  }
  return "";
}

std::string ProcessGroup::finish() {
  finished = true;
  return transport ? transport->finish() : "";
}

void ProcessGroup::finishAfterCommonError() {
  finished = true;
  if (transport)
    transport->finish();
}
