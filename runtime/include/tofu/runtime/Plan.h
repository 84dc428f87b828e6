//===- Plan.h - In-memory form of a tofu plan (plan.bin) --------*- C++ -*-===//
//
// The contract between the compiler (tofuc's `emit` phase) and the runtime
// (tofu-run). The compiler fills a `Plan`; `writePlan` serializes it into the
// versioned, checksummed plan.bin container; `readPlan` verifies and loads it.
// This header depends only on the C++17 standard library: the runtime builds
// without LLVM/MLIR.
//
// Coordinates: every region (`Box`) is a half-open box [lo, hi) in the GLOBAL
// index space of its tensor. A buffer on a device holds one box of one tensor,
// stored densely in row-major order of that box.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_PLAN_H
#define TOFU_RUNTIME_PLAN_H

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tofu::plan {

/// An immutable string that its copies share (one reference count, one
/// heap block): the op and kernel names of instructions, which every
/// device's instructions of one op carry. As one std::string per
/// instruction they were 32 bytes each plus a heap copy for names over 15
/// characters (~11% of tofuc's memory for GPT-3 at k = 256,
/// bench/compile_scale.md); a SharedName is one pointer. It reads as a
/// `const std::string &` (str(), or the conversion); plan.bin stores it as
/// any string. The empty name holds no block.
class SharedName {
public:
  SharedName() = default;
  SharedName(std::string text)
      : rep(text.empty() ? nullptr : new Rep{{1}, std::move(text)}) {}
  SharedName(const char *text) : SharedName(std::string(text)) {}
  SharedName(const SharedName &other) noexcept : rep(other.rep) {
    if (rep)
      rep->refs.fetch_add(1, std::memory_order_relaxed);
  }
  SharedName(SharedName &&other) noexcept : rep(other.rep) {
    other.rep = nullptr;
  }
  SharedName &operator=(SharedName other) noexcept {
    std::swap(rep, other.rep);
    return *this;
  }
  ~SharedName() {
    if (rep && rep->refs.fetch_sub(1, std::memory_order_acq_rel) == 1)
      delete rep;
  }

  const std::string &str() const { return rep ? rep->text : emptyString(); }
  operator const std::string &() const { return str(); }
  bool empty() const { return !rep; }
  size_t size() const { return str().size(); }
  const char *c_str() const { return str().c_str(); }
  const char *data() const { return str().data(); }
  /// True when `other` shares this name's block (both empty included).
  bool sharesWith(const SharedName &other) const { return rep == other.rep; }

  friend bool operator==(const SharedName &a, const SharedName &b) {
    return a.rep == b.rep || a.str() == b.str();
  }
  friend bool operator==(const SharedName &a, const std::string &b) {
    return a.str() == b;
  }
  friend bool operator==(const SharedName &a, std::string_view b) {
    return std::string_view(a.str()) == b;
  }
  friend bool operator==(const SharedName &a, const char *b) {
    return a.str() == b;
  }
  template <typename T>
  friend bool operator==(const T &a, const SharedName &b) {
    return b == a;
  }
  template <typename T>
  friend bool operator!=(const SharedName &a, const T &b) {
    return !(a == b);
  }
  template <typename T>
  friend bool operator!=(const T &a, const SharedName &b) {
    return !(b == a);
  }
  friend std::string operator+(const std::string &a, const SharedName &b) {
    return a + b.str();
  }
  friend std::string operator+(const char *a, const SharedName &b) {
    return a + b.str();
  }
  friend std::string operator+(const SharedName &a, const std::string &b) {
    return a.str() + b;
  }
  friend std::string operator+(const SharedName &a, const char *b) {
    return a.str() + b;
  }
  // The return type names std::string, not `name`: SharedName is
  // incomplete inside its own class (clang rejects the member access).
  template <typename Stream>
  friend auto operator<<(Stream &os, const SharedName &name)
      -> decltype(os << std::declval<const std::string &>()) {
    return os << name.str();
  }

private:
  struct Rep {
    std::atomic<uint64_t> refs;
    std::string text;
  };
  static const std::string &emptyString() {
    static const std::string empty;
    return empty;
  }
  Rep *rep = nullptr;
};

/// Element type of a tensor. Bool is stored as one byte (0 or 1); F16 is
/// IEEE 754 binary16, BF16 the upper half of a binary32. All types are stored
/// little-endian. The values are part of the plan format: F32, I64 since 1.0,
/// Bool since 1.1, F64 through BF16 since 1.7 (docs/PlanFormat.md).
enum class DType : uint8_t {
  F32 = 0,
  I64 = 1,
  Bool = 2,
  F64 = 3,
  I32 = 4,
  I16 = 5,
  I8 = 6,
  U8 = 7,
  U16 = 8,
  U32 = 9,
  U64 = 10,
  F16 = 11,
  BF16 = 12,
};

/// Number of element types (one above the largest `DType` value): a plan or
/// checkpoint naming a dtype at or above it is rejected.
inline constexpr uint8_t kNumDTypes = 13;

/// The most devices a plan has: tofuc refuses a larger --gpus and the reader
/// a plan that claims more (the partitioner's search grows with k; a count
/// from a damaged file must not size allocations). docs/Errors.md.
inline constexpr uint32_t kMaxDevices = 1024;

/// The most elements one tensor has (2^56): byte sizes of every dtype stay
/// far from 64-bit overflow. tofuc refuses a larger tensor at import, the
/// reader a plan that holds one.
inline constexpr int64_t kMaxTensorElements = int64_t(1) << 56;

/// The largest device arena (planned peak memory) of a plan: 2^56 bytes, a
/// bound on corrupt or overflowed sizes rather than on any real device
/// (tofu-run reports a real device's shortfall when it allocates).
inline constexpr uint64_t kMaxArenaBytes = uint64_t(1) << 56;

/// The highest tensor rank tofuc and the reader accept (ONNX sets none;
/// the largest rank of any known model is far below it).
inline constexpr int64_t kMaxTensorRank = 64;

/// True if `code` names a `DType` (a value read from a file).
inline bool isValidDType(uint8_t code) { return code < kNumDTypes; }

/// Size in bytes of one element of `type`.
inline uint64_t dtypeSize(DType type) {
  switch (type) {
  case DType::Bool:
  case DType::I8:
  case DType::U8:
    return 1;
  case DType::I16:
  case DType::U16:
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::F32:
  case DType::I32:
  case DType::U32:
    return 4;
  case DType::F64:
  case DType::I64:
  case DType::U64:
    return 8;
  }
  return 0;
}

/// The numpy name of `type` ("float32", "int64", "bool", "float16",
/// "bfloat16", ...), used in messages, checkpoints and dumps.
inline const char *dtypeNumpyName(DType type) {
  switch (type) {
  case DType::F32: return "float32";
  case DType::I64: return "int64";
  case DType::Bool: return "bool";
  case DType::F64: return "float64";
  case DType::I32: return "int32";
  case DType::I16: return "int16";
  case DType::I8: return "int8";
  case DType::U8: return "uint8";
  case DType::U16: return "uint16";
  case DType::U32: return "uint32";
  case DType::U64: return "uint64";
  case DType::F16: return "float16";
  case DType::BF16: return "bfloat16";
  }
  return "unknown";
}

/// True for the floating-point types (F16, BF16, F32, F64).
inline bool isFloatDType(DType type) {
  return type == DType::F32 || type == DType::F64 || type == DType::F16 ||
         type == DType::BF16;
}

/// True for the signed and unsigned integer types (not Bool).
inline bool isIntegerDType(DType type) {
  return !isFloatDType(type) && type != DType::Bool;
}

/// True for the unsigned integer types.
inline bool isUnsignedDType(DType type) {
  return type == DType::U8 || type == DType::U16 || type == DType::U32 ||
         type == DType::U64;
}

/// A half-open box [lo, hi) in a tensor's global index space. A rank-0 tensor
/// (scalar) has empty `lo`/`hi` and one element.
struct Box {
  std::vector<int64_t> lo, hi;
  /// Number of elements in the box.
  int64_t numElements() const {
    int64_t n = 1;
    for (size_t i = 0; i < lo.size(); ++i)
      n *= hi[i] > lo[i] ? hi[i] - lo[i] : 0;
    return n;
  }
};

/// A read-only view of a box's bounds: `rank` coordinates at `lo` and as
/// many at `hi` (a Box's, or a device's row of a shared region table,
/// DeviceProgram::sharedRegions).
struct BoxView {
  const int64_t *lo = nullptr, *hi = nullptr;
  size_t rank = 0;
  BoxView() = default;
  BoxView(const int64_t *lo, const int64_t *hi, size_t rank)
      : lo(lo), hi(hi), rank(rank) {}
  BoxView(const Box &box)
      : lo(box.lo.data()), hi(box.hi.data()), rank(box.lo.size()) {}
  /// Number of elements in the box.
  int64_t numElements() const {
    int64_t n = 1;
    for (size_t i = 0; i < rank; ++i)
      n *= hi[i] > lo[i] ? hi[i] - lo[i] : 0;
    return n;
  }
  /// A Box holding the same bounds.
  Box toBox() const { return Box{{lo, lo + rank}, {hi, hi + rank}}; }
};

/// What a tensor is in the training step.
enum class TensorRole : uint8_t {
  Input = 0,      ///< fed by the data loader each step (features)
  Label = 1,      ///< fed by the data loader each step (class labels)
  Param = 2,      ///< trainable weight, persistent across steps
  Activation = 3, ///< forward intermediate
  Gradient = 4,   ///< backward intermediate (gradient of some tensor)
  Loss = 5,       ///< the scalar loss
  Updated = 6,    ///< new value of a Param or State, copied back at step end
  State = 7,      ///< optimizer state (velocity, moments, update count,
                  ///< learning rate), persistent across steps; --save
                  ///< writes it to the checkpoint's state file
};

/// One cut of a tiling: dimension `dim` split into `parts` parts at one
/// recursion step.
struct Cut {
  int32_t dim = 0;
  int32_t parts = 1;
};

/// A tensor of the (unpartitioned) training graph.
struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  TensorRole role = TensorRole::Activation;
  std::vector<Cut> tiling;  ///< cuts, one per recursion step (may be empty)
  int64_t numClasses = 0;   ///< Label tensors: values lie in [0, numClasses) (or equal ignoreIndex); int64 Input tensors (token ids): in [-numClasses, numClasses) (ONNX Gather)
  int32_t pairedInput = -1; ///< for Label tensors: the Input tensor they label
  std::string paramName;    ///< for Param/Updated: the ONNX initializer name
  int32_t gradientOf = -1;  ///< for a Param's full gradient: the Param tensor
  /// Label tensors: the value the losses reading them ignore (their
  /// ignore_index, e.g. PyTorch's -100), allowed besides [0, numClasses).
  std::optional<int64_t> ignoreIndex;
};

