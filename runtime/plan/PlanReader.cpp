//===- PlanReader.cpp - Verify and load plan.bin --------------------------===//
//
// Reads a plan.bin and checks, in order: the file size, the magic, the format
// version, the header checksum, the section table (bounds, alignment, no
// overlap, zero padding), every section checksum, the FlatBuffers verifier,
// and every index of the decoded plan (tensors, buffers, devices, regions,
// arena offsets). Any failure returns a message naming what was expected and
// what was found; no input makes it crash.
//
//===----------------------------------------------------------------------===//

#include "tofu/runtime/Plan.h"
#include "tofu/runtime/CollectivePieces.h"
#include "tofu/runtime/ExprProgramCheck.h"
#include "tofu/runtime/InputFile.h"

#include "PlanContainer.h"
#include "cuda_kernels_generated.h"
#include "plan_generated.h"
#include "tofu/runtime/CudaArch.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <new>
#include <sstream>
#include <unordered_map>

using namespace tofu::plan;
namespace fbs = tofu::plan::fb;
namespace ct = tofu::plan::container;

namespace {

const char *kRecompile = "the file is corrupt; recompile it with tofuc";

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%016llx",
                static_cast<unsigned long long>(v));
  return buf;
}

/// The bytes as text, non-printable ones as \xNN.
std::string printable(const uint8_t *p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '"' && p[i] != '\\') {
      s += static_cast<char>(p[i]);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", p[i]);
      s += buf;
    }
  }
  return s;
}

/// Largest element count of any tensor (keeps byte sizes far from overflow).
constexpr int64_t kMaxElements = kMaxTensorElements;

/// The verifier checks only the 4-byte alignment of a vector's length, so a
/// damaged (but re-signed) file can hold a misaligned vector of 8-byte
/// elements: copy the bytes instead of loading through an int64_t pointer.
/// FlatBuffers data is little-endian, like every host tofu-run supports.
std::vector<int64_t> toVec(const flatbuffers::Vector<int64_t> *v) {
  std::vector<int64_t> out;
  if (v && v->size()) {
    out.resize(v->size());
    std::memcpy(out.data(), v->Data(), v->size() * sizeof(int64_t));
  }
  return out;
}
std::vector<int32_t> toVec(const flatbuffers::Vector<int32_t> *v) {
  return v ? std::vector<int32_t>(v->begin(), v->end())
           : std::vector<int32_t>();
}
std::string toStr(const flatbuffers::String *s) {
  return s ? s->str() : std::string();
}

/// Finds device d's weight shard: checks where the Device table says it
/// lies and sets `shard` to its verified bytes, or to null when this read
/// does not load that device's initial contents.
using ShardLoader = std::function<std::string(
    size_t d, const fbs::Device &fd, const uint8_t *&shard)>;

/// Decodes the FlatBuffers plan into `plan` and checks every index.
class PlanDecoder {
public:
  PlanDecoder(const fbs::Plan &root, ShardLoader loadShard, Plan &plan,
              bool expandCollectives, bool sharePrograms)
      : root(root), loadShard(std::move(loadShard)), plan(plan),
        expand(expandCollectives), share(sharePrograms && !expandCollectives) {}

  std::string decode();

private:
  std::string decodeTensors();
  std::string decodeSpecs();
  std::string decodeDevice(size_t d, const fbs::Device &dev);
  std::string decodeInstr(size_t d, size_t i, const fbs::Instr &in,
                          Instr &out);
  std::string checkBox(const Box &box, int32_t tensor, const std::string &what);
  std::string decodePrograms(size_t d, const fbs::Instr &in, Instr &out,
                             const std::string &where);
  std::string checkPieces(size_t d, size_t i, const Instr &in);
  /// Makes decoded device `d` share the program of device `owner`, which
  /// runs the same stored program (ReadOptions::sharePrograms).
  void shareProgram(size_t d, size_t owner);
  /// Checks Plan.collectives against the decoded buffers and gives each
  /// instruction that names one its table (format 3.0).
  std::string decodeCollectives();

  /// The name stored at `s` (null: empty), shared by every instruction
  /// that names the same stored string: writePlan stores each op and
  /// kernel name once (CreateSharedString), so that a plan of k devices
  /// holds each name once in memory too.
  SharedName sharedName(const flatbuffers::String *s) {
    if (!s || s->size() == 0)
      return SharedName();
    SharedName &name = names[s];
    if (name.empty())
      name = s->str();
    return name;
  }

  const fbs::Plan &root;
  ShardLoader loadShard;
  Plan &plan;
  std::unordered_map<const flatbuffers::String *, SharedName> names;
  /// Plan.op_specs, decoded; instructions share these.
  std::vector<std::shared_ptr<const OpSpec>> specs;
  /// Per spec: the input and output ranks its programs were verified
  /// against (empty until the first instruction that uses it), so that the
  /// programs of an op are verified once, not once per device.
  struct VerifiedRanks {
    bool done = false;
    std::vector<int64_t> inputs, outputs;
  };
  std::vector<VerifiedRanks> verified;
  /// Instructions naming a collective source table: (device, instruction,
  /// table index), in file order; resolved by decodeCollectives.
  struct SourcesUse {
    size_t device, instr;
    int32_t table;
  };
  std::vector<SourcesUse> sourcesUses;
  bool expand;
  /// ReadOptions::sharePrograms, and per stored program the first device
  /// that runs it (-1: none yet).
  bool share;
  std::vector<int32_t> ownerOfProgram;
  /// The device being decoded: its reduction bounds (format 4.0) and the
  /// next one its instructions take.
  const flatbuffers::Vector<int64_t> *bounds = nullptr;
  size_t boundsAt = 0;
};

