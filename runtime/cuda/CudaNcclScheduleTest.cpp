//===- CudaNcclScheduleTest.cpp - One process per GPU, without a GPU -----===//
//
// The multi-process CUDA schedule (CudaNcclSchedule.h) on plans tofuc
// compiles from the example models (with --cuda-arch, so nvcc is needed;
// exit 77 = skipped without it):
//
//  * CudaNcclSchedule.*: MLP k = 8 on 1, 2, 3, 4 and 8 ranks and GPT k = 8
//    on 2 ranks validate; the transfers are the cross-rank pieces; every
//    rank touches only its own memory. Mutations must fail validation: a
//    dropped receive, two sends of one pair swapped, a send moved before a
//    receive of the other direction (deadlock), a dropped wait, an op left
//    reading another rank's memory.
//  * CudaNcclOnHost.*: W ranks as threads, each stream of each rank a thread
//    running the rank's entries after their waits, the generated kernels
//    through their host drivers (the plan's CUDA source compiled as C++),
//    the other calls as loops, and NCCL emulated by blocking matched
//    send/receive (a send returns once its receive took the bytes; both
//    check the transfer and the byte count). MLP k = 8 on 2 and 4 ranks and
//    GPT k = 8 on 2 ranks give the CPU backend's losses and parameters
//    within fp32 tolerance; the deadlocking mutation above hangs the
//    emulated NCCL calls, which the emulator's timeout reports (what the
//    executor's --nccl-timeout does on GPUs), and the validator rejects it.
//
// Usage: tofu-cuda-nccl-schedule-tests --tofuc T --nvcc N --python P
//          --examples DIR --workdir DIR --host-cxx CXX [gtest flags]
//
//===----------------------------------------------------------------------===//

#include "CudaKernelLaunch.h"
#include "CudaNcclSchedule.h"

#include "tofu/runtime/CpuBackend.h"
#include "tofu/runtime/SyntheticData.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <array>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

using namespace tofu::cuda;
using namespace tofu::plan;