/// A buffer on one device: a box of one tensor, at an offset in the device's
/// static arena.
struct Buffer {
  // (The small fields first: a plan at k = 1024 holds ~20 M buffers.)
  int32_t tensor = -1;  ///< index into Plan::tensors
  bool partial = false; ///< holds a partial sum (to be reduced), not final data
  /// The device's canonical copy of its tile of the tensor (the region its
  /// tiling assigns to this device). Each tensor has exactly one owned buffer
  /// per device; the owned buffers of all devices together cover the tensor
  /// (a scalar is owned by every device). --save and --dump read these.
  bool owned = false;
  Box region;           ///< global coordinates of the data it holds
  /// Byte offset in the device arena; a multiple of the element size, and
  /// offset + bytes <= the device's peakBytes (readPlan checks both).
  uint64_t offset = 0;
  uint64_t bytes = 0;   ///< region.numElements() * dtypeSize
  /// Initial contents (Param buffers only; empty otherwise), `bytes` long.
  std::vector<uint8_t> init;
  /// Initial contents borrowed instead of held in `init` (which is then
  /// empty), `bytes` long. Only the compiler sets it (materialize with
  /// MaterializeOptions::borrowWeights): a weight tile that is contiguous in
  /// the parameter's value points at those bytes, in the model file's
  /// read-only mapping, which outlives the plan's use; the weights then go
  /// from the model file to plan.bin without a copy in between. readPlan
  /// never sets it.
  const uint8_t *borrowedInit = nullptr;

