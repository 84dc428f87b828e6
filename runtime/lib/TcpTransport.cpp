//===- TcpTransport.cpp - Transport over TCP sockets (torchrun launch) ----===//
//
// For processes started with the torchrun environment (RANK, WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT). Connection setup:
//
//  1. Every rank opens a listening socket: rank 0 on MASTER_PORT (all
//     interfaces), the others on an ephemeral port.
//  2. Rendezvous: rank r > 0 connects to MASTER_ADDR:MASTER_PORT (retrying
//     until rank 0 listens) and sends {magic, rank, world size, its port};
//     rank 0 answers every rank with the table of all ranks' (IPv4 address as
//     rank 0 saw it, port). This connection carries the messages of the pair
//     (0, r).
//  3. Full mesh: every rank r > 0 connects to each rank 0 < q < r and says
//     who it is, then accepts one connection from every rank above it. The
//     connects complete against the listen backlog, so the order cannot
//     deadlock.
//
// Messages are framed with their 8-byte length, so a size mismatch is an
// error rather than garbage. Sockets are nonblocking; every wait is a poll()
// bounded by the timeout. A peer that closed its connection (it ended or
// died) is an error on the next message to or from it.
//
//===----------------------------------------------------------------------===//

#include "tofu/runtime/Transport.h"

#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace tofu::runtime;

namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kMagic = 0x746f6675; // "tofu"

std::string sysError(const std::string &what) {
  return what + ": " + std::strerror(errno);
}

std::string formatSeconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g s", s);
  return buf;
}

Clock::time_point deadlineAfter(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(seconds));
}

int msUntil(Clock::time_point deadline) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - Clock::now())
                .count();
  return ms < 0 ? 0 : static_cast<int>(ms > 1000 ? 1000 : ms);
}

void setNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

void setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/// One socket with bounded, framed reads and writes.
struct Connection {
  int fd = -1;
  std::string peerName; ///< "rank 3" for messages

  /// Writes all `n` bytes before `deadline`.
  std::string writeAll(const void *data, size_t n, Clock::time_point deadline,
                       double timeout) {
    const uint8_t *p = static_cast<const uint8_t *>(data);
    while (n > 0) {
      ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
      if (w > 0) {
        p += w;
        n -= static_cast<size_t>(w);
        continue;
      }
      if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        if (errno == EPIPE || errno == ECONNRESET)
          return peerName + " closed its connection (it ended or died)";
        return sysError("sending to " + peerName);
      }
      if (Clock::now() > deadline)
        return "sending to " + peerName + ": no progress within " +
               formatSeconds(timeout) +
               " (--comm-timeout); the peer is stalled or gone";
      pollfd pfd{fd, POLLOUT, 0};
      ::poll(&pfd, 1, msUntil(deadline));
    }
    return "";
  }

  /// Reads exactly `n` bytes before `deadline`.
  std::string readAll(void *data, size_t n, Clock::time_point deadline,
                      double timeout) {
    uint8_t *p = static_cast<uint8_t *>(data);
    while (n > 0) {
      ssize_t r = ::recv(fd, p, n, 0);
      if (r > 0) {
        p += r;
        n -= static_cast<size_t>(r);
        continue;
      }
      if (r == 0)
        return peerName + " closed its connection (it ended or died)";
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        if (errno == ECONNRESET)
          return peerName + " closed its connection (it ended or died)";
        return sysError("receiving from " + peerName);
      }
      if (Clock::now() > deadline)
        return "receiving from " + peerName + ": no progress within " +
               formatSeconds(timeout) +
               " (--comm-timeout); the peer is stalled or gone";
      pollfd pfd{fd, POLLIN, 0};
      ::poll(&pfd, 1, msUntil(deadline));
    }
    return "";
  }
};

class TcpTransport final : public Transport {
public:
  TcpTransport(int rank, int size, double timeout)
      : myRank(rank), size(size), timeout(timeout),
        peers(static_cast<size_t>(size)) {
    for (int r = 0; r < size; ++r)
      peers[r].peerName = "rank " + std::to_string(r);
  }
  ~TcpTransport() override { closeAll(); }

  int rank() const override { return myRank; }
  int worldSize() const override { return size; }
  const char *kind() const override { return "tcp"; }

  std::string send(int peer, const void *data, size_t bytes) override {
    if (std::string err = checkPeer(peer); !err.empty())
      return err;
    uint64_t header = bytes;
    auto deadline = deadlineAfter(timeout);
    if (std::string err =
            peers[peer].writeAll(&header, sizeof(header), deadline, timeout);
        !err.empty())
      return err;
    return peers[peer].writeAll(data, bytes, deadline, timeout);
  }

