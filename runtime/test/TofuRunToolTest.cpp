//===- TofuRunToolTest.cpp - tofu-run end to end on a hand-built plan -----===//
//
// Writes the two-device test plan (with a real ONNX model holding the
// parameter "w") and runs the tofu-run binary on it: report, --save, --dump,
// --dump-plan, and the error paths (exit code 1, "tofu-run: error: ").
//
//===----------------------------------------------------------------------===//

#include "TestPlans.h"
#include "tofu/runtime/CpuBackend.h"
#include "tofu/runtime/NpyWriter.h"
#include "tofu/runtime/SyntheticData.h"

#include "onnx/onnx_pb.h"

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

using namespace tofu::plan;
using namespace tofu::runtime;
using namespace tofu::test;

namespace {

const float kW0[4] = {0.25f, -0.5f, 1.0f, 2.0f};

std::vector<uint8_t> modelBytes() {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  onnx::GraphProto *g = model.mutable_graph();
  g->set_name("test");
  onnx::TensorProto *w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(4);
  for (float v : kW0)
    w->add_float_data(v);
  onnx::NodeProto *n = g->add_node();
  n->set_op_type("Identity");
  n->add_input("w");
  n->add_output("out");
  std::string s;
  EXPECT_TRUE(model.SerializeToString(&s));
  return std::vector<uint8_t>(s.begin(), s.end());
}

struct Result {
  int code = -1;
  std::string out, err;
};

std::string slurp(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result runTool(const std::string &args) {
  std::string dir = ::testing::TempDir();
  std::string cmd = std::string(TOFU_RUN_PATH) + " " + args + " >" + dir +
                    "tool.out 2>" + dir + "tool.err";
  int status = std::system(cmd.c_str());
  Result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(dir + "tool.out");
  r.err = slurp(dir + "tool.err");
  return r;
}

class TofuRun : public ::testing::Test {
protected:
  void SetUp() override {
    dir = ::testing::TempDir() + "tofu-run-test/";
    std::system(("rm -rf " + dir + " && mkdir -p " + dir).c_str());
    plan = makeTwoDevicePlan();
    plan.onnxModel = modelBytes();
    ASSERT_EQ(writePlan(plan, dir + "plan.bin"), "");
  }
  std::string dir;
  Plan plan;
};

TEST_F(TofuRun, TrainsAndReports) {
  Result r = runTool(dir + "plan.bin --steps 3 --report " + dir + "r.json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("devices 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("step 3  loss "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("samples/s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("comm bytes per step: planned 88  measured 88"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.err, "");
  std::string json = slurp(dir + "r.json");
  EXPECT_NE(json.find("\"devices\": 2"), std::string::npos) << json;
  EXPECT_NE(json.find("\"backend\": \"cpu\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"comm_bytes\": {\"planned\": 88, \"measured\": 88"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"peak_bytes\": [{\"device\": 0, \"planned\": "),
            std::string::npos)
      << json;
  // Per device: planned peak memory and bytes received are the plan's, and
  // the measured ones are what the executor saw (every arena byte of this
  // plan is used; every planned byte is moved).
  for (int d = 0; d < 2; ++d) {
    std::string dev = "{\"device\": " + std::to_string(d) + ", ";
    std::string peak = std::to_string(plan.devices[d].peakBytes);
    std::string comm = std::to_string(plan.devices[d].commBytes);
    ASSERT_GT(plan.devices[d].peakBytes, 0u);
    ASSERT_GT(plan.devices[d].commBytes, 0u);
    EXPECT_NE(json.find(dev + "\"planned\": " + peak + ", \"measured\": " +
                        peak + "}"),
              std::string::npos)
        << json;
    EXPECT_NE(json.find(dev + "\"planned\": " + comm + ", \"measured\": " +
                        comm + "}"),
              std::string::npos)
        << json;
  }
}

TEST_F(TofuRun, InterpreterKernelsGiveTheSameLosses) {
  // A Relu that carries a program (native kernel registered too) and a
  // program-only column sum: both --kernels modes print the same losses.
  Plan withPrograms = withProgramsOnly(makeTwoDevicePlan());
  for (DeviceProgram &dev : withPrograms.devices)
    for (Instr &in : dev.instrs)
      if (in.kernel == "ReluByProgram")
        in.kernel = "Relu";
  ASSERT_EQ(writePlan(withPrograms, dir + "programs.bin"), "");
  Result native = runTool(dir + "programs.bin --steps 3");
  Result interp = runTool(dir + "programs.bin --steps 3 --kernels interpreter");
  ASSERT_EQ(native.code, 0) << native.err;
  ASSERT_EQ(interp.code, 0) << interp.err;
  auto losses = [](const std::string &out) {
    std::string l;
    for (size_t p = out.find("loss "); p != std::string::npos;
         p = out.find("loss ", p + 1))
      l += out.substr(p, 14) + ";";
    return l;
  };
  EXPECT_EQ(losses(native.out), losses(interp.out));
  EXPECT_NE(losses(native.out), "");
  Result bad = runTool(dir + "programs.bin --kernels fast");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("--kernels expects native or interpreter"),
            std::string::npos)
      << bad.err;
}

TEST_F(TofuRun, SavesTrainedWeights) {
  Result r = runTool(dir + "plan.bin --steps 4 --quiet --save " + dir +
                     "trained.onnx");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  // The same training in-process.
  CpuExecutor exec(plan);
  ASSERT_EQ(exec.init(), "");
  for (int s = 0; s < 4; ++s)
    ASSERT_EQ(exec.runStep(s), "");
  std::vector<float> want(4);
  std::memcpy(want.data(), exec.bufferData(0, kBufW), 8);
  std::memcpy(want.data() + 2, exec.bufferData(1, kBufW), 8);

  onnx::ModelProto model;
  std::string bytes = slurp(dir + "trained.onnx");
  ASSERT_TRUE(model.ParseFromString(bytes));
  ASSERT_EQ(model.graph().initializer_size(), 1);
  const onnx::TensorProto &w = model.graph().initializer(0);
  EXPECT_EQ(w.float_data_size(), 0);
  ASSERT_EQ(w.raw_data().size(), 16u);
  std::vector<float> got(4);
  std::memcpy(got.data(), w.raw_data().data(), 16);
  EXPECT_EQ(got, want);
  EXPECT_NE(got[0], kW0[0]);
  EXPECT_EQ(model.graph().node_size(), 1);
}

TEST_F(TofuRun, DumpsNpyFiles) {
  Result r = runTool(dir + "plan.bin --steps 2 --quiet --dump " + dir + "d");
  ASSERT_EQ(r.code, 0) << r.err;
  std::string param = slurp(dir + "d/param.w.npy");
  std::string header = npyHeader(DType::F32, {4});
  ASSERT_EQ(param.size(), header.size() + 16);
  EXPECT_EQ(param.substr(0, header.size()), header);
  EXPECT_EQ(header.size() % 64, 0u);
  EXPECT_NE(header.find("{'descr': '<f4', 'fortran_order': False, 'shape': "
                        "(4,), }"),
            std::string::npos);
  EXPECT_EQ(std::memcmp(param.data() + header.size(), kW0, 16), 0);
  EXPECT_EQ(slurp(dir + "d/input.X.npy").size(),
            npyHeader(DType::F32, {4, 4}).size() + 64);
  std::string labels = slurp(dir + "d/input.L.npy");
  EXPECT_NE(labels.find("'<i8'"), std::string::npos);
  EXPECT_EQ(labels.size(), npyHeader(DType::I64, {4}).size() + 32);
  // grad.w is step 1's column sums of relu(X).
  std::string grad = slurp(dir + "d/grad.w.npy");
  ASSERT_EQ(grad.size(), header.size() + 16);
  CpuExecutor exec(plan);
  ASSERT_EQ(exec.init(), "");
  exec.watch(0, kBufP);
  exec.watch(1, kBufP);
  ASSERT_EQ(exec.runStep(0), "");
  EXPECT_EQ(std::memcmp(grad.data() + header.size(),
                        exec.snapshot(0, kBufP)->data(), 8),
            0);
  EXPECT_EQ(std::memcmp(grad.data() + header.size() + 8,
                        exec.snapshot(1, kBufP)->data(), 8),
            0);
}

/// The lines of `text` that contain every one of `needles`.
std::vector<std::string> linesWith(const std::string &text,
                                   const std::vector<std::string> &needles) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    bool all = true;
    for (const std::string &n : needles)
      all &= line.find(n) != std::string::npos;
    if (all)
      lines.push_back(line);
  }
  return lines;
}

/// The integer after `"key": ` in `line`, or -1.
int64_t intField(const std::string &line, const std::string &key) {
  size_t p = line.find("\"" + key + "\": ");
  if (p == std::string::npos)
    return -1;
  return std::strtoll(line.c_str() + p + key.size() + 4, nullptr, 10);
}

TEST_F(TofuRun, TraceHasOneEventPerInstructionAndTheMeasuredBytes) {
  const int kSteps = 3;
  Result r = runTool(dir + "plan.bin --quiet --steps " +
                     std::to_string(kSteps) + " --report " + dir +
                     "r.json --trace " + dir + "trace.json");
  ASSERT_EQ(r.code, 0) << r.err;
  std::string trace = slurp(dir + "trace.json");
  ASSERT_EQ(trace.rfind("{\"displayTimeUnit\": \"ms\", \"traceEvents\": [", 0),
            0u)
      << trace;
  // (The e2e test trace_timeline parses a real model's trace as JSON.)
  for (int d = 0; d < 2; ++d) {
    std::string pid = "\"pid\": " + std::to_string(d) + ",";
    EXPECT_EQ(linesWith(trace, {"\"process_name\"", pid,
                                "{\"name\": \"device " + std::to_string(d)})
                  .size(),
              1u);
    EXPECT_EQ(linesWith(trace, {"\"thread_name\"", pid, "\"tid\": 0",
                                "{\"name\": \"compute\"}"})
                  .size(),
              1u);
    EXPECT_EQ(linesWith(trace, {"\"thread_name\"", pid, "\"tid\": 1",
                                "{\"name\": \"communication\"}"})
                  .size(),
              1u);
    // One compute event per Compute instruction of the device per step, on
    // the compute track, named by kernel.
    size_t computes = 0, comms = 0;
    for (const Instr &in : plan.devices[d].instrs)
      (in.kind == Instr::Kind::Compute ? computes : comms)++;
    ASSERT_GT(computes, 0u);
    ASSERT_GT(comms, 0u);
    for (int s = 1; s <= kSteps; ++s) {
      std::string step = "\"step\": " + std::to_string(s) + ",";
      EXPECT_EQ(linesWith(trace, {"\"cat\": \"compute\"", "\"ph\": \"X\"",
                                  pid, "\"tid\": 0,", step})
                    .size(),
                computes)
          << "device " << d << " step " << s << "\n" << trace;
      EXPECT_EQ(linesWith(trace, {"\"ph\": \"X\"", pid, "\"tid\": 1,", step,
                                  "\"bytes\": "})
                    .size(),
                comms)
          << "device " << d << " step " << s;
    }
  }
  EXPECT_EQ(linesWith(trace, {"\"name\": \"Relu", "\"cat\": \"compute\""})
                .size(),
            2u * kSteps);
  // Bytes received, summed over the trace, equal the report's measured bytes
  // and the plan's (per step and on device 0).
  int64_t traced = 0, traced0 = 0;
  for (const std::string &line : linesWith(trace, {"\"bytes\": "})) {
    traced += intField(line, "bytes");
    if (line.find("\"pid\": 0,") != std::string::npos)
      traced0 += intField(line, "bytes");
  }
  std::string json = slurp(dir + "r.json");
  int64_t reported = 0;
  for (const std::string &line : linesWith(json, {"\"loss\": "}))
    reported += intField(line, "comm_bytes");
  EXPECT_EQ(traced, reported);
  ASSERT_GT(plan.commBytes, 0u);
  EXPECT_EQ(traced, static_cast<int64_t>(plan.commBytes) * kSteps);
  EXPECT_EQ(traced0, static_cast<int64_t>(plan.devices[0].commBytes) * kSteps);
}

TEST_F(TofuRun, TraceToAnUnwritablePathFails) {
  Result r = runTool(dir + "plan.bin --steps 1 --trace " + dir +
                     "no/such/dir/trace.json");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("tofu-run: error: --trace: "), std::string::npos)
      << r.err;
}

/// The "loss ..." fields of tofu-run's step lines.
std::string lossesOf(const std::string &out) {
  std::string l;
  for (size_t p = out.find("loss "); p != std::string::npos;
       p = out.find("loss ", p + 1))
    l += out.substr(p, 14) + ";";
  return l;
}

/// The whole of tensor `t` of synthetic batch `batch`, as tofu-run would
/// feed it.
std::vector<uint8_t> syntheticTensor(const Plan &plan, int32_t t,
                                     int64_t batch) {
  const TensorInfo &info = plan.tensors[t];
  Box all;
  all.lo.assign(info.shape.size(), 0);
  all.hi = info.shape;
  std::vector<uint8_t> bytes(all.numElements() * dtypeSize(info.dtype));
  SyntheticData data(plan);
  EXPECT_EQ(data.fill(t, all, batch, bytes.data()), "");
  return bytes;
}

/// Writes synthetic batches `batches` as DIR/batch_<i>/{X,L}.npy.
void writeBatches(const Plan &plan, const std::string &dir,
                  const std::vector<int64_t> &batches) {
  std::system(("rm -rf " + dir).c_str());
  for (size_t i = 0; i < batches.size(); ++i) {
    std::string b = dir + "/batch_" + std::to_string(i);
    std::system(("mkdir -p " + b).c_str());
    for (int32_t t : {kX, kL})
      ASSERT_EQ(writeNpy(b + "/" + plan.tensors[t].name + ".npy",
                         plan.tensors[t].dtype, plan.tensors[t].shape,
                         syntheticTensor(plan, t, batches[i])),
                "");
  }
}

TEST_F(TofuRun, DataFromNpyGivesTheSyntheticLosses) {
  Result synthetic = runTool(dir + "plan.bin --steps 3");
  ASSERT_EQ(synthetic.code, 0) << synthetic.err;
  writeBatches(plan, dir + "data", {0, 1, 2});
  Result fed = runTool(dir + "plan.bin --steps 3 --data " + dir + "data");
  ASSERT_EQ(fed.code, 0) << fed.err;
  EXPECT_NE(fed.out.find("data: 3 batches from "), std::string::npos)
      << fed.out;
  EXPECT_NE(lossesOf(synthetic.out), "");
  EXPECT_EQ(lossesOf(fed.out), lossesOf(synthetic.out));

  // Two batches cycle: steps 1, 2, 3 see batches 0, 1, 0 -- the same as
  // three folders holding synthetic batches 0, 1, 0.
  writeBatches(plan, dir + "two", {0, 1});
  writeBatches(plan, dir + "cycled", {0, 1, 0});
  Result two = runTool(dir + "plan.bin --steps 3 --data " + dir + "two");
  Result cycled = runTool(dir + "plan.bin --steps 3 --data " + dir + "cycled");
  ASSERT_EQ(two.code, 0) << two.err;
  ASSERT_EQ(cycled.code, 0) << cycled.err;
  EXPECT_EQ(lossesOf(two.out), lossesOf(cycled.out));
  EXPECT_NE(lossesOf(two.out), lossesOf(synthetic.out));

  // The data is really read: other values give other losses.
  writeBatches(plan, dir + "other", {5, 6, 7});
  Result other = runTool(dir + "plan.bin --steps 3 --data " + dir + "other");
  ASSERT_EQ(other.code, 0) << other.err;
  EXPECT_NE(lossesOf(other.out), lossesOf(synthetic.out));
}

TEST_F(TofuRun, BadDataGivesClearErrors) {
  auto expectError = [&](const std::string &data,
                         const std::vector<std::string> &parts,
                         const std::string &prefix =
                             "tofu-run: error: --data: ") {
    Result r = runTool(dir + "plan.bin --steps 2 --data " + data);
    EXPECT_EQ(r.code, 1) << data;
    EXPECT_EQ(r.err.rfind(prefix, 0), 0u) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
    for (const std::string &p : parts)
      EXPECT_NE(r.err.find(p), std::string::npos) << p << " in " << r.err;
  };
  std::string d = dir + "bad";
  std::string x = d + "/batch_0/X.npy", l = d + "/batch_0/L.npy";
  expectError(dir + "absent", {"is not a directory"});
  std::system(("mkdir -p " + dir + "empty").c_str());
  expectError(dir + "empty", {"has no batch_0 folder", "batch_<i>/<input>.npy"});

  writeBatches(plan, d, {0});
  std::remove(l.c_str());
  expectError(d, {"missing file '" + l + "'", "input 'L'", "(4,)", "<i8"});

  writeBatches(plan, d, {0});
  ASSERT_EQ(writeNpy(x, DType::F32, {4, 2}, std::vector<uint8_t>(32)), "");
  expectError(d, {"'" + x + "' has shape (4, 2), expected (4, 4)",
                  "input 'X'"});

  writeBatches(plan, d, {0});
  ASSERT_EQ(writeNpy(x, DType::I64, {4, 4}, std::vector<uint8_t>(128)), "");
  expectError(d, {"'" + x + "' has dtype '<i8', expected '<f4'", "input 'X'"});

  writeBatches(plan, d, {0});
  std::ofstream(x, std::ios::binary | std::ios::trunc) << "PK\x03\x04 zip";
  expectError(d, {"'" + x + "' is not a .npy file"});

  writeBatches(plan, d, {0});
  {
    std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': "
                       "(4, four), }";
    std::string h = std::string("\x93NUMPY\x01\x00", 8);
    h += static_cast<char>(dict.size());
    h += '\0';
    std::ofstream(x, std::ios::binary | std::ios::trunc)
        << h << dict << std::string(64, '\0');
  }
  expectError(d, {"corrupt .npy header in '" + x + "'", "bad 'shape'"});

  writeBatches(plan, d, {0});
  {
    std::string bytes = slurp(x);
    std::ofstream(x, std::ios::binary | std::ios::trunc)
        << bytes.substr(0, bytes.size() - 4);
  }
  expectError(d, {"'" + x + "' is ", "expected", "truncated or corrupt"});

  // A second batch that is wrong is caught before training starts.
  writeBatches(plan, d, {0, 1});
  ASSERT_EQ(writeNpy(d + "/batch_1/X.npy", DType::F32, {3, 4},
                     std::vector<uint8_t>(48)),
            "");
  expectError(d, {"batch_1/X.npy' has shape (3, 4)"});

  // Labels outside [0, classes): found when the step reads the batch.
  writeBatches(plan, d, {0});
  std::vector<uint8_t> labels(32, 0);
  labels[8] = 9; // row 1 = 9, with 4 classes
  ASSERT_EQ(writeNpy(l, DType::I64, {4}, labels), "");
  expectError(d,
              {"--data: '" + l + "': label 9 at index 1 is outside [0, 4)"},
              "tofu-run: error: step 1: ");
}

TEST_F(TofuRun, ResumeContinuesTrainingExactly) {
  // 4 steps straight and 2 + --save + --resume 2 write byte-identical models
  // (same weights, same state file name, which is the state's checksum).
  std::system(("mkdir -p " + dir + "a " + dir + "b " + dir + "c").c_str());
  Result r = runTool(dir + "plan.bin --steps 4 --quiet --save " + dir +
                     "a/m.onnx");
  ASSERT_EQ(r.code, 0) << r.err;
  r = runTool(dir + "plan.bin --steps 2 --quiet --save " + dir + "b/m.onnx");
  ASSERT_EQ(r.code, 0) << r.err;
  r = runTool(dir + "plan.bin --steps 2 --resume " + dir + "b/m.onnx --save " +
              dir + "c/m.onnx");
  ASSERT_EQ(r.code, 0) << r.err;
  // Resumed steps are numbered on from the checkpoint.
  EXPECT_NE(r.out.find("step 3  loss "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("step 4  loss "), std::string::npos) << r.out;
  std::string straight = slurp(dir + "a/m.onnx");
  ASSERT_FALSE(straight.empty());
  EXPECT_EQ(slurp(dir + "c/m.onnx"), straight);
  EXPECT_NE(slurp(dir + "b/m.onnx"), straight);
  onnx::ModelProto model;
  ASSERT_TRUE(model.ParseFromString(straight));
  std::map<std::string, std::string> meta;
  for (const auto &e : model.metadata_props())
    meta[e.key()] = e.value();
  EXPECT_EQ(meta["tofu.training_step"], "4");
  ASSERT_EQ(meta["tofu.training_state"].rfind("m.onnx.tofu-state-", 0), 0u)
      << meta["tofu.training_state"];
  EXPECT_FALSE(slurp(dir + "a/" + meta["tofu.training_state"]).empty());

  // Saving again to the same path removes the older state file.
  r = runTool(dir + "plan.bin --steps 1 --quiet --save " + dir + "a/m.onnx");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(slurp(dir + "a/" + meta["tofu.training_state"]).empty());
}

TEST_F(TofuRun, ResumeErrors) {
  // A model that tofu-run did not save has no training state.
  std::ofstream(dir + "plain.onnx", std::ios::binary) << std::string(
      plan.onnxModel.begin(), plan.onnxModel.end());
  Result r = runTool(dir + "plan.bin --resume " + dir + "plain.onnx");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("carries no tofu training state"), std::string::npos)
      << r.err;

  r = runTool(dir + "plan.bin --resume " + dir + "missing.onnx");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("cannot open the model '" + dir + "missing.onnx'"),
            std::string::npos)
      << r.err;

