//===- RecurrentUnrolling.h - ONNX RNN/LSTM/GRU -> per-step cells -*- C++ -*-===//
//
// tofuc has no recurrent operator: an ONNX RNN, LSTM or GRU node is expanded
// at import into one cell per time step built from ops with TDL specs
// (MatMul, Add, Sub, Mul, Sigmoid, Tanh, Relu, LeakyRelu, Split, Transpose,
// Reshape, Concat). Every op of a cell carries the discardable attributes
//
//   tofu.timestep  : i64  -- the step of the recurrence (0 = first processed)
//   tofu.direction : i64  -- 0 forward, 1 reverse (bidirectional: both)
//   tofu.recurrence: str  -- the ONNX node the cell belongs to
//
// (names in tofu/Dialect/Tofu.h) so that coarsening can merge the time steps
// (paper §5.1). See docs/RecurrentUnrolling.md.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_IMPORT_RECURRENTUNROLLING_H
#define TOFU_IMPORT_RECURRENTUNROLLING_H

#include "tofu/Dialect/Tofu.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

namespace onnx {
class NodeProto;
} // namespace onnx

namespace tofu {

/// True for the ONNX op types the importer unrolls: RNN, LSTM and GRU.
bool isRecurrentOpType(llvm::StringRef opType);

/// Expands `node` (RNN, LSTM or GRU, default domain) into per-step cells
/// created with `builder` at its insertion point. `operands` has one entry
/// per node input, a null Value for an omitted optional input. Returns one
/// Value per node output (Y, Y_h and for LSTM Y_c). Unsupported forms
/// (sequence_lens, clip, input_forget, activations without a TDL spec) are
/// errors that say what is not supported; the message does not name the node
/// (the caller prefixes it).
llvm::Expected<llvm::SmallVector<mlir::Value>>
unrollRecurrentNode(mlir::OpBuilder &builder, mlir::Location loc,
                    const onnx::NodeProto &node, llvm::StringRef nodeName,
                    llvm::ArrayRef<mlir::Value> operands);

} // namespace tofu

#endif // TOFU_IMPORT_RECURRENTUNROLLING_H
