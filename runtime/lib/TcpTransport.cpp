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
//     rank 0 saw it, port) as one framed message, or with an abort note when
//     the rendezvous fails (a rank missing, a mismatched WORLD_SIZE). This
//     connection carries the messages of the pair (0, r).
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
// Ending the run (abortAll): a rank that stops with an error first sends
// every peer an abort note (a frame whose length is kAbortFrame) naming the
// rank at fault and why, then closes. Without it a rank that only waited on
// the one that saw the failure would blame that one ("rank 0 closed its
// connection") instead of the rank that died. A rank that learns of a
// failure from a note relays the same note, so the culprit survives any
// number of hops. A rank killed outright sends nothing: its peers see its
// connection close and name it.
//
//===----------------------------------------------------------------------===//

#include "tofu/runtime/Transport.h"

#include <algorithm>
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

/// The length field of an abort note; no message is that long.
constexpr uint64_t kAbortFrame = ~uint64_t(0);
/// An abort note's culprit when it is not known.
constexpr uint32_t kUnknownRank = ~uint32_t(0);
/// The longest reason an abort note carries (longer ones are cut).
constexpr uint32_t kMaxNoteText = 1024;

/// What ended the run: the rank at fault (kUnknownRank if not known), the
/// rank that saw it first, and the error as that rank saw it (a sentence
/// about the culprit in the third person, so any rank can print it).
struct Failure {
  uint32_t culprit = kUnknownRank;
  uint32_t reporter = kUnknownRank;
  std::string text;
};

/// The fixed part of an abort note after its kAbortFrame length.
struct NoteHeader {
  uint32_t magic, culprit, reporter, textBytes;
};

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

struct Hello {
  uint32_t magic, rank, size, port;
};
struct PeerAddress {
  uint32_t ipv4; ///< network byte order
  uint32_t port;
};

/// One socket with bounded, framed reads and writes.
struct Connection {
  int fd = -1;
  std::string peerName; ///< "rank 3" for messages
  /// A frame to this peer was begun and not finished (an abort note must
  /// not follow: the peer would read it as the rest of that frame).
  bool writeMidFrame = false;
  /// A frame from this peer was begun and not finished (its next bytes are
  /// no frame start).
  bool readMidFrame = false;
  /// The peer closed the connection (EOF, reset or broken pipe).
  bool closed = false;

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
        if (errno == EPIPE || errno == ECONNRESET) {
          closed = true;
          return peerName + " closed its connection (it ended or died)";
        }
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
      if (r == 0) {
        closed = true;
        return peerName + " closed its connection (it ended or died)";
      }
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        if (errno == ECONNRESET) {
          closed = true;
          return peerName + " closed its connection (it ended or died)";
        }
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
    Connection &c = peers[peer];
    uint64_t header = bytes;
    auto deadline = deadlineAfter(timeout);
    c.writeMidFrame = true;
    if (std::string err =
            c.writeAll(&header, sizeof(header), deadline, timeout);
        !err.empty())
      return failedWith(peer, err);
    if (std::string err = c.writeAll(data, bytes, deadline, timeout);
        !err.empty())
      return failedWith(peer, err);
    c.writeMidFrame = false;
    return "";
  }

  std::string recv(int peer, void *data, size_t bytes) override {
    if (std::string err = checkPeer(peer); !err.empty())
      return err;
    Connection &c = peers[peer];
    uint64_t header = 0;
    auto deadline = deadlineAfter(timeout);
    c.readMidFrame = true;
    if (std::string err = c.readAll(&header, sizeof(header), deadline, timeout);
        !err.empty())
      return failedWith(peer, err);
    if (header == kAbortFrame)
      return readNoteFrom(peer, deadline);
    if (header != bytes)
      return failedWith(
          peer, "receiving from rank " + std::to_string(peer) + ": expected " +
                    std::to_string(bytes) + " bytes, the message has " +
                    std::to_string(header) +
                    "; the ranks disagree about the plan (run the same "
                    "plan.bin on every rank)");
    if (std::string err =
            c.readAll(data, bytes, deadlineAfter(timeout), timeout);
        !err.empty())
      return failedWith(peer, err);
    c.readMidFrame = false;
    return "";
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

  void abortAll(int) override;

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
  /// Records the first failure (an operation with `peer` failed with
  /// `err`) and returns the error to report. When the peer closed its
  /// connection while this rank was sending to it, an abort note it left
  /// before closing is looked for first: it names the rank at fault.
  std::string failedWith(int peer, const std::string &err);
  /// Reads the rest of an abort note from `peer` (its kAbortFrame length was
  /// read), records it and returns the error to report.
  std::string readNoteFrom(int peer, Clock::time_point deadline);
  /// The error a rank reports for a failure it learned of from a note.
  std::string describe(const Failure &f) const;
  std::string listenOn(int port, int &boundPort);
  std::string connectTo(const sockaddr_in &addr, const std::string &what,
                        Clock::time_point deadline, int &fd);
  std::string acceptOne(Clock::time_point deadline, int &fd);
  std::string acceptRanks(int masterPort, std::vector<PeerAddress> &table);

  int myRank, size;
  double timeout;
  std::vector<Connection> peers;
  int listener = -1;
  /// The first failure this rank saw or was told of; relayed by abortAll.
  bool failed = false;
  Failure failure;
};