std::string PlanDecoder::decodeCollectives() {
  size_t n = root.collectives() ? root.collectives()->size() : 0;
  const size_t k = plan.devices.size();
  std::vector<std::shared_ptr<const CollectiveSources>> tables;
  tables.reserve(n);
  for (size_t t = 0; t < n; ++t) {
    std::string where = "collective " + std::to_string(t);
    std::vector<int32_t> buffers =
        toVec(root.collectives()->Get(t)->buffers());
    if (buffers.size() != k)
      return where + ": source table has " + std::to_string(buffers.size()) +
             " entries for " + std::to_string(k) + " devices";
    int64_t rank = -1;
    int32_t tensor = -1;
    for (size_t e = 0; e < k; ++e) {
      int32_t b = buffers[e];
      if (b == -1)
        continue;
      const auto &devBuffers = buffersOf(plan, e);
      if (b < 0 || static_cast<size_t>(b) >= devBuffers.size())
        return where + ": buffer " + std::to_string(b) +
               " does not exist on device " + std::to_string(e) + " (it has " +
               std::to_string(devBuffers.size()) + " buffers)";
      const Buffer &src = devBuffers[b];
      const size_t srcRank = bufferRegion(plan, e, b).rank;
      if (rank == -1) {
        rank = static_cast<int64_t>(srcRank);
        tensor = src.tensor;
      } else if (srcRank != static_cast<size_t>(rank) ||
                 plan.tensors[src.tensor].dtype != plan.tensors[tensor].dtype) {
        return where + ": the source buffers of devices differ in rank or "
                       "element type (device " + std::to_string(e) + ")";
      }
    }
    tables.push_back(makeCollectiveSources(plan, std::move(buffers)));
  }
  for (const SourcesUse &use : sourcesUses) {
    std::string where = "device " + std::to_string(use.device) +
                        " instruction " + std::to_string(use.instr);
    if (use.table < 0 || static_cast<size_t>(use.table) >= n)
      return where + ": collective " + std::to_string(use.table) +
             " does not exist (plan has " + std::to_string(n) +
             " collectives)";
    // (Only devices that own their program record uses.)
    Instr &in = plan.devices[use.device].instrs[use.instr];
    const CollectiveSources &table = *tables[use.table];
    const Buffer &dst = plan.devices[use.device].buffers[in.dst];
    // A table whose devices all contribute nothing gives no pieces.
    int32_t first = -1;
    for (size_t e = 0; e < k && first < 0; ++e)
      if (table.buffers[e] >= 0)
        first = static_cast<int32_t>(e);
    if (first >= 0) {
      const Buffer &src = buffersOf(plan, first)[table.buffers[first]];
      if (table.rank != dst.region.lo.size())
        return where + ": collective " + std::to_string(use.table) +
               " has rank " + std::to_string(table.rank) +
               " but the destination buffer has rank " +
               std::to_string(dst.region.lo.size());
      if (plan.tensors[src.tensor].dtype != plan.tensors[dst.tensor].dtype)
        return where + ": collective " + std::to_string(use.table) +
               " holds tensor '" + plan.tensors[src.tensor].name +
               "', of another element type than the destination tensor '" +
               plan.tensors[dst.tensor].name + "'";
    }
    in.sources = tables[use.table];
    if (expand)
      in.pieces = derivePieces(plan, use.device, in);
  }
  return "";
}

std::string PlanDecoder::checkBox(const Box &box, int32_t tensor,
                                  const std::string &what) {
  const TensorInfo &t = plan.tensors[tensor];
  if (box.lo.size() != t.shape.size() || box.hi.size() != t.shape.size())
    return what + ": region has rank " + std::to_string(box.lo.size()) + "/" +
           std::to_string(box.hi.size()) + " but tensor '" + t.name +
           "' has rank " + std::to_string(t.shape.size());
  for (size_t i = 0; i < t.shape.size(); ++i)
    if (box.lo[i] < 0 || box.lo[i] > box.hi[i] || box.hi[i] > t.shape[i])
      return what + ": region [" + std::to_string(box.lo[i]) + ", " +
             std::to_string(box.hi[i]) + ") of dimension " +
             std::to_string(i) + " lies outside tensor '" + t.name +
             "' (extent " + std::to_string(t.shape[i]) + ")";
  return "";
}

std::string PlanDecoder::decodeTensors() {
  size_t n = root.tensors() ? root.tensors()->size() : 0;
  plan.tensors.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const fbs::Tensor *ft = root.tensors()->Get(i);
    TensorInfo &t = plan.tensors[i];
    std::string where = "tensor " + std::to_string(i);
    t.name = toStr(ft->name());
    if (!isValidDType(ft->dtype()))
      return where + " ('" + t.name + "'): unknown dtype " +
             std::to_string(ft->dtype()) + " (this runtime knows dtypes 0.." +
             std::to_string(kNumDTypes - 1) +
             "; a newer tofu-run may read this plan)";
    t.dtype = static_cast<DType>(ft->dtype());
    if (ft->role() > static_cast<uint8_t>(TensorRole::State))
      return where + " ('" + t.name + "'): unknown role " +
             std::to_string(ft->role());
    t.role = static_cast<TensorRole>(ft->role());
    t.shape = toVec(ft->shape());
    if (t.shape.size() > static_cast<size_t>(kMaxTensorRank))
      return where + " ('" + t.name + "'): rank " +
             std::to_string(t.shape.size()) + " is over the limit of " +
             std::to_string(kMaxTensorRank);
    int64_t elements = 1;
    for (int64_t dim : t.shape) {
      if (dim < 0 || (dim > 0 && elements > kMaxElements / dim))
        return where + " ('" + t.name + "'): invalid shape";
      elements *= dim;
    }
    if (ft->tiling())
      for (const fbs::Cut *c : *ft->tiling()) {
        if (c->dim() < 0 || static_cast<size_t>(c->dim()) >= t.shape.size() ||
            c->parts() < 1)
          return where + " ('" + t.name + "'): tiling cut (" +
                 std::to_string(c->dim()) + ", " + std::to_string(c->parts()) +
                 ") is out of range";
        t.tiling.push_back({c->dim(), c->parts()});
      }
    t.numClasses = ft->num_classes();
    t.pairedInput = ft->paired_input();
    t.paramName = toStr(ft->param_name());
    t.gradientOf = ft->gradient_of();
    if (ft->ignore_index())
      t.ignoreIndex = *ft->ignore_index();
    if (t.pairedInput < -1 || t.pairedInput >= static_cast<int64_t>(n))
      return where + ": paired input " + std::to_string(t.pairedInput) +
             " is not a tensor id";
    if (t.gradientOf < -1 || t.gradientOf >= static_cast<int64_t>(n))
      return where + ": gradientOf " + std::to_string(t.gradientOf) +
             " is not a tensor id";
    if (t.numClasses < 0)
      return where + ": negative numClasses";
  }
  return "";
}