  /// The size of the initial contents, owned or borrowed (0: none).
  size_t initSize() const { return borrowedInit ? bytes : init.size(); }
  /// True when the buffer has initial contents, owned or borrowed.
  bool hasInit() const { return initSize() != 0; }
  /// The initial contents, owned or borrowed (nullptr when none).
  const uint8_t *initData() const {
    return borrowedInit ? borrowedInit : init.empty() ? nullptr : init.data();
  }
};

/// An attribute of a compute instruction.
struct Attr {
  enum class Kind : uint8_t { Int = 0, Float = 1, String = 2, Ints = 3 };
  std::string name;
  Kind kind = Kind::Int;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
};

/// Binary operators of expression programs (value semantics in float64;
/// comparisons and logic give 1.0 or 0.0; FloorDiv/Mod are floor-based).
enum class BinaryOp : uint8_t {
  Add = 0, Sub, Mul, Div, FloorDiv, Mod, Pow,
  Eq, Ne, Lt, Le, Gt, Ge, And, Or,
};
/// Functions of expression programs.
enum class Function : uint8_t {
  Exp = 0, Log, Sqrt, Tanh, Abs, Max, Min, Erf, Sigmoid, Floor, Ceil, Select,
  /// uniform(seed, counter) in [0, 1): tofu::rng::counterUniform
  /// (CounterRng.h). Format 1.3.
  Uniform,
};
/// Reducers of expression programs.
enum class Reducer : uint8_t { Sum = 0, Max, Min, Prod };