std::string TcpTransport::describe(const Failure &f) const {
  if (f.reporter == f.culprit)
    return f.text;
  return "rank " + std::to_string(f.reporter) + " ended the run: " + f.text;
}

std::string TcpTransport::failedWith(int peer, const std::string &err) {
  Connection &c = peers[peer];
  if (c.closed && !c.readMidFrame && c.fd >= 0) {
    // Sending to a rank that ended the run: its note may wait unread.
    // Skip whole messages before it (none are expected, the ranks meet
    // the messages in one order; skipping costs nothing if there are).
    auto deadline = deadlineAfter(std::min(timeout, 1.0));
    c.closed = false;
    std::vector<uint8_t> skip;
    for (;;) {
      uint64_t header = 0;
      c.readMidFrame = true;
      if (!c.readAll(&header, sizeof(header), deadline, timeout).empty())
        break;
      if (header == kAbortFrame)
        return readNoteFrom(peer, deadline);
      if (header > (uint64_t(1) << 40))
        break;
      skip.resize(static_cast<size_t>(header));
      if (!c.readAll(skip.data(), skip.size(), deadline, timeout).empty())
        break;
      c.readMidFrame = false;
    }
    c.closed = true;
  }
  if (!failed) {
    failed = true;
    failure = {static_cast<uint32_t>(peer), static_cast<uint32_t>(myRank), err};
  }
  return err;
}

std::string TcpTransport::readNoteFrom(int peer, Clock::time_point deadline) {
  Connection &c = peers[peer];
  NoteHeader h{};
  std::string text;
  std::string err = c.readAll(&h, sizeof(h), deadline, timeout);
  const uint32_t world = static_cast<uint32_t>(size);
  if (err.empty() && (h.magic != kMagic || h.textBytes > kMaxNoteText ||
                      (h.culprit >= world && h.culprit != kUnknownRank) ||
                      h.reporter >= world))
    err = "rank " + std::to_string(peer) +
          " sent a malformed abort note; the ranks run different tofu-run "
          "versions";
  if (err.empty()) {
    text.resize(h.textBytes);
    err = c.readAll(text.data(), text.size(), deadline, timeout);
  }
  if (!err.empty()) {
    // The note was cut short: all that is known is that the peer closed.
    if (!failed) {
      failed = true;
      failure = {static_cast<uint32_t>(peer), static_cast<uint32_t>(myRank),
                 err};
    }
    return err;
  }
  Failure noted{h.culprit, h.reporter, text};
  if (!failed) {
    failed = true;
    failure = noted;
  }
  return describe(noted);
}

void TcpTransport::abortAll(int) {
  Failure f = failure;
  if (!failed)
    f = {static_cast<uint32_t>(myRank), static_cast<uint32_t>(myRank),
         "rank " + std::to_string(myRank) +
             " ended the run after an error of its own (its message says "
             "which)"};
  if (f.text.size() > kMaxNoteText)
    f.text.resize(kMaxNoteText);
  std::vector<uint8_t> note(sizeof(uint64_t) + sizeof(NoteHeader) +
                            f.text.size());
  NoteHeader h{kMagic, f.culprit, f.reporter,
               static_cast<uint32_t>(f.text.size())};
  std::memcpy(note.data(), &kAbortFrame, sizeof(uint64_t));
  std::memcpy(note.data() + sizeof(uint64_t), &h, sizeof(h));
  std::memcpy(note.data() + sizeof(uint64_t) + sizeof(h), f.text.data(),
              f.text.size());
  for (int r = 0; r < size; ++r) {
    Connection &c = peers[r];
    if (c.fd < 0)
      continue;
    // One attempt, no wait: a peer whose buffer is full is not reading
    // from this rank, and a cut note reads as a closed connection.
    if (!c.writeMidFrame && !c.closed)
      (void)::send(c.fd, note.data(), note.size(), MSG_NOSIGNAL);
    // FIN after the note; then read what is pending so that closing sends
    // no reset (which would drop a note the peer has not read yet).
    ::shutdown(c.fd, SHUT_WR);
    uint8_t sink[4096];
    for (size_t drained = 0; drained < (size_t(64) << 20);) {
      ssize_t n = ::recv(c.fd, sink, sizeof(sink), 0);
      if (n <= 0)
        break;
      drained += static_cast<size_t>(n);
    }
  }
  closeAll();
}

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
    if (Clock::now() > deadline) {
      // Which ranks this one still waits for (rank 0: all others; rank r:
      // those above it).
      std::string missing;
      int count = 0;
      for (int r = myRank == 0 ? 1 : myRank + 1; r < size; ++r)
        if (peers[r].fd < 0 && count++ < 8)
          missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      if (count > 8)
        missing += " and " + std::to_string(count - 8) + " more";
      return std::string(count == 1 ? "rank " : "ranks ") + missing +
             " did not connect to rank " + std::to_string(myRank) + " within " +
             formatSeconds(timeout) +
             " (--comm-timeout); were all WORLD_SIZE processes started?";
    }
    pollfd pfd{listener, POLLIN, 0};
    ::poll(&pfd, 1, msUntil(deadline));
  }
}