namespace {

std::string tofuc, nvcc, python, examples, workdir, hostCxx;
std::map<std::string, Plan> plans;
std::map<std::string, std::string> planErrors;

int shell(const std::string &cmd) {
  std::fprintf(stderr, "+ %s\n", cmd.c_str());
  return std::system(cmd.c_str());
}

void compilePlan(const std::string &name, const std::string &onnx) {
  const std::string out = workdir + "/" + name + ".bin";
  const std::string log = workdir + "/" + name + ".log";
  if (shell(tofuc + " " + onnx + " --gpus 8 --cuda-arch sm_80 --nvcc " +
            nvcc + " -o " + out + " > " + log + " 2>&1") != 0) {
    planErrors[name] = "tofuc failed (" + log + ")";
    return;
  }
  Plan plan;
  if (std::string err = readPlan(out, plan); !err.empty()) {
    planErrors[name] = err;
    return;
  }
  plans[name] = std::move(plan);
}

void compilePlans() {
  std::filesystem::create_directories(workdir);
  compilePlan("mlp-8", examples + "/mlp/mlp.onnx");
  const std::string gpt = workdir + "/gpt.onnx";
  if (shell(python + " " + examples +
            "/transformer/make_gpt.py --layers 2 --hidden 16 --heads 2 "
            "--seq 8 --vocab 32 --batch 2 -o " + gpt + " > " + workdir +
            "/gpt.gen.log 2>&1") != 0)
    planErrors["gpt-8"] = "the generator failed (" + workdir + "/gpt.gen.log)";
  else
    compilePlan("gpt-8", gpt);
}

const Plan &planNamed(const std::string &name) {
  auto it = plans.find(name);
  if (it == plans.end()) {
    ADD_FAILURE() << name << ": " << planErrors[name];
    static Plan empty;
    return empty;
  }
  return it->second;
}

/// Builds and validates; fails the test on either error.
MultiProcessSchedule scheduled(const std::string &name, int32_t ranks) {
  const Plan &plan = planNamed(name);
  MultiProcessSchedule ms;
  if (plan.devices.empty())
    return ms;
  std::string err = buildMultiProcessSchedule(plan, ranks, ms);
  EXPECT_EQ(err, "") << name << " on " << ranks << " ranks";
  if (err.empty())
    EXPECT_EQ(validateMultiProcessSchedule(plan, ms), "")
        << name << " on " << ranks << " ranks";
  return ms;
}

size_t countOps(const RankSchedule &rs, CudaOp::Kind kind) {
  size_t n = 0;
  for (const ScheduledInstr &e : rs.schedule.instrs)
    for (const CudaOp &op : e.ops)
      n += op.kind == kind;
  return n;
}

/// Moves rank entry `from` to position `to` (< from), renumbering waits.
void moveEntry(RankSchedule &rs, int32_t from, int32_t to) {
  const int32_t n = static_cast<int32_t>(rs.schedule.instrs.size());
  std::vector<int32_t> order;
  for (int32_t p = 0; p < n; ++p)
    if (p != from) {
      if (p == to)
        order.push_back(from);
      order.push_back(p);
    }
  std::vector<int32_t> newPos(n);
  for (int32_t p = 0; p < n; ++p)
    newPos[order[p]] = p;
  RankSchedule out;
  out.schedule.mapping = rs.schedule.mapping;
  out.schedule.lossWriter =
      rs.schedule.lossWriter < 0 ? -1 : newPos[rs.schedule.lossWriter];
  for (int32_t old : order) {
    ScheduledInstr e = rs.schedule.instrs[old];
    for (int32_t &w : e.waits)
      w = newPos[w];
    std::sort(e.waits.begin(), e.waits.end());
    out.schedule.instrs.push_back(std::move(e));
    out.origin.push_back(rs.origin[old]);
    out.sends.push_back(rs.sends[old]);
  }
  rs = std::move(out);
}

/// The transfer an entry sends, or -1.
int32_t sentTransfer(const RankSchedule &rs, int32_t p) { return rs.sends[p]; }

/// Finds on some rank b an entry i receiving from rank a and a later send
/// entry j to a whose waits all lie before i, and moves j before i: b then
/// sends to a before receiving from a, while a sends to b before receiving
/// from b. Returns false if the schedule has no such pair.
bool makeDeadlock(MultiProcessSchedule &ms, std::string &what) {
  for (int32_t b = 0; b < ms.worldSize; ++b) {
    RankSchedule &rs = ms.ranks[b];
    const int32_t n = static_cast<int32_t>(rs.schedule.instrs.size());
    for (int32_t i = 0; i < n; ++i) {
      std::set<int32_t> from;
      for (const CudaOp &op : rs.schedule.instrs[i].ops)
        if (op.kind == CudaOp::Kind::Recv)
          from.insert(op.peer);
      if (from.empty())
        continue;
      for (int32_t j = i + 1; j < n; ++j) {
        const int32_t t = sentTransfer(rs, j);
        if (t < 0 || !from.count(ms.transfers[t].to))
          continue;
        bool movable = true;
        for (int32_t w : rs.schedule.instrs[j].waits)
          movable &= w < i;
        if (!movable)
          continue;
        what = "rank " + std::to_string(b) + " entry " + std::to_string(j) +
               " (send of transfer " + std::to_string(t) +
               ") moved before entry " + std::to_string(i);
        moveEntry(rs, j, i);
        return true;
      }
    }
  }
  return false;
}

TEST(CudaNcclSchedule, PlansValidateOnEveryWorldSize) {
  const Plan &plan = planNamed("mlp-8");
  if (plan.devices.empty())
    return;
  for (int32_t W : {1, 2, 3, 4, 8}) {
    MultiProcessSchedule ms = scheduled("mlp-8", W);
    ASSERT_EQ(ms.ranks.size(), static_cast<size_t>(W));
    // Placement: device p on rank p * W / k; W = k is the CPU backend's
    // one device per process.
    for (int32_t p = 0; p < 8; ++p)
      EXPECT_EQ(ms.rankOf(p), p * W / 8);
    size_t sends = 0, recvs = 0;
    for (const RankSchedule &rs : ms.ranks) {
      sends += countOps(rs, CudaOp::Kind::Send);
      recvs += countOps(rs, CudaOp::Kind::Recv);
      // No op of a rank reads or writes another rank's memory.
      for (const ScheduledInstr &e : rs.schedule.instrs)
        for (const CudaOp &op : e.ops)
          if (op.kind == CudaOp::Kind::Copy && op.bytes)
            EXPECT_NE(op.path, CopyPath::Peer);
    }
    EXPECT_EQ(sends, ms.transfers.size()) << W;
    EXPECT_EQ(recvs, ms.transfers.size()) << W;
    if (W == 1)
      EXPECT_EQ(ms.transfers.size(), 0u);
    else
      EXPECT_GT(ms.transfers.size(), 0u) << W;
    // The loss is saved on the rank of device 0 only.
    EXPECT_GE(ms.ranks[0].schedule.lossWriter, 0);
    for (int32_t r = 1; r < W; ++r)
      EXPECT_EQ(ms.ranks[r].schedule.lossWriter, -1);
  }
  // More ranks than devices is refused with the rule.
  MultiProcessSchedule ms;
  std::string err = buildMultiProcessSchedule(plan, 9, ms);
  EXPECT_NE(err.find("runs on 1 to 8 processes"), std::string::npos) << err;
  scheduled("gpt-8", 2);
}

TEST(CudaNcclSchedule, BoxPiecesAreStagedAndContiguousOnesAreNot) {
  const Plan &plan = planNamed("gpt-8");
  if (plan.devices.empty())
    return;
  MultiProcessSchedule ms = scheduled("gpt-8", 2);
  // Every transfer's receive lands either in place (a contiguous run) or in
  // the staging area followed by the entry's box kernel from there.
  size_t staged = 0, inPlace = 0;
  for (int32_t r = 0; r < 2; ++r)
    for (const ScheduledInstr &e : ms.ranks[r].schedule.instrs)
      for (size_t j = 0; j < e.ops.size(); ++j) {
        const CudaOp &op = e.ops[j];
        if (op.kind != CudaOp::Kind::Recv)
          continue;
        if (op.dst.offset == ms.stagingOffset[op.dst.device]) {
          ++staged;
          ASSERT_LT(j + 1, e.ops.size());
          const CudaOp &next = e.ops[j + 1];
          EXPECT_TRUE(next.kind == CudaOp::Kind::BoxCopy ||
                      next.kind == CudaOp::Kind::BoxAdd);
          EXPECT_EQ(next.src.offset, op.dst.offset);
        } else {
          ++inPlace;
        }
        EXPECT_LE(op.bytes, ms.stagingBytes[op.dst.device] +
                                (op.dst.offset ==
                                         ms.stagingOffset[op.dst.device]
                                     ? 0
                                     : op.bytes));
      }
  EXPECT_GT(staged + inPlace, 0u);
  std::printf("gpt-8 on 2 ranks: %zu transfers, %zu staged, %zu in place\n",
              ms.transfers.size(), staged, inPlace);
}

TEST(CudaNcclSchedule, BrokenSchedulesFailValidation) {
  const Plan &plan = planNamed("mlp-8");
  if (plan.devices.empty())
    return;
  const MultiProcessSchedule good = scheduled("mlp-8", 2);
  ASSERT_GT(good.transfers.size(), 1u);

  {
    // A dropped receive: its send has no partner.
    MultiProcessSchedule ms = good;
    bool dropped = false;
    for (RankSchedule &rs : ms.ranks)
      for (ScheduledInstr &e : rs.schedule.instrs)
        for (size_t j = 0; j < e.ops.size() && !dropped; ++j)
          if (e.ops[j].kind == CudaOp::Kind::Recv) {
            e.ops.erase(e.ops.begin() + j);
            dropped = true;
          }
    ASSERT_TRUE(dropped);
    std::string err = validateMultiProcessSchedule(plan, ms);
    EXPECT_NE(err.find("rank"), std::string::npos) << err;
    EXPECT_TRUE(err.find("no receive left") != std::string::npos ||
                err.find("one order") != std::string::npos)
        << err;
  }
  {
    // Two sends of one pair swapped: the i-th send is not the i-th receive.
    MultiProcessSchedule ms = good;
    bool swapped = false;
    for (RankSchedule &rs : ms.ranks) {
      const int32_t n = static_cast<int32_t>(rs.schedule.instrs.size());
      for (int32_t i = 0; i < n && !swapped; ++i)
        for (int32_t j = i + 1; j < n && !swapped; ++j) {
          if (rs.sends[i] < 0 || rs.sends[j] < 0 ||
              ms.transfers[rs.sends[i]].to != ms.transfers[rs.sends[j]].to)
            continue;
          bool movable = true;
          for (int32_t w : rs.schedule.instrs[j].waits)
            movable &= w < i;
          if (!movable)
            continue;
          moveEntry(rs, j, i);
          swapped = true;
        }
    }
    ASSERT_TRUE(swapped);
    std::string err = validateMultiProcessSchedule(plan, ms);
    EXPECT_NE(err.find("must be in one order"), std::string::npos) << err;
  }
  {
    // A send moved before a receive of the other direction: deadlock.
    MultiProcessSchedule ms = good;
    std::string what;
    ASSERT_TRUE(makeDeadlock(ms, what));
    std::string err = validateMultiProcessSchedule(plan, ms);
    EXPECT_NE(err.find("deadlock"), std::string::npos) << what << ": " << err;
  }
  {
    // Every single wait dropped in turn (the first 40) must be caught.
    size_t tried = 0;
    for (int32_t r = 0; r < 2; ++r)
      for (size_t p = 0; p < good.ranks[r].schedule.instrs.size() && tried < 40;
           ++p)
        for (size_t w = 0; w < good.ranks[r].schedule.instrs[p].waits.size();
             ++w) {
          MultiProcessSchedule ms = good;
          auto &waits = ms.ranks[r].schedule.instrs[p].waits;
          waits.erase(waits.begin() + w);
          ++tried;
          std::string err = validateMultiProcessSchedule(plan, ms);
          EXPECT_NE(err, "") << "rank " << r << " entry " << p << " wait "
                             << w;
        }
    EXPECT_GT(tried, 5u);
  }
  {
    // A receive turned back into the cross-rank copy: reads another rank.
    MultiProcessSchedule ms = good;
    bool changed = false;
    for (RankSchedule &rs : ms.ranks)
      for (size_t p = 0; p < rs.schedule.instrs.size() && !changed; ++p)
        for (CudaOp &op : rs.schedule.instrs[p].ops)
          if (op.kind == CudaOp::Kind::Recv && !changed) {
            const NcclTransfer &t = ms.transfers[op.transfer];
            op = ms.global.instrs[t.entry].ops[t.op];
            changed = true;
          }
    ASSERT_TRUE(changed);
    std::string err = validateMultiProcessSchedule(plan, ms);
    EXPECT_NE(err, "");
  }
  {
    // A transfer missing from the list.
    MultiProcessSchedule ms = good;
    ms.transfers.pop_back();
    EXPECT_NE(validateMultiProcessSchedule(plan, ms).find("NCCL transfers"),
              std::string::npos);
  }
}

TEST(CudaNcclSchedule, DescribeNamesTheRankAndItsCalls) {
  const Plan &plan = planNamed("mlp-8");
  if (plan.devices.empty())
    return;
  MultiProcessSchedule ms = scheduled("mlp-8", 2);
  std::string text = describeRankSchedule(plan, ms, 1);
  EXPECT_NE(text.find("rank 1 of 2: plan devices 4,5,6,7"), std::string::npos)
      << text;
  EXPECT_NE(text.find("ncclSend(to rank 0"), std::string::npos);
  EXPECT_NE(text.find("ncclRecv(from rank 0"), std::string::npos);
  EXPECT_NE(text.find(" nccl "), std::string::npos);
  EXPECT_EQ(text.find("device 0: GPU"), std::string::npos) << text;
}

//===----------------------------------------------------------------------===//
// W ranks as threads with emulated NCCL.
//===----------------------------------------------------------------------===//

/// Blocking matched send/receive between threads, and the done flags of
/// every rank's entries, under one lock. Every blocking wait is bounded by
/// `timeout`; the first one to expire aborts everything (as the executor's
/// watchdog does with ncclCommAbort and the transport).
class World {
public:
  World(int32_t ranks, std::chrono::milliseconds timeout)
      : timeout(timeout), doneFlags(ranks) {}