/// A node of an expression program (a TDL output expression lowered at
/// compile time, so that tofu-run can evaluate any op that has a TDL spec
/// without a hand-written kernel and without a compiler).
struct ExprNode {
  enum class Kind : uint8_t {
    Const = 0,  ///< `value`
    Var = 1,    ///< the current value of index variable `var`
    Access = 2, ///< input `input` at indices operands[0..rank) (global
                ///< coordinates, truncated to integers); outside the tensor's
                ///< global shape it reads 0 (padding). The runtime rounds
                ///< each index with std::floor, as the TDL evaluator does.
    Neg = 3,    ///< -operands[0]
    Binary = 4, ///< operands[0] `binary` operands[1]
    Call = 5,   ///< `function`(operands...); Select(c, a, b) = c != 0 ? a : b
    Reduce = 6, ///< `reducer` of operands[0] over index variables `vars`
  };
  Kind kind = Kind::Const;
  double value = 0;
  int32_t var = -1;
  int32_t input = -1;
  BinaryOp binary = BinaryOp::Add;
  Function function = Function::Exp;
  Reducer reducer = Reducer::Sum;
  std::vector<int32_t> operands; ///< node ids, always smaller than this one's
  std::vector<int32_t> vars;     ///< Reduce: the variables it binds
};

/// The expression computing one output of an op: every element
/// out[v_outputVars[0], ...] = nodes[root], with each index variable ranging
/// over [0, varExtents[v]) (global extents). A Compute instruction whose
/// kernel has no native implementation is evaluated from these, over the
/// output buffer's region, with every reduction variable of the top-level
/// reducer restricted to `reductionRanges` when the device computes a
/// partial sum.
struct ExprProgram {
  std::vector<int64_t> varExtents;
  std::vector<int32_t> outputVars; ///< one variable per output dimension
  /// The variables of the top-level reducer, in the order of the TDL
  /// library's reductionVars(); Instr::reductionRanges refers to these.
  std::vector<int32_t> topReductionVars;
  std::vector<ExprNode> nodes;
  int32_t root = -1;
};

/// One piece of a fetch or reduction: `region` (global coordinates) of
/// buffer `buffer` on device `device`.
struct Piece {
  int32_t device = 0;
  int32_t buffer = 0;
  Box region;
};

/// The sources of a collective (format 3.0): for every device e of the plan,
/// the id of the buffer on e that holds e's part (-1: e contributes
/// nothing). One table serves every device's Fetch or Reduce of one
/// collective (all-gather, reduce-scatter, all-reduce): the owned tiles of a
/// tensor, or the tiles one op output produced, so that a collective over k
/// devices stores k entries instead of k pieces on each of k devices. A
/// Fetch or Reduce instruction of device d naming a table has the pieces
/// `derivePieces` gives (CollectivePieces.h): for each e in the order d,
/// then 0, 1, ... (skipping d), with a source buffer whose region meets
/// dst's region, the piece (e, buffer, intersection); a Fetch stops after
/// the first source whose region contains dst's whole region.
struct CollectiveSourceIndex;
struct CollectiveSources {
  std::vector<int32_t> buffers; ///< per device: source buffer id, or -1
  /// The source buffers' regions, flattened (device e's box is
  /// lo/hi[e*rank, (e+1)*rank); zeros where buffers[e] is -1): a copy of
  /// the plan's buffer regions that `makeCollectiveSources` makes, so that
  /// deriving pieces scans one array instead of k devices' buffers.
  size_t rank = 0;
  std::vector<int64_t> lo, hi;
  /// Where the sources lie (CollectivePieces.h), so that deriving the pieces
  /// of one destination visits the sources that meet it instead of all k:
  /// made by `makeCollectiveSources` when the boxes form a grid, as the
  /// tiles of a tiling do; null: derivation scans every source. Derived
  /// from buffers/lo/hi: a table changed afterwards needs a new index
  /// (makeCollectiveSources again) or none.
  std::shared_ptr<const CollectiveSourceIndex> index;
};

