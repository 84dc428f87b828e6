//===- OnnxImportFuzzer.cpp - libFuzzer target: ONNX import -----------------===//
//
// Imports each input as an ONNX model the way tofuc does (importOnnxFile:
// the checked open, protobuf parse, initialization graph, opset
// normalization, constant folding, TDL shape inference, the ONNX checker),
// then verifies the module it produced. The input is written to a file in
// a private temporary directory first, so external data references resolve
// (and are refused) as they would for a model in that directory. Built
// twice: binary protobuf models (tofu-fuzz-onnx) and the ONNX text format
// (tofu-fuzz-onnx-text, TOFU_FUZZ_ONNX_TEXT).
//
// A crash, a hang or unbounded memory is a finding; so is a module that
// import returned without error but that fails the MLIR verifier (an
// importer invariant: bad input must be an import error, docs/Errors.md).
//
//===----------------------------------------------------------------------===//
#include "tofu/Import/OnnxImporter.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

#ifdef TOFU_FUZZ_ONNX_TEXT
static const char *const kModelName = "model.onnxtxt";
#else
static const char *const kModelName = "model.onnx";
#endif

/// A directory of this process's own, removed at exit.
static const std::string &modelPath() {
  static const std::string path = [] {
    const char *tmp = std::getenv("TMPDIR");
    std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") +
                      "/tofu-fuzz-onnx-XXXXXX";
    if (!mkdtemp(dir.data())) {
      perror("tofu-fuzz-onnx: mkdtemp");
      std::abort();
    }
    static std::string file = dir + "/" + kModelName;
    static std::string removeDir = dir;
    std::atexit([] {
      ::unlink(file.c_str());
      ::rmdir(removeDir.c_str());
    });
    return file;
  }();
  return path;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string &path = modelPath();
  {
    FILE *f = std::fopen(path.c_str(), "wb");
    if (!f || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0) {
      perror("tofu-fuzz-onnx: writing the model");
      std::abort();
    }
  }
  // Threading off: a thread pool per input would dominate the time.
  mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    diagnostics += d.str() + "\n";
    return mlir::success();
  });
  auto imported = tofu::importOnnxFile(&context, path);
  if (!imported) {
    llvm::consumeError(imported.takeError());
    return 0;
  }
  if (mlir::failed(mlir::verify(*imported->module))) {
    llvm::errs() << "tofu-fuzz-onnx: import succeeded but the module fails "
                    "verification:\n"
                 << diagnostics;
    std::abort();
  }
  return 0;
}
