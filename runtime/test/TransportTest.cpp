//===- TransportTest.cpp - TCP transport and ProcessGroup on loopback -----===//
//
// The TCP transport (TcpTransport.cpp) with its ranks as threads of this
// process, and ProcessGroup's collectives with its ranks as forked processes
// (ProcessGroup reads the torchrun environment, which is per process), all
// on 127.0.0.1: messages of several sizes between every pair, a size
// mismatch, a world-size mismatch at the rendezvous and in checkWorldSize,
// and a receive that times out naming the rank it waited for. The only
// timing assertion is a generous upper bound on the timeout path.
//
//===----------------------------------------------------------------------===//
#include "tofu/runtime/ProcessGroup.h"
#include "tofu/runtime/Transport.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace tofu::runtime;

namespace {

/// A TCP port nobody listens on right now (the kernel's choice).
int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

/// What one rank (a thread) does once connected; returns an error or "".
using RankBody = std::function<std::string(Transport &)>;

/// Connects `sizes.size()` ranks over TCP (rank r believes the world has
/// sizes[r] ranks), runs `body` on each connected rank and returns every
/// rank's error ("" = none), the connection's error if it failed. Transports
/// are finished only when `finish` is set.
std::vector<std::string> runRanks(const std::vector<int> &sizes,
                                  double timeout, const RankBody &body,
                                  bool finish = true) {
  int port = freePort();
  std::vector<std::future<std::string>> ranks;
  for (int r = 0; r < static_cast<int>(sizes.size()); ++r)
    ranks.push_back(std::async(std::launch::async, [=, &body]() {
      std::unique_ptr<Transport> t;
      if (std::string err = createTcpTransport(r, sizes[r], "127.0.0.1", port,
                                               timeout, t);
          !err.empty())
        return "connect: " + err;
      if (std::string err = body(*t); !err.empty())
        return err;
      return finish ? t->finish() : std::string();
    }));
  std::vector<std::string> errors;
  for (auto &f : ranks)
    errors.push_back(f.get());
  return errors;
}

std::vector<int> sameSize(int k) { return std::vector<int>(k, k); }

/// Bytes of message `n` from rank `from` to rank `to`: a pattern that
/// differs by message, sender and receiver.
std::vector<uint8_t> pattern(size_t bytes, int from, int to, int n) {
  std::vector<uint8_t> v(bytes);
  for (size_t i = 0; i < bytes; ++i)
    v[i] = static_cast<uint8_t>(i * 31 + from * 7 + to * 13 + n * 101);
  return v;
}

TEST(TcpTransport, SendsAndReceivesSeveralSizesBetweenEveryPair) {
  constexpr int k = 3;
  // 0 bytes, 1, odd, one page, and 3 MiB + 5 (more than a socket buffer, so
  // the sender waits for the receiver to read).
  const std::vector<size_t> sizes = {0, 1, 7, 4096, (3u << 20) + 5};
  // Pairs in one global order; within a pair the lower rank sends first.
  // Every rank walks the same order, so the blocking calls cannot deadlock.
  auto exchange = [&](Transport &t) -> std::string {
    EXPECT_EQ(t.worldSize(), k);
    EXPECT_STREQ(t.kind(), "tcp");
    for (int a = 0; a < k; ++a)
      for (int b = a + 1; b < k; ++b) {
        if (t.rank() != a && t.rank() != b)
          continue;
        int peer = t.rank() == a ? b : a;
        for (int round = 0; round < 2; ++round) {
          bool sending = (round == 0) == (t.rank() == a);
          for (size_t n = 0; n < sizes.size(); ++n) {
            if (sending) {
              std::vector<uint8_t> out = pattern(sizes[n], t.rank(), peer, n);
              if (std::string err = t.send(peer, out.data(), out.size());
                  !err.empty())
                return err;
            } else {
              std::vector<uint8_t> in(sizes[n], 0);
              if (std::string err = t.recv(peer, in.data(), in.size());
                  !err.empty())
                return err;
              if (in != pattern(sizes[n], peer, t.rank(), n))
                return "rank " + std::to_string(t.rank()) + ": message " +
                       std::to_string(n) + " from rank " +
                       std::to_string(peer) + " has other bytes";
            }
          }
        }
      }
    return "";
  };
  std::vector<std::string> errors = runRanks(sameSize(k), 30, exchange);
  for (int r = 0; r < k; ++r)
    EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST(TcpTransport, SizeMismatchIsAnError) {
  std::vector<std::string> errors =
      runRanks(sameSize(2), 30, [](Transport &t) -> std::string {
        uint8_t buf[16] = {};
        if (t.rank() == 0)
          return t.send(1, buf, 8);
        std::string err = t.recv(0, buf, 16);
        EXPECT_NE(err.find("expected 16 bytes, the message has 8"),
                  std::string::npos)
            << err;
        return "";
      }, /*finish=*/false);
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

TEST(TcpTransport, ReceiveTimesOutNamingTheRank) {
  std::promise<void> receiverDone;
  std::shared_future<void> done = receiverDone.get_future().share();
  double waited = 0;
  std::vector<std::string> errors = runRanks(
      sameSize(2), 0.5,
      [&](Transport &t) -> std::string {
        if (t.rank() == 0) {
          // Alive but silent until rank 1 has given up.
          done.wait();
          return "";
        }
        uint32_t value = 0;
        auto start = std::chrono::steady_clock::now();
        std::string err = t.recv(0, &value, sizeof(value));
        waited = std::chrono::duration<double>(
                     std::chrono::steady_clock::now() - start)
                     .count();
        receiverDone.set_value();
        return err;
      },
      /*finish=*/false);
  EXPECT_EQ(errors[0], "");
  EXPECT_NE(errors[1].find("receiving from rank 0: no progress within 0.5 s"),
            std::string::npos)
      << errors[1];
  EXPECT_LT(waited, 30.0) << "the timeout of 0.5 s did not end the wait";
}

TEST(TcpTransport, WorldSizeMismatchAtTheRendezvousIsAnError) {
  // Rank 0 believes in 2 ranks, rank 1 in 3.
  std::vector<std::string> errors =
      runRanks({2, 3}, 10, [](Transport &) { return std::string(); });
  EXPECT_NE(errors[0].find("rank 1 has WORLD_SIZE=3 but rank 0 has "
                           "WORLD_SIZE=2"),
            std::string::npos)
      << errors[0];
  EXPECT_NE(errors[1], "") << "rank 1 connected to a rank 0 that refused it";
}

/// Rank 2 ends without a word (its transport closes every socket, as a
/// killed process's do) while rank 0 waits for it and rank 1 waits for rank
/// 0. Rank 0 sees rank 2 go and ends the run (abortAll, as tofu-run's
/// ProcessGroup does); rank 1 must blame rank 2, not rank 0.
TEST(TcpTransport, ASurvivorNamesTheRankThatDiedNotTheOneThatSawIt) {
  std::vector<std::string> errors = runRanks(
      sameSize(3), 30,
      [](Transport &t) -> std::string {
        uint32_t value = 0;
        if (t.rank() == 2)
          return ""; // dies: the transport closes without a note
        std::string err = t.recv(t.rank() == 0 ? 2 : 0, &value, sizeof(value));
        if (t.rank() == 0)
          t.abortAll(1);
        return err;
      },
      /*finish=*/false);
  EXPECT_EQ(errors[0], "rank 2 closed its connection (it ended or died)");
  EXPECT_EQ(errors[1], "rank 0 ended the run: rank 2 closed its connection "
                       "(it ended or died)");
  EXPECT_EQ(errors[2], "");
}

/// The note is relayed unchanged: rank 3 hears of rank 2's death from rank
/// 1, which heard of it from rank 0.
TEST(TcpTransport, TheCulpritSurvivesRelays) {
  std::vector<std::string> errors = runRanks(
      sameSize(4), 30,
      [](Transport &t) -> std::string {
        uint32_t value = 0;
        const int waitsFor[4] = {2, 0, -1, 1};
        if (t.rank() == 2)
          return "";
        std::string err = t.recv(waitsFor[t.rank()], &value, sizeof(value));
        t.abortAll(1);
        return err;
      },
      /*finish=*/false);
  EXPECT_EQ(errors[0], "rank 2 closed its connection (it ended or died)");
  const std::string relayed =
      "rank 0 ended the run: rank 2 closed its connection (it ended or died)";
  EXPECT_EQ(errors[1], relayed);
  EXPECT_EQ(errors[3], relayed);
}

/// A rank that ends the run for a reason of its own (not a peer's failure)
/// says so; its peers do not call it dead.
TEST(TcpTransport, ARankThatFailsByItselfIsNamedAsSuch) {
  std::vector<std::string> errors = runRanks(
      sameSize(3), 30,
      [](Transport &t) -> std::string {
        uint32_t value = 0;
        if (t.rank() == 1) {
          t.abortAll(1);
          return "";
        }
        return t.recv(1, &value, sizeof(value));
      },
      /*finish=*/false);
  const std::string own =
      "rank 1 ended the run after an error of its own (its message says "
      "which)";
  EXPECT_EQ(errors[0], own);
  EXPECT_EQ(errors[2], own);
}

/// A rank that is sending (more than the socket buffers hold) to a rank
/// that ends the run reads that rank's note when its send fails.
TEST(TcpTransport, ASenderReadsTheNoteOfTheRankItSendsTo) {
  std::vector<std::string> errors = runRanks(
      sameSize(3), 30,
      [](Transport &t) -> std::string {
        if (t.rank() == 2)
          return "";
        if (t.rank() == 1) {
          uint32_t value = 0;
          std::string err = t.recv(2, &value, sizeof(value));
          t.abortAll(1);
          return err;
        }
        std::vector<uint8_t> big(64u << 20, 1);
        return t.send(1, big.data(), big.size());
      },
      /*finish=*/false);
  EXPECT_EQ(errors[1], "rank 2 closed its connection (it ended or died)");
  EXPECT_EQ(errors[0], "rank 1 ended the run: rank 2 closed its connection "
                       "(it ended or died)");
}

/// A rank that never starts: rank 0's wait at the rendezvous ends naming it,
/// and the ranks that did connect hear that from rank 0 instead of blaming
/// it for closing.
TEST(TcpTransport, ARankMissingAtTheRendezvousIsNamed) {
  // Three ranks believe in four; rank 3 never starts.
  std::vector<std::string> errors =
      runRanks({4, 4, 4}, 1, [](Transport &) { return std::string(); });
  const std::string missing =
      "rank 3 did not connect to rank 0 within 1 s (--comm-timeout)";
  EXPECT_NE(errors[0].find(missing), std::string::npos) << errors[0];
  for (int r : {1, 2}) {
    EXPECT_NE(errors[r].find("rank 0 ended the run: " + missing),
              std::string::npos)
        << "rank " << r << ": " << errors[r];
  }
}

/// Runs `body(group)` in `k` forked processes started as torchrun ranks
/// (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, and TORCHELASTIC_RUN_ID as
/// torchrun sets it; without it with `torchrun` false, as a launcher that
/// sets only the four variables); each exits 0 when `body` returns "" and
/// prints the error otherwise. Returns the exit codes.
std::vector<int>
forkRanks(int k, const std::function<std::string(ProcessGroup &)> &body,
          bool torchrun = true) {
  int port = freePort();
  std::vector<pid_t> pids;
  for (int r = 0; r < k; ++r) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("RANK", std::to_string(r).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(k).c_str(), 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      ::unsetenv("TORCHELASTIC_USE_AGENT_STORE");
      if (torchrun)
        ::setenv("TORCHELASTIC_RUN_ID", "none", 1);
      else
        ::unsetenv("TORCHELASTIC_RUN_ID");
      int code = 0;
      {
        int argc = 1;
        char name[] = "transport-test";
        char *args[] = {name, nullptr};
        char **argv = args;
        ProcessGroup group;
        std::string err = group.start(argc, argv, 30);
        if (err.empty())
          err = body(group);
        if (err.empty())
          err = group.finish();
        else
          group.finishAfterCommonError();
        if (!err.empty()) {
          std::fprintf(stderr, "rank %d: %s\n", r, err.c_str());
          code = 1;
        }
      }
      std::fflush(stderr);
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  std::vector<int> codes;
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 128);
  }
  return codes;
}

TEST(ProcessGroup, CollectivesOverTcp) {
  constexpr int k = 3;
  std::vector<int> codes = forkRanks(k, [](ProcessGroup &g) -> std::string {
    if (!g.multiProcess() || g.worldSize() != k || g.launcher() != "torchrun")
      return "not a 3-process torchrun group";
    if (std::string err = g.checkWorldSize(k); !err.empty())
      return "checkWorldSize(3): " + err;
    std::string mismatch = g.checkWorldSize(4);
    if (mismatch.find("the plan has 4 devices but torchrun started 3 "
                      "processes") == std::string::npos)
      return "checkWorldSize(4) said: '" + mismatch + "'";
    if (std::string err = g.barrier(); !err.empty())
      return "barrier: " + err;
    std::vector<uint64_t> all;
    if (std::string err = g.gather(100 + g.rank(), all); !err.empty())
      return "gather: " + err;
    if (g.rank() == 0 ? all != std::vector<uint64_t>{100, 101, 102}
                      : !all.empty())
      return "gather gave " + std::to_string(all.size()) + " values";
    // Texts of different lengths, rank 1's empty, rank 2's 70000 bytes.
    std::string mine(g.rank() == 1 ? 0 : 70000 * (g.rank() / 2) + 5,
                     static_cast<char>('a' + g.rank()));
    std::vector<std::string> texts;
    if (std::string err = g.gatherText(mine, texts); !err.empty())
      return "gatherText: " + err;
    if (g.rank() == 0) {
      if (texts.size() != k || texts[0] != std::string(5, 'a') ||
          !texts[1].empty() || texts[2] != std::string(70005, 'c'))
        return "gatherText gave other texts";
    } else if (!texts.empty()) {
      return "gatherText gave texts to a rank other than 0";
    }
    return "";
  });
  EXPECT_EQ(codes, std::vector<int>(k, 0));
}

/// RANK/WORLD_SIZE set by a launcher other than torchrun (a script, a
/// batch scheduler): messages name the variables, never torchrun.
TEST(ProcessGroup, PlainRankEnvironmentIsNotCalledTorchrun) {
  constexpr int k = 2;
  std::vector<int> codes = forkRanks(
      k,
      [](ProcessGroup &g) -> std::string {
        if (g.launcher() != "RANK/WORLD_SIZE")
          return "launcher() is '" + g.launcher() + "'";
        std::string mismatch = g.checkWorldSize(4);
        if (mismatch.find("torchrun") != std::string::npos ||
            mismatch.find("the plan has 4 devices but WORLD_SIZE=2 gives 2 "
                          "processes") == std::string::npos)
          return "checkWorldSize(4) said: '" + mismatch + "'";
        return "";
      },
      /*torchrun=*/false);
  EXPECT_EQ(codes, std::vector<int>(k, 0));

  // A missing variable, in this process (start fails before connecting).
  ::unsetenv("TORCHELASTIC_RUN_ID");
  ::setenv("RANK", "0", 1);
  ::unsetenv("WORLD_SIZE");
  int argc = 1;
  char name[] = "transport-test";
  char *args[] = {name, nullptr};
  char **argv = args;
  std::string err;
  {
    ProcessGroup group;
    err = group.start(argc, argv, 5);
  }
  ::unsetenv("RANK");
  EXPECT_NE(err.find("needs WORLD_SIZE"), std::string::npos) << err;
  EXPECT_EQ(err.find("torchrun"), std::string::npos) << err;
}

/// Under a launcher that ends the ranks with SIGTERM (torchrun's agent,
/// mpirun), a rank so ended prints one line of its own and still dies by
/// the signal.
TEST(ProcessGroup, SigtermPrintsOneLineNamingTheLauncher) {
  char errPath[] = "/tmp/tofu-transport-test-XXXXXX";
  int errFd = ::mkstemp(errPath);
  ASSERT_GE(errFd, 0);
  int port = freePort();
  std::vector<pid_t> pids;
  for (int r = 0; r < 2; ++r) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("RANK", std::to_string(r).c_str(), 1);
      ::setenv("WORLD_SIZE", "2", 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      ::unsetenv("TORCHELASTIC_USE_AGENT_STORE");
      ::setenv("TORCHELASTIC_RUN_ID", "none", 1);
      int argc = 1;
      char name[] = "transport-test";
      char *args[] = {name, nullptr};
      char **argv = args;
      ProcessGroup group;
      if (!group.start(argc, argv, 30).empty())
        ::_exit(2);
      if (r == 1) {
        ::dup2(errFd, STDERR_FILENO);
        group.reportTerminationBySignal();
        ::raise(SIGTERM);
        ::_exit(3); // not reached: the signal ends the process
      }
      uint8_t token = 0;
      std::string err = group.getTransport()->recv(1, &token, 1);
      ::_exit(err.find("rank 1 closed its connection") != std::string::npos
                  ? 0
                  : 4);
    }
    pids.push_back(pid);
  }
  int status0 = 0, status1 = 0;
  ::waitpid(pids[0], &status0, 0);
  ::waitpid(pids[1], &status1, 0);
  EXPECT_TRUE(WIFEXITED(status0) && WEXITSTATUS(status0) == 0) << status0;
  EXPECT_TRUE(WIFSIGNALED(status1) && WTERMSIG(status1) == SIGTERM) << status1;
  std::string text(4096, '\0');
  ssize_t n = ::pread(errFd, text.data(), text.size(), 0);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  ::close(errFd);
  ::unlink(errPath);
  EXPECT_EQ(text, "tofu-run: error: rank 1: ended by SIGTERM from torchrun's "
                  "agent, which ends every rank once one has failed "
                  "(torchrun's message names that rank) or when it is "
                  "interrupted\n");
}

} // namespace
