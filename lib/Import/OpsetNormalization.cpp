//===- OpsetNormalization.cpp - One node form for opsets 6 to 22 ----------===//
//
// See OpsetNormalization.h. Each rule names the opset where ONNX changed the
// operator and rewrites the older (or newer) form into the spec's.
//
//===----------------------------------------------------------------------===//
#include "tofu/Import/OpsetNormalization.h"

#include "tofu/Import/EinsumNormalization.h"

#include "llvm/ADT/STLExtras.h"

#include <onnx/onnx_pb.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <numeric>

namespace tofu {

namespace {

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 message.str());
}

const onnx::AttributeProto *findAttr(const onnx::NodeProto &node,
                                     llvm::StringRef name) {
  for (const auto &attr : node.attribute())
    if (attr.name() == name)
      return &attr;
  return nullptr;
}

void removeAttr(onnx::NodeProto &node, llvm::StringRef name) {
  auto *attrs = node.mutable_attribute();
  for (int i = 0; i < attrs->size(); ++i)
    if (attrs->Get(i).name() == name) {
      attrs->DeleteSubrange(i, 1);
      return;
    }
}

TensorData int64Tensor(const std::vector<int64_t> &values) {
  TensorData data;
  data.type.elem = tdl::ElemType::I64;
  data.type.dims = {static_cast<int64_t>(values.size())};
  data.bytes.resize(values.size() * sizeof(int64_t));
  if (!values.empty())
    std::memcpy(data.bytes.data(), values.data(), data.bytes.size());
  return data;
}

TensorData floatScalar(float value) {
  TensorData data;
  data.type.elem = tdl::ElemType::F32;
  data.bytes.resize(sizeof(float));
  std::memcpy(data.bytes.data(), &value, sizeof(float));
  return data;
}

TensorData boolScalar(bool value) {
  TensorData data;
  data.type.elem = tdl::ElemType::Bool;
  data.bytes.assign(1, value ? 1 : 0);
  return data;
}

/// The int attribute `name` of `node`, or `fallback`.
int64_t intAttr(const onnx::NodeProto &node, llvm::StringRef name,
                int64_t fallback) {
  const onnx::AttributeProto *attr = findAttr(node, name);
  return attr ? attr->i() : fallback;
}

void setIntAttr(onnx::NodeProto &node, llvm::StringRef name, int64_t value) {
  removeAttr(node, name);
  auto *attr = node.add_attribute();
  attr->set_name(name.str());
  attr->set_type(onnx::AttributeProto::INT);
  attr->set_i(value);
}

/// "[2, 3, 4]".
std::string formatDims(const std::vector<int64_t> &dims) {
  std::string text = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    text += (i ? ", " : "") + std::to_string(dims[i]);
  return text + "]";
}

/// The element-wise ops whose B operand broadcast only with `broadcast = 1`
/// before opset 7, its dims aligned with A's from `axis` on (suffix
/// matching without `axis`), where later opsets broadcast both ways as
/// numpy does.
bool hasLegacyBroadcast(llvm::StringRef op) {
  return op == "Add" || op == "Sub" || op == "Mul" || op == "Div" ||
         op == "Pow" || op == "And" || op == "Or" || op == "Xor" ||
         op == "Equal" || op == "Greater" || op == "Less";
}

/// For a node with the legacy broadcast (hasLegacyBroadcast, opset < 7):
/// how many size-1 dims B needs appended so that numpy broadcasting aligns
/// it with A from `axis` on, as the legacy rule does. Legacy B dims equal
/// A's (a size-1 B dim broadcasting was "not supported yet" there; it is
/// taken with its numpy meaning, which is what PyTorch's exports mean).
/// Without `broadcast = 1`, A and B must have the same shape.
llvm::Expected<int64_t> legacyBroadcastPadding(
    const onnx::NodeProto &node, const std::string &at,
    llvm::function_ref<std::optional<tdl::TensorType>(llvm::StringRef)>
        typeOf) {
  const std::string op = node.op_type();
  const onnx::AttributeProto *axisAttr = findAttr(node, "axis");
  bool broadcast = intAttr(node, "broadcast", 0) != 0;
  if (node.input_size() != 2)
    return error(at + ": " + op + " takes two inputs");
  std::optional<tdl::TensorType> a = typeOf(node.input(0));
  std::optional<tdl::TensorType> b = typeOf(node.input(1));
  if (!a || !b)
    return error(at + ": the shapes of A and B must be known to apply " + op +
                 "'s broadcast rule of opsets before 7");
  auto same = [](int64_t x, int64_t y) { return x == y || x < 0 || y < 0; };
  int64_t r = a->dims.size(), q = b->dims.size();
  if (!broadcast) {
    bool equal = r == q;
    for (int64_t d = 0; equal && d < r; ++d)
      equal = same(a->dims[d], b->dims[d]);
    if (!equal)
      return error(at + ": " + op +
                   " without broadcast = 1 (opsets before "
                   "7) needs A and B of one shape, not " +
                   formatDims(a->dims) + " and " + formatDims(b->dims));
    return 0;
  }
  if (q > r)
    return error(at + ": " + op +
                 " with broadcast = 1 (opsets before 7) "
                 "needs B of rank at most A's, not " +
                 formatDims(b->dims) + " for A " + formatDims(a->dims));
  int64_t count = 1;
  for (int64_t d : b->dims)
    count *= d;
  if (count == 1)
    return 0; // one element: broadcast alike wherever it is aligned
  int64_t start = r - q;
  if (axisAttr) {
    start = axisAttr->i() < 0 ? axisAttr->i() + r : axisAttr->i();
    if (start < 0 || start + q > r)
      return error(at + ": " + op + "'s axis " + std::to_string(axisAttr->i()) +
                   " does not fit B " + formatDims(b->dims) + " into A " +
                   formatDims(a->dims));
  }
  for (int64_t j = 0; j < q; ++j)
    if (b->dims[j] != 1 && !same(b->dims[j], a->dims[start + j]))
      return error(at + ": " + op + " with broadcast = 1 aligns B " +
                   formatDims(b->dims) + " with A " + formatDims(a->dims) +
                   " from axis " + std::to_string(start) + ", but B's dim " +
                   std::to_string(j) + " (" + std::to_string(b->dims[j]) +
                   ") is not A's dim " + std::to_string(start + j) + " (" +
                   std::to_string(a->dims[start + j]) + ")");
  return r - start - q;
}