std::string PlanDecoder::decodeSpecs() {
  size_t n = root.op_specs() ? root.op_specs()->size() : 0;
  specs.reserve(n);
  verified.resize(n);
  auto shapes = [](const flatbuffers::Vector<flatbuffers::Offset<fbs::Shape>>
                       *v) {
    std::vector<std::vector<int64_t>> r;
    if (v)
      for (const fbs::Shape *s : *v)
        r.push_back(toVec(s->dims()));
    return r;
  };
  for (size_t i = 0; i < n; ++i) {
    const fbs::OpSpec &fs = *root.op_specs()->Get(i);
    std::string where = "op spec " + std::to_string(i);
    auto spec = std::make_shared<OpSpec>();
    if (fs.attrs())
      for (const fbs::Attr *fa : *fs.attrs()) {
        Attr a;
        a.name = toStr(fa->name());
        if (fa->kind() > static_cast<uint8_t>(Attr::Kind::Ints))
          return where + ": attribute '" + a.name + "' has unknown kind " +
                 std::to_string(fa->kind());
        a.kind = static_cast<Attr::Kind>(fa->kind());
        a.i = fa->i();
        a.f = fa->f();
        a.s = toStr(fa->s());
        a.ints = toVec(fa->ints());
        spec->attrs.push_back(std::move(a));
      }
    spec->inputGlobalShapes = shapes(fs.input_global_shapes());
    spec->outputGlobalShapes = shapes(fs.output_global_shapes());
    if (fs.programs())
      for (const fbs::ExprProgram *fp : *fs.programs()) {
        ExprProgram p;
        p.varExtents = toVec(fp->var_extents());
        p.outputVars = toVec(fp->output_vars());
        p.topReductionVars = toVec(fp->top_reduction_vars());
        p.root = fp->root();
        if (fp->nodes()) {
          if (fp->nodes()->size() > kMaxExprNodes)
            return where + ": program " +
                   std::to_string(spec->programs.size()) + " has " +
                   std::to_string(fp->nodes()->size()) + " nodes (at most " +
                   std::to_string(kMaxExprNodes) + ")";
          p.nodes.reserve(fp->nodes()->size());
          for (const fbs::ExprNode *fn : *fp->nodes()) {
            ExprNode node;
            // Enumerations are range-checked by verifyExprProgram.
            node.kind = static_cast<ExprNode::Kind>(fn->kind());
            node.value = fn->value();
            node.var = fn->var();
            node.input = fn->input();
            node.binary = static_cast<BinaryOp>(fn->binary());
            node.function = static_cast<Function>(fn->function());
            node.reducer = static_cast<Reducer>(fn->reducer());
            node.operands = toVec(fn->operands());
            node.vars = toVec(fn->vars());
            p.nodes.push_back(std::move(node));
          }
        }
        spec->programs.push_back(std::move(p));
      }
    specs.push_back(std::move(spec));
  }
  return "";
}

std::string PlanDecoder::decodeInstr(size_t d, size_t i, const fbs::Instr &in,
                                     Instr &out) {
  std::string where =
      "device " + std::to_string(d) + " instruction " + std::to_string(i);
  if (in.kind() > static_cast<uint8_t>(Instr::Kind::Reduce))
    return where + ": unknown instruction kind " + std::to_string(in.kind());
  out.kind = static_cast<Instr::Kind>(in.kind());
  out.seq = in.seq();
  out.kernel = sharedName(in.kernel());
  out.op = sharedName(in.op());
  out.inputs = toVec(in.inputs());
  out.outputs = toVec(in.outputs());
  if (in.spec() != -1) {
    if (in.spec() < 0 || static_cast<size_t>(in.spec()) >= specs.size())
      return where + ": op spec " + std::to_string(in.spec()) +
             " does not exist (plan has " + std::to_string(specs.size()) +
             " op specs)";
    out.spec = specs[in.spec()];
  }
  out.dst = in.dst();
  if (in.sources() != -1) {
    if (out.kind == Instr::Kind::Compute || (in.pieces() && in.pieces()->size()))
      return where + ": a collective source table on a compute instruction "
                     "or one that lists pieces";
    sourcesUses.push_back({d, i, in.sources()});
  }
  if (in.pieces())
    for (const fbs::Piece *fp : *in.pieces())
      out.pieces.push_back(
          {fp->device(), fp->buffer(), {toVec(fp->lo()), toVec(fp->hi())}});

  const auto &buffers = plan.devices[d].buffers;
  auto validBuffer = [&](int32_t b) {
    return b >= 0 && static_cast<size_t>(b) < buffers.size();
  };
  if (out.kind == Instr::Kind::Compute) {
    if (out.kernel.empty())
      return where + ": compute instruction without a kernel name";
    for (int32_t b : out.inputs)
      if (b != -1 && !validBuffer(b))
        return where + " (" + out.kernel + "): input buffer " +
               std::to_string(b) + " does not exist (device has " +
               std::to_string(buffers.size()) + " buffers)";
    for (int32_t b : out.outputs)
      if (!validBuffer(b))
        return where + " (" + out.kernel + "): output buffer " +
               std::to_string(b) + " does not exist (device has " +
               std::to_string(buffers.size()) + " buffers)";
    if (!out.inputGlobalShapes().empty() &&
        out.inputGlobalShapes().size() != out.inputs.size())
      return where + " (" + out.kernel + "): " +
             std::to_string(out.inputGlobalShapes().size()) +
             " input global shapes for " + std::to_string(out.inputs.size()) +
             " inputs";
    if (!out.outputGlobalShapes().empty() &&
        out.outputGlobalShapes().size() != out.outputs.size())
      return where + " (" + out.kernel + "): " +
             std::to_string(out.outputGlobalShapes().size()) +
             " output global shapes for " +
             std::to_string(out.outputs.size()) + " outputs";
    return decodePrograms(d, in, out, where + " (" + out.kernel + ")");
  }
  if (in.spec() != -1 || in.reduction_range_sizes())
    return where + ": an op spec or reduction ranges on a non-compute "
                   "instruction";
  if (!validBuffer(out.dst))
    return where + ": destination buffer " + std::to_string(out.dst) +
           " does not exist (device has " + std::to_string(buffers.size()) +
           " buffers)";
  return "";
}

/// Decodes and verifies the expression programs and reduction ranges of a
/// Compute instruction whose buffers are already checked.
std::string PlanDecoder::decodePrograms(size_t d, const fbs::Instr &in,
                                        Instr &out, const std::string &where) {
  const auto &buffers = plan.devices[d].buffers;
  const std::vector<ExprProgram> &programs = out.programs();
  if (!programs.empty() && programs.size() != out.outputs.size())
    return where + ": " + std::to_string(programs.size()) +
           " expression programs for " + std::to_string(out.outputs.size()) +
           " outputs";
  if (const auto *sizes = in.reduction_range_sizes()) {
    if (sizes->size() != programs.size())
      return where + ": " + std::to_string(sizes->size()) +
             " reduction range lists for " +
             std::to_string(programs.size()) + " expression programs";
    size_t available = bounds ? bounds->size() : 0;
    for (int32_t n : *sizes) {
      if (n < 0 || static_cast<uint64_t>(n) * 2 > available - boundsAt)
        return where + ": " + std::to_string(n) + " reduction ranges, but " +
               "the device's reduction_bounds hold " +
               std::to_string((available - boundsAt) / 2) + " more";
      std::vector<std::pair<int64_t, int64_t>> list;
      list.reserve(n);
      for (int32_t r = 0; r < n; ++r, boundsAt += 2)
        list.emplace_back(bounds->Get(boundsAt), bounds->Get(boundsAt + 1));
      out.reductionRanges.push_back(std::move(list));
    }
  }
  if (programs.empty())
    return "";

  auto rankOf = [&](int32_t b, const std::vector<std::vector<int64_t>> &g,
                    size_t pos) -> int64_t {
    if (b < 0)
      return -1; // absent optional input: reads as 0
    if (!g.empty())
      return static_cast<int64_t>(g[pos].size());
    return static_cast<int64_t>(plan.tensors[buffers[b].tensor].shape.size());
  };
  std::vector<int64_t> inputRanks, outputRanks;
  for (size_t j = 0; j < out.inputs.size(); ++j)
    inputRanks.push_back(rankOf(out.inputs[j], out.inputGlobalShapes(), j));
  for (size_t o = 0; o < programs.size(); ++o)
    outputRanks.push_back(rankOf(out.outputs[o], out.outputGlobalShapes(), o));
  // The programs are shared: verify them once per set of ranks (one set for
  // every device of an op, unless a damaged file says otherwise).
  VerifiedRanks &seen = verified[in.spec()];
  bool verify = !seen.done || seen.inputs != inputRanks ||
                seen.outputs != outputRanks;
  for (size_t o = 0; o < programs.size(); ++o) {
    const ExprProgram &p = programs[o];
    std::string po = where + " program " + std::to_string(o);
    if (verify)
      if (std::string err = verifyExprProgram(
              p, inputRanks, static_cast<size_t>(outputRanks[o]));
          !err.empty())
        return po + ": " + err;
    if (!out.reductionRanges.empty())
      if (std::string err = verifyReductionRanges(p, out.reductionRanges[o]);
          !err.empty())
        return po + ": " + err;
  }
  if (verify)
    seen = {true, std::move(inputRanks), std::move(outputRanks)};
  return "";
}