/// Rank 0's half of the rendezvous: accepts every other rank, checks its
/// hello and fills `table` with where each listens.
std::string TcpTransport::acceptRanks(int masterPort,
                                      std::vector<PeerAddress> &table) {
  auto deadline = deadlineAfter(timeout);
  for (int i = 1; i < size; ++i) {
    int fd = -1;
    if (std::string err = acceptOne(deadline, fd); !err.empty())
      return err;
    Connection c{fd, "a connecting process"};
    Hello h{};
    if (std::string err = c.readAll(&h, sizeof(h), deadline, timeout);
        !err.empty()) {
      ::close(fd);
      return err;
    }
    if (h.magic != kMagic) {
      ::close(fd);
      return "a process that is not tofu-run connected to MASTER_PORT " +
             std::to_string(masterPort);
    }
    if (h.size != static_cast<uint32_t>(size)) {
      ::close(fd);
      return "rank " + std::to_string(h.rank) +
             " has WORLD_SIZE=" + std::to_string(h.size) +
             " but rank 0 has WORLD_SIZE=" + std::to_string(size) +
             "; start every rank with the same WORLD_SIZE";
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
  return "";
}

std::string TcpTransport::connectMesh(const std::string &masterAddr,
                                      int masterPort) {
  auto deadline = deadlineAfter(timeout);
  int myPort = 0;
  if (std::string err = listenOn(myRank == 0 ? masterPort : 0, myPort);
      !err.empty())
    return err;
  std::vector<PeerAddress> table(static_cast<size_t>(size));

  if (myRank == 0) {
    std::string err = acceptRanks(masterPort, table);
    if (!err.empty()) {
      // Tell the ranks already connected why the run ends (they wait for
      // the table), so that they do not blame rank 0 for closing.
      if (!failed) {
        failed = true;
        failure = {kUnknownRank, 0, err};
      }
      abortAll(1);
      return err;
    }
    // The table as one framed message (an abort note takes its place when
    // the rendezvous fails).
    const uint64_t tableBytes = table.size() * sizeof(PeerAddress);
    for (int r = 1; r < size; ++r) {
      if (std::string err = peers[r].writeAll(&tableBytes, sizeof(tableBytes),
                                              deadline, timeout);
          !err.empty())
        return err;
      if (std::string err =
              peers[r].writeAll(table.data(), tableBytes, deadline, timeout);
          !err.empty())
        return err;
    }
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
  // Rank 0 answers once every rank has connected, or with an abort note
  // when its own wait (which began before this connection) ran out: wait a
  // second longer than it, so that its note, not a timeout here, says why.
  deadline = deadlineAfter(timeout + 1);
  uint64_t tableBytes = 0;
  if (std::string err =
          peers[0].readAll(&tableBytes, sizeof(tableBytes), deadline, timeout);
      !err.empty())
    return "rendezvous with rank 0: " + err;
  if (tableBytes == kAbortFrame)
    return "rendezvous with rank 0: " + readNoteFrom(0, deadline);
  if (tableBytes != table.size() * sizeof(PeerAddress))
    return "rendezvous with rank 0: its table of ranks has " +
           std::to_string(tableBytes) + " bytes, expected " +
           std::to_string(table.size() * sizeof(PeerAddress)) +
           "; the ranks run different tofu-run versions";
  if (std::string err = peers[0].readAll(
          table.data(), table.size() * sizeof(PeerAddress), deadline, timeout);
      !err.empty())
    return "rendezvous with rank 0: " + err;

  // Connect to every rank between 0 and this one; say who we are.
  deadline = deadlineAfter(timeout);
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