/// What the Compute instructions of one op output share on every device
/// (format 2.0): the op's attributes, the global shapes of its inputs and
/// outputs, and its expression programs. The compiler makes one per op
/// output and every device's instruction points at it; plan.bin stores each
/// once (Plan.op_specs) and the reader shares it again, so that these grow
/// with the number of ops, not with ops x devices.
struct OpSpec {
  std::vector<Attr> attrs;      ///< the op's attributes (an instruction
                                ///< computing one output of a multi-output
                                ///< op adds Int "tofu.output" = its index)
  /// Global shape of each input / output tensor (kernels that need a global
  /// extent, e.g. a mean over the batch, read it from here).
  std::vector<std::vector<int64_t>> inputGlobalShapes, outputGlobalShapes;
  /// One expression program per output (empty for opaque ops, which need a
  /// native kernel).
  std::vector<ExprProgram> programs;
};

/// One instruction of a device program.
struct Instr {
  enum class Kind : uint8_t {
    /// Run kernel `kernel` on local buffers `inputs` -> `outputs`.
    Compute = 0,
    /// MultiFetch: assemble buffer `dst` from `pieces` (each copied to the
    /// same global coordinates inside dst's region). Pieces on other devices
    /// are communication; pieces on this device are local copies.
    Fetch = 1,
    /// Reduction: dst := sum of `pieces` (dst's region is zeroed first, every
    /// piece is added at its global coordinates). Remote pieces are
    /// communication. Reduce-scatter and all-reduce are sets of these.
    Reduce = 2,
  };
  // (The small fields first: a plan at k = 1024 holds ~20 M instructions.)
  Kind kind = Kind::Compute;
  int32_t dst = -1;             ///< Fetch/Reduce: destination buffer id
  /// Global sequence number: the CPU backend runs the instructions of all
  /// devices in increasing `seq`; instructions with equal `seq` are
  /// independent of each other.
  int64_t seq = 0;
  SharedName kernel;            ///< Compute: kernel name (= TDL op name)
  std::vector<int32_t> inputs;  ///< Compute: buffer ids (-1 = absent optional)
  std::vector<int32_t> outputs; ///< Compute: buffer ids
  /// Fetch/Reduce: sources, listed explicitly. Empty when `sources` is set
  /// (tofuc's plans); readPlan fills them from `sources` unless told not to
  /// (ReadOptions::expandCollectives), so the runtimes read `pieces` only.
  std::vector<Piece> pieces;
  /// Fetch/Reduce (format 3.0): the collective's source table, shared with
  /// the other devices' instructions of the same collective; the pieces are
  /// derived from it (derivePieces, forEachPiece in CollectivePieces.h).
  /// Null = `pieces` are explicit.
  std::shared_ptr<const CollectiveSources> sources;
  /// Name of the graph op it came from (traces); shared by the
  /// instructions of one op on every device.
  SharedName op;
  /// Compute: the op-level part, shared with the other devices' instructions
  /// of the same op output (null = no attributes, shapes or programs). Read
  /// it through attrs(), inputGlobalShapes(), outputGlobalShapes() and
  /// programs(); change it through editSpec().
  std::shared_ptr<const OpSpec> spec;
  /// Compute: per output, this device's half-open range [lo, hi) of each of
  /// that output program's topReductionVars ({} = the whole extents). Native
  /// kernels see the same ranges through their local input shapes.
  std::vector<std::vector<std::pair<int64_t, int64_t>>> reductionRanges;

  const std::vector<Attr> &attrs() const { return specOrEmpty().attrs; }
  const std::vector<std::vector<int64_t>> &inputGlobalShapes() const {
    return specOrEmpty().inputGlobalShapes;
  }
  const std::vector<std::vector<int64_t>> &outputGlobalShapes() const {
    return specOrEmpty().outputGlobalShapes;
  }
  const std::vector<ExprProgram> &programs() const {
    return specOrEmpty().programs;
  }
  /// The spec, for changing it: a new one when there is none, a private
  /// copy when it is shared with other instructions (copy on write), so that
  /// a change never reaches another instruction.
  OpSpec &editSpec() {
    if (!spec || spec.use_count() > 1)
      spec = spec ? std::make_shared<OpSpec>(*spec)
                  : std::make_shared<OpSpec>();
    // Every spec is created non-const (make_shared<OpSpec>), and this
    // instruction is its only owner.
    return const_cast<OpSpec &>(*spec);
  }

private:
  const OpSpec &specOrEmpty() const {
    static const OpSpec empty;
    return spec ? *spec : empty;
  }
};