  std::string recv(int peer, void *data, size_t bytes) override {
    if (std::string err = checkPeer(peer); !err.empty())
      return err;
    uint64_t header = 0;
    auto deadline = deadlineAfter(timeout);
    if (std::string err =
            peers[peer].readAll(&header, sizeof(header), deadline, timeout);
        !err.empty())
      return err;
    if (header != bytes)
      return "receiving from rank " + std::to_string(peer) + ": expected " +
             std::to_string(bytes) + " bytes, the message has " +
             std::to_string(header) +
             "; the ranks disagree about the plan (run the same plan.bin on "
             "every rank)";
    return peers[peer].readAll(data, bytes, deadlineAfter(timeout), timeout);
  }

  std::string finish() override {
    // A barrier through rank 0, so that no rank closes its sockets while
    // another still waits for a message from it.
    uint8_t token = 1;
    if (myRank == 0) {
      for (int r = 1; r < size; ++r)
        if (std::string err = recv(r, &token, 1); !err.empty())
          return err;
      for (int r = 1; r < size; ++r)
        if (std::string err = send(r, &token, 1); !err.empty())
          return err;
    } else {
      if (std::string err = send(0, &token, 1); !err.empty())
        return err;
      if (std::string err = recv(0, &token, 1); !err.empty())
        return err;
    }
    closeAll();
    return "";
  }

  void abortAll(int) override { closeAll(); }

  std::string connectMesh(const std::string &masterAddr, int masterPort);

private:
  std::string checkPeer(int peer) const {
    if (peer < 0 || peer >= size || peer == myRank || peers[peer].fd < 0)
      return "no connection to rank " + std::to_string(peer);
    return "";
  }
  void closeAll() {
    for (Connection &c : peers)
      if (c.fd >= 0) {
        ::close(c.fd);
        c.fd = -1;
      }
    if (listener >= 0) {
      ::close(listener);
      listener = -1;
    }
  }
  std::string listenOn(int port, int &boundPort);
  std::string connectTo(const sockaddr_in &addr, const std::string &what,
                        Clock::time_point deadline, int &fd);
  std::string acceptOne(Clock::time_point deadline, int &fd);

  int myRank, size;
  double timeout;
  std::vector<Connection> peers;
  int listener = -1;
};

std::string TcpTransport::listenOn(int port, int &boundPort) {
  listener = ::socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0)
    return sysError("socket");
  int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(listener, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) < 0)
    return sysError("rank " + std::to_string(myRank) +
                    ": cannot listen on port " + std::to_string(port) +
                    (port ? " (MASTER_PORT; is another run using it?)" : ""));
  if (::listen(listener, size + 8) < 0)
    return sysError("listen");
  socklen_t len = sizeof(addr);
  getsockname(listener, reinterpret_cast<sockaddr *>(&addr), &len);
  boundPort = ntohs(addr.sin_port);
  setNonBlocking(listener);
  return "";
}