  void resetDone(int32_t rank, size_t entries) {
    doneFlags[rank].assign(entries, 0);
  }
  void markDone(int32_t rank, int32_t entry) {
    std::lock_guard<std::mutex> lock(mu);
    doneFlags[rank][entry] = 1;
    cv.notify_all();
  }
  bool waitDone(int32_t rank, const std::vector<int32_t> &entries,
                const std::string &who) {
    std::unique_lock<std::mutex> lock(mu);
    return waitFor(lock, who, [&] {
      for (int32_t e : entries)
        if (!doneFlags[rank][e])
          return false;
      return true;
    });
  }

  /// Returns once rank `to` took the bytes (NCCL p2p blocks until matched).
  bool send(int32_t from, const CudaOp &op, const uint8_t *data,
            const std::string &who) {
    Message m{op.transfer, op.bytes, data, false};
    std::unique_lock<std::mutex> lock(mu);
    auto &queue = channels[{from, op.peer}];
    queue.push_back(&m);
    cv.notify_all();
    pendingCalls.insert(who);
    bool ok = waitFor(lock, who, [&] { return m.taken; });
    pendingCalls.erase(who);
    if (!ok) // still queued: the receiver must not see it any more
      for (auto it = queue.begin(); it != queue.end(); ++it)
        if (*it == &m) {
          queue.erase(it);
          break;
        }
    return ok;
  }
  bool recv(int32_t to, const CudaOp &op, uint8_t *data,
            const std::string &who) {
    std::unique_lock<std::mutex> lock(mu);
    auto &queue = channels[{op.peer, to}];
    pendingCalls.insert(who);
    bool ok = waitFor(lock, who, [&] { return !queue.empty(); });
    pendingCalls.erase(who);
    if (!ok)
      return false;
    Message *m = queue.front();
    if (m->transfer != op.transfer || m->bytes != op.bytes) {
      abortLocked(who + ": received transfer " + std::to_string(m->transfer) +
                  " (" + std::to_string(m->bytes) + " bytes) instead");
      return false;
    }
    std::memcpy(data, m->data, m->bytes);
    m->taken = true;
    queue.pop_front();
    cv.notify_all();
    return true;
  }
  void abort(const std::string &why) {
    std::lock_guard<std::mutex> lock(mu);
    abortLocked(why);
  }
  std::string error() {
    std::lock_guard<std::mutex> lock(mu);
    return abortReason;
  }

private:
  struct Message {
    int32_t transfer;
    uint64_t bytes;
    const uint8_t *data;
    bool taken;
  };
  template <typename Pred>
  bool waitFor(std::unique_lock<std::mutex> &lock, const std::string &who,
               Pred pred) {
    if (!cv.wait_for(lock, timeout, [&] { return aborted || pred(); })) {
      abortLocked(who + " timed out after " +
                  std::to_string(timeout.count()) + " ms");
      return false;
    }
    return !aborted;
  }
  void abortLocked(const std::string &why) {
    if (!aborted) {
      abortReason = why;
      for (const std::string &call : pendingCalls)
        abortReason += "; blocked: " + call;
    }
    aborted = true;
    cv.notify_all();
  }