/// Attribute `name` of `in`, or null. The typed lookups below give
/// `fallback` when the attribute is absent or of another kind (a Float
/// lookup also takes an Int; an Ints lookup also falls back on an empty
/// list). The CPU kernels read theirs through KernelArgs instead.
inline const Attr *findAttr(const Instr &in, const char *name) {
  for (const Attr &a : in.attrs())
    if (a.name == name)
      return &a;
  return nullptr;
}
inline int64_t intAttr(const Instr &in, const char *name, int64_t fallback) {
  const Attr *a = findAttr(in, name);
  return a && a->kind == Attr::Kind::Int ? a->i : fallback;
}
inline double floatAttr(const Instr &in, const char *name, double fallback) {
  const Attr *a = findAttr(in, name);
  if (a && a->kind == Attr::Kind::Float)
    return a->f;
  if (a && a->kind == Attr::Kind::Int)
    return static_cast<double>(a->i);
  return fallback;
}
inline std::vector<int64_t> intsAttr(const Instr &in, const char *name,
                                     std::vector<int64_t> fallback) {
  const Attr *a = findAttr(in, name);
  if (a && a->kind == Attr::Kind::Ints && !a->ints.empty())
    return a->ints;
  return fallback;
}
/// The String attribute `name` of `in`, or "".
inline std::string stringAttr(const Instr &in, const char *name) {
  const Attr *a = findAttr(in, name);
  return a && a->kind == Attr::Kind::String ? a->s : "";
}

/// The initial contents of buffer `buffer` of a device that shares another
/// device's program (DeviceProgram::sharedInits): what the buffer's `init`
/// or `borrowedInit` would hold.
struct SharedInit {
  int32_t buffer = -1;
  std::vector<uint8_t> init;
  const uint8_t *borrowedInit = nullptr;
};

/// The program of one device.
struct DeviceProgram {
  std::vector<Buffer> buffers;
  std::vector<Instr> instrs;  ///< in execution order (increasing seq)
  uint64_t peakBytes = 0;     ///< arena size = planned peak memory
  uint64_t commBytes = 0;     ///< planned bytes received per step
  /// Where readPlan found this device's initial buffer contents (its weight
  /// shard): empty = the WEIGHTS section of plan.bin, otherwise the name of
  /// the external file next to plan.bin (format 1.5). writePlan ignores it
  /// and decides from its WriteOptions.
  std::string weightsFile;

  // Programs shared between devices while tofuc builds a plan
  // (SharedPrograms.h). readPlan never makes them: the runtimes always see
  // every device's own program.
  /// -1: `buffers` and `instrs` are this device's own. Otherwise they are
  /// empty and the device runs those of device `programOf` (which owns its
  /// program), the same up to the regions and the bounds of the reduction
  /// ranges, which are this device's in `sharedRegions` and
  /// `sharedReductionRanges`.
  int32_t programOf = -1;
  /// With programOf >= 0: buffer by buffer, its region's lo then hi (the
  /// rank of the buffer's tensor each); buffer b's row starts at
  /// `devices[programOf].regionStarts[b]`.
  std::vector<int64_t> sharedRegions;
  /// With programOf >= 0: instruction by instruction, output by output, the
  /// bounds of its reduction ranges (as many as the program's instruction
  /// has).
  std::vector<std::pair<int64_t, int64_t>> sharedReductionRanges;
  /// With programOf >= 0: the initial contents of this device's buffers,
  /// one per buffer of the program that has some (Buffer::hasInit), in
  /// buffer order.
  std::vector<SharedInit> sharedInits;
  /// On a device that owns its program: where each buffer's row starts in
  /// the sharedRegions of the devices sharing it (buffers.size() + 1
  /// entries; empty when none do).
  std::vector<size_t> regionStarts;
};