/// PRelu before opset 7 (Caffe2's): a slope [C] with C > 1 is per channel
/// (dim 1 of X [N, C, ...]), where numpy broadcasting (opset 7 on) aligns it
/// with the last dim. Returns how many size-1 dims the slope needs appended
/// (0 when numpy broadcasting already means the same), or an error when the
/// slope fits neither form.
llvm::Expected<int64_t> legacyPReluPadding(
    const onnx::NodeProto &node, const std::string &at,
    llvm::function_ref<std::optional<tdl::TensorType>(llvm::StringRef)>
        typeOf) {
  if (node.input_size() != 2)
    return error(at + ": PRelu takes two inputs");
  std::optional<tdl::TensorType> x = typeOf(node.input(0));
  std::optional<tdl::TensorType> slope = typeOf(node.input(1));
  if (!x || !slope)
    return error(at + ": the shapes of X and slope must be known to apply "
                      "PRelu's per-channel slope of opsets before 7");
  int64_t count = 1;
  for (int64_t d : slope->dims)
    count *= d;
  if (count == 1 || slope->dims == x->dims)
    return 0;
  int64_t r = x->dims.size(), q = slope->dims.size();
  if (q == 1 && r >= 2 && x->dims[1] == slope->dims[0])
    return r - 2; // per channel: [C] -> [C, 1, ..., 1]
  // A slope [C, 1, ..., 1] (what the per-channel form becomes) or another
  // that broadcasts to X.
  bool broadcasts = q > 1 && q <= r;
  for (int64_t j = 0; broadcasts && j < q; ++j)
    broadcasts = slope->dims[j] == 1 || slope->dims[j] == x->dims[r - q + j];
  if (broadcasts)
    return 0;
  return error(at + ": PRelu's slope " + formatDims(slope->dims) +
               " is neither one value, X's shape " + formatDims(x->dims) +
               " nor one value per channel (dim 1)");
}

/// Sets input `index` of `node` to `name`, padding with absent inputs.
void setInput(onnx::NodeProto &node, int index, const std::string &name) {
  while (node.input_size() <= index)
    node.add_input("");
  node.set_input(index, name);
}


/// The string attribute `name` of `node`, or `fallback`.
std::string stringAttr(const onnx::NodeProto &node, llvm::StringRef name,
                       llvm::StringRef fallback) {
  const onnx::AttributeProto *attr = findAttr(node, name);
  return attr ? attr->s() : fallback.str();
}

/// A positive scale as an exact fraction num / den (den <= 1000) within
/// float32's precision of `scale`, or nullopt.
std::optional<std::pair<int64_t, int64_t>> scaleFraction(double scale) {
  if (!(scale > 0) || scale > 1e6)
    return std::nullopt;
  for (int64_t den = 1; den <= 1000; ++den) {
    double num = std::round(scale * static_cast<double>(den));
    if (num >= 1 &&
        std::fabs(num / static_cast<double>(den) - scale) <= 1e-6 * scale)
      return std::make_pair(static_cast<int64_t>(num), den);
  }
  return std::nullopt;
}