  std::chrono::milliseconds timeout;
  std::mutex mu;
  std::condition_variable cv;
  bool aborted = false;
  std::string abortReason;
  std::vector<std::vector<char>> doneFlags;
  std::map<std::pair<int32_t, int32_t>, std::deque<Message *>> channels;
  std::set<std::string> pendingCalls; ///< NCCL calls now blocked
};

/// The plan's generated kernels as host code (compiled once per plan).
class HostKernels {
public:
  using HostFn = void (*)(void *const *, const int64_t *, uint64_t,
                          unsigned long long *);
  ~HostKernels() {
    if (lib)
      dlclose(lib);
  }
  std::string load(const Plan &plan, const std::string &tag) {
    std::string src = workdir + "/" + tag + ".host.cpp";
    std::string so = workdir + "/" + tag + ".host.so";
    if (!std::filesystem::exists(so)) {
      std::ofstream(src) << plan.cuda.source;
      if (shell(hostCxx + " -std=c++17 -O1 -ffp-contract=off -fPIC -shared "
                          "-w -o " + so + " " + src) != 0)
        return "compiling the generated source as C++ failed";
    }
    lib = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib)
      return std::string("dlopen: ") + dlerror();
    // Per kernel the host driver of each variant it has (CudaKernelLaunch.h:
    // the one the executor would launch is run).
    for (const CudaKernel &k : plan.cuda.kernels) {
      std::array<HostFn, 5> variants = {};
      for (auto v : {KernelLaunchConfig::Variant::Element,
                     KernelLaunchConfig::Variant::Block,
                     KernelLaunchConfig::Variant::Row,
                     KernelLaunchConfig::Variant::RowWarp,
                     KernelLaunchConfig::Variant::Grid}) {
        std::string driver = k.name + variantSuffix(v) + "_host";
        variants[static_cast<size_t>(v)] =
            reinterpret_cast<HostFn>(dlsym(lib, driver.c_str()));
      }
      if (!variants[0])
        return "no host driver " + k.name + "_host";
      fns.push_back(variants);
    }
    return "";
  }
  std::vector<std::array<HostFn, 5>> fns;

private:
  void *lib = nullptr;
};