std::string TcpTransport::connectTo(const sockaddr_in &addr,
                                    const std::string &what,
                                    Clock::time_point deadline, int &fd) {
  // Retry: the peer may not listen yet.
  for (;;) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
      return sysError("socket");
    if (::connect(fd, reinterpret_cast<const sockaddr *>(&addr),
                  sizeof(addr)) == 0) {
      setNonBlocking(fd);
      setNoDelay(fd);
      return "";
    }
    int e = errno;
    ::close(fd);
    fd = -1;
    if (e != ECONNREFUSED && e != ETIMEDOUT && e != EHOSTUNREACH &&
        e != ENETUNREACH && e != EINTR) {
      errno = e;
      return sysError("connecting to " + what);
    }
    if (Clock::now() > deadline)
      return "cannot connect to " + what + " within " +
             formatSeconds(timeout) + " (--comm-timeout)";
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::string TcpTransport::acceptOne(Clock::time_point deadline, int &fd) {
  for (;;) {
    fd = ::accept(listener, nullptr, nullptr);
    if (fd >= 0) {
      setNonBlocking(fd);
      setNoDelay(fd);
      return "";
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return sysError("accept");
    if (Clock::now() > deadline)
      return "rank " + std::to_string(myRank) +
             ": not every rank connected within " + formatSeconds(timeout) +
             " (--comm-timeout); were all WORLD_SIZE processes started?";
    pollfd pfd{listener, POLLIN, 0};
    ::poll(&pfd, 1, msUntil(deadline));
  }
}

struct Hello {
  uint32_t magic, rank, size, port;
};
struct PeerAddress {
  uint32_t ipv4; ///< network byte order
  uint32_t port;
};

std::string TcpTransport::connectMesh(const std::string &masterAddr,
                                      int masterPort) {
  auto deadline = deadlineAfter(timeout);
  int myPort = 0;
  if (std::string err = listenOn(myRank == 0 ? masterPort : 0, myPort);
      !err.empty())
    return err;
  std::vector<PeerAddress> table(static_cast<size_t>(size));

  if (myRank == 0) {
    for (int i = 1; i < size; ++i) {
      int fd = -1;
      if (std::string err = acceptOne(deadline, fd); !err.empty())
        return err;
      Connection c{fd, "a connecting process"};
      Hello h{};
      if (std::string err = c.readAll(&h, sizeof(h), deadline, timeout);
          !err.empty())
        return err;
      if (h.magic != kMagic) {
        ::close(fd);
        return "a process that is not tofu-run connected to MASTER_PORT " +
               std::to_string(masterPort);
      }
      if (h.size != static_cast<uint32_t>(size)) {
        ::close(fd);
        return "rank " + std::to_string(h.rank) + " has WORLD_SIZE=" +
               std::to_string(h.size) + " but rank 0 has WORLD_SIZE=" +
               std::to_string(size) + "; start every rank with the same "
               "WORLD_SIZE";
      }
      if (h.rank == 0 || h.rank >= static_cast<uint32_t>(size) ||
          peers[h.rank].fd >= 0) {
        ::close(fd);
        return "two processes claim RANK=" + std::to_string(h.rank) +
               " (or it is out of range); give each rank a distinct RANK in "
               "[0, WORLD_SIZE)";
      }
      sockaddr_in addr{};
      socklen_t len = sizeof(addr);
      getpeername(fd, reinterpret_cast<sockaddr *>(&addr), &len);
      table[h.rank] = {addr.sin_addr.s_addr, h.port};
      peers[h.rank].fd = fd;
    }
    for (int r = 1; r < size; ++r)
      if (std::string err = peers[r].writeAll(
              table.data(), table.size() * sizeof(PeerAddress), deadline,
              timeout);
          !err.empty())
        return err;
    return "";
  }

  // Rank r > 0: rendezvous with rank 0.
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (int rc = getaddrinfo(masterAddr.c_str(),
                           std::to_string(masterPort).c_str(), &hints, &res);
      rc != 0 || !res)
    return "cannot resolve MASTER_ADDR '" + masterAddr +
           "': " + gai_strerror(rc);
  sockaddr_in master = *reinterpret_cast<sockaddr_in *>(res->ai_addr);
  freeaddrinfo(res);
  int fd = -1;
  if (std::string err = connectTo(master,
                                  "rank 0 at MASTER_ADDR:MASTER_PORT " +
                                      masterAddr + ":" +
                                      std::to_string(masterPort),
                                  deadline, fd);
      !err.empty())
    return err;
  peers[0].fd = fd;
  Hello h{kMagic, static_cast<uint32_t>(myRank), static_cast<uint32_t>(size),
          static_cast<uint32_t>(myPort)};
  if (std::string err = peers[0].writeAll(&h, sizeof(h), deadline, timeout);
      !err.empty())
    return err;
  if (std::string err = peers[0].readAll(
          table.data(), table.size() * sizeof(PeerAddress), deadline, timeout);
      !err.empty())
    return "rendezvous with rank 0: " + err;

  // Connect to every rank between 0 and this one; say who we are.
  for (int q = 1; q < myRank; ++q) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = table[q].ipv4;
    addr.sin_port = htons(static_cast<uint16_t>(table[q].port));
    if (std::string err = connectTo(addr, "rank " + std::to_string(q),
                                    deadline, peers[q].fd);
        !err.empty())
      return err;
    uint32_t me = static_cast<uint32_t>(myRank);
    if (std::string err = peers[q].writeAll(&me, sizeof(me), deadline, timeout);
        !err.empty())
      return err;
  }
  // Accept every rank above this one.
  for (int i = myRank + 1; i < size; ++i) {
    int afd = -1;
    if (std::string err = acceptOne(deadline, afd); !err.empty())
      return err;
    Connection c{afd, "a connecting rank"};
    uint32_t who = 0;
    if (std::string err = c.readAll(&who, sizeof(who), deadline, timeout);
        !err.empty())
      return err;
    if (who <= static_cast<uint32_t>(myRank) ||
        who >= static_cast<uint32_t>(size) || peers[who].fd >= 0) {
      ::close(afd);
      return "rank " + std::to_string(myRank) +
             ": unexpected connection claiming rank " + std::to_string(who);
    }
    peers[who].fd = afd;
  }
  return "";
}

} // namespace

std::string tofu::runtime::createTcpTransport(int rank, int worldSize,
                                              const std::string &masterAddr,
                                              int masterPort,
                                              double timeoutSeconds,
                                              std::unique_ptr<Transport> &out) {
  auto t = std::make_unique<TcpTransport>(rank, worldSize, timeoutSeconds);
  if (worldSize > 1)
    if (std::string err = t->connectMesh(masterAddr, masterPort);
        !err.empty())
      return "rendezvous of the processes (RANK=" + std::to_string(rank) +
             ", WORLD_SIZE=" + std::to_string(worldSize) + ", MASTER_ADDR=" +
             masterAddr + ", MASTER_PORT=" + std::to_string(masterPort) +
             "): " + err;
  out = std::move(t);
  return "";
}