std::string PlanDecoder::checkPieces(size_t d, size_t i, const Instr &in) {
  if (in.kind == Instr::Kind::Compute)
    return "";
  std::string where =
      "device " + std::to_string(d) + " instruction " + std::to_string(i);
  const Buffer &dst = buffersOf(plan, d)[in.dst];
  const BoxView dstRegion = bufferRegion(plan, d, in.dst);
  const TensorInfo &dstT = plan.tensors[dst.tensor];
  for (size_t p = 0; p < in.pieces.size(); ++p) {
    const Piece &piece = in.pieces[p];
    std::string pw = where + " piece " + std::to_string(p);
    if (piece.device < 0 ||
        static_cast<size_t>(piece.device) >= plan.devices.size())
      return pw + ": device " + std::to_string(piece.device) +
             " does not exist (plan has " +
             std::to_string(plan.devices.size()) + " devices)";
    const auto &srcBuffers = buffersOf(plan, piece.device);
    if (piece.buffer < 0 || static_cast<size_t>(piece.buffer) >= srcBuffers.size())
      return pw + ": buffer " + std::to_string(piece.buffer) +
             " does not exist on device " + std::to_string(piece.device);
    const Buffer &src = srcBuffers[piece.buffer];
    const BoxView srcRegion = bufferRegion(plan, piece.device, piece.buffer);
    const TensorInfo &srcT = plan.tensors[src.tensor];
    if (srcT.dtype != dstT.dtype)
      return pw + ": source tensor '" + srcT.name +
             "' and destination tensor '" + dstT.name +
             "' have different element types";
    if (std::string err = checkBox(piece.region, src.tensor, pw); !err.empty())
      return err;
    for (size_t k = 0; k < piece.region.lo.size(); ++k) {
      if (piece.region.lo[k] < srcRegion.lo[k] ||
          piece.region.hi[k] > srcRegion.hi[k])
        return pw + ": region is not inside its source buffer's region "
                    "(dimension " + std::to_string(k) + ")";
      if (dstRegion.rank != piece.region.lo.size() ||
          piece.region.lo[k] < dstRegion.lo[k] ||
          piece.region.hi[k] > dstRegion.hi[k])
        return pw + ": region is not inside the destination buffer's region "
                    "(dimension " + std::to_string(k) + ")";
    }
    if (dstRegion.rank != piece.region.lo.size())
      return pw + ": rank differs from the destination buffer's rank";
  }
  return "";
}

std::string PlanDecoder::decodeDevice(size_t d, const fbs::Device &fd) {
  DeviceProgram &dev = plan.devices[d];
  const size_t usesBefore = sourcesUses.size();
  std::string where = "device " + std::to_string(d);
  dev.peakBytes = fd.peak_bytes();
  if (dev.peakBytes > kMaxArenaBytes)
    return where + ": its arena of " + std::to_string(dev.peakBytes) +
           " bytes is over the limit of " + std::to_string(kMaxArenaBytes);
  dev.commBytes = fd.comm_bytes();
  const uint64_t wSize = fd.weights_size();
  const uint8_t *shard = nullptr;
  if (std::string err = loadShard(d, fd, shard); !err.empty())
    return err;
  dev.weightsFile = toStr(fd.weights_file());

  // Format 4.0: the buffers and instructions are the program's (shared
  // with the devices of its class), the regions and reduction bounds the
  // device's own.
  size_t numPrograms = root.programs() ? root.programs()->size() : 0;
  if (fd.program() < 0 || static_cast<size_t>(fd.program()) >= numPrograms)
    return where + ": program " + std::to_string(fd.program()) +
           " does not exist (plan has " + std::to_string(numPrograms) +
           " programs)";
  const fbs::Program &fp = *root.programs()->Get(fd.program());
  const flatbuffers::Vector<int64_t> *regions = fd.regions();
  const size_t numRegionValues = regions ? regions->size() : 0;
  size_t regionsAt = 0;
  size_t nb = fp.buffers() ? fp.buffers()->size() : 0;
  dev.buffers.resize(nb);
  for (size_t b = 0; b < nb; ++b) {
    const fbs::Buffer *fb = fp.buffers()->Get(b);
    Buffer &buf = dev.buffers[b];
    std::string bw = where + " buffer " + std::to_string(b);
    buf.tensor = fb->tensor();
    if (buf.tensor < 0 || static_cast<size_t>(buf.tensor) >= plan.tensors.size())
      return bw + ": tensor id " + std::to_string(buf.tensor) +
             " is out of range (plan has " +
             std::to_string(plan.tensors.size()) + " tensors)";
    size_t rank = plan.tensors[buf.tensor].shape.size();
    if (2 * rank > numRegionValues - regionsAt)
      return bw + ": the device's regions end before this buffer's (" +
             std::to_string(numRegionValues) + " values)";
    buf.region.lo.resize(rank);
    buf.region.hi.resize(rank);
    for (size_t i = 0; i < rank; ++i) {
      buf.region.lo[i] = regions->Get(regionsAt + i);
      buf.region.hi[i] = regions->Get(regionsAt + rank + i);
    }
    regionsAt += 2 * rank;
    if (std::string err = checkBox(buf.region, buf.tensor, bw); !err.empty())
      return err;
    buf.partial = fb->partial();
    buf.owned = fb->owned();
    buf.offset = fb->offset();
    buf.bytes = fb->bytes();
    const TensorInfo &t = plan.tensors[buf.tensor];
    uint64_t expect = static_cast<uint64_t>(buf.region.numElements()) *
                      dtypeSize(t.dtype);
    if (buf.bytes != expect)
      return bw + " (tensor '" + t.name + "'): " + std::to_string(buf.bytes) +
             " bytes recorded but its region needs " + std::to_string(expect);
    if (buf.offset > dev.peakBytes || buf.bytes > dev.peakBytes - buf.offset)
      return bw + " (tensor '" + t.name + "'): bytes [" +
             std::to_string(buf.offset) + ", " +
             std::to_string(buf.offset + buf.bytes) +
             ") exceed the device arena of " + std::to_string(dev.peakBytes) +
             " bytes (peakBytes)";
    if (buf.offset % dtypeSize(t.dtype) != 0)
      return bw + " (tensor '" + t.name + "'): arena offset " +
             std::to_string(buf.offset) + " is not a multiple of the element "
             "size";
    if (fb->has_init()) {
      uint64_t io = fb->init_offset();
      if (io > wSize || buf.bytes > wSize - io)
        return bw + " (tensor '" + t.name + "'): initial contents [" +
               std::to_string(io) + ", +" + std::to_string(buf.bytes) +
               ") lie outside the device's weights range (" +
               std::to_string(wSize) + " bytes)";
      if (shard)
        buf.init.assign(shard + io, shard + io + buf.bytes);
    }
  }

  if (regionsAt != numRegionValues)
    return where + ": its regions hold " + std::to_string(numRegionValues) +
           " values, its program's buffers need " + std::to_string(regionsAt);

  bounds = fd.reduction_bounds();
  boundsAt = 0;
  size_t ni = fp.instrs() ? fp.instrs()->size() : 0;
  dev.instrs.resize(ni);
  for (size_t i = 0; i < ni; ++i) {
    if (std::string err = decodeInstr(d, i, *fp.instrs()->Get(i), dev.instrs[i]);
        !err.empty())
      return err;
    if (i > 0 && dev.instrs[i].seq < dev.instrs[i - 1].seq)
      return where + " instruction " + std::to_string(i) + ": seq " +
             std::to_string(dev.instrs[i].seq) + " is smaller than the previous "
             "instruction's seq " + std::to_string(dev.instrs[i - 1].seq) +
             " (instructions must be in increasing seq)";
  }
  size_t numBounds = bounds ? bounds->size() : 0;
  if (boundsAt != numBounds)
    return where + ": its reduction_bounds hold " + std::to_string(numBounds) +
           " values, its program's instructions take " +
           std::to_string(boundsAt);
  if (share) {
    int32_t &owner = ownerOfProgram[fd.program()];
    if (owner < 0) {
      owner = static_cast<int32_t>(d);
    } else {
      // Its instructions are the owner's: their table uses are the owner's.
      sourcesUses.resize(usesBefore);
      shareProgram(d, static_cast<size_t>(owner));
    }
  }
  return "";
}