/// Resize / Upsample with mode linear or cubic become ResizeInterp
/// (tdl-specs/resize-interp.tdl): per dim the output size and the source
/// coordinate of output index y as the exact fraction
/// (coord_num * y + coord_off) / coord_den of the scale (num / den: sizes
/// give output / input, constant scales their nearest small fraction) and
/// the coordinate_transformation_mode, as onnx's reference computes it.
llvm::Error normalizeResizeInterp(
    onnx::NodeProto &node, int64_t opset, const std::string &at,
    const std::string &mode, bool legacy, std::vector<double> scales,
    const std::string &sizesName, std::vector<int64_t> axes,
    const std::string &policy,
    llvm::function_ref<const TensorData *(llvm::StringRef)> constantOf,
    llvm::function_ref<std::optional<tdl::TensorType>(llvm::StringRef)>
        typeOf) {
  const std::string op = node.op_type();
  std::string x = node.input_size() ? node.input(0) : "";
  std::optional<tdl::TensorType> type = typeOf(x);
  if (!type || llvm::is_contained(type->dims, -1))
    return error(at + ": " + op + " " + mode +
                 " needs an input of known static shape");
  const std::vector<int64_t> &in = type->dims;
  size_t rank = in.size();
  std::string transform =
      legacy ? "asymmetric"
             : stringAttr(node, "coordinate_transformation_mode", "half_pixel");
  bool nearest = mode == "nearest";
  if (transform != "half_pixel" && transform != "pytorch_half_pixel" &&
      transform != "half_pixel_symmetric" && transform != "asymmetric" &&
      transform != "align_corners" &&
      !(nearest && transform == "tf_half_pixel_for_nn"))
    return error(at + ": " + op + " " + mode +
                 " with coordinate_transformation_mode '" + transform +
                 "' is not supported (half_pixel, pytorch_half_pixel, "
                 "half_pixel_symmetric, asymmetric, align_corners and, for "
                 "nearest, tf_half_pixel_for_nn are)");
  std::string rounding =
      legacy ? "floor" : stringAttr(node, "nearest_mode", "round_prefer_floor");
  if (nearest && rounding != "floor" && rounding != "ceil" &&
      rounding != "round_prefer_floor" && rounding != "round_prefer_ceil")
    return error(at + ": Resize nearest_mode '" + rounding +
                 "' is not supported");
  const onnx::AttributeProto *excl = findAttr(node, "exclude_outside");
  if (mode == "cubic" && excl && excl->i() != 0)
    return error(at + ": Resize cubic with exclude_outside = 1 is not "
                      "supported (exclude_outside = 0 is)");
  float cubicA = -0.75f;
  if (const onnx::AttributeProto *a = findAttr(node, "cubic_coeff_a"))
    cubicA = a->f();

  // `axes` (opset 18) names the dims scales / sizes give; the others keep
  // their size (scale 1).
  bool allAxes = axes.empty();
  if (allAxes)
    for (size_t d = 0; d < rank; ++d)
      axes.push_back(static_cast<int64_t>(d));
  for (int64_t &a : axes) {
    if (a < -static_cast<int64_t>(rank) || a >= static_cast<int64_t>(rank))
      return error(at + ": Resize axis " + std::to_string(a) +
                   " out of range for rank " + std::to_string(rank));
    if (a < 0)
      a += static_cast<int64_t>(rank);
  }
  if (!scales.empty()) {
    if (scales.size() != axes.size())
      return error(at + ": " + std::to_string(scales.size()) + " scales for " +
                   std::to_string(axes.size()) + " axes");
    std::vector<double> full(rank, 1.0);
    for (size_t i = 0; i < axes.size(); ++i)
      full[axes[i]] = scales[i];
    scales = full;
  }

  // Per dim: output size and the scale as num / den.
  std::vector<int64_t> out(rank), num(rank), den(rank);
  if (!scales.empty()) {
    if (scales.size() != rank)
      return error(at + ": " + std::to_string(scales.size()) +
                   " scales for an input of rank " + std::to_string(rank));
    for (size_t d = 0; d < rank; ++d) {
      std::optional<std::pair<int64_t, int64_t>> f = scaleFraction(scales[d]);
      if (!f)
        return error(at + ": scale " + std::to_string(scales[d]) +
                     " is not supported for " + mode +
                     " (a positive fraction with a denominator up to 1000 "
                     "is)");
      num[d] = f->first;
      den[d] = f->second;
      // onnx's reference: floor(input size * scale), in float64.
      out[d] = static_cast<int64_t>(std::floor(
          static_cast<double>(in[d]) * static_cast<double>(scales[d])));
    }
  } else {
    const TensorData *data = constantOf(sizesName);
    if (!data || data->numElements() != static_cast<int64_t>(axes.size()))
      return error(at + ": Resize's sizes must have one entry per axis");
    for (size_t d = 0; d < rank; ++d)
      out[d] = num[d] = den[d] = in[d];
    for (size_t i = 0; i < axes.size(); ++i) {
      out[axes[i]] = num[axes[i]] = static_cast<int64_t>(data->valueAt(i));
      den[axes[i]] = in[axes[i]];
    }
    if (policy == "not_larger" || policy == "not_smaller") {
      // One scale for the axes, the smallest (not_larger) or largest
      // (not_smaller) of sizes / input; sizes round half up (onnx).
      size_t best = 0;
      for (size_t i = 1; i < axes.size(); ++i) {
        int64_t a = axes[i], b = axes[best];
        bool less = num[a] * den[b] < num[b] * den[a];
        bool greater = num[a] * den[b] > num[b] * den[a];
        if (policy == "not_larger" ? less : greater)
          best = i;
      }
      int64_t P = num[axes[best]], Q = den[axes[best]];
      for (int64_t a : axes) {
        num[a] = P, den[a] = Q;
        out[a] = (2 * P * in[a] + Q) / (2 * Q);
      }
    } else if (policy != "stretch") {
      return error(at + ": Resize's keep_aspect_ratio_policy '" + policy +
                   "' is not supported (stretch, not_larger and not_smaller "
                   "are)");
    }
  }
  bool downsample = false;
  for (size_t d = 0; d < rank; ++d) {
    if (out[d] < 1 || in[d] < 1)
      return error(at + ": " + op + " " + mode +
                   " with an empty input or output dimension is not "
                   "supported");
    downsample |= num[d] < den[d];
  }
  if (const onnx::AttributeProto *aa = findAttr(node, "antialias");
      aa && aa->i() != 0 && downsample)
    return error(at + ": Resize with antialias = 1 when downsampling is not "
                      "supported (antialias = 0 is)");

  // x = (cn * y + co) / cd per dim (P / Q the scale, I / O the sizes).
  std::vector<int64_t> cn(rank), co(rank), cd(rank);
  for (size_t d = 0; d < rank; ++d) {
    int64_t P = num[d], Q = den[d], I = in[d], O = out[d];
    bool outputOne = P * I == Q; // the float output size scale * I is 1
    if (transform == "asymmetric") {
      cn[d] = Q, co[d] = 0, cd[d] = P;
    } else if (transform == "align_corners") {
      if (outputOne)
        cn[d] = 0, co[d] = 0, cd[d] = 1;
      else if (P * I - Q < 0)
        return error(at + ": align_corners with an output size below 1");
      else
        cn[d] = (I - 1) * Q, co[d] = 0, cd[d] = P * I - Q;
    } else if (transform == "pytorch_half_pixel" && outputOne) {
      cn[d] = 0, co[d] = -1, cd[d] = 2; // onnx's reference: -0.5
    } else if (transform == "half_pixel_symmetric") {
      cn[d] = 2 * Q, co[d] = I * P - O * Q + Q - P, cd[d] = 2 * P;
    } else if (transform == "tf_half_pixel_for_nn") {
      cn[d] = 2 * Q, co[d] = Q, cd[d] = 2 * P;
    } else { // half_pixel, pytorch_half_pixel
      cn[d] = 2 * Q, co[d] = Q - P, cd[d] = 2 * P;
    }
    // Nearest: floor((a y + b) / c) becomes the rounded coordinate.
    if (nearest && rounding == "ceil") {
      co[d] += cd[d] - 1;
    } else if (nearest && rounding != "floor") {
      // round_prefer_floor: ceil(x - 1/2); round_prefer_ceil: floor(x + 1/2).
      cn[d] *= 2;
      co[d] = 2 * co[d] + cd[d] - (rounding == "round_prefer_floor" ? 1 : 0);
      cd[d] *= 2;
    }
    int64_t g = std::gcd(std::gcd(std::abs(cn[d]), std::abs(co[d])), cd[d]);
    if (g > 1)
      cn[d] /= g, co[d] /= g, cd[d] /= g;
    // A dim of size 1 kept at 1 reads its one cell whatever the coordinate
    // (every tap clamps to it, and the weights sum to 1); a nearest dim
    // whose rounded coordinate is y reads cell y: x = y, one tap.
    bool same = I == 1 && O == 1;
    if (nearest && I == O) {
      same = true;
      for (int64_t y = 0; y < O && same; ++y) {
        int64_t v = cn[d] * y + co[d];
        same = (v >= 0 ? v / cd[d] : -((-v + cd[d] - 1) / cd[d])) == y;
      }
    }
    if (same)
      cn[d] = 1, co[d] = 0, cd[d] = 1;
  }

  node.set_op_type("ResizeInterp");
  node.clear_input();
  node.add_input(x);
  node.clear_attribute();
  auto addInts = [&](const char *name, const std::vector<int64_t> &values) {
    auto *attr = node.add_attribute();
    attr->set_name(name);
    attr->set_type(onnx::AttributeProto::INTS);
    for (int64_t v : values)
      attr->add_ints(v);
  };
  auto *modeAttr = node.add_attribute();
  modeAttr->set_name("mode");
  modeAttr->set_type(onnx::AttributeProto::STRING);
  modeAttr->set_s(mode);
  addInts("sizes", out);
  addInts("coord_num", cn);
  addInts("coord_off", co);
  addInts("coord_den", cd);
  auto *aAttr = node.add_attribute();
  aAttr->set_name("cubic_coeff_a");
  aAttr->set_type(onnx::AttributeProto::FLOAT);
  aAttr->set_f(cubicA);
  (void)opset;
  return llvm::Error::success();
}

