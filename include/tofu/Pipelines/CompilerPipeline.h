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

#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>

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

/// Options of one compilation.
struct CompileOptions {
  std::string inputPath;
  std::string outputPath; ///< plan.bin; empty = do not write
  int64_t devices = 1;
  std::string partitioner = "tofu";
  std::string topology; ///< --topology; empty = steps are k's prime factors
  double learningRate = 0.1;
  Phase stopAfter = Phase::Emit;
  PlanDump dumpPlan = PlanDump::None;
  /// Importer flags: --shape, --batch, --no-weights, ...
  ImportOptions import;
};

/// Adds the IR passes of phases train..partition to `pm` (a module pass
/// manager), stopping after `stopAfter`.
void buildIRPipeline(mlir::OpPassManager &pm, const CompileOptions &options,
                     Phase stopAfter);

/// Compiles the ONNX model of `options`, printing the IR (or device programs)
/// of `stopAfter` phases before `emit`, or the plan summary, to `os`.
llvm::Error compileModel(const CompileOptions &options, llvm::raw_ostream &os);

} // namespace tofu

#endif // TOFU_PIPELINES_COMPILERPIPELINE_H