  r = runTool(dir + "plan.bin --steps 1 --quiet --save " + dir + "m.onnx");
  ASSERT_EQ(r.code, 0) << r.err;
  onnx::ModelProto model;
  ASSERT_TRUE(model.ParseFromString(slurp(dir + "m.onnx")));
  std::string state;
  for (const auto &e : model.metadata_props())
    if (e.key() == "tofu.training_state")
      state = dir + e.value();
  std::string bytes = slurp(state);
  ASSERT_FALSE(bytes.empty());

  // A flipped byte in the state file.
  std::string bad = bytes;
  bad[20] ^= 0x10;
  std::ofstream(state, std::ios::binary) << bad;
  r = runTool(dir + "plan.bin --resume " + dir + "m.onnx");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("checksum mismatch"), std::string::npos) << r.err;

  // The state file gone.
  std::remove(state.c_str());
  r = runTool(dir + "plan.bin --resume " + dir + "m.onnx");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("cannot open the training state"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("keep the two together"), std::string::npos) << r.err;

  // A checkpoint of another model: the parameter has another shape.
  std::ofstream(state, std::ios::binary) << bytes;
  ASSERT_TRUE(model.ParseFromString(slurp(dir + "m.onnx")));
  model.mutable_graph()->mutable_initializer(0)->set_dims(0, 6);
  model.mutable_graph()->mutable_initializer(0)->set_raw_data(
      std::string(24, '\0'));
  std::string wrong;
  ASSERT_TRUE(model.SerializeToString(&wrong));
  std::ofstream(dir + "m.onnx", std::ios::binary) << wrong;
  r = runTool(dir + "plan.bin --resume " + dir + "m.onnx");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("has shape [6], the plan's parameter [4]"),
            std::string::npos)
      << r.err;
}