void PlanDecoder::shareProgram(size_t d, size_t owner) {
  DeviceProgram &dev = plan.devices[d];
  DeviceProgram &own = plan.devices[owner];
  if (own.regionStarts.empty()) {
    own.regionStarts.reserve(own.buffers.size() + 1);
    own.regionStarts.push_back(0);
    for (const Buffer &buf : own.buffers)
      own.regionStarts.push_back(own.regionStarts.back() +
                                 2 * buf.region.lo.size());
  }
  dev.sharedRegions.reserve(own.regionStarts.back());
  for (size_t b = 0; b < dev.buffers.size(); ++b) {
    Buffer &buf = dev.buffers[b];
    dev.sharedRegions.insert(dev.sharedRegions.end(), buf.region.lo.begin(),
                             buf.region.lo.end());
    dev.sharedRegions.insert(dev.sharedRegions.end(), buf.region.hi.begin(),
                             buf.region.hi.end());
    if (buf.hasInit())
      dev.sharedInits.push_back(
          {static_cast<int32_t>(b), std::move(buf.init), nullptr});
  }
  for (const Instr &in : dev.instrs)
    for (const auto &list : in.reductionRanges)
      dev.sharedReductionRanges.insert(dev.sharedReductionRanges.end(),
                                       list.begin(), list.end());
  std::vector<Buffer>().swap(dev.buffers);
  std::vector<Instr>().swap(dev.instrs);
  dev.programOf = static_cast<int32_t>(owner);
}

std::string PlanDecoder::decode() {
  plan.producer = toStr(root.producer());
  plan.modelFingerprint = root.model_fingerprint();
  plan.numDevices = root.num_devices();
  if (plan.numDevices > kMaxDevices)
    return "the plan has " + std::to_string(plan.numDevices) +
           " devices, over the limit of " + std::to_string(kMaxDevices);
  plan.batchSize = root.batch_size();
  plan.partitioner = toStr(root.partitioner());
  plan.searchSeconds = root.search_seconds();
  plan.commBytes = root.comm_bytes();
  plan.optimizer.kind = toStr(root.optimizer_kind());
  plan.optimizer.learningRate = root.learning_rate();
  plan.summary = toStr(root.summary());
  plan.withoutWeights = root.without_weights();
  if (std::string err = decodeTensors(); !err.empty())
    return err;
  if (std::string err = decodeSpecs(); !err.empty())
    return err;
  size_t nt = plan.tensors.size();
  plan.lossTensor = root.loss_tensor();
  if (plan.lossTensor < -1 || plan.lossTensor >= static_cast<int64_t>(nt))
    return "loss tensor " + std::to_string(plan.lossTensor) +
           " is not a tensor id";
  if (root.param_updates())
    for (const fbs::ParamUpdate *u : *root.param_updates()) {
      if (u->param() < 0 || static_cast<size_t>(u->param()) >= nt ||
          u->updated() < 0 || static_cast<size_t>(u->updated()) >= nt)
        return "parameter update (" + std::to_string(u->param()) + ", " +
               std::to_string(u->updated()) + ") names a tensor that does not "
               "exist";
      plan.paramUpdates.emplace_back(u->param(), u->updated());
    }
  size_t nd = root.devices() ? root.devices()->size() : 0;
  if (nd == 0 || nd != plan.numDevices)
    return "the plan says it has " + std::to_string(plan.numDevices) +
           " devices but holds " + std::to_string(nd) + " device programs";
  plan.devices.resize(nd);
  plan.storedPrograms = root.programs() ? root.programs()->size() : 0;
  ownerOfProgram.assign(plan.storedPrograms, -1);
  for (size_t d = 0; d < nd; ++d)
    if (std::string err = decodeDevice(d, *root.devices()->Get(d));
        !err.empty())
      return err;
  // Collectives and pieces refer to buffers of other devices: check after
  // all are decoded.
  if (std::string err = decodeCollectives(); !err.empty())
    return err;
  for (size_t d = 0; d < nd; ++d) {
    const std::vector<Instr> &instrs = instrsOf(plan, d);
    for (size_t i = 0; i < instrs.size(); ++i)
      if (std::string err = checkPieces(d, i, instrs[i]); !err.empty())
        return err;
  }
  return "";
}

