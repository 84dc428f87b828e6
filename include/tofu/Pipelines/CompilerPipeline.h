//===- CompilerPipeline.h - tofuc's phases ----------------------*- C++ -*-===//
//
// import -> train -> analyze -> coarsen -> partition -> materialize -> schedule -> emit
// (DESIGN.md §1). `tofuc` is a thin shell over `compileModel`; tofu-opt runs
// the IR passes of the middle phases one by one.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_PIPELINES_COMPILERPIPELINE_H
#define TOFU_PIPELINES_COMPILERPIPELINE_H

#include "tofu/Import/OnnxImporter.h"
#include "tofu/Target/StepPrediction.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <vector>

namespace tofu {

/// The named phases of the pipeline, in order.
enum class Phase {
  Import,
  Train,
  Analyze,
  Coarsen,
  Partition,
  Materialize,
  Schedule,
  Emit
};

/// Parses a phase name ("import", "train", ...).
std::optional<Phase> parsePhase(llvm::StringRef name);
/// All phase names, comma separated (for help and errors).
std::string phaseNames();

/// How `--dump-plan` prints the plan: a text table, JSON
/// (docs/PlanJson.md) or a self-contained HTML page (docs/PlanHtml.md).
enum class PlanDump { None, Text, Json, Html };

/// Above this many bytes of initial buffer contents (all devices together),
/// plan.bin keeps the weights in external files even without
/// --external-weights.
inline constexpr uint64_t kAutoExternalWeightsBytes = uint64_t(2) << 30;

/// The most threads `--compile-threads` may ask for.
inline constexpr unsigned kMaxMaterializeThreads = 64;

/// Options of one compilation.
struct CompileOptions {
  std::string inputPath;
  std::string outputPath; ///< plan.bin; empty = do not write
  /// --external-weights: every device's weight shard in its own file next
  /// to plan.bin (docs/PlanFormat.md). Without it, shards go external
  /// automatically when all weights together exceed
  /// kAutoExternalWeightsBytes.
  bool externalWeights = false;
  /// --time-phases: print each phase's wall seconds to stderr.
  bool timePhases = false;
  /// List every Fetch/Reduce's pieces instead of naming its collective's
  /// source table (MaterializeOptions::explicitPieces; tofuc
  /// --explicit-pieces): for tests that compare the two forms.
  bool explicitPieces = false;
  /// --compile-threads: threads that materialize the plan
  /// (MaterializeOptions::threads); 0: the machine's cores (at most 8) from
  /// 256 devices on; at most kMaxMaterializeThreads.
  unsigned threads = 0;
  int64_t devices = 1;
  std::string partitioner = "tofu";
  std::string topology; ///< --topology; empty = steps are k's prime factors
  std::string objective = "auto"; ///< --objective: auto, bytes, time
  /// --device: a built-in device name or a JSON description
  /// (docs/DeviceModel.md); "" = not given (the search's time objective
  /// then uses cpu, and nothing is predicted without --topology).
  std::string device;
  /// The training step (the train phase's options; see BuildTrainingStep
  /// in dialects/tofu/Passes.td and docs/Training.md).
  struct Training {
    std::string loss;               ///< --loss ("" = the scalar output)
    std::string optimizer = "sgd";  ///< --optimizer
    double learningRate = 0.1;      ///< --lr
    double momentum = 0.9;          ///< --momentum (Momentum alpha)
    double momentumBeta = 1.0;      ///< --momentum-beta (Momentum beta)
    bool nesterov = false;          ///< --nesterov
    double beta1 = 0.9, beta2 = 0.999; ///< --beta1/--beta2 (Adam alpha/beta)
    double epsilon = 1e-6;          ///< --epsilon
    double weightDecay = 0;         ///< --weight-decay (norm_coefficient)
    double lrDecay = 0;             ///< --lr-decay (Adagrad decay_factor)
    std::vector<std::string> freeze; ///< --freeze
    /// --trainable: the only parameters that train (replaces the model's
    /// tofu.frozen / tofu.trainable lists).
    std::vector<std::string> trainable;
    /// The training flags given explicitly ("--optimizer", ...): a model
    /// that carries its own training algorithm refuses them.
    std::vector<std::string> overrides;
    /// --precision: "f32" (everything float32) or "bf16" (MatMul, Gemm and
    /// Conv compute in bfloat16, the `tofu-autocast` pass; docs/Training.md,
    /// "Mixed precision").
    std::string precision = "f32";
  } training;
  Phase stopAfter = Phase::Emit;
  PlanDump dumpPlan = PlanDump::None;
  /// Importer flags: --shape, --batch, --no-weights, ...
  ImportOptions import;
  /// --cuda-arch: generate CUDA kernels for this architecture (e.g. sm_90)
  /// into the plan's CUDA section; empty = none (docs/Cuda.md).
  std::string cudaArch;
  /// --nvcc: the nvcc that compiles them (empty: PATH, /usr/local/cuda).
  std::string nvccPath;
  /// The process exits right after compileModel returns (tofuc): leave the
  /// plan's memory to the operating system instead of freeing its millions
  /// of small records one by one, as clang's -disable-free does (a fifth of
  /// GPT-3 175B's compile at k = 64, bench/compile_scale.md).
  bool disableFree = false;
};

/// Adds the IR passes of phases train..partition to `pm` (a module pass
/// manager), stopping after `stopAfter`.
void buildIRPipeline(mlir::OpPassManager &pm, const CompileOptions &options,
                     Phase stopAfter);

/// Compiles the ONNX model of `options`, printing the IR (or device programs)
/// of `stopAfter` phases before `emit`, or the plan summary, to `os`. With
/// --device (or --topology), `prediction` (when given) receives the
/// predicted step and memory fit (docs/DeviceModel.md).
llvm::Error compileModel(const CompileOptions &options, llvm::raw_ostream &os,
                         std::optional<StepPrediction> *prediction = nullptr);

/// `--gpus auto`: the smallest k among 1, 2, 4, 8, ... (up to
/// plan::kMaxDevices) whose plan fits `options.device` (which must give a
/// memory size) less the margin (kDefaultMemoryMargin), compiling the
/// model at each k in turn; says what it tried on `log`.
llvm::Expected<int64_t> smallestFittingDevices(const CompileOptions &options,
                                               llvm::raw_ostream &log);

} // namespace tofu

#endif // TOFU_PIPELINES_COMPILERPIPELINE_H
