//===- tofu-onnx-node-tests.cpp - ONNX backend node tests on tofu's CPU ---===//
//
//   tofu-onnx-node-tests [--data DIR] [--backend cpu|native-kernels|
//                        tdl-reference] [--filter SUBSTR] [--jobs N]
//                        [--timeout S] [--max-elements N] [--devices K]
//                        [--baseline FILE]
//                        [--write-passing FILE] [--report FILE] [--verbose]
//   tofu-onnx-node-tests --list-ops
//
// Runs every ONNX backend node test (DIR/test_*/): onnx 1.12's from the
// Debian package (the default DIR) or a newer onnx wheel's
// (onnx/backend/test/data/node; scripts/setup.sh unpacks onnx 1.17's). A
// graph of one node with a TDL spec runs on its own: instantiate the spec on
// the test's inputs, compute each output with the chosen backend on whole
// tensors (k = 1). Any other graph (the `*_expanded` function expansions,
// Gradient graphs, a single node that only the importer takes, such as
// Shape) is compiled by tofuc's pipeline into a forward plan for k = 1 and
// run on the CPU runtime (RunGraphTest.cpp). Each output is compared with
// the expected output (rtol 1e-3, atol 1e-7; exact for integers and bools).
// Each test runs in a forked child, so a crash or a hang fails that test
// only. Prints failures, the sorted passing tests, skip reasons by category
// (with the ops behind "no TDL spec" and "random outputs") and a summary
// line.
//
// With --baseline (cpu backend only), exits 1 when a test listed in FILE (and
// selected by --filter) does not pass or fewer tests pass than that; newly passing tests are
// printed so that FILE can be updated. --list-ops prints, for every op with a
// TDL spec or a CPU kernel: op, spec (yes/no), gradient rule (yes/no), CPU
// kernel (native/interpreted/none), tab-separated.
//
//===----------------------------------------------------------------------===//
#include "NodeTest.h"
#include "RunNodeTest.h"

#include "tofu/runtime/Kernels.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <thread>

using namespace tofu::nodetest;
namespace cl = llvm::cl;

static cl::opt<std::string>
    dataDir("data", cl::desc("Directory of node tests (test_*/model.onnx)"),
            cl::init("/usr/share/libonnx-testdata/data/node"));
static cl::opt<std::string> backendOpt(
    "backend",
    cl::desc("cpu (the runtime's compute entry point; the only mode that "
             "counts), native-kernels or tdl-reference (placeholders)"),
    cl::init("cpu"));
static cl::opt<std::string>
    filter("filter", cl::desc("Run only tests whose name contains this"));
static cl::opt<unsigned> jobs("jobs", cl::desc("Tests run in parallel"),
                              cl::init(0));
static cl::opt<double> timeoutSeconds("timeout",
                                      cl::desc("Seconds per test"),
                                      cl::init(20));
static cl::opt<int64_t>
    maxElements("max-elements",
                cl::desc("Skip tests with more input+output elements"),
                cl::init(1 << 20));
static cl::opt<int64_t> devices(
    "devices",
    cl::desc("k of the plans that graph tests (several nodes) compile and "
             "run on k virtual CPU devices (default 1)"),
    cl::init(1));
static cl::opt<std::string>
    baseline("baseline", cl::desc("Tests that must pass (one name a line)"));
static cl::opt<std::string>
    writePassing("write-passing", cl::desc("Write the passing tests here"));
static cl::opt<std::string>
    report("report", cl::desc("Write name, op, status, how, detail (TSV)"));
static cl::opt<bool> verbose("verbose", cl::desc("Print skipped tests too"));
static cl::opt<bool> noFork("no-fork",
                            cl::desc("Run tests in this process (debugging)"));
static cl::opt<bool> listOps("list-ops",
                             cl::desc("List ops: spec, gradient, CPU kernel"));

/// One line per result: fields separated by tabs (tabs and newlines inside a
/// field become spaces).
static std::string clean(std::string s) {
  for (char &c : s)
    if (c == '\t' || c == '\n' || c == '\r')
      c = ' ';
  return s;
}