/// Decodes and checks the CUDA section (format 1.6) against the decoded
/// device programs.
std::string decodeCudaModule(const fbs::CudaModule &root, Plan &plan) {
  CudaModule &m = plan.cuda;
  m.arch = toStr(root.arch());
  m.compiler = toStr(root.compiler());
  m.source = toStr(root.source());
  CudaArch arch;
  if (!parseCudaArch(m.arch, arch))
    return "CUDA section: architecture '" + m.arch +
           "' is not sm_<major><minor>";
  if (root.cubin())
    m.cubin.assign(root.cubin()->begin(), root.cubin()->end());
  if (root.kernels())
    for (const fbs::CudaKernel *k : *root.kernels()) {
      CudaKernel kernel;
      kernel.name = toStr(k->name());
      kernel.kind = toStr(k->kind());
      kernel.ops = toStr(k->ops());
      kernel.numPointers = k->num_pointers();
      kernel.numParams = k->num_params();
      kernel.blockSize = k->block_size();
      if (kernel.name.empty() || kernel.numPointers == 0 ||
          kernel.numParams == 0 || kernel.blockSize == 0 ||
          kernel.blockSize > 1024)
        return "CUDA section: kernel " + std::to_string(m.kernels.size()) +
               " ('" + kernel.name + "') has no name, no pointer or parameter "
               "arguments, or a block size outside [1, 1024]";
      m.kernels.push_back(std::move(kernel));
    }
  if (root.launches())
    for (const fbs::CudaLaunch *l : *root.launches()) {
      CudaLaunch launch;
      launch.device = l->device();
      launch.firstInstr = l->first_instr();
      launch.numInstrs = l->num_instrs();
      launch.output = l->output();
      launch.kernel = l->kernel();
      launch.numElements = l->num_elements();
      // toVec: a re-signed damaged section may misalign the int64 params.
      launch.buffers = toVec(l->buffers());
      launch.params = toVec(l->params());
      std::string where =
          "CUDA section: launch " + std::to_string(m.launches.size());
      if (launch.device < 0 ||
          static_cast<size_t>(launch.device) >= plan.devices.size())
        return where + " is on device " + std::to_string(launch.device) +
               ", which the plan does not have";
      struct {
        const std::vector<Instr> &instrs;
        const std::vector<Buffer> &buffers;
      } dev{instrsOf(plan, launch.device), buffersOf(plan, launch.device)};
      if (launch.firstInstr < 0 || launch.numInstrs < 1 ||
          static_cast<int64_t>(launch.firstInstr) + launch.numInstrs >
              static_cast<int64_t>(dev.instrs.size()))
        return where + " covers instructions [" +
               std::to_string(launch.firstInstr) + ", +" +
               std::to_string(launch.numInstrs) + ") outside device " +
               std::to_string(launch.device) + "'s program";
      for (int32_t i = launch.firstInstr;
           i < launch.firstInstr + launch.numInstrs; ++i)
        if (dev.instrs[i].kind != Instr::Kind::Compute)
          return where + " covers instruction " + std::to_string(i) +
                 ", which is not a compute instruction";
      const Instr &first = dev.instrs[launch.firstInstr];
      if (launch.output < 0 ||
          static_cast<size_t>(launch.output) >= first.outputs.size())
        return where + " computes output " + std::to_string(launch.output) +
               " of an instruction with " +
               std::to_string(first.outputs.size()) + " outputs";
      if (launch.kernel < 0 ||
          static_cast<size_t>(launch.kernel) >= m.kernels.size())
        return where + " names kernel " + std::to_string(launch.kernel) +
               ", which the section does not have";
      const CudaKernel &k = m.kernels[launch.kernel];
      if (launch.buffers.size() != k.numPointers ||
          launch.params.size() != k.numParams)
        return where + " passes " + std::to_string(launch.buffers.size()) +
               " pointers and " + std::to_string(launch.params.size()) +
               " parameters to kernel '" + k.name + "', which takes " +
               std::to_string(k.numPointers) + " and " +
               std::to_string(k.numParams);
      for (size_t b = 0; b < launch.buffers.size(); ++b) {
        int32_t id = launch.buffers[b];
        bool output = b < static_cast<size_t>(launch.numInstrs);
        if (id < (output ? 0 : -1) ||
            (id >= 0 && static_cast<size_t>(id) >= dev.buffers.size()))
          return where + ": pointer " + std::to_string(b) + " is buffer " +
                 std::to_string(id) + ", which device " +
                 std::to_string(launch.device) + " does not have";
      }
      if (launch.numElements < 0 || launch.params[0] != launch.numElements ||
          launch.numElements !=
              dev.buffers[launch.buffers[0]].region.numElements())
        return where + " computes " + std::to_string(launch.numElements) +
               " elements, not the " +
               std::to_string(
                   dev.buffers[launch.buffers[0]].region.numElements()) +
               " of its output buffer";
      m.launches.push_back(std::move(launch));
    }
  return "";
}

struct SectionEntry {
  uint32_t kind;
  uint64_t offset, size, checksum;
};

/// Where the bytes of a plan.bin come from: the whole file in memory (a full
/// read, which verifies every byte), or the open file, read range by range
/// (a partial read of one device's shard).
struct PlanInput {
  bool partial = false;           ///< read ranges from `file`, not `whole`
  const uint8_t *whole = nullptr; ///< the whole file (full read)
  std::ifstream *file = nullptr;  ///< the open file (partial read)
  uint64_t size = 0;              ///< file size in bytes
  /// plan.bin's directory, where external weight files are looked up; unset
  /// for readPlanBytes (which then refuses external weights).
  bool hasDir = false;
  std::filesystem::path dir;
  ReadOptions options;

  /// Bytes [offset, offset + n) of the file (in range: checked before).
  std::string readAt(uint64_t offset, uint64_t n, std::vector<uint8_t> &out) {
    out.resize(n);
    file->clear();
    file->seekg(static_cast<std::streamoff>(offset));
    file->read(reinterpret_cast<char *>(out.data()),
               static_cast<std::streamsize>(n));
    if (static_cast<uint64_t>(file->gcount()) != n)
      return "short read at offset " + std::to_string(offset) +
             " (the file changed while it was read?)";
    return "";
  }
};

