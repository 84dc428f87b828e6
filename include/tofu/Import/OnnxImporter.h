//===- OnnxImporter.h - ONNX model -> tofu IR -------------------*- C++ -*-===//
#ifndef TOFU_IMPORT_ONNXIMPORTER_H
#define TOFU_IMPORT_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tofu {

/// A model imported from ONNX: the forward graph as a module holding
/// `func.func @main`, and the original model bytes (kept so that trained
/// weights can be written back into the same model).
struct ImportedModel {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::vector<uint8_t> modelBytes;
  uint64_t fingerprint = 0; ///< FNV-1a 64 of modelBytes
};

/// Imports the ONNX model at `path`: one tofu.input per graph input, one
/// tofu.param per initializer (with its data), one tofu.compute per node
/// (shapes from TDL shape inference), and a tofu.loss on the graph's output
/// when it is a single scalar float. Errors name the file, the node and what
/// to do.
llvm::Expected<ImportedModel> importOnnxFile(mlir::MLIRContext *context,
                                             llvm::StringRef path);

/// FNV-1a 64-bit hash of `bytes`.
uint64_t fingerprintBytes(llvm::ArrayRef<uint8_t> bytes);

} // namespace tofu

#endif // TOFU_IMPORT_ONNXIMPORTER_H
