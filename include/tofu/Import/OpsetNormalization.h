//===- OpsetNormalization.h - One node form for opsets 6 to 22 --*- C++ -*-===//
//
// ONNX moved operands between attributes and inputs across opsets: Reduce*
// `axes` (an input from 13 for ReduceSum, from 18 for the others), Split's
// `split` (an input from 13), Squeeze/Unsqueeze `axes` (13), Clip's min/max
// (11), Dropout's ratio (12), Slice's starts/ends/axes (10), and Softmax's
// coerce-to-2D semantics (before 13); before opset 7, the `axis` /
// `broadcast` rule of Add, Mul, ..., Gemm's `broadcast`, the `is_test` of
// BatchNormalization and Dropout, PRelu's per-channel slope and
// Upsample-1's height_scale / width_scale. The TDL specs describe one form;
// this rewrites a node into it, so one spec serves every version. It also
// rewrites edge values whose ONNX meaning the spec's expression would lose
// (Gemm's alpha = 0 or beta = 0, which leave an operand unread; ReduceSum's
// empty axes of a non-integer type, as torch.onnx.export writes them):
//
//  - an attribute that the spec takes as an input becomes a constant input
//    (returned in `newConstants`, named `<node>/<attribute>`);
//  - an input that the spec takes as an attribute must be a compile-time
//    constant (`constantOf`) and becomes the attribute;
//  - a variant the spec cannot express is an error naming the op and opset;
//  - a form that needs several nodes in the spec form (expandOnnxNode) is
//    an error for normalizeOnnxNode, which rewrites one node in place.
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

/// The old forms that take several nodes in the spec form, which
/// normalizeOnnxNode refuses: Softmax, LogSoftmax and Hardmax before opset
/// 13 on an axis other than the last (Flatten at `axis`, the op on axis 1,
/// Reshape back: the coerce-to-2-D semantics); before opset 7, Add, Mul, ...
/// with `broadcast = 1` and an `axis` that aligns B short of A's last dim,
/// and PRelu with a per-channel slope [C] (B or the slope through an
/// Unsqueeze appending size-1 dims). Returns the nodes that replace `node`,
/// in order, the last one producing `node`'s outputs; `{node}` when it needs
/// none. Each goes through normalizeOnnxNode next. New constants (axes,
/// shapes) are appended to `newConstants`, named `<node>/<what>`; the new
/// nodes and values are named `<node>/<what>` too.
llvm::Expected<std::vector<onnx::NodeProto>> expandOnnxNode(
    const onnx::NodeProto &node, int64_t opset, llvm::StringRef where,
    llvm::function_ref<std::optional<tdl::TensorType>(llvm::StringRef)> typeOf,
    std::vector<std::pair<std::string, TensorData>> &newConstants);

} // namespace tofu

#endif // TOFU_IMPORT_OPSETNORMALIZATION_H