/// Verifies the container and decodes it.
std::string readContainer(PlanInput &in, Plan &plan) {
  const uint64_t size = in.size;
  const bool partial = in.partial;
  std::vector<uint8_t> headerBytes;
  const uint8_t *p = in.whole;
  if (partial) {
    if (std::string err = in.readAt(0, std::min<uint64_t>(size, ct::kFixedHeaderBytes),
                                    headerBytes);
        !err.empty())
      return err;
    p = headerBytes.data();
  }
  if (size < ct::kOffHeaderSize)
    return "file is " + std::to_string(size) +
           " bytes, too small to be a plan.bin; " + kRecompile;
  if (std::memcmp(p, ct::kMagic, sizeof(ct::kMagic)) != 0)
    return "not a plan.bin: expected magic \"TOFUPLAN\", found \"" +
           printable(p, 8) + "\" (is this the right file?)";
  uint16_t major = ct::loadLE(p + ct::kOffMajor, 2);
  uint16_t minor = ct::loadLE(p + ct::kOffMinor, 2);
  if (major > ct::kMajor)
    return "plan.bin format " + std::to_string(major) + "." +
           std::to_string(minor) + " is newer than this tofu-run supports (" +
           std::to_string(ct::kMajor) +
           ".x); rebuild tofu-run or recompile the plan";
  // A newer minor may add fields that FlatBuffers lets this reader skip
  // without a word (a new attribute of an instruction): running such a plan
  // could silently compute something else. Older minors of this major are
  // read with their own rules (defaults).
  if (major == ct::kMajor && minor > ct::kMinor)
    return "plan.bin format " + std::to_string(major) + "." +
           std::to_string(minor) + " is newer than this tofu-run reads (" +
           std::to_string(ct::kMajor) + "." + std::to_string(ct::kMinor) +
           "): it may use features this tofu-run would ignore; rebuild "
           "tofu-run or recompile the plan with this tofuc";
  if (major < ct::kMajor)
    return "plan.bin format " + std::to_string(major) + "." +
           std::to_string(minor) + " is older than this tofu-run supports (" +
           std::to_string(ct::kMajor) +
           ".x: format 4.0 stores each class of devices' program once); "
           "recompile the plan with this tofuc";
  if (size < ct::kFixedHeaderBytes)
    return "file is " + std::to_string(size) +
           " bytes, shorter than the plan.bin header (" +
           std::to_string(ct::kFixedHeaderBytes) + " bytes); " + kRecompile;
  uint64_t headerSize = ct::loadLE(p + ct::kOffHeaderSize, 4);
  uint64_t fileSize = ct::loadLE(p + ct::kOffFileSize, 8);
  uint64_t numSections = ct::loadLE(p + ct::kOffNumSections, 4);
  if (fileSize != size)
    return "header records a file size of " + std::to_string(fileSize) +
           " bytes but the file has " + std::to_string(size) +
           " (truncated or appended to); " + kRecompile;
  if (numSections > 1024 ||
      headerSize != ct::kFixedHeaderBytes + numSections * ct::kSectionEntryBytes ||
      headerSize > size)
    return "header size " + std::to_string(headerSize) + " does not match " +
           std::to_string(numSections) + " sections; " + kRecompile;
  if (partial) {
    if (std::string err = in.readAt(0, headerSize, headerBytes); !err.empty())
      return err;
    p = headerBytes.data();
  }
  uint64_t expectHeader = ct::loadLE(p + ct::kOffHeaderChecksum, 8);
  uint64_t foundHeader = ct::headerChecksum(p, headerSize);
  if (expectHeader != foundHeader)
    return "checksum mismatch in the header: expected " + hex(expectHeader) +
           ", found " + hex(foundHeader) + "; " + kRecompile;
  if (ct::loadLE(p + ct::kOffReserved0, 8) != 0 ||
      ct::loadLE(p + ct::kOffReserved1, 8) != 0)
    return std::string("reserved header fields are not zero; ") + kRecompile;

  std::vector<SectionEntry> sections;
  for (uint64_t i = 0; i < numSections; ++i) {
    const uint8_t *e = p + ct::kFixedHeaderBytes + i * ct::kSectionEntryBytes;
    SectionEntry s{static_cast<uint32_t>(ct::loadLE(e, 4)),
                   ct::loadLE(e + 8, 8), ct::loadLE(e + 16, 8),
                   ct::loadLE(e + 24, 8)};
    std::string name = std::string(ct::sectionName(s.kind)) + " section";
    if (s.offset < headerSize || s.offset > size || s.size > size - s.offset)
      return name + " [" + std::to_string(s.offset) + ", +" +
             std::to_string(s.size) + ") lies outside the file (" +
             std::to_string(size) + " bytes) or inside the header; " +
             kRecompile;
    if (s.offset % ct::kSectionAlign != 0)
      return name + " starts at misaligned offset " + std::to_string(s.offset) +
             "; " + kRecompile;
    for (const SectionEntry &o : sections) {
      if (o.kind == s.kind)
        return name + " appears twice; " + kRecompile;
      if (s.offset < o.offset + o.size && o.offset < s.offset + s.size)
        return name + " overlaps the " + ct::sectionName(o.kind) +
               " section; " + kRecompile;
    }
    if (ct::loadLE(e + 4, 4) != 0)
      return name + " has unknown flags; " + kRecompile;
    sections.push_back(s);
  }
  if (!partial) {
    // Every byte outside the header and the sections is zero padding.
    std::vector<std::pair<uint64_t, uint64_t>> used = {{0, headerSize}};
    for (const SectionEntry &s : sections)
      used.emplace_back(s.offset, s.offset + s.size);
    std::sort(used.begin(), used.end());
    uint64_t cursor = 0;
    for (const auto &[lo, hi] : used) {
      for (uint64_t b = cursor; b < lo; ++b)
        if (p[b] != 0)
          return "non-zero byte at offset " + std::to_string(b) +
                 " between sections; " + kRecompile;
      cursor = std::max(cursor, hi);
    }
    for (uint64_t b = cursor; b < size; ++b)
      if (p[b] != 0)
        return "non-zero byte at offset " + std::to_string(b) +
               " after the last section; " + kRecompile;
  }

  // A full read checks every section; a partial one the PLAN and CUDA
  // sections, the MODEL section if it is loaded, and (below) its own weight
  // shard.
  const SectionEntry *planSec = nullptr, *weightsSec = nullptr,
                     *modelSec = nullptr, *cudaSec = nullptr;
  std::vector<uint8_t> planBytes, modelBytes, cudaBytes;
  for (const SectionEntry &s : sections) {
    const uint8_t *data = nullptr;
    if (s.kind == ct::kSectionPlan)
      planSec = &s;
    else if (s.kind == ct::kSectionWeights)
      weightsSec = &s;
    else if (s.kind == ct::kSectionModel)
      modelSec = &s;
    else if (s.kind == ct::kSectionCuda)
      cudaSec = &s;
    if (!partial) {
      data = p + s.offset;
    } else if (s.kind == ct::kSectionPlan || s.kind == ct::kSectionCuda ||
               (s.kind == ct::kSectionModel && in.options.loadModel)) {
      std::vector<uint8_t> &buf = s.kind == ct::kSectionPlan   ? planBytes
                                  : s.kind == ct::kSectionCuda ? cudaBytes
                                                               : modelBytes;
      if (std::string err = in.readAt(s.offset, s.size, buf); !err.empty())
        return err;
      data = buf.data();
    } else {
      continue; // not read, not checked
    }
    uint64_t found = ct::bulkChecksum(data, s.size);
    if (found != s.checksum)
      return std::string("checksum mismatch in the ") +
             ct::sectionName(s.kind) + " section: expected " +
             hex(s.checksum) + ", found " + hex(found) + "; " + kRecompile;
    // Unknown kinds (from a newer minor version) are checked and skipped.
  }
  if (!planSec)
    return std::string("the file has no PLAN section; ") + kRecompile;

  const uint8_t *planData = partial ? planBytes.data() : p + planSec->offset;
  flatbuffers::Verifier verifier(planData, planSec->size,
                                 /*max_depth=*/64, /*max_tables=*/1u << 30);
  if (!fbs::VerifyPlanBuffer(verifier))
    return std::string("the PLAN section fails FlatBuffers verification; ") +
           kRecompile;
  const fbs::Plan *root = fbs::GetPlan(planData);
  const uint64_t weightsSize = weightsSec ? weightsSec->size : 0;
  std::vector<uint8_t> shardBytes;
  // Set where a shard's error already says what to do (a missing or
  // replaced .tofu-weights file), so that no second advice is appended.
  bool adviceGiven = false;
  ShardLoader loadShard = [&](size_t d, const fbs::Device &fd,
                              const uint8_t *&shard) -> std::string {
    shard = nullptr;
    const std::string where = "device " + std::to_string(d);
    const uint64_t wOff = fd.weights_offset(), wSize = fd.weights_size();
    const std::string file = toStr(fd.weights_file());
    const bool wanted = in.options.onlyDevice < 0 ||
                        in.options.onlyDevice == static_cast<int32_t>(d);
    std::string what;
    if (file.empty()) {
      if (wOff > weightsSize || wSize > weightsSize - wOff)
        return where + ": weights range [" + std::to_string(wOff) + ", +" +
               std::to_string(wSize) + ") lies outside the WEIGHTS section (" +
               std::to_string(weightsSize) + " bytes)";
      if (!wanted || wSize == 0)
        return "";
      what = "the WEIGHTS section";
      if (!partial) {
        shard = p + weightsSec->offset + wOff;
      } else {
        if (std::string err =
                in.readAt(weightsSec->offset + wOff, wSize, shardBytes);
            !err.empty())
          return err;
        shard = shardBytes.data();
      }
    } else {
      if (file.find('/') != std::string::npos || file == "." || file == "..")
        return where + ": invalid external weights file name '" + file + "'";
      if (!wanted)
        return "";
      if (!in.hasDir)
        return where + ": the weights are in the external file '" + file +
               "'; read the plan from its file (readPlan) so that the file "
               "can be found next to it";
      const std::string path = (in.dir / file).string();
      what = "external weights file '" + path + "'";
      std::ifstream ext;
      uint64_t extSize = 0;
      if (std::string err = tofu::openInputStream(path, "its external weights file",
                                            tofu::kMaxInputFileBytes, ext, extSize);
          !err.empty()) {
        adviceGiven = true;
        return where + ": " + err +
               "; keep the .tofu-weights files next to plan.bin (or "
               "recompile it with tofuc)";
      }
      if (wOff > extSize || wSize != extSize - wOff) {
        adviceGiven = true;
        return where + ": its " + what + " is " + std::to_string(extSize) +
               " bytes, expected " + std::to_string(wOff + wSize) +
               " (truncated or replaced); recompile the plan with tofuc";
      }
      PlanInput extIn;
      extIn.file = &ext;
      if (std::string err = extIn.readAt(wOff, wSize, shardBytes);
          !err.empty())
        return where + ": " + what + ": " + err;
      shard = shardBytes.data();
    }
    {
      uint64_t found = ct::bulkChecksum(shard, wSize);
      if (found != fd.weights_checksum())
        return where + ": checksum mismatch in its weights in " + what +
               ": expected " + hex(fd.weights_checksum()) + ", found " +
               hex(found) + "; the file is corrupt";
    }
    return "";
  };
  if (std::string err = PlanDecoder(*root, loadShard, plan,
                                          in.options.expandCollectives,
                                          in.options.sharePrograms)
                                  .decode();
      !err.empty())
    return "invalid plan: " + err +
           (adviceGiven ? "" : "; recompile it with tofuc");
  if (root->num_devices() != ct::loadLE(p + ct::kOffNumDevices, 4) ||
      root->model_fingerprint() != ct::loadLE(p + ct::kOffFingerprint, 8))
    return std::string("the header and the PLAN section disagree on the "
                       "device count or model fingerprint; ") +
           kRecompile;
  if (in.options.onlyDevice >= 0 &&
      static_cast<uint32_t>(in.options.onlyDevice) >= plan.numDevices)
    return "device " + std::to_string(in.options.onlyDevice) +
           " was asked for, but the plan has " +
           std::to_string(plan.numDevices) + " devices";
  if (cudaSec) {
    const uint8_t *cuda = partial ? cudaBytes.data() : p + cudaSec->offset;
    flatbuffers::Verifier cudaVerifier(cuda, cudaSec->size,
                                       /*max_depth=*/64,
                                       /*max_tables=*/1u << 30);
    if (!cudaVerifier.VerifyBuffer<fbs::CudaModule>("TFCU"))
      return std::string("the CUDA section fails FlatBuffers verification; ") +
             kRecompile;
    if (std::string err = decodeCudaModule(
            *flatbuffers::GetRoot<fbs::CudaModule>(cuda), plan);
        !err.empty())
      return "invalid plan: " + err + "; recompile it with tofuc";
  }
  if (modelSec && in.options.loadModel) {
    if (partial)
      plan.onnxModel = std::move(modelBytes);
    else
      plan.onnxModel.assign(p + modelSec->offset,
                            p + modelSec->offset + modelSec->size);
  }
  return "";
}

} // namespace