/// Resize (opsets 10-19) and Upsample (7-9) with mode "nearest" become
/// ResizeNearest (tdl-specs/resize.tdl): upsampling by whole factors, where
/// output index y reads input index y // f. That holds for a factor f >= 1
/// with the half-pixel transformations and round-to-nearest (the offset
/// stays inside (-0.5, 0.5)), and with the asymmetric ones and floor;
/// anything else is refused with what is supported.
llvm::Error normalizeResize(
    onnx::NodeProto &node, int64_t opset, const std::string &at,
    llvm::function_ref<const TensorData *(llvm::StringRef)> constantOf,
    llvm::function_ref<std::optional<tdl::TensorType>(llvm::StringRef)> typeOf,
    llvm::function_ref<int64_t(llvm::StringRef)> rankOf) {
  const std::string op = node.op_type();
  bool upsample = op == "Upsample";
  std::string mode = stringAttr(node, "mode", "nearest");
  // Upsample-7 and older name bilinear interpolation "bilinear".
  if (upsample && mode == "bilinear")
    mode = "linear";
  if (mode != "nearest" && mode != "linear" && mode != "cubic")
    return error(at + ": " + op + " mode '" + mode +
                 "' is not supported (nearest, linear and cubic are)");
  // Before Resize-11 (and in Upsample) nearest is asymmetric with floor.
  bool legacy = upsample || opset < 11;
  std::string transform =
      legacy ? "asymmetric"
             : stringAttr(node, "coordinate_transformation_mode", "half_pixel");
  std::string rounding =
      legacy ? "floor" : stringAttr(node, "nearest_mode", "round_prefer_floor");
  int scalesInput = legacy ? 1 : 2, sizesInput = legacy ? -1 : 3;
  auto inputAt = [&](int index) -> std::string {
    return index >= 0 && index < node.input_size() ? node.input(index) : "";
  };
  // `axes` and keep_aspect_ratio_policy (opset 18): ResizeInterp.
  std::vector<int64_t> axes;
  if (const onnx::AttributeProto *axesAttr = findAttr(node, "axes"))
    axes.assign(axesAttr->ints().begin(), axesAttr->ints().end());
  std::string policy = stringAttr(node, "keep_aspect_ratio_policy", "stretch");

  // The factors, from constant scales (an attribute of Upsample-7).
  std::vector<int64_t> factors;
  bool fromScales = false;
  std::vector<double> scales;
  if (const onnx::AttributeProto *attr = findAttr(node, "scales")) {
    scales.assign(attr->floats().begin(), attr->floats().end());
    fromScales = true;
  } else if (!inputAt(scalesInput).empty()) {
    const TensorData *data = constantOf(inputAt(scalesInput));
    if (!data)
      return error(at + ": the scales input '" + inputAt(scalesInput) +
                   "' must be a compile-time constant (an initializer or a "
                   "Constant); a data-dependent output size is not "
                   "supported");
    for (int64_t k = 0; k < data->numElements(); ++k)
      scales.push_back(data->valueAt(k));
    // Resize-13 passes an empty scales tensor when sizes are given.
    fromScales = !scales.empty();
  }
  std::string sizes = inputAt(sizesInput);
  if (!fromScales && sizes.empty())
    return error(at + ": " + op + " needs constant scales or sizes");
  if (fromScales && !sizes.empty())
    return error(at + ": Resize takes scales or sizes, not both");
  if (!sizes.empty() && !constantOf(sizes))
    return error(at + ": the sizes input '" + sizes +
                 "' must be a compile-time constant (an initializer or a "
                 "Constant); a data-dependent output size is not "
                 "supported");
  if (mode != "nearest" || !axes.empty() || policy != "stretch")
    return normalizeResizeInterp(node, opset, at, mode, legacy, scales,
                                 sizes, axes, policy, constantOf, typeOf);
  // Whole-factor upsampling is ResizeNearest (y // f, a cheap gradient);
  // any other nearest resize is ResizeInterp's one-tap nearest.
  bool whole = true, identity = true;
  for (double scale : scales) {
    if (scale < 1 || scale != static_cast<double>(static_cast<int64_t>(scale))) {
      whole = false;
      break;
    }
    factors.push_back(static_cast<int64_t>(scale));
    identity &= factors.back() == 1;
  }
  if (fromScales && whole) {
    int64_t rank = rankOf(inputAt(0));
    if (rank >= 0 && rank != static_cast<int64_t>(factors.size()))
      return error(at + ": " + std::to_string(factors.size()) +
                   " scales for an input of rank " + std::to_string(rank));
  }
  if (!sizes.empty()) {
    const TensorData *data = constantOf(sizes);
    std::optional<tdl::TensorType> type = typeOf(inputAt(0));
    if (type && data->numElements() == static_cast<int64_t>(type->dims.size()))
      for (size_t d = 0; d < type->dims.size(); ++d) {
        int64_t want = static_cast<int64_t>(data->valueAt(d));
        whole &= type->dims[d] > 0 && want >= type->dims[d] &&
                 want % type->dims[d] == 0;
      }
  }
  bool halfPixel = transform == "half_pixel" ||
                   transform == "pytorch_half_pixel" ||
                   transform == "half_pixel_symmetric";
  bool asymmetric =
      transform == "asymmetric" || transform == "tf_half_pixel_for_nn";
  bool round = rounding == "round_prefer_floor" ||
               rounding == "round_prefer_ceil";
  if (!whole || (!(fromScales && identity) &&
                 !((halfPixel && round) || (asymmetric && rounding == "floor"))))
    return normalizeResizeInterp(node, opset, at, mode, legacy, scales, sizes,
                                 axes, policy, constantOf, typeOf);

  // The ResizeNearest form: X (and the constant sizes), `factors`.
  node.set_op_type("ResizeNearest");
  std::string x = inputAt(0);
  node.clear_input();
  node.add_input(x);
  if (!sizes.empty())
    node.add_input(sizes);
  node.clear_attribute();
  if (fromScales) {
    auto *attr = node.add_attribute();
    attr->set_name("factors");
    attr->set_type(onnx::AttributeProto::INTS);
    for (int64_t f : factors)
      attr->add_ints(f);
  }
  return llvm::Error::success();
}

/// A tensor of `dims` zeros of the float element type `elem`.
TensorData zeros(tdl::ElemType elem, std::vector<int64_t> dims) {
  TensorData data;
  data.type.elem = elem;
  data.type.dims = std::move(dims);
  data.bytes.assign(data.numElements() *
                        (elem == tdl::ElemType::F64 ? sizeof(double)
                                                    : sizeof(float)),
                    0);
  return data;
}