static std::string serialize(const TestResult &r) {
  return clean(r.name) + "\t" + clean(r.opType) + "\t" + statusName(r.status) +
         "\t" + clean(r.how) + "\t" + clean(r.detail) + "\n";
}

static bool deserialize(llvm::StringRef line, TestResult &r) {
  llvm::SmallVector<llvm::StringRef> f;
  line.trim("\n").split(f, '\t');
  if (f.size() != 5)
    return false;
  r.name = f[0].str();
  r.opType = f[1].str();
  r.status = f[2] == "PASS"   ? TestResult::Status::Pass
             : f[2] == "FAIL" ? TestResult::Status::Fail
                              : TestResult::Status::Skip;
  r.how = f[3].str();
  r.detail = f[4].str();
  return true;
}

/// The test directories under `dir` matching --filter, sorted.
static std::vector<std::string> findTests(const std::string &dir) {
  std::vector<std::string> tests;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec)) {
    std::string name = llvm::sys::path::filename(it->path()).str();
    if (!llvm::sys::fs::exists(it->path() + "/model.onnx"))
      continue;
    if (!filter.empty() && name.find(filter) == std::string::npos)
      continue;
    tests.push_back(it->path());
  }
  std::sort(tests.begin(), tests.end());
  return tests;
}

/// Runs every test in a forked child, at most `parallel` at a time; a child
/// that crashes or exceeds the timeout fails its test.
static std::vector<TestResult> runAll(const std::vector<std::string> &tests,
                                      const RunOptions &options,
                                      unsigned parallel) {
  std::vector<TestResult> results(tests.size());
  if (noFork) {
    for (size_t i = 0; i < tests.size(); ++i)
      results[i] = runNodeTest(tests[i], options);
    return results;
  }
  struct Child {
    pid_t pid;
    int fd;
    size_t index;
    std::string output;
    std::chrono::steady_clock::time_point start;
  };
  std::vector<Child> running;
  size_t next = 0;
  auto finish = [&](Child &c, bool timedOut) {
    int status = 0;
    if (timedOut)
      kill(c.pid, SIGKILL);
    waitpid(c.pid, &status, 0);
    close(c.fd);
    TestResult &r = results[c.index];
    r.name = llvm::sys::path::filename(tests[c.index]).str();
    if (timedOut) {
      r.status = TestResult::Status::Fail;
      r.detail = "timed out after " + std::to_string(timeoutSeconds) + " s";
    } else if (!deserialize(c.output, r)) {
      r.status = TestResult::Status::Fail;
      r.detail = WIFSIGNALED(status)
                     ? std::string("crashed: ") + strsignal(WTERMSIG(status))
                     : "exited with status " +
                           std::to_string(WEXITSTATUS(status)) +
                           " without a result";
    }
    if (r.opType.empty() && r.status == TestResult::Status::Fail)
      r.opType = singleNodeOpType(tests[c.index]);
  };
  while (next < tests.size() || !running.empty()) {
    while (next < tests.size() && running.size() < parallel) {
      int fds[2];
      if (pipe(fds) != 0) {
        perror("pipe");
        exit(2);
      }
      llvm::outs().flush();
      llvm::errs().flush();
      pid_t pid = fork();
      if (pid < 0) {
        perror("fork");
        exit(2);
      }
      if (pid == 0) {
        close(fds[0]);
        std::string line = serialize(runNodeTest(tests[next], options));
        const char *p = line.data();
        size_t left = line.size();
        while (left > 0) {
          ssize_t n = write(fds[1], p, left);
          if (n <= 0)
            break;
          p += n;
          left -= n;
        }
        _exit(0);
      }
      close(fds[1]);
      running.push_back(
          {pid, fds[0], next++, "", std::chrono::steady_clock::now()});
    }
    std::vector<pollfd> polls;
    for (const Child &c : running)
      polls.push_back({c.fd, POLLIN, 0});
    poll(polls.data(), polls.size(), 100);
    for (size_t i = running.size(); i-- > 0;) {
      Child &c = running[i];
      bool done = false;
      if (polls[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        char buf[4096];
        ssize_t n = read(c.fd, buf, sizeof buf);
        if (n > 0)
          c.output.append(buf, n);
        else
          done = true;
      }
      double elapsed = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - c.start)
                           .count();
      bool timedOut = !done && elapsed > timeoutSeconds;
      if (done || timedOut) {
        finish(c, timedOut);
        running.erase(running.begin() + i);
      }
    }
  }
  return results;
}