/// One rank: its GPU's memory laid out by the mapping, its entries run by
/// one thread per stream, its NCCL calls through the World.
class RankEmulator {
public:
  RankEmulator(const Plan &plan, const MultiProcessSchedule &ms, int32_t rank,
               const HostKernels &kernels, World &world)
      : plan(plan), ms(ms), rs(ms.ranks[rank]), rank(rank), kernels(kernels),
        world(world) {
    mem.assign(ms.global.mapping.gpuBytes[rank], 0);
    for (size_t d = 0; d < plan.devices.size(); ++d)
      if (ms.rankOf(static_cast<int32_t>(d)) == rank)
        for (const Buffer &b : plan.devices[d].buffers)
          if (!b.init.empty())
            std::memcpy(ptr({static_cast<int32_t>(d), b.offset}),
                        b.init.data(), b.bytes);
  }

  /// Feeds the step's batch into this rank's devices.
  std::string feed(int64_t step) {
    tofu::runtime::SyntheticData data(plan);
    for (size_t d = 0; d < plan.devices.size(); ++d) {
      if (ms.rankOf(static_cast<int32_t>(d)) != rank)
        continue;
      for (const Buffer &b : plan.devices[d].buffers) {
        const TensorInfo &t = plan.tensors[b.tensor];
        if (t.role != TensorRole::Input && t.role != TensorRole::Label)
          continue;
        if (std::string err = data.fill(
                b.tensor, b.region,
                step % tofu::runtime::SyntheticData::kNumBatches,
                ptr({static_cast<int32_t>(d), b.offset}));
            !err.empty())
          return err;
      }
    }
    world.resetDone(rank, rs.schedule.instrs.size());
    return "";
  }