/// Gemm with alpha = 0 or beta = 0 (ONNX, PyTorch's addmm): beta = 0
/// ignores C, even when present (so a NaN or inf in C does not spread, as
/// in PyTorch), and alpha = 0 leaves only beta * C (or zeros), the product
/// of A and B unread. The spec's `alpha * sum(...) + beta * C` would keep
/// such an operand with an empty access region, which the kernels cannot
/// take; so C is dropped, and with alpha = 0 the product becomes one of
/// zero constants [M, 1] x [1, N] (A and B unused: their gradient is zero,
/// as in PyTorch), which keeps Y's shape and dtype and C's broadcast and
/// gradient rule.
llvm::Error normalizeGemm(
    onnx::NodeProto &node, const std::string &at, const std::string &prefix,
    llvm::function_ref<std::optional<tdl::TensorType>(llvm::StringRef)> typeOf,
    std::vector<std::pair<std::string, TensorData>> &newConstants) {
  const onnx::AttributeProto *alphaAttr = findAttr(node, "alpha");
  const onnx::AttributeProto *betaAttr = findAttr(node, "beta");
  bool alphaZero = alphaAttr && alphaAttr->f() == 0.0f;
  bool betaZero = betaAttr && betaAttr->f() == 0.0f;
  if (betaZero && node.input_size() > 2) {
    node.mutable_input()->DeleteSubrange(2, node.input_size() - 2);
    removeAttr(node, "beta");
  }
  if (!alphaZero)
    return llvm::Error::success();
  if (node.input_size() < 2)
    return error(at + ": Gemm needs inputs A and B");
  std::optional<tdl::TensorType> a = typeOf(node.input(0));
  std::optional<tdl::TensorType> b = typeOf(node.input(1));
  if (!a || !b || a->dims.size() != 2 || b->dims.size() != 2 ||
      llvm::is_contained(a->dims, -1) || llvm::is_contained(b->dims, -1))
    return error(at + ": Gemm with alpha = 0 needs A and B of known 2-D "
                      "shapes");
  if (a->elem != tdl::ElemType::F32 && a->elem != tdl::ElemType::F64)
    return error(at + ": Gemm with alpha = 0 is supported for float32 and "
                      "float64 only");
  const onnx::AttributeProto *transA = findAttr(node, "transA");
  const onnx::AttributeProto *transB = findAttr(node, "transB");
  int64_t M = transA && transA->i() ? a->dims[1] : a->dims[0];
  int64_t N = transB && transB->i() ? b->dims[0] : b->dims[1];
  std::string zeroA = prefix + "/alpha0.A", zeroB = prefix + "/alpha0.B";
  newConstants.push_back({zeroA, zeros(a->elem, {M, 1})});
  newConstants.push_back({zeroB, zeros(a->elem, {1, N})});
  node.set_input(0, zeroA);
  node.set_input(1, zeroB);
  removeAttr(node, "alpha");
  removeAttr(node, "transA");
  removeAttr(node, "transB");
  return llvm::Error::success();
}

/// Softmax, LogSoftmax and Hardmax before opset 13 normalize over dims
/// `axis` .. rank - 1 of `type`: when all of them but one have size 1 (or
/// all do), that is normalizing over the one (or the last), the opset-13
/// form in one node; squeezenet's Softmax on axis 1 of [1, 1000, 1, 1] is
/// Softmax on axis 1, which a loss sees through as any Softmax. The dim, or
/// nothing when two or more dims are wider (or unknown).
std::optional<int64_t> singleNormalizedDim(const tdl::TensorType &type,
                                           int64_t axis) {
  int64_t rank = type.dims.size(), wide = rank - 1, wideCount = 0;
  for (int64_t d = axis; d < rank; ++d)
    if (type.dims[d] != 1) {
      wide = d;
      ++wideCount;
    }
  if (wideCount > 1)
    return std::nullopt;
  return wide;
}