std::string tofu::plan::readPlanBytes(const std::vector<uint8_t> &bytes,
                                      Plan &plan) {
  plan = Plan();
  try {
    PlanInput in;
    in.whole = bytes.data();
    in.size = bytes.size();
    std::string err = readContainer(in, plan);
    if (!err.empty())
      plan = Plan();
    return err;
  } catch (const std::bad_alloc &) {
    plan = Plan();
    return "out of memory while loading the plan";
  }
}

std::string tofu::plan::readPlan(const std::string &path, Plan &plan,
                                 const ReadOptions &options) {
  plan = Plan();
  std::ifstream file;
  uint64_t fileSize = 0;
  if (std::string err = tofu::openInputStream(path, "the plan", tofu::kMaxInputFileBytes,
                                        file, fileSize);
      !err.empty())
    return err;
  PlanInput in;
  in.size = fileSize;
  in.hasDir = true;
  in.dir = std::filesystem::path(path).parent_path();
  in.options = options;
  std::vector<uint8_t> whole;
  try {
    if (options.onlyDevice < 0) {
      whole.resize(static_cast<size_t>(fileSize));
      file.read(reinterpret_cast<char *>(whole.data()),
                static_cast<std::streamsize>(whole.size()));
      if (static_cast<uint64_t>(file.gcount()) != whole.size())
        return "cannot read plan '" + path + "': short read";
      in.whole = whole.data();
    } else {
      in.partial = true;
      in.file = &file;
    }
    if (std::string err = readContainer(in, plan); !err.empty()) {
      plan = Plan();
      return "'" + path + "': " + err;
    }
  } catch (const std::bad_alloc &) {
    plan = Plan();
    return "'" + path + "': out of memory while loading the plan";
  }
  return "";
}