  /// Starts one thread per stream that has entries.
  void start(int64_t step, std::vector<std::thread> &threads) {
    std::map<int32_t, std::vector<int32_t>> queues;
    const int32_t k = static_cast<int32_t>(plan.devices.size());
    for (size_t p = 0; p < rs.schedule.instrs.size(); ++p) {
      const ScheduledInstr &e = rs.schedule.instrs[p];
      queues[e.stream == StreamKind::Nccl
                 ? 2 * k
                 : e.device * 2 + static_cast<int32_t>(e.stream)]
          .push_back(static_cast<int32_t>(p));
    }
    for (auto &[stream, entries] : queues)
      threads.emplace_back([this, step, entries = entries] {
        for (int32_t p : entries) {
          const std::string who = "rank " + std::to_string(rank) + " entry " +
                                  std::to_string(p) + " (" +
                                  describeRankEntry(plan, ms, rank, p) + ")";
          if (!world.waitDone(rank, rs.schedule.instrs[p].waits,
                              who + " waiting on its events"))
            return;
          if (std::string err = run(rs.schedule.instrs[p], step, who);
              !err.empty()) {
            world.abort(err);
            return;
          }
          world.markDone(rank, p);
        }
      });
  }

  float loss() const { return lossSlot; }
  const uint8_t *buffer(int32_t d, int32_t b) {
    return ptr({d, plan.devices[d].buffers[b].offset});
  }

private:
  uint8_t *ptr(const DevicePointer &p) {
    const DevicePlacement &pl = ms.global.mapping.devices[p.device];
    if (pl.gpu != rank)
      throw std::runtime_error("rank " + std::to_string(rank) +
                               " touches device " + std::to_string(p.device) +
                               " of rank " + std::to_string(pl.gpu));
    return mem.data() + pl.base + p.offset;
  }

  std::string run(const ScheduledInstr &e, int64_t step,
                  const std::string &who) {
    try {
      for (const CudaOp &op : e.ops)
        if (std::string err = runOp(op, step, who); !err.empty())
          return err;
    } catch (const std::exception &ex) {
      return who + ": " + ex.what();
    }
    return "";
  }

  std::string runOp(const CudaOp &op, int64_t step, const std::string &who) {
    switch (op.kind) {
    case CudaOp::Kind::Kernel: {
      const CudaLaunch &l = plan.cuda.launches[op.launch];
      std::vector<void *> ptrs;
      for (int32_t b : l.buffers)
        ptrs.push_back(b < 0 ? nullptr
                             : ptr({l.device,
                                    plan.devices[l.device].buffers[b].offset}));
      unsigned long long error[12] = {0};
      // Rows on blocks, as the executor without TOFU_CUDA_WARP_ROWS=1.
      const KernelLaunchConfig config = kernelLaunchConfig(
          plan.cuda.kernels[l.kernel], l, kEmulatedMultiprocessors,
          /*warpRows=*/false,
          kernels.fns[l.kernel][static_cast<size_t>(
              KernelLaunchConfig::Variant::Grid)] != nullptr);
      auto fn = kernels.fns[l.kernel][static_cast<size_t>(config.variant)];
      if (!fn)
        return "no host driver " + plan.cuda.kernels[l.kernel].name +
               variantSuffix(config.variant) + "_host";
      fn(ptrs.data(), l.params.data(),
                            static_cast<uint64_t>(step), error);
      if (error[0])
        return who + ": kernel read outside its buffer";
      return "";
    }
    case CudaOp::Kind::Gemm:
      for (int64_t b = 0; b < op.batch; ++b) {
        const float *A =
            reinterpret_cast<const float *>(ptr(op.a)) + b * op.strideA;
        const float *B =
            reinterpret_cast<const float *>(ptr(op.b)) + b * op.strideB;
        float *C = reinterpret_cast<float *>(ptr(op.c)) + b * op.strideC;
        for (int64_t i = 0; i < op.m; ++i)
          for (int64_t j = 0; j < op.n; ++j) {
            double acc = 0;
            for (int64_t q = 0; q < op.k; ++q)
              acc += double(op.transA ? A[q * op.lda + i] : A[i * op.lda + q]) *
                     double(op.transB ? B[j * op.ldb + q] : B[q * op.ldb + j]);
            float &c = C[i * op.ldc + j];
            // cuBLASLt's epilogue: the bias, then the ReLU (CudaBlas.h).
            double v = op.alpha * acc + (op.beta != 0 ? op.beta * c : 0.0);
            if (op.bias.device >= 0)
              v += reinterpret_cast<const float *>(ptr(op.bias))[j];
            if (op.relu && v < 0)
              v = 0;
            c = static_cast<float>(v);
          }
      }
      return "";
    case CudaOp::Kind::GemmBias: {
      const float *c = reinterpret_cast<const float *>(ptr(op.c));
      float *y = reinterpret_cast<float *>(ptr(op.dst));
      for (int64_t i = 0; i < op.m; ++i)
        for (int64_t j = 0; j < op.n; ++j)
          y[i * op.n + j] = op.beta * c[i * op.cRowStride + j * op.cColStride];
      return "";
    }
    case CudaOp::Kind::Conv:
      return "the host emulator has no convolution";
    case CudaOp::Kind::Copy:
      std::memmove(ptr(op.dst), ptr(op.src), op.bytes);
      return "";
    case CudaOp::Kind::Zero:
      std::memset(ptr(op.dst), 0, op.bytes);
      return "";
    case CudaOp::Kind::BoxCopy:
    case CudaOp::Kind::BoxAdd: {
      const BoxMove &bm = op.box;
      int64_t n = 1;
      for (int r = 0; r < bm.rank; ++r)
        n *= bm.region[r];
      const uint8_t *src = ptr(op.src);
      uint8_t *dst = ptr(op.dst);
      for (int64_t el = 0; el < n; ++el) {
        int64_t rest = el, so = 0, dof = 0, ss = 1, ds = 1;
        for (int r = bm.rank - 1; r >= 0; --r) {
          int64_t c = rest % bm.region[r];
          rest /= bm.region[r];
          so += (bm.srcStart[r] + c) * ss;
          dof += (bm.dstStart[r] + c) * ds;
          ss *= bm.srcExtents[r];
          ds *= bm.dstExtents[r];
        }
        const uint8_t *sp = src + so * op.elementSize;
        uint8_t *dp = dst + dof * op.elementSize;
        if (op.kind == CudaOp::Kind::BoxCopy)
          std::memcpy(dp, sp, op.elementSize);
        else if (op.dtype == DType::F32)
          *reinterpret_cast<float *>(dp) +=
              *reinterpret_cast<const float *>(sp);
        else if (op.dtype == DType::I64)
          *reinterpret_cast<int64_t *>(dp) +=
              *reinterpret_cast<const int64_t *>(sp);
        else
          *dp = (*dp | *sp) ? 1 : 0;
      }
      return "";
    }
    case CudaOp::Kind::SaveLoss:
      std::memcpy(&lossSlot, ptr(op.src), sizeof(float));
      return "";
    case CudaOp::Kind::Send:
      return world.send(rank, op, ptr(op.src),
                        who + " in ncclSend to rank " +
                            std::to_string(op.peer) + " (transfer " +
                            std::to_string(op.transfer) + ")")
                 ? ""
                 : "aborted";
    case CudaOp::Kind::Recv:
      return world.recv(rank, op, ptr(op.dst),
                        who + " in ncclRecv from rank " +
                            std::to_string(op.peer) + " (transfer " +
                            std::to_string(op.transfer) + ")")
                 ? ""
                 : "aborted";
    case CudaOp::Kind::Pool:
    case CudaOp::Kind::BatchNorm:
      return "the multi-process host emulator has no cuDNN pooling or batch "
             "normalization";
    }
    return "unknown op";
  }