/// A kernel of the CUDA module (CudaModule): CUDA C++ generated by tofuc
/// from TDL expression programs (lib/Target/CudaKernelGenerator.cpp).
/// Its entry point is
///   extern "C" __global__ void name(TofuPointers<numPointers> ptrs,
///                                   TofuParams<numParams> params,
///                                   const unsigned long long *step,
///                                   unsigned long long *error)
/// where ptrs/params are by-value arrays of void* / int64_t (the values of a
/// CudaLaunch), `step` points to the training step (for uniform()), and
/// `error` to a 12-word record the kernel fills on its first out-of-buffer
/// read: {1, node, input, rank, index[0..8)}. Every thread block has
/// `blockSize` threads; the grid is the runtime's choice (grid-stride loop
/// over the launch's numElements). Format 1.6.
struct CudaKernel {
  std::string name;
  /// "elementwise", "reduction", "block-reduction" (also `<name>_block`,
  /// launched with one block of 256 threads per output element),
  /// "row-reduction" (also `<name>_row`, launched with one block of 256
  /// threads per row; the launch's last int64 parameter is the number of
  /// rows), "data-movement" or "fused-elementwise".
  std::string kind;
  std::string ops;          ///< the op kernels it computes, e.g. "Add+Relu"
  uint32_t numPointers = 0; ///< stage outputs, then operands
  uint32_t numParams = 0;   ///< int64 parameters
  uint32_t blockSize = 256;
};

/// One launch of a generated kernel: it computes output `output` of
/// instruction `firstInstr` of device `device` or, for a fused kernel, the
/// (only) outputs of instructions [firstInstr, firstInstr + numInstrs),
/// which are consecutive in the device's program. Format 1.6.
struct CudaLaunch {
  int32_t device = 0;
  int32_t firstInstr = 0;
  int32_t numInstrs = 1;
  int32_t output = 0;
  int32_t kernel = 0;        ///< index into CudaModule::kernels
  int64_t numElements = 0;   ///< output elements (threads of work)
  /// The pointer arguments: buffer ids of the device (stage outputs, then
  /// operands; -1 = an absent optional input, passed as null).
  std::vector<int32_t> buffers;
  std::vector<int64_t> params; ///< the int64 arguments, exactly as passed
};

/// The CUDA kernels of a plan compiled with `tofuc --cuda-arch` (the CUDA
/// section of plan.bin, format 1.6). Empty `arch` = no CUDA section.
struct CudaModule {
  std::string arch;     ///< target architecture, e.g. "sm_90"
  std::string compiler; ///< the nvcc that built `cubin` (its version line)
  std::string source;   ///< the generated CUDA C++ (one translation unit)
  std::vector<uint8_t> cubin; ///< nvcc -cubin -arch=<arch> of `source`
  std::vector<CudaKernel> kernels;
  std::vector<CudaLaunch> launches;
};

/// How parameters are updated (the update itself is compute instructions;
/// this is reported and used by --save).
struct OptimizerInfo {
  std::string kind = "sgd";
  double learningRate = 0.1;
};

/// A whole compiled training step for k devices.
struct Plan {
  std::string producer;         ///< e.g. "tofuc 0.1.0"
  uint64_t modelFingerprint = 0;///< FNV-1a 64 of the ONNX model bytes
  uint32_t numDevices = 1;
  int64_t batchSize = 0;        ///< samples per step
  std::string partitioner;      ///< e.g. "allrow-greedy"
  double searchSeconds = 0;
  uint64_t commBytes = 0;       ///< planned total bytes moved per step
  OptimizerInfo optimizer;
  std::vector<TensorInfo> tensors;
  int32_t lossTensor = -1;
  /// (Param tensor, Updated tensor) pairs: at step end each device copies its
  /// Updated buffers into the Param buffers of the same region (emitted as
  /// local Fetch instructions by the compiler, listed here for --save).
  std::vector<std::pair<int32_t, int32_t>> paramUpdates;
  std::vector<DeviceProgram> devices;
  /// Set by readPlan: how many programs plan.bin stores for `devices`
  /// (format 4.0: devices whose buffers and instructions are the same up to
  /// regions and reduction bounds share one); 0 for a plan not read.
  uint32_t storedPrograms = 0;
  /// The original ONNX model (serialized ModelProto), used by --save to write
  /// the trained weights back. May be empty.
  std::vector<uint8_t> onnxModel;
  /// Human-readable plan summary printed by `tofu-run --dump-plan`.
  std::string summary;
  /// True when the plan was compiled without weights (`tofuc --no-weights`,
  /// graph-only model): parameter buffers have no initial contents, and
  /// tofu-run refuses to run it (format 1.2).
  bool withoutWeights = false;
  /// Kernels for the CUDA backend (`tofuc --cuda-arch`); empty without.
  CudaModule cuda;
};