TEST_F(TofuRun, DumpPlanPrintsTheSummary) {
  Result r = runTool(dir + "plan.bin --dump-plan");
  ASSERT_EQ(r.code, 0) << r.err;
  // Then how many programs the file stores (format 4.0): the two devices
  // of the test plan differ.
  EXPECT_EQ(r.out, plan.summary +
                       "stored programs: 2 for 2 devices (devices of a class "
                       "share their buffers and instructions)\n");
}

TEST_F(TofuRun, CudaBackendRefusesAPlanWithoutCudaKernels) {
  // The test plan has no CUDA section (tofuc --cuda-arch): refused before
  // any GPU is looked for, in every build (docs/Cuda.md).
  Result r = runTool(dir + "plan.bin --backend cuda");
  EXPECT_EQ(r.code, 1);
  bool refused =
      r.err.find("the plan has no CUDA kernels: compile it with tofuc "
                 "--cuda-arch") != std::string::npos ||
      r.err.find("this tofu-run was built without the CUDA executor") !=
          std::string::npos;
  EXPECT_TRUE(refused) << r.err;
}

TEST_F(TofuRun, ErrorsExitWithOne) {
  for (const std::string &args :
       {std::string(""), dir + "missing.bin", dir + "plan.bin --steps 0",
        dir + "plan.bin --steps", dir + "plan.bin --frobnicate",
        dir + "plan.bin --trace", dir + "plan.bin --data",
        dir + "plan.bin --backend tpu"}) {
    Result r = runTool(args);
    EXPECT_EQ(r.code, 1) << args;
    EXPECT_EQ(r.err.rfind("tofu-run: error: ", 0), 0u) << args << ": " << r.err;
  }
}