  const Plan &plan;
  const MultiProcessSchedule &ms;
  const RankSchedule &rs;
  int32_t rank;
  const HostKernels &kernels;
  World &world;
  std::vector<uint8_t> mem;
  float lossSlot = 0;
};

/// Runs `steps` steps of `ms` with W threads' ranks; returns the World's
/// error ("" when every step finished).
std::string runRanks(const Plan &plan, const MultiProcessSchedule &ms,
                     const std::string &tag, int steps,
                     std::chrono::milliseconds timeout,
                     std::vector<std::unique_ptr<RankEmulator>> &ranks,
                     std::vector<float> *losses = nullptr,
                     tofu::runtime::CpuExecutor *cpu = nullptr,
                     std::vector<double> *cpuLosses = nullptr) {
  static std::map<std::string, std::unique_ptr<HostKernels>> kernelsByTag;
  auto &kernels = kernelsByTag[tag];
  if (!kernels) {
    kernels = std::make_unique<HostKernels>();
    if (std::string err = kernels->load(plan, tag); !err.empty()) {
      kernels.reset();
      return err;
    }
  }
  World world(ms.worldSize, timeout);
  for (int32_t r = 0; r < ms.worldSize; ++r)
    ranks.push_back(
        std::make_unique<RankEmulator>(plan, ms, r, *kernels, world));
  for (int step = 0; step < steps; ++step) {
    for (auto &rank : ranks)
      if (std::string err = rank->feed(step); !err.empty())
        return err;
    std::vector<std::thread> threads;
    for (auto &rank : ranks)
      rank->start(step, threads);
    for (std::thread &t : threads)
      t.join();
    if (std::string err = world.error(); !err.empty())
      return "step " + std::to_string(step + 1) + ": " + err;
    if (losses)
      losses->push_back(ranks[0]->loss());
    if (cpu) {
      if (std::string err = cpu->runStep(step); !err.empty())
        return err;
      double want = 0;
      if (std::string err = cpu->lastLoss(want); !err.empty())
        return err;
      cpuLosses->push_back(want);
    }
  }
  return "";
}