/// The `axis` (default 1) of Softmax, LogSoftmax or Hardmax before opset
/// 13, in [0, rank).
llvm::Expected<int64_t>
coercedAxis(const onnx::NodeProto &node, const std::string &at,
            llvm::function_ref<int64_t(llvm::StringRef)> rankOf) {
  int64_t rank = node.input_size() ? rankOf(node.input(0)) : -1;
  if (rank < 0)
    return error(at + ": the input's rank is unknown");
  int64_t axis = intAttr(node, "axis", 1);
  if (axis < -rank || axis >= rank)
    return error(at + ": axis " + std::to_string(axis) +
                 " is outside [-rank, rank) for an input of rank " +
                 std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

} // namespace

llvm::Error normalizeOnnxNode(
    onnx::NodeProto &node, int64_t opset, llvm::StringRef where,
    llvm::function_ref<const TensorData *(llvm::StringRef)> constantOf,
    llvm::function_ref<std::optional<tdl::TensorType>(llvm::StringRef)> typeOf,
    std::vector<std::pair<std::string, TensorData>> &newConstants) {
  const std::string op = node.op_type();
  auto rankOf = [&](llvm::StringRef name) -> int64_t {
    std::optional<tdl::TensorType> type = typeOf(name);
    return type ? static_cast<int64_t>(type->dims.size()) : -1;
  };
  std::string prefix = node.name().empty()
                           ? (node.output_size() ? node.output(0) : op)
                           : node.name();
  std::string at = where.str() + " at opset " + std::to_string(opset);

  // An attribute that later opsets made input `index`.
  auto intsAttrToInput = [&](llvm::StringRef attrName, int index) {
    const onnx::AttributeProto *attr = findAttr(node, attrName);
    if (!attr)
      return;
    std::vector<int64_t> values(attr->ints().begin(), attr->ints().end());
    std::string name = prefix + "/" + attrName.str();
    newConstants.push_back({name, int64Tensor(values)});
    setInput(node, index, name);
    removeAttr(node, attrName);
  };
  auto floatAttrToInput = [&](llvm::StringRef attrName, int index,
                              std::optional<float> fallback) {
    const onnx::AttributeProto *attr = findAttr(node, attrName);
    if (!attr && !fallback)
      return;
    std::string name = prefix + "/" + attrName.str();
    newConstants.push_back({name, floatScalar(attr ? attr->f() : *fallback)});
    setInput(node, index, name);
    if (attr)
      removeAttr(node, attrName);
  };

  // An empty axes input of another element type (torch.onnx.export writes
  // `x.sum(dim=[])` as an empty float32 Constant) is the empty int64 list.
  auto emptyAxesToInt64 = [&]() {
    if (node.input_size() < 2 || node.input(1).empty())
      return;
    const TensorData *axes = constantOf(node.input(1));
    if (!axes || axes->numElements() != 0 ||
        axes->type.elem == tdl::ElemType::I64)
      return;
    std::string name = prefix + "/axes.int64";
    newConstants.push_back({name, int64Tensor({})});
    node.set_input(1, name);
  };
  // `consumed_inputs` (opset 1 of Add, BatchNormalization, Relu, ...)
  // only marked inputs that an op could overwrite in place.
  removeAttr(node, "consumed_inputs");
  if (opset < 7 && hasLegacyBroadcast(op)) {
    auto padding = legacyBroadcastPadding(node, at, typeOf);
    if (!padding)
      return padding.takeError();
    if (*padding != 0)
      return error(at + ": B needs " + std::to_string(*padding) +
                   " size-1 dims appended to be aligned at axis " +
                   std::to_string(intAttr(node, "axis", 0)) +
                   ", an extra Unsqueeze node that only a model's graph gets "
                   "(expandOnnxNode), not a lone node");
    removeAttr(node, "broadcast");
    removeAttr(node, "axis");
    return llvm::Error::success();
  }
  if (opset < 7 && op == "PRelu") {
    auto padding = legacyPReluPadding(node, at, typeOf);
    if (!padding)
      return padding.takeError();
    if (*padding != 0)
      return error(at + ": the per-channel slope needs " +
                   std::to_string(*padding) +
                   " size-1 dims appended, an extra Unsqueeze node that only a "
                   "model's graph gets (expandOnnxNode), not a lone node");
    return llvm::Error::success();
  }
  if (opset < 7 && (op == "RNN" || op == "GRU" || op == "LSTM"))
    // Whether Y is produced is the node's output list from opset 7 on.
    removeAttr(node, "output_sequence");
  if (op == "TopK" && opset < 10) {
    // k, an attribute before 10, is the int64 [1] input of later opsets.
    if (const onnx::AttributeProto *k = findAttr(node, "k")) {
      std::string name = prefix + "/k";
      newConstants.push_back({name, int64Tensor({k->i()})});
      setInput(node, 1, name);
      removeAttr(node, "k");
    }
    return llvm::Error::success();
  }
  if (op == "Gemm" && opset < 7) {
    // Before 7, C broadcast (unidirectionally, as from 7 on) only with
    // broadcast = 1; otherwise it is [M, N].
    bool broadcast = intAttr(node, "broadcast", 0) != 0;
    removeAttr(node, "broadcast");
    if (!broadcast && node.input_size() > 2) {
      std::optional<tdl::TensorType> a = typeOf(node.input(0));
      std::optional<tdl::TensorType> b = typeOf(node.input(1));
      std::optional<tdl::TensorType> c = typeOf(node.input(2));
      if (a && b && c && a->dims.size() == 2 && b->dims.size() == 2) {
        int64_t M = a->dims[intAttr(node, "transA", 0) ? 1 : 0];
        int64_t N = b->dims[intAttr(node, "transB", 0) ? 0 : 1];
        if (c->dims != std::vector<int64_t>{M, N})
          return error(at +
                       ": Gemm without broadcast = 1 (opsets before 7) "
                       "needs C of shape " +
                       formatDims({M, N}) + ", not " + formatDims(c->dims));
      }
    }
  }
  if (op == "Gemm")
    return normalizeGemm(node, at, prefix, typeOf, newConstants);
  if (op == "Einsum")
    return normalizeEinsum(node, at, typeOf);
  // Scatter (opsets 9-10) is ScatterElements (11) without reduction.
  if (op == "Scatter") {
    node.set_op_type("ScatterElements");
    return llvm::Error::success();
  }
  if (op == "ReduceSum" && opset < 13) {
    intsAttrToInput("axes", 1);
    return llvm::Error::success();
  }
  if (op == "ReduceSum")
    emptyAxesToInt64();
  if ((op == "ReduceMean" || op == "ReduceMax" || op == "ReduceMin" ||
       op == "ReduceProd" || op == "ReduceL1" || op == "ReduceL2" ||
       op == "ReduceLogSum" || op == "ReduceLogSumExp" ||
       op == "ReduceSumSquare") &&
      opset >= 18) {
    // The axes input (18) becomes the attribute of the opset-13 form.
    if (node.input_size() < 2 || node.input(1).empty())
      return llvm::Error::success();
    const TensorData *axes = constantOf(node.input(1));
    if (!axes)
      return error(at + ": the axes input '" + node.input(1) +
                   "' must be a compile-time constant");
    auto *attr = node.add_attribute();
    attr->set_name("axes");
    attr->set_type(onnx::AttributeProto::INTS);
    for (int64_t k = 0; k < axes->numElements(); ++k)
      attr->add_ints(static_cast<int64_t>(axes->valueAt(k)));
    node.mutable_input()->DeleteSubrange(1, node.input_size() - 1);
    // An empty axes list with noop_with_empty_axes = 0 reduces every axis,
    // which is what the attribute form's empty list means too.
    return llvm::Error::success();
  }
  if (op == "Split" && opset < 13) {
    intsAttrToInput("split", 1);
    return llvm::Error::success();
  }
  if ((op == "Squeeze" || op == "Unsqueeze") && opset < 13) {
    intsAttrToInput("axes", 1);
    return llvm::Error::success();
  }
  if (op == "Slice" && opset < 10) {
    if (!findAttr(node, "starts") || !findAttr(node, "ends"))
      return error(at + ": Slice needs 'starts' and 'ends' attributes");
    intsAttrToInput("starts", 1);
    intsAttrToInput("ends", 2);
    intsAttrToInput("axes", 3);
    return llvm::Error::success();
  }
  if (op == "Clip" && opset < 11) {
    bool hasMax = findAttr(node, "max");
    floatAttrToInput("min", 1,
                     hasMax ? std::optional<float>(-FLT_MAX) : std::nullopt);
    floatAttrToInput("max", 2, std::nullopt);
    return llvm::Error::success();
  }
  if (op == "Dropout" && opset < 12) {
    bool training = false;
    if (opset < 7) {
      // Dropout-6 drops at random unless is_test = 1 (default 0), with
      // `ratio` (default 0.5); its mask output is float.
      training = intAttr(node, "is_test", 0) == 0;
      removeAttr(node, "is_test");
      if (node.output_size() > 1 && !node.output(1).empty())
        return error(at + ": Dropout's mask output before opset 10 is a "
                          "float tensor, which is not supported (opset 12's "
                          "Dropout has a bool mask)");
    } else if (findAttr(node, "is_test")) {
      return error(at + ": Dropout's 'is_test' attribute exists before "
                        "opset 7 only");
    }
    floatAttrToInput("ratio", 1,
                     training ? std::optional<float>(0.5f) : std::nullopt);
    if (training) {
      std::string name = prefix + "/training_mode";
      newConstants.push_back({name, boolScalar(true)});
      setInput(node, 2, name);
    }
    return llvm::Error::success();
  }
  if (op == "Pad" && opset < 11) {
    // Before 11, `pads` and the constant `value` were attributes.
    intsAttrToInput("pads", 1);
    floatAttrToInput("value", 2, std::nullopt);
    return llvm::Error::success();
  }
  if (op == "BatchNormalization" && opset < 9) {
    if (opset < 7) {
      // Before 7, is_test = 1 is inference (outputs Y only) and is_test = 0
      // (the default) training, with outputs Y, mean, var (the running
      // statistics) and saved_mean, saved_var: the spec's training_mode.
      bool training = intAttr(node, "is_test", 0) == 0;
      removeAttr(node, "is_test");
      for (int k = training ? 3 : 1; k < node.output_size(); ++k)
        if (!node.output(k).empty())
          return error(at + ": BatchNormalization with is_test = " +
                       (training ? "0" : "1") + " and output " +
                       std::to_string(k) + " ('" + node.output(k) +
                       "') is not supported (" +
                       (training ? "saved_mean and saved_var are not "
                                   "computed"
                                 : "test mode outputs Y only") +
                       ")");
      if (node.output_size() > 3)
        node.mutable_output()->DeleteSubrange(3, node.output_size() - 3);
      if (training)
        setIntAttr(node, "training_mode", 1);
    }
    // Before 9, `spatial` (default 1) chose per-channel statistics (1) or
    // per-activation ones (0); from 9 on only the per-channel form exists.
    if (const onnx::AttributeProto *attr = findAttr(node, "spatial")) {
      if (attr->i() != 1)
        return error(at + ": BatchNormalization with spatial = 0 "
                          "(per-activation statistics) is not supported; "
                          "re-export the model at opset 9 or later");
      removeAttr(node, "spatial");
    }
    return llvm::Error::success();
  }
  if ((op == "Softmax" || op == "LogSoftmax" || op == "Hardmax") &&
      opset < 13) {
    // Before 13 the input is coerced to 2-D at `axis` (default 1) and
    // normalized over all dims from `axis` on; from 13 over `axis` alone.
    // The two agree when `axis` is the last dim, or when the other dims
    // from `axis` on have size 1 (singleNormalizedDim); expandOnnxNode
    // flattens the input for the rest.
    auto axis = coercedAxis(node, at, rankOf);
    if (!axis)
      return axis.takeError();
    auto single = singleNormalizedDim(*typeOf(node.input(0)), *axis);
    if (!single)
      return error(at + ": " + op +
                   " before opset 13 normalizes over all dims from axis " +
                   std::to_string(*axis) +
                   " on (coerced to 2-D), which takes Flatten and Reshape nodes "
                   "that only a model's graph gets (expandOnnxNode), not a "
                   "lone node");
    setIntAttr(node, "axis", *single);
    return llvm::Error::success();
  }
  if (op == "Upsample" && opset < 7) {
    // Upsample-1 (experimental): height_scale and width_scale of a 4-D
    // [N, C, H, W] input, mode nearest or bilinear.
    const onnx::AttributeProto *h = findAttr(node, "height_scale");
    const onnx::AttributeProto *w = findAttr(node, "width_scale");
    if (!h || !w)
      return error(at + ": Upsample before opset 7 needs the height_scale "
                        "and width_scale attributes");
    if (node.input_size() < 1 || rankOf(node.input(0)) != 4)
      return error(at + ": Upsample before opset 7 takes a 4-D input");
    auto *scales = node.add_attribute();
    scales->set_name("scales");
    scales->set_type(onnx::AttributeProto::FLOATS);
    for (float f : {1.0f, 1.0f, h->f(), w->f()})
      scales->add_floats(f);
    removeAttr(node, "height_scale");
    removeAttr(node, "width_scale");
    if (stringAttr(node, "mode", "nearest") == "bilinear") {
      removeAttr(node, "mode");
      auto *mode = node.add_attribute();
      mode->set_name("mode");
      mode->set_type(onnx::AttributeProto::STRING);
      mode->set_s("linear");
    }
  }
  if (op == "Resize" || op == "Upsample")
    return normalizeResize(node, opset, at, constantOf, typeOf, rankOf);
  return llvm::Error::success();
}

llvm::Expected<std::vector<onnx::NodeProto>> expandOnnxNode(
    const onnx::NodeProto &node, int64_t opset, llvm::StringRef where,
    llvm::function_ref<std::optional<tdl::TensorType>(llvm::StringRef)> typeOf,
    std::vector<std::pair<std::string, TensorData>> &newConstants) {
  const std::string op = node.op_type();
  std::string prefix = node.name().empty()
                           ? (node.output_size() ? node.output(0) : op)
                           : node.name();
  std::string at = where.str() + " at opset " + std::to_string(opset);
  auto rankOf = [&](llvm::StringRef name) -> int64_t {
    std::optional<tdl::TensorType> type = typeOf(name);
    return type ? static_cast<int64_t>(type->dims.size()) : -1;
  };
  auto makeNode = [&](llvm::StringRef opType, llvm::StringRef name,
                      std::vector<std::string> inputs,
                      std::vector<std::string> outputs) {
    onnx::NodeProto piece;
    piece.set_op_type(opType.str());
    piece.set_name(name.str());
    for (const std::string &input : inputs)
      piece.add_input(input);
    for (const std::string &output : outputs)
      piece.add_output(output);
    return piece;
  };
  // Operand `index` of `main` through an Unsqueeze that appends `count`
  // size-1 dims to its `rank` dims.
  auto appendUnitDims = [&](onnx::NodeProto &main, int index, int64_t rank,
                            int64_t count, llvm::StringRef what) {
    std::vector<int64_t> axes;
    for (int64_t k = 0; k < count; ++k)
      axes.push_back(rank + k);
    std::string axesName = prefix + "/" + what.str() + ".axes";
    std::string aligned = prefix + "/" + what.str() + ".aligned";
    newConstants.push_back({axesName, int64Tensor(axes)});
    onnx::NodeProto unsqueeze =
        makeNode("Unsqueeze", prefix + "/" + what.str() + ".unsqueeze",
                 {main.input(index), axesName}, {aligned});
    main.set_input(index, aligned);
    return unsqueeze;
  };

  if (opset < 7 && hasLegacyBroadcast(op)) {
    auto padding = legacyBroadcastPadding(node, at, typeOf);
    if (!padding)
      return padding.takeError();
    if (*padding == 0)
      return std::vector<onnx::NodeProto>{node};
    // B aligned at `axis`: B with size-1 dims appended, then the suffix
    // matching of broadcast = 1 without axis, which is numpy's.
    onnx::NodeProto main = node;
    main.set_name(prefix);
    removeAttr(main, "axis");
    onnx::NodeProto unsqueeze =
        appendUnitDims(main, 1, rankOf(node.input(1)), *padding, "B");
    return std::vector<onnx::NodeProto>{unsqueeze, main};
  }
  if (opset < 7 && op == "PRelu") {
    auto padding = legacyPReluPadding(node, at, typeOf);
    if (!padding)
      return padding.takeError();
    if (*padding == 0)
      return std::vector<onnx::NodeProto>{node};
    onnx::NodeProto main = node;
    main.set_name(prefix);
    onnx::NodeProto unsqueeze = appendUnitDims(main, 1, 1, *padding, "slope");
    return std::vector<onnx::NodeProto>{unsqueeze, main};
  }
  if ((op == "Softmax" || op == "LogSoftmax" || op == "Hardmax") &&
      opset < 13) {
    auto axis = coercedAxis(node, at, rankOf);
    if (!axis)
      return axis.takeError();
    std::optional<tdl::TensorType> type = typeOf(node.input(0));
    if (singleNormalizedDim(*type, *axis))
      return std::vector<onnx::NodeProto>{node}; // normalizeOnnxNode's
    if (llvm::any_of(type->dims, [](int64_t d) { return d < 0; }))
      return error(at + ": " + op + " on axis " + std::to_string(*axis) +
                   " of an input with unknown dims " + formatDims(type->dims) +
                   " (coerced to 2-D) needs a static shape");
    if (node.output_size() != 1)
      return error(at + ": " + op + " has one output");
    // [d0 .. d(axis-1)] x [d(axis) ..], the op on axis 1, and back.
    std::string flat = prefix + "/coerced", result = prefix + "/coerced.out";
    std::string shape = prefix + "/shape";
    onnx::NodeProto flatten =
        makeNode("Flatten", prefix + "/coerce", {node.input(0)}, {flat});
    setIntAttr(flatten, "axis", *axis);
    onnx::NodeProto main = node;
    main.set_name(prefix);
    main.set_input(0, flat);
    main.set_output(0, result);
    setIntAttr(main, "axis", 1);
    newConstants.push_back({shape, int64Tensor(type->dims)});
    onnx::NodeProto reshape = makeNode("Reshape", prefix + "/uncoerce",
                                       {result, shape}, {node.output(0)});
    return std::vector<onnx::NodeProto>{flatten, main, reshape};
  }
  if ((op == "InstanceNormalization" || op == "GroupNormalization") &&
      node.input_size() == 3 && node.output_size() == 1) {
    // The specs (tdl-specs/norm-extra.tdl) recompute the group's mean inside
    // its variance for every element: interpreted, that is O(M^2) work per
    // element for M elements per group (an InstanceNormalization on
    // [2, 10, 32, 32] took over 200 s). With static shapes and a float32 or
    // float64 input the node becomes LayerNormalization over the groups,
    // which has native kernels and the same statistics (biased variance,
    // the same epsilon):
    //   X [N, C, *S] -> Reshape [N, G, C/G * prod(S)] -> LayerNormalization
    //   (axis 2, Scale all ones) -> scale, bias per group ([G] of opset 18: on
    //   [N, G, M] as [G, 1]) or per channel ([C]: on [N, C, *S] as
    //   [C, 1, ...]).
    std::optional<tdl::TensorType> type = typeOf(node.input(0));
    std::optional<tdl::TensorType> scaleType = typeOf(node.input(1));
    std::optional<tdl::TensorType> biasType = typeOf(node.input(2));
    bool isStatic =
        type && type->dims.size() >= 2 &&
        llvm::all_of(type->dims, [](int64_t d) { return d > 0; }) &&
        (type->elem == tdl::ElemType::F32 || type->elem == tdl::ElemType::F64);
    if (!isStatic || !scaleType || !biasType || scaleType->dims.size() != 1 ||
        biasType->dims != scaleType->dims)
      return std::vector<onnx::NodeProto>{node};
    int64_t batch = type->dims[0], channels = type->dims[1];
    int64_t groups = op == "InstanceNormalization"
                         ? channels
                         : intAttr(node, "num_groups", 0);
    if (groups < 1 || channels % groups != 0)
      return std::vector<onnx::NodeProto>{node}; // the spec's error
    int64_t perGroup = channels / groups;
    for (size_t d = 2; d < type->dims.size(); ++d)
      perGroup *= type->dims[d];
    int64_t paramLength = scaleType->dims[0];
    if (paramLength != channels && paramLength != groups)
      return std::vector<onnx::NodeProto>{node}; // the spec's error
    bool perChannel = paramLength == channels;
    float epsilon = 1e-5f;
    for (const onnx::AttributeProto &attr : node.attribute())
      if (attr.name() == "epsilon")
        epsilon = attr.f();

    std::string groupedShape = prefix + "/grouped.shape";
    std::string grouped = prefix + "/grouped";
    std::string ones = prefix + "/ones";
    std::string normalized = prefix + "/normalized";
    newConstants.push_back(
        {groupedShape, int64Tensor({batch, groups, perGroup})});
    // Scale holds every normalized element (not [1]): the native kernel
    // takes no Scale broadcast inside the normalized dims.
    TensorData one;
    one.type.elem = type->elem;
    one.type.dims = {perGroup};
    if (type->elem == tdl::ElemType::F64) {
      std::vector<double> values(perGroup, 1.0);
      one.bytes.resize(values.size() * sizeof(double));
      std::memcpy(one.bytes.data(), values.data(), one.bytes.size());
    } else {
      std::vector<float> values(perGroup, 1.0f);
      one.bytes.resize(values.size() * sizeof(float));
      std::memcpy(one.bytes.data(), values.data(), one.bytes.size());
    }
    newConstants.push_back({ones, one});
    std::vector<onnx::NodeProto> pieces;
    pieces.push_back(makeNode("Reshape", prefix + "/group",
                              {node.input(0), groupedShape}, {grouped}));
    onnx::NodeProto norm = makeNode("LayerNormalization", prefix + "/normalize",
                                    {grouped, ones}, {normalized});
    setIntAttr(norm, "axis", 2);
    onnx::AttributeProto *eps = norm.add_attribute();
    eps->set_name("epsilon");
    eps->set_type(onnx::AttributeProto::FLOAT);
    eps->set_f(epsilon);
    pieces.push_back(norm);
    // scale and bias as [P, 1, ..., 1] against [N, P, ...] (P = G or C).
    int64_t trailing = perChannel ? static_cast<int64_t>(type->dims.size()) - 2
                                  : 1;
    std::string current = normalized;
    if (perChannel) {
      std::string shape = prefix + "/shape";
      newConstants.push_back({shape, int64Tensor(type->dims)});
      pieces.push_back(makeNode("Reshape", prefix + "/ungroup",
                                {normalized, shape}, {prefix + "/ungrouped"}));
      current = prefix + "/ungrouped";
    }
    std::vector<int64_t> paramShape = {paramLength};
    paramShape.insert(paramShape.end(), trailing, 1);
    std::string paramShapeName = prefix + "/param.shape";
    newConstants.push_back({paramShapeName, int64Tensor(paramShape)});
    pieces.push_back(makeNode("Reshape", prefix + "/scale.reshape",
                              {node.input(1), paramShapeName},
                              {prefix + "/scale.aligned"}));
    pieces.push_back(makeNode("Reshape", prefix + "/bias.reshape",
                              {node.input(2), paramShapeName},
                              {prefix + "/bias.aligned"}));
    std::string scaled = prefix + "/scaled";
    std::string shifted = perChannel ? node.output(0) : prefix + "/shifted";
    onnx::NodeProto mul = makeNode("Mul", prefix + "/scale",
                                   {current, prefix + "/scale.aligned"},
                                   {scaled});
    onnx::NodeProto add = makeNode("Add", prefix + "/shift",
                                   {scaled, prefix + "/bias.aligned"},
                                   {shifted});
    if (opset < 7) { // numpy's trailing alignment, in the opset-6 spelling
      setIntAttr(mul, "broadcast", 1);
      setIntAttr(add, "broadcast", 1);
    }
    pieces.push_back(mul);
    pieces.push_back(add);
    if (!perChannel) {
      std::string shape = prefix + "/shape";
      newConstants.push_back({shape, int64Tensor(type->dims)});
      pieces.push_back(makeNode("Reshape", prefix + "/ungroup",
                                {shifted, shape}, {node.output(0)}));
    }
    return pieces;
  }
  return std::vector<onnx::NodeProto>{node};
}

} // namespace tofu