/// The device whose program device `device` runs: itself, or the one whose
/// program it shares (DeviceProgram::programOf).
inline size_t programOwner(const Plan &plan, size_t device) {
  const int32_t programOf = plan.devices[device].programOf;
  return programOf < 0 ? device : static_cast<size_t>(programOf);
}

/// The buffers device `device` runs with: its own, or those of the device
/// whose program it shares (DeviceProgram::programOf); their regions are
/// bufferRegion's.
inline const std::vector<Buffer> &buffersOf(const Plan &plan, size_t device) {
  const DeviceProgram &dev = plan.devices[device];
  return dev.programOf < 0 ? dev.buffers : plan.devices[dev.programOf].buffers;
}

/// The instructions device `device` runs: its own, or those of the device
/// whose program it shares (their reduction ranges are the owner's).
inline const std::vector<Instr> &instrsOf(const Plan &plan, size_t device) {
  const DeviceProgram &dev = plan.devices[device];
  return dev.programOf < 0 ? dev.instrs : plan.devices[dev.programOf].instrs;
}

/// The region of buffer `buffer` of device `device`, whether the device
/// owns its program or shares one.
inline BoxView bufferRegion(const Plan &plan, size_t device, size_t buffer) {
  const DeviceProgram &dev = plan.devices[device];
  if (dev.programOf < 0)
    return BoxView(dev.buffers[buffer].region);
  const DeviceProgram &owner = plan.devices[dev.programOf];
  const size_t start = owner.regionStarts[buffer];
  const size_t rank = (owner.regionStarts[buffer + 1] - start) / 2;
  const int64_t *lo = dev.sharedRegions.data() + start;
  return BoxView(lo, lo + rank, rank);
}

/// How writePlan stores the weights.
struct WriteOptions {
  /// When the initial buffer contents of all devices together exceed this
  /// many bytes, each device's shard goes into its own external file in
  /// plan.bin's directory, named `<16 hex digits>.tofu-weights` after its
  /// FNV-1a 64 checksum (so the name depends only on the contents), instead
  /// of into the WEIGHTS section. 0 = always (tofuc --external-weights).
  uint64_t externalWeightsAbove = UINT64_MAX;
};

/// What readPlan loads.
struct ReadOptions {
  /// -1: every device's weight shard (and the whole file is verified).
  /// d >= 0: only device d's shard is read and verified (its checksum); the
  /// other devices' buffers get no `init` and their shards are neither read
  /// nor checksummed, so a process reads only its own shard.
  int32_t onlyDevice = -1;
  /// Whether to read the MODEL section (the original ONNX model, as large as
  /// the weights; --save needs it). A partial read (onlyDevice >= 0) without
  /// it does not touch that section.
  bool loadModel = true;
  /// Whether to fill every Fetch/Reduce instruction's `pieces` from its
  /// collective source table (format 3.0), so that code reading `pieces`
  /// sees every piece. Off: `pieces` stay empty where `sources` is set
  /// (read them with forEachPiece), as tofuc makes them.
  bool expandCollectives = true;
  /// With expandCollectives off: devices that run one stored program
  /// (format 4.0) share it in memory as tofuc's materialize makes them
  /// (DeviceProgram::programOf, SharedPrograms.h) instead of each getting
  /// a copy, so that reading a plan for 1024 devices does not hold 1024
  /// copies of a program. Every device is still decoded and checked. For
  /// code that reads through buffersOf, instrsOf and bufferRegion or
  /// expands the plan first (tofu-run --dump-plan).
  bool sharePrograms = false;
};

/// Serializes `plan` into the plan.bin container (and the external weight
/// files the options ask for, written before plan.bin). Returns an empty
/// string on success, otherwise an error message.
std::string writePlan(const Plan &plan, const std::string &path,
                      const WriteOptions &options = {});

/// Reads and verifies a plan.bin (magic, version, checksums, section
/// bounds, FlatBuffers verifier, index ranges, weight shards and external
/// weight files). Returns an empty string on success, otherwise an error
/// message naming what is wrong and what to do.
std::string readPlan(const std::string &path, Plan &plan,
                     const ReadOptions &options = {});

/// In-memory forms of writePlan/readPlan: serialize into `bytes` (weights in
/// the WEIGHTS section), or verify and load from the complete contents of a
/// plan.bin (one with external weight files needs readPlan).
std::string writePlanBytes(const Plan &plan, std::vector<uint8_t> &bytes);
std::string readPlanBytes(const std::vector<uint8_t> &bytes, Plan &plan);

} // namespace tofu::plan

#endif // TOFU_RUNTIME_PLAN_H