static int printOps() {
  const auto &library = tofu::tdl::SpecLibrary::builtin();
  std::set<std::string> ops;
  for (const std::string &name : library.opNames())
    ops.insert(name);
  for (const std::string &name : tofu::runtime::registeredKernels())
    ops.insert(name);
  for (const std::string &name : ops)
    llvm::outs() << name << "\t" << (library.lookup(name) ? "yes" : "no")
                 << "\t" << (library.lookupGrad(name) ? "yes" : "no") << "\t"
                 << cpuKernelKind(name) << "\n";
  return 0;
}

static bool readLines(const std::string &path, std::vector<std::string> &out) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return false;
  llvm::SmallVector<llvm::StringRef> lines;
  (*buffer)->getBuffer().split(lines, '\n');
  for (llvm::StringRef line : lines) {
    line = line.trim();
    if (!line.empty() && !line.starts_with("#"))
      out.push_back(line.str());
  }
  return true;
}

static bool writeFile(const std::string &path, const std::string &text) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec) {
    llvm::errs() << "error: cannot write " << path << ": " << ec.message()
                 << "\n";
    return false;
  }
  os << text;
  return true;
}

int main(int argc, char **argv) {
  cl::ParseCommandLineOptions(argc, argv,
                              "ONNX backend node tests on tofu's CPU backend\n");
  // Parse the specs and fill the kernel registry once, before forking.
  (void)tofu::tdl::SpecLibrary::builtin();
  (void)tofu::runtime::registeredKernels();
  if (listOps)
    return printOps();

  RunOptions options;
  if (backendOpt == "cpu")
    options.backend = Backend::Cpu;
  else if (backendOpt == "native-kernels")
    options.backend = Backend::NativeKernels;
  else if (backendOpt == "tdl-reference")
    options.backend = Backend::TdlReference;
  else {
    llvm::errs() << "error: unknown --backend '" << backendOpt
                 << "' (cpu, native-kernels, tdl-reference)\n";
    return 2;
  }
  options.maxElements = maxElements;
  if (devices < 1) {
    llvm::errs() << "error: --devices must be at least 1\n";
    return 2;
  }
  options.devices = devices;
  if (!baseline.empty() && options.backend != Backend::Cpu) {
    llvm::errs() << "error: --baseline counts CPU-backend passes only; the "
                 << backendOpt << " mode is a placeholder\n";
    return 2;
  }
  std::vector<std::string> tests = findTests(dataDir);
  if (tests.empty()) {
    llvm::errs() << "error: no node tests (test_*/model.onnx) under "
                 << dataDir << "\n";
    return 2;
  }
  unsigned parallel = jobs ? jobs : std::max(1u, std::thread::hardware_concurrency());
  auto start = std::chrono::steady_clock::now();
  std::vector<TestResult> results = runAll(tests, options, parallel);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();

  std::vector<std::string> passing;
  std::map<std::string, int> skipCounts;
  std::map<std::string, std::map<std::string, int>> skipOps;
  size_t failed = 0, skipped = 0;
  std::string reportText;
  for (const TestResult &r : results) {
    reportText += serialize(r);
    switch (r.status) {
    case TestResult::Status::Pass:
      passing.push_back(r.name);
      break;
    case TestResult::Status::Fail:
      ++failed;
      llvm::outs() << "FAIL " << r.name << " ("
                   << (r.opType.empty() ? "graph" : r.opType) << "): "
                   << r.detail << "\n";
      break;
    case TestResult::Status::Skip:
      ++skipped;
      ++skipCounts[skipCategory(r.detail)];
      if (std::string op = skippedOp(r.detail); !op.empty())
        ++skipOps[skipCategory(r.detail)][op];
      if (verbose)
        llvm::outs() << "SKIP " << r.name << ": " << r.detail << "\n";
      break;
    }
  }
  std::sort(passing.begin(), passing.end());
  llvm::outs() << "passing (" << passing.size() << "):\n";
  for (const std::string &name : passing)
    llvm::outs() << "  " << name << "\n";
  llvm::outs() << "skipped by reason:\n";
  for (const auto &[category, count] : skipCounts) {
    llvm::outs() << "  " << count << "  " << category << "\n";
    // The ops behind "no TDL spec" and "random outputs", most tests first.
    auto ops = skipOps.find(category);
    if (ops == skipOps.end())
      continue;
    std::vector<std::pair<int, std::string>> byCount;
    for (const auto &[op, n] : ops->second)
      byCount.push_back({-n, op});
    std::sort(byCount.begin(), byCount.end());
    std::string line;
    for (const auto &[n, op] : byCount) {
      std::string item = op + " " + std::to_string(-n);
      if (line.size() + item.size() > 72) {
        llvm::outs() << "      " << line << "\n";
        line.clear();
      }
      line += (line.empty() ? "" : ", ") + item;
    }
    if (!line.empty())
      llvm::outs() << "      " << line << "\n";
  }
  if (!report.empty() && !writeFile(report, reportText))
    return 2;
  if (!writePassing.empty() &&
      !writeFile(writePassing,
                 "# ONNX backend node tests that pass on the CPU backend, of "
                 "the data set this\n# file is the baseline of "
                 "(test/onnx-node/CMakeLists.txt). Its ctest test fails\n# "
                 "when one stops passing. Regenerate when more pass:\n#   "
                 "tofu-onnx-node-tests --data <dir> --write-passing <this "
                 "file>\n" +
                     llvm::join(passing, "\n") + "\n"))
    return 2;

  int rc = 0;
  if (!baseline.empty()) {
    std::vector<std::string> expected;
    if (!readLines(baseline, expected)) {
      llvm::errs() << "error: cannot read baseline " << baseline << "\n";
      return 2;
    }
    // With --filter, the baseline's tests that the filter selects.
    if (!filter.empty())
      llvm::erase_if(expected, [](const std::string &name) {
        return name.find(filter) == std::string::npos;
      });
    std::set<std::string> passSet(passing.begin(), passing.end());
    std::set<std::string> baseSet(expected.begin(), expected.end());
    std::map<std::string, const TestResult *> byName;
    for (const TestResult &r : results)
      byName[r.name] = &r;
    for (const std::string &name : expected) {
      if (passSet.count(name))
        continue;
      auto it = byName.find(name);
      llvm::outs() << "REGRESSION " << name << ": "
                   << (it == byName.end()
                           ? std::string("not found")
                           : std::string(statusName(it->second->status)) +
                                 ": " + it->second->detail)
                   << "\n";
      rc = 1;
    }
    size_t newly = 0;
    for (const std::string &name : passing)
      if (!baseSet.count(name)) {
        llvm::outs() << "NEW PASS " << name << "\n";
        ++newly;
      }
    if (newly)
      llvm::outs() << newly << " tests pass that " << baseline
                   << " does not list: add them (--write-passing)\n";
    if (passing.size() < expected.size()) {
      llvm::outs() << "error: " << passing.size() << " tests pass, fewer than "
                   << expected.size() << " listed in " << baseline << "\n";
      rc = 1;
    }
  }
  llvm::outs() << "onnx node tests (backend " << backendOpt
               << (devices > 1 ? ", graph plans on " + std::to_string(devices) +
                                     " devices"
                               : std::string())
               << "): " << results.size() << " tests, " << passing.size()
               << " passed, " << failed << " failed, " << skipped
               << " skipped";
  if (options.backend != Backend::Cpu)
    llvm::outs() << " [placeholder mode: not CPU-backend passes]";
  llvm::outs() << " in " << llvm::format("%.1f", seconds) << " s\n";
  return rc;
}
