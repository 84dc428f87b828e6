//===- OpsetNormalization.h - One node form for opsets 7 to 21 --*- C++ -*-===//
//
// ONNX moved operands between attributes and inputs across opsets: Reduce*
// `axes` (an input from 13 for ReduceSum, from 18 for the others), Split's
// `split` (an input from 13), Squeeze/Unsqueeze `axes` (13), Clip's min/max
// (11), Dropout's ratio (12), Slice's starts/ends/axes (10), and Softmax's
// coerce-to-2D semantics (before 13). The TDL specs describe one form; this
// rewrites a node into it, so one spec serves every version. It also
// rewrites edge values whose ONNX meaning the spec's expression would lose
// (Gemm's alpha = 0 or beta = 0, which leave an operand unread; ReduceSum's
// empty axes of a non-integer type, as torch.onnx.export writes them):
//
//  - an attribute that the spec takes as an input becomes a constant input
//    (returned in `newConstants`, named `<node>/<attribute>`);
//  - an input that the spec takes as an attribute must be a compile-time
//    constant (`constantOf`) and becomes the attribute;
//  - a variant the spec cannot express is an error naming the op and opset.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_IMPORT_OPSETNORMALIZATION_H
#define TOFU_IMPORT_OPSETNORMALIZATION_H

#include "tofu/Import/OnnxConversion.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace onnx {
class NodeProto;
} // namespace onnx

namespace tofu {

/// Rewrites `node` (default domain, model opset `opset`) into the form the
/// TDL specs take. `constantOf(name)` gives a compile-time input's value or
/// nullptr; `typeOf(name)` an input's element type and shape, or nullopt when
/// unknown. Errors name `where` (the node), the op and the opset.
llvm::Error normalizeOnnxNode(
    onnx::NodeProto &node, int64_t opset, llvm::StringRef where,
    llvm::function_ref<const TensorData *(llvm::StringRef)> constantOf,
    llvm::function_ref<std::optional<tdl::TensorType>(llvm::StringRef)> typeOf,
    std::vector<std::pair<std::string, TensorData>> &newConstants);

} // namespace tofu

#endif // TOFU_IMPORT_OPSETNORMALIZATION_H