TEST_F(TofuRun, CorruptPlanIsRejected) {
  std::string bytes = slurp(dir + "plan.bin");
  bytes[bytes.size() / 2] ^= 0x10;
  std::ofstream(dir + "bad.bin", std::ios::binary) << bytes;
  Result r = runTool(dir + "bad.bin");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("checksum mismatch"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("recompile it with tofuc"), std::string::npos) << r.err;
}

TEST_F(TofuRun, SaveWithoutModelFails) {
  plan.onnxModel.clear();
  ASSERT_EQ(writePlan(plan, dir + "nomodel.bin"), "");
  Result r = runTool(dir + "nomodel.bin --save " + dir + "x.onnx");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("MODEL section is empty"), std::string::npos) << r.err;
}

/// A MODEL section that passes its checksum but is not the model --save
/// writes into is refused when the plan is loaded: before the first step,
/// not after the training it would lose (issue 18).
TEST_F(TofuRun, SaveWithCorruptModelFailsBeforeTraining) {
  plan.onnxModel = {0xff, 0xff, 0xff, 0xff, 0x0f, 0x01, 0x02};
  ASSERT_EQ(writePlan(plan, dir + "badmodel.bin"), "");
  Result r = runTool(dir + "badmodel.bin --steps 2 --save " + dir + "x.onnx");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--save: the embedded ONNX model does not parse"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("loss"), std::string::npos) << "it trained:\n" << r.out;
  // Without --save the MODEL section is not needed, and the run goes on.
  EXPECT_EQ(runTool(dir + "badmodel.bin --steps 1 --quiet").code, 0);

  // A model that parses but lacks the trained parameter's initializer.
  std::vector<uint8_t> good = modelBytes();
  onnx::ModelProto other;
  ASSERT_TRUE(other.ParseFromArray(good.data(), static_cast<int>(good.size())));
  other.mutable_graph()->clear_initializer();
  std::string bytes;
  ASSERT_TRUE(other.SerializeToString(&bytes));
  plan.onnxModel.assign(bytes.begin(), bytes.end());
  ASSERT_EQ(writePlan(plan, dir + "now.bin"), "");
  r = runTool(dir + "now.bin --steps 2 --save " + dir + "x.onnx");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("parameter 'w' has no initializer in the embedded "
                       "ONNX model"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("loss"), std::string::npos) << "it trained:\n" << r.out;
}

/// A name taken from the plan that holds a newline and an escape sequence
/// is printed escaped: the error stays one line and cannot recolor the
/// terminal (issue 18).
TEST_F(TofuRun, NamesInErrorsAreEscaped) {
  for (TensorInfo &t : plan.tensors)
    if (t.paramName == "w")
      t.paramName = "w\n\x1b[31mred";
  ASSERT_EQ(writePlan(plan, dir + "name.bin"), "");
  Result r = runTool(dir + "name.bin --steps 1 --save " + dir + "x.onnx");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  EXPECT_NE(r.err.find("parameter 'w\\x0a\\x1b[31mred' has no initializer"),
            std::string::npos)
      << r.err;
}

} // namespace
