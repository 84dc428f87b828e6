//===- OnnxConversion.h - ONNX protobuf values -> TDL values ----*- C++ -*-===//
//
// The conversions shared by the ONNX importer and the ONNX node-test runner:
// node attributes to a TDL attribute map, ONNX element types to TDL element
// types, and TensorProtos (initializers, test-data .pb files) to dense bytes.
//
// This header does not include the ONNX protobuf headers (which need
// exceptions); the classes are only forward-declared. Errors are llvm::Error
// values that name the node, attribute or tensor (`what`) they concern.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_IMPORT_ONNXCONVERSION_H
#define TOFU_IMPORT_ONNXCONVERSION_H

#include "tofu/TDL/TDL.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace onnx {
class NodeProto;
class TensorProto;
} // namespace onnx

namespace tofu {

/// The TDL attribute map of `node`'s attributes. INT, FLOAT, STRING and INTS
/// attributes are supported; any other kind is an error naming the node
/// (`nodeName` and op type) and the attribute.
llvm::Expected<tdl::AttrMap> convertOnnxAttributes(const onnx::NodeProto &node,
                                                   llvm::StringRef nodeName);

/// The name of an ONNX TensorProto::DataType value ("FLOAT", "BOOL", ...,
/// also the types libonnx 1.12 does not know: "FLOAT8E4M3FN" ... "INT4",
/// "FLOAT4E2M1"), or "<unknown type N>" for a number onnx.proto does not
/// define.
std::string onnxElemTypeName(int32_t elemType);

/// The TDL element type of an ONNX element type: FLOAT -> F32, INT64 -> I64,
/// and BOOL -> Bool where the TDL library has it. Any other type is an error
/// "<what> has ONNX element type T, which is not supported (... are)".
llvm::Expected<tdl::ElemType> convertOnnxElemType(int32_t elemType,
                                                  llvm::StringRef what);

/// The TDL Bool element type when the TDL library has one.
std::optional<tdl::ElemType> tdlBoolElemType();

/// True when `type` is the TDL Bool element type.
bool isBoolElemType(tdl::ElemType type);

/// Bytes per element in the runtime's (and MLIR's raw buffer) layout: F32 4,
/// I64 8, Bool 1.
size_t elemTypeBytes(tdl::ElemType type);

/// The short spelling of an element type: "f32", "i64", "bool".
std::string elemTypeString(tdl::ElemType type);

/// Checks a tensor shape against the limits every later phase relies on
/// (plan::kMaxTensorRank, plan::kMaxTensorElements; docs/Errors.md): no
/// negative dimension, a rank of at most 64, at most 2^56 elements, all
/// computed without overflow. The error names `what` and the limit.
llvm::Error checkTensorShape(llvm::ArrayRef<int64_t> dims,
                             const llvm::Twine &what);

/// A tensor's contents: dense, row-major, host byte order, elemTypeBytes()
/// bytes per element (Bool is one byte, 0 or 1).
struct TensorData {
  tdl::TensorType type;
  std::vector<uint8_t> bytes;

  int64_t numElements() const;
  /// Element `index` as a double (exact for Bool and for I64 up to 2^53).
  double valueAt(int64_t index) const;
  /// The TDL evaluator's form: every element as a double (valueAt).
  tdl::DenseTensor toDense() const;
};

/// The contents of `tensor`, from raw_data or from the typed field of its
/// element type (float_data, int64_data, int32_data for BOOL), checked against
/// the size its dims need. External data and unsupported element types are
/// errors naming `what`.
llvm::Expected<TensorData> convertOnnxTensor(const onnx::TensorProto &tensor,
                                             llvm::StringRef what);

/// What the import-time evaluators (ConstantFolding.h) need of a node's
/// attributes: the TDL attribute map, and ConstantOfShape's `value` tensor
/// (which TDL attributes cannot hold) apart.
struct EvaluatedNodeAttributes {
  tdl::AttrMap attrs;
  std::optional<tdl::DenseTensor> constantOfShapeValue;
};

/// The attributes of `node` as the import-time evaluators take them. Errors
/// name `where` (or the node, for an unsupported attribute kind).
llvm::Expected<EvaluatedNodeAttributes>
convertEvaluatedNodeAttributes(const onnx::NodeProto &node,
                               llvm::StringRef where);

} // namespace tofu

#endif // TOFU_IMPORT_ONNXCONVERSION_H