void expectRanksMatchCpu(const std::string &name, int32_t W, int steps) {
  const Plan &plan = planNamed(name);
  if (plan.devices.empty())
    return;
  MultiProcessSchedule ms = scheduled(name, W);
  ASSERT_EQ(ms.ranks.size(), static_cast<size_t>(W));
  tofu::runtime::CpuExecutor cpu(plan);
  cpu.preferInterpreter(true);
  ASSERT_EQ(cpu.init(), "");
  ASSERT_EQ(cpu.watchLoss(), "");
  std::vector<std::unique_ptr<RankEmulator>> ranks;
  std::vector<float> losses;
  std::vector<double> want;
  ASSERT_EQ(runRanks(plan, ms, name, steps, std::chrono::seconds(120), ranks,
                     &losses, &cpu, &want),
            "")
      << name << " on " << W << " ranks";
  ASSERT_EQ(losses.size(), want.size());
  for (size_t s = 0; s < losses.size(); ++s)
    EXPECT_NEAR(losses[s], want[s], 1e-5 + 1e-4 * std::fabs(want[s]))
        << name << " on " << W << " ranks, step " << s + 1;
  size_t compared = 0;
  for (size_t d = 0; d < plan.devices.size(); ++d) {
    const auto &buffers = plan.devices[d].buffers;
    RankEmulator &owner = *ranks[ms.rankOf(static_cast<int32_t>(d))];
    for (size_t b = 0; b < buffers.size(); ++b) {
      const TensorInfo &t = plan.tensors[buffers[b].tensor];
      if (t.role != TensorRole::Param || !buffers[b].owned ||
          t.dtype != DType::F32)
        continue;
      const float *g = reinterpret_cast<const float *>(
          owner.buffer(static_cast<int32_t>(d), static_cast<int32_t>(b)));
      const float *c = reinterpret_cast<const float *>(
          cpu.bufferData(static_cast<int32_t>(d), static_cast<int32_t>(b)));
      for (size_t i = 0; i < buffers[b].bytes / 4; ++i)
        ASSERT_NEAR(g[i], c[i], 1e-5 + 1e-4 * std::fabs(c[i]))
            << name << " on " << W << " ranks: device " << d << " " << t.name
            << " element " << i;
      ++compared;
    }
  }
  EXPECT_GT(compared, 0u) << name;
}

TEST(CudaNcclOnHost, MlpOnTwoAndFourRanksMatchesTheCpuBackend) {
  expectRanksMatchCpu("mlp-8", 2, 3);
  expectRanksMatchCpu("mlp-8", 4, 3);
}

TEST(CudaNcclOnHost, GptOnTwoRanksMatchesTheCpuBackend) {
  expectRanksMatchCpu("gpt-8", 2, 2);
}

TEST(CudaNcclOnHost, AMisorderedScheduleDeadlocksAndTimesOut) {
  const Plan &plan = planNamed("mlp-8");
  if (plan.devices.empty())
    return;
  MultiProcessSchedule ms = scheduled("mlp-8", 2);
  std::string what;
  ASSERT_TRUE(makeDeadlock(ms, what));
  EXPECT_NE(validateMultiProcessSchedule(plan, ms).find("deadlock"),
            std::string::npos);
  std::vector<std::unique_ptr<RankEmulator>> ranks;
  std::string err = runRanks(plan, ms, "mlp-8", 1,
                             std::chrono::milliseconds(1500), ranks);
  EXPECT_NE(err.find("timed out"), std::string::npos) << what << ": " << err;
  EXPECT_NE(err.find("ncclSend"), std::string::npos) << err;
}

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--tofuc")
      tofuc = value;
    else if (flag == "--nvcc")
      nvcc = value;
    else if (flag == "--python")
      python = value;
    else if (flag == "--examples")
      examples = value;
    else if (flag == "--workdir")
      workdir = value;
    else if (flag == "--host-cxx")
      hostCxx = value;
    else {
      std::fprintf(stderr, "unknown argument %s\n", flag.c_str());
      return 2;
    }
  }
  if (tofuc.empty() || python.empty() || examples.empty() || workdir.empty() ||
      hostCxx.empty()) {
    std::fprintf(stderr, "usage: tofu-cuda-nccl-schedule-tests --tofuc T "
                         "--nvcc N --python P --examples DIR --workdir DIR "
                         "--host-cxx CXX\n");
    return 2;
  }
  if (nvcc.empty() || nvcc.find("NOTFOUND") != std::string::npos) {
    std::printf("SKIPPED: no nvcc; the plans need tofuc --cuda-arch\n");
    return 77;
  }
  // A previous run's host libraries may belong to other plans.
  std::filesystem::remove_all(workdir);
  compilePlans();
  return RUN_ALL_TESTS();
}
