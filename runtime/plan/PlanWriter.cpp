//===- PlanWriter.cpp - Serialize a Plan into plan.bin --------------------===//
//
// Builds the PLAN section with FlatBuffers, lays the initial buffer contents
// out per device in the WEIGHTS section, appends the ONNX model as the MODEL
// section, and wraps the three in the checksummed container described in
// docs/PlanFormat.md. The output depends only on the Plan: the same Plan
// always gives byte-identical files.
//
//===----------------------------------------------------------------------===//

#include "tofu/runtime/Plan.h"
#include "tofu/runtime/AtomicFile.h"
#include "tofu/runtime/SharedPrograms.h"

#include "PlanContainer.h"
#include "cuda_kernels_generated.h"
#include "plan_generated.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <unordered_map>

using namespace tofu::plan;
namespace fbs = tofu::plan::fb;
namespace ct = tofu::plan::container;

namespace {

/// A section's bytes as a sequence of pieces that are not copied together
/// (the WEIGHTS section is every buffer's `init`, in order).
struct Chunks {
  std::vector<std::pair<const uint8_t *, size_t>> pieces;
  uint64_t size = 0;
  /// checksum(), where it was computed along with something else.
  std::optional<uint64_t> knownChecksum;
  void add(const uint8_t *data, size_t bytes) {
    if (bytes)
      pieces.push_back({data, bytes});
    size += bytes;
  }
  /// ct::contentChecksum of the concatenated pieces.
  uint64_t checksum() const {
    if (knownChecksum)
      return *knownChecksum;
    ct::ContentHasher hash;
    for (const auto &[data, bytes] : pieces)
      hash.update(data, bytes);
    return hash.digest();
  }
};

/// A device's weight shard stored in its own file next to plan.bin.
/// contentChecksum of `shard`, feeding its bytes to `section` too (when
/// given) block by block while they are in cache: the weights are read once
/// for the shard checksums and the WEIGHTS section's, not twice.
uint64_t shardChecksum(const Chunks &shard, ct::ContentHasher *section) {
  constexpr size_t kBlock = 64 * 1024;
  ct::ContentHasher hash;
  for (const auto &[data, bytes] : shard.pieces)
    for (size_t at = 0; at < bytes; at += kBlock) {
      size_t n = std::min(kBlock, bytes - at);
      hash.update(data + at, n);
      if (section)
        section->update(data + at, n);
    }
  return hash.digest();
}

struct ExternalShard {
  std::string name;
  Chunks bytes;
};

/// `<16 hex digits of the checksum>.tofu-weights`.
std::string externalShardName(uint64_t checksum) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%016llx.tofu-weights",
                static_cast<unsigned long long>(checksum));
  return buf;
}

bool sameProgram(const DeviceProgram &a, const DeviceProgram &b) {
  if (a.buffers.size() != b.buffers.size() ||
      a.instrs.size() != b.instrs.size())
    return false;
  for (size_t i = 0; i < a.buffers.size(); ++i)
    if (!sameInProgram(a.buffers[i], b.buffers[i]))
      return false;
  for (size_t i = 0; i < a.instrs.size(); ++i)
    if (!sameInProgram(a.instrs[i], b.instrs[i]))
      return false;
  return true;
}

/// A hash of what sameProgram compares (equal programs hash equally; the
/// value only buckets candidates, it never reaches the file).
uint64_t programHash(const DeviceProgram &dev) {
  uint64_t h = 0x9e3779b97f4a7c15ull;
  auto mix = [&h](uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  };
  mix(dev.buffers.size());
  for (const Buffer &b : dev.buffers) {
    mix(static_cast<uint64_t>(b.tensor));
    mix(b.offset ^ (b.bytes << 1) ^ (uint64_t{b.partial} << 62) ^
        (uint64_t{b.owned} << 61) ^ (uint64_t{b.hasInit()} << 60));
  }
  mix(dev.instrs.size());
  for (const Instr &in : dev.instrs) {
    mix(static_cast<uint64_t>(in.kind) ^ (static_cast<uint64_t>(in.seq) << 8));
    mix(static_cast<uint64_t>(in.dst));
    for (int32_t b : in.inputs)
      mix(static_cast<uint64_t>(b));
    for (int32_t b : in.outputs)
      mix(static_cast<uint64_t>(b) << 1);
    mix(reinterpret_cast<uintptr_t>(in.spec.get()));
    mix(reinterpret_cast<uintptr_t>(in.sources.get()));
    if (!in.sources)
      mix(in.pieces.size());
  }
  return h;
}

/// Serializes the in-memory plan into FlatBuffers; `weights` receives the
/// WEIGHTS section (each device's init bytes contiguous, in buffer order) as
/// pieces pointing into the plan's buffers, or, with `external`, each
/// device's shard goes into `externals` instead.
class PlanSerializer {
public:
  explicit PlanSerializer(const Plan &plan) : plan(plan) {}

  std::string build(std::vector<uint8_t> &planBytes, Chunks &weights,
                    bool external, std::vector<ExternalShard> &externals);

private:
  flatbuffers::Offset<flatbuffers::Vector<int64_t>>
  longs(const std::vector<int64_t> &v) {
    return fbb.CreateVector(v);
  }
  flatbuffers::Offset<fbs::Tensor> tensor(const TensorInfo &t);
  flatbuffers::Offset<fbs::Instr> instr(const Instr &in);
  flatbuffers::Offset<fbs::ExprProgram> program(const ExprProgram &p);
  flatbuffers::Offset<fbs::OpSpec> opSpec(const OpSpec &spec);
  /// Plan.op_specs: every distinct OpSpec object (instructions that share
  /// one share its entry), numbered in order of first use (device by
  /// device, instruction by instruction), so that the file depends only on
  /// the plan and not on addresses.
  flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fbs::OpSpec>>>
  opSpecs();

  /// Plan.collectives: every distinct source table, numbered in order of
  /// first use like the op specs (format 3.0).
  flatbuffers::Offset<
      flatbuffers::Vector<flatbuffers::Offset<fbs::CollectiveSources>>>
  collectives();

  const Plan &plan;
  flatbuffers::FlatBufferBuilder fbb{1 << 16};
  std::unordered_map<const OpSpec *, int32_t> specIndex;
  std::unordered_map<const CollectiveSources *, int32_t> sourcesIndex;
};

flatbuffers::Offset<fbs::Tensor> PlanSerializer::tensor(const TensorInfo &t) {
  std::vector<fbs::Cut> cuts;
  for (const Cut &c : t.tiling)
    cuts.emplace_back(c.dim, c.parts);
  auto name = fbb.CreateString(t.name);
  auto shape = longs(t.shape);
  auto tiling = fbb.CreateVectorOfStructs(cuts);
  auto paramName = fbb.CreateString(t.paramName);
  fbs::TensorBuilder b(fbb);
  b.add_name(name);
  b.add_dtype(static_cast<uint8_t>(t.dtype));
  b.add_shape(shape);
  b.add_role(static_cast<uint8_t>(t.role));
  b.add_tiling(tiling);
  b.add_num_classes(t.numClasses);
  b.add_paired_input(t.pairedInput);
  b.add_param_name(paramName);
  b.add_gradient_of(t.gradientOf);
  if (t.ignoreIndex)
    b.add_ignore_index(*t.ignoreIndex);
  return b.Finish();
}

flatbuffers::Offset<fbs::ExprProgram>
PlanSerializer::program(const ExprProgram &p) {
  std::vector<flatbuffers::Offset<fbs::ExprNode>> nodes;
  for (const ExprNode &n : p.nodes) {
    auto operands = fbb.CreateVector(n.operands);
    auto vars = fbb.CreateVector(n.vars);
    nodes.push_back(fbs::CreateExprNode(
        fbb, static_cast<uint8_t>(n.kind), n.value, n.var, n.input,
        static_cast<uint8_t>(n.binary), static_cast<uint8_t>(n.function),
        static_cast<uint8_t>(n.reducer), operands, vars));
  }
  auto extents = longs(p.varExtents);
  auto outputVars = fbb.CreateVector(p.outputVars);
  auto topVars = fbb.CreateVector(p.topReductionVars);
  auto nodeVec = fbb.CreateVector(nodes);
  return fbs::CreateExprProgram(fbb, extents, outputVars, topVars, nodeVec,
                                p.root);
}

flatbuffers::Offset<fbs::OpSpec> PlanSerializer::opSpec(const OpSpec &spec) {
  std::vector<flatbuffers::Offset<fbs::Attr>> attrs;
  for (const Attr &a : spec.attrs) {
    auto name = fbb.CreateSharedString(a.name);
    auto s = fbb.CreateSharedString(a.s);
    auto ints = longs(a.ints);
    attrs.push_back(fbs::CreateAttr(fbb, name, static_cast<uint8_t>(a.kind),
                                    a.i, a.f, s, ints));
  }
  auto shapes = [&](const std::vector<std::vector<int64_t>> &v) {
    std::vector<flatbuffers::Offset<fbs::Shape>> out;
    for (const auto &dims : v)
      out.push_back(fbs::CreateShape(fbb, longs(dims)));
    return fbb.CreateVector(out);
  };
  auto attrVec = fbb.CreateVector(attrs);
  auto inShapes = shapes(spec.inputGlobalShapes);
  auto outShapes = shapes(spec.outputGlobalShapes);
  flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fbs::ExprProgram>>>
      programVec;
  if (!spec.programs.empty()) {
    std::vector<flatbuffers::Offset<fbs::ExprProgram>> programs;
    for (const ExprProgram &p : spec.programs)
      programs.push_back(program(p));
    programVec = fbb.CreateVector(programs);
  }
  return fbs::CreateOpSpec(fbb, attrVec, inShapes, outShapes, programVec);
}

flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fbs::OpSpec>>>
PlanSerializer::opSpecs() {
  std::vector<flatbuffers::Offset<fbs::OpSpec>> specs;
  for (const DeviceProgram &dev : plan.devices)
    for (const Instr &in : dev.instrs)
      if (in.spec && specIndex.emplace(in.spec.get(), specs.size()).second)
        specs.push_back(opSpec(*in.spec));
  return fbb.CreateVector(specs);
}

flatbuffers::Offset<
    flatbuffers::Vector<flatbuffers::Offset<fbs::CollectiveSources>>>
PlanSerializer::collectives() {
  std::vector<flatbuffers::Offset<fbs::CollectiveSources>> tables;
  for (const DeviceProgram &dev : plan.devices)
    for (const Instr &in : dev.instrs)
      if (in.sources &&
          sourcesIndex.emplace(in.sources.get(), tables.size()).second)
        tables.push_back(fbs::CreateCollectiveSources(
            fbb, fbb.CreateVector(in.sources->buffers)));
  return fbb.CreateVector(tables);
}

flatbuffers::Offset<fbs::Instr> PlanSerializer::instr(const Instr &in) {
  // With a source table the pieces are derived from it (readPlan may have
  // expanded them into `pieces`: they are not stored again).
  std::vector<flatbuffers::Offset<fbs::Piece>> pieces;
  for (const Piece &p : in.sources ? std::vector<Piece>() : in.pieces) {
    auto lo = longs(p.region.lo);
    auto hi = longs(p.region.hi);
    pieces.push_back(fbs::CreatePiece(fbb, p.device, p.buffer, lo, hi));
  }
  // Every device's instructions of an op carry the same names: store each
  // distinct name once.
  auto kernel = fbb.CreateSharedString(in.kernel.str());
  auto inputs = fbb.CreateVector(in.inputs);
  auto outputs = fbb.CreateVector(in.outputs);
  auto pieceVec = fbb.CreateVector(pieces);
  auto op = fbb.CreateSharedString(in.op.str());
  int32_t spec = in.spec ? specIndex.at(in.spec.get()) : -1;
  // The bounds are the device's (Device.reduction_bounds): only the number
  // of ranges per list is shared.
  flatbuffers::Offset<flatbuffers::Vector<int32_t>> rangeSizes;
  if (!in.reductionRanges.empty()) {
    std::vector<int32_t> sizes;
    for (const auto &list : in.reductionRanges)
      sizes.push_back(static_cast<int32_t>(list.size()));
    rangeSizes = fbb.CreateVector(sizes);
  }
  int32_t sources = in.sources ? sourcesIndex.at(in.sources.get()) : -1;
  fbs::InstrBuilder b(fbb);
  b.add_kind(static_cast<uint8_t>(in.kind));
  b.add_seq(in.seq);
  b.add_kernel(kernel);
  b.add_inputs(inputs);
  b.add_outputs(outputs);
  b.add_dst(in.dst);
  b.add_pieces(pieceVec);
  b.add_op(op);
  b.add_spec(spec);
  b.add_sources(sources);
  if (!in.reductionRanges.empty())
    b.add_reduction_range_sizes(rangeSizes);
  return b.Finish();
}

std::string PlanSerializer::build(std::vector<uint8_t> &planBytes,
                                  Chunks &weights, bool external,
                                  std::vector<ExternalShard> &externals) {
  std::vector<flatbuffers::Offset<fbs::Tensor>> tensors;
  for (const TensorInfo &t : plan.tensors)
    tensors.push_back(tensor(t));
  auto specVec = opSpecs();
  auto collectiveVec = collectives();

  // Format 4.0: devices whose programs are the same up to regions and
  // reduction bounds share one stored Program, numbered in order of their
  // first device.
  // A device that shares another's program in memory (SharedPrograms.h)
  // gets that device's stored program.
  std::vector<int32_t> programOf(plan.devices.size(), -1);
  std::vector<size_t> firstDevice; // per stored program: a device owning it
  {
    std::unordered_map<uint64_t, std::vector<int32_t>> byHash;
    for (size_t d = 0; d < plan.devices.size(); ++d) {
      size_t owner = plan.devices[d].programOf < 0
                         ? d
                         : static_cast<size_t>(plan.devices[d].programOf);
      if (programOf[owner] < 0) {
        std::vector<int32_t> &candidates =
            byHash[programHash(plan.devices[owner])];
        for (int32_t p : candidates)
          if (sameProgram(plan.devices[firstDevice[p]],
                          plan.devices[owner])) {
            programOf[owner] = p;
            break;
          }
        if (programOf[owner] < 0) {
          programOf[owner] = static_cast<int32_t>(firstDevice.size());
          candidates.push_back(programOf[owner]);
          firstDevice.push_back(owner);
        }
      }
      programOf[d] = programOf[owner];
    }
  }
  std::vector<flatbuffers::Offset<fbs::Program>> programs;
  for (size_t d : firstDevice) {
    const DeviceProgram &dev = plan.devices[d];
    std::vector<flatbuffers::Offset<fbs::Buffer>> buffers;
    uint64_t initOffset = 0; // the same on every device of the program
    for (const Buffer &buf : dev.buffers) {
      bool hasInit = buf.hasInit();
      fbs::BufferBuilder b(fbb);
      b.add_tensor(buf.tensor);
      b.add_partial(buf.partial);
      b.add_owned(buf.owned);
      b.add_offset(buf.offset);
      b.add_bytes(buf.bytes);
      b.add_has_init(hasInit);
      b.add_init_offset(hasInit ? initOffset : 0);
      buffers.push_back(b.Finish());
      initOffset += buf.initSize();
    }
    std::vector<flatbuffers::Offset<fbs::Instr>> instrs;
    for (const Instr &in : dev.instrs)
      instrs.push_back(instr(in));
    auto bufVec = fbb.CreateVector(buffers);
    auto instrVec = fbb.CreateVector(instrs);
    programs.push_back(fbs::CreateProgram(fbb, bufVec, instrVec));
  }
  auto programVec = fbb.CreateVector(programs);

  std::vector<flatbuffers::Offset<fbs::Device>> devices;
  ct::ContentHasher weightsHash; // of the WEIGHTS section, shard by shard
  std::vector<int64_t> regions, bounds;
  for (size_t d = 0; d < plan.devices.size(); ++d) {
    const DeviceProgram &dev = plan.devices[d];
    Chunks shard;
    regions.clear();
    bounds.clear();
    if (dev.programOf >= 0) {
      // Its own regions, bounds and initial contents, laid out as stored.
      const std::vector<Buffer> &program = buffersOf(plan, d);
      size_t next = 0;
      for (size_t b = 0; b < program.size(); ++b) {
        if (!program[b].hasInit())
          continue;
        if (next >= dev.sharedInits.size() ||
            dev.sharedInits[next].buffer != static_cast<int32_t>(b))
          return "device " + std::to_string(d) + " buffer " +
                 std::to_string(b) +
                 ": its shared program has initial contents, the device "
                 "none";
        const SharedInit &init = dev.sharedInits[next++];
        if (init.borrowedInit) {
          shard.add(init.borrowedInit, program[b].bytes);
        } else if (init.init.size() == program[b].bytes) {
          shard.add(init.init.data(), init.init.size());
        } else {
          return "device " + std::to_string(d) + " buffer " +
                 std::to_string(b) + ": init holds " +
                 std::to_string(init.init.size()) +
                 " bytes but the buffer has " +
                 std::to_string(program[b].bytes);
        }
      }
      if (next != dev.sharedInits.size())
        return "device " + std::to_string(d) +
               ": initial contents for buffers its shared program has none "
               "for";
      regions = dev.sharedRegions;
      for (const auto &[lo, hi] : dev.sharedReductionRanges) {
        bounds.push_back(lo);
        bounds.push_back(hi);
      }
    }
    for (size_t b = 0; b < dev.buffers.size(); ++b) {
      const Buffer &buf = dev.buffers[b];
      bool hasInit = buf.hasInit();
      if (hasInit && buf.initSize() != buf.bytes)
        return "device " + std::to_string(d) + " buffer " + std::to_string(b) +
               ": init holds " + std::to_string(buf.initSize()) +
               " bytes but the buffer has " + std::to_string(buf.bytes);
      shard.add(buf.initData(), buf.initSize());
      regions.insert(regions.end(), buf.region.lo.begin(),
                     buf.region.lo.end());
      regions.insert(regions.end(), buf.region.hi.begin(),
                     buf.region.hi.end());
    }
    for (const Instr &in : dev.instrs)
      for (const auto &list : in.reductionRanges)
        for (const auto &[lo, hi] : list) {
          bounds.push_back(lo);
          bounds.push_back(hi);
        }
    auto regionVec = longs(regions);
    auto boundVec = longs(bounds);
    const bool inWeights = !(external && shard.size);
    const uint64_t checksum =
        shardChecksum(shard, inWeights ? &weightsHash : nullptr);
    uint64_t weightsOffset = 0;
    std::string file;
    if (!inWeights) {
      // Identical shards (replicated weights) share one file.
      file = externalShardName(checksum);
      if (std::none_of(externals.begin(), externals.end(),
                       [&](const ExternalShard &e) { return e.name == file; }))
        externals.push_back({file, shard});
    } else {
      weightsOffset = weights.size;
      for (const auto &[data, bytes] : shard.pieces)
        weights.add(data, bytes);
    }
    auto fileName = fbb.CreateString(file);
    fbs::DeviceBuilder b(fbb);
    b.add_peak_bytes(dev.peakBytes);
    b.add_comm_bytes(dev.commBytes);
    b.add_weights_offset(weightsOffset);
    b.add_weights_size(shard.size);
    b.add_weights_checksum(checksum);
    b.add_weights_file(fileName);
    b.add_program(programOf[d]);
    b.add_regions(regionVec);
    b.add_reduction_bounds(boundVec);
    devices.push_back(b.Finish());
  }
  weights.knownChecksum = weightsHash.digest();

  std::vector<fbs::ParamUpdate> updates;
  for (const auto &[param, updated] : plan.paramUpdates)
    updates.emplace_back(param, updated);

  auto producer = fbb.CreateString(plan.producer);
  auto partitioner = fbb.CreateString(plan.partitioner);
  auto optKind = fbb.CreateString(plan.optimizer.kind);
  auto tensorVec = fbb.CreateVector(tensors);
  auto updateVec = fbb.CreateVectorOfStructs(updates);
  auto deviceVec = fbb.CreateVector(devices);
  auto summary = fbb.CreateString(plan.summary);
  auto root = fbs::CreatePlan(
      fbb, producer, plan.modelFingerprint, plan.numDevices, plan.batchSize,
      partitioner, plan.searchSeconds, plan.commBytes, optKind,
      plan.optimizer.learningRate, tensorVec, plan.lossTensor, updateVec,
      deviceVec, summary, plan.withoutWeights, specVec, collectiveVec,
      programVec);
  fbs::FinishPlanBuffer(fbb, root);
  planBytes.assign(fbb.GetBufferPointer(),
                   fbb.GetBufferPointer() + fbb.GetSize());
  return "";
}

/// The CUDA section: FlatBuffers `tofu.plan.fb.CudaModule` (identifier TFCU).
void serializeCudaModule(const CudaModule &m, std::vector<uint8_t> &bytes) {
  flatbuffers::FlatBufferBuilder fbb(1 << 12);
  std::vector<flatbuffers::Offset<fbs::CudaKernel>> kernels;
  for (const CudaKernel &k : m.kernels)
    kernels.push_back(fbs::CreateCudaKernel(
        fbb, fbb.CreateString(k.name), fbb.CreateString(k.kind),
        fbb.CreateString(k.ops), k.numPointers, k.numParams, k.blockSize));
  std::vector<flatbuffers::Offset<fbs::CudaLaunch>> launches;
  for (const CudaLaunch &l : m.launches)
    launches.push_back(fbs::CreateCudaLaunch(
        fbb, l.device, l.firstInstr, l.numInstrs, l.output, l.kernel,
        l.numElements, fbb.CreateVector(l.buffers),
        fbb.CreateVector(l.params)));
  auto root = fbs::CreateCudaModule(
      fbb, fbb.CreateString(m.arch), fbb.CreateString(m.compiler),
      fbb.CreateString(m.source), fbb.CreateVector(m.cubin),
      fbb.CreateVector(kernels), fbb.CreateVector(launches));
  fbb.Finish(root, "TFCU");
  bytes.assign(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

uint64_t alignUp(uint64_t value) {
  return (value + ct::kSectionAlign - 1) / ct::kSectionAlign *
         ct::kSectionAlign;
}

} // namespace

namespace {

/// The container of a plan: its header (with the section table) and its
/// sections, each as pieces, laid out but not yet copied together.
struct Container {
  std::vector<uint8_t> header;
  std::vector<uint8_t> planBytes;
  std::vector<uint8_t> cudaBytes;
  Chunks sections[4];
  size_t numSections = 3;
  std::vector<uint64_t> offsets;
  uint64_t fileSize = 0;
  std::vector<ExternalShard> externals;
};

std::string layOut(const Plan &plan, const WriteOptions &options,
                   Container &c) {
  uint64_t initBytes = 0;
  for (const DeviceProgram &dev : plan.devices) {
    for (const Buffer &buf : dev.buffers)
      initBytes += buf.initSize();
    for (const SharedInit &init : dev.sharedInits)
      initBytes += init.borrowedInit ? plan.devices[dev.programOf]
                                           .buffers[init.buffer]
                                           .bytes
                                     : init.init.size();
  }
  const bool external =
      options.externalWeightsAbove == 0 ||
      initBytes > options.externalWeightsAbove;
  if (std::string err = PlanSerializer(plan).build(
          c.planBytes, c.sections[1], external, c.externals);
      !err.empty())
    return err;
  c.sections[0].add(c.planBytes.data(), c.planBytes.size());
  c.sections[2].add(plan.onnxModel.data(), plan.onnxModel.size());
  const uint32_t kinds[] = {ct::kSectionPlan, ct::kSectionWeights,
                            ct::kSectionModel, ct::kSectionCuda};
  if (!plan.cuda.arch.empty()) {
    serializeCudaModule(plan.cuda, c.cudaBytes);
    c.sections[3].add(c.cudaBytes.data(), c.cudaBytes.size());
    c.numSections = 4;
  }
  const size_t numSections = c.numSections;
  const size_t headerSize =
      ct::kFixedHeaderBytes + numSections * ct::kSectionEntryBytes;

  // Lay the sections out after the header, each 8-byte aligned, zero padding.
  uint64_t end = alignUp(headerSize);
  for (size_t i = 0; i < numSections; ++i) {
    c.offsets.push_back(end);
    end = alignUp(end + c.sections[i].size);
  }
  c.fileSize = c.offsets.back() + c.sections[numSections - 1].size;

  std::vector<uint8_t> &file = c.header;
  file.assign(headerSize, 0);
  std::memcpy(file.data() + ct::kOffMagic, ct::kMagic, sizeof(ct::kMagic));
  ct::storeLE(&file[ct::kOffMajor], ct::kMajor, 2);
  ct::storeLE(&file[ct::kOffMinor], ct::kMinor, 2);
  ct::storeLE(&file[ct::kOffHeaderSize], headerSize, 4);
  ct::storeLE(&file[ct::kOffFileSize], c.fileSize, 8);
  ct::storeLE(&file[ct::kOffFingerprint], plan.modelFingerprint, 8);
  ct::storeLE(&file[ct::kOffNumDevices], plan.numDevices, 4);
  ct::storeLE(&file[ct::kOffNumSections], numSections, 4);
  std::memcpy(&file[ct::kOffProducer], plan.producer.data(),
              std::min(plan.producer.size(), ct::kProducerBytes - 1));
  for (size_t i = 0; i < numSections; ++i) {
    uint8_t *entry =
        &file[ct::kFixedHeaderBytes + i * ct::kSectionEntryBytes];
    ct::storeLE(entry + 0, kinds[i], 4);
    ct::storeLE(entry + 4, 0, 4);
    ct::storeLE(entry + 8, c.offsets[i], 8);
    ct::storeLE(entry + 16, c.sections[i].size, 8);
    ct::storeLE(entry + 24, c.sections[i].checksum(), 8);
  }
  ct::storeLE(&file[ct::kOffHeaderChecksum],
              ct::headerChecksum(file.data(), headerSize), 8);
  return "";
}

} // namespace

std::string tofu::plan::writePlanBytes(const Plan &plan,
                                      std::vector<uint8_t> &file) {
  Container c;
  if (std::string err = layOut(plan, WriteOptions(), c); !err.empty())
    return err;
  file.assign(c.fileSize, 0);
  std::memcpy(file.data(), c.header.data(), c.header.size());
  for (size_t i = 0; i < c.numSections; ++i) {
    uint64_t at = c.offsets[i];
    for (const auto &[data, bytes] : c.sections[i].pieces) {
      std::memcpy(&file[at], data, bytes);
      at += bytes;
    }
  }
  return "";
}

std::string tofu::plan::writePlan(const Plan &plan, const std::string &path,
                                  const WriteOptions &options) {
  // The sections are streamed from the plan's buffers: the weights are not
  // copied into one file image first (a model's weights would otherwise be
  // held twice more in memory).
  Container c;
  if (std::string err = layOut(plan, options, c); !err.empty())
    return "cannot write plan '" + path + "': " + err;
  if (std::string kind = outputPathKind(path); !kind.empty() && kind != "direct")
    return "cannot write the plan: " + kind;
  if (!c.externals.empty() && isSpecialOutputPath(path))
    return "cannot write plan '" + path + "': it is a special file, and the "
           "plan's weights go to .tofu-weights files next to it; write the "
           "plan to a regular file";
  // External weight files first: plan.bin, renamed into place last, only
  // ever names complete files.
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  for (const ExternalShard &e : c.externals)
    if (std::string err = writeFileAtomically(
            (dir / e.name).string(),
            [&](std::ostream &out) {
              for (const auto &[data, bytes] : e.bytes.pieces)
                out.write(reinterpret_cast<const char *>(data),
                          static_cast<std::streamsize>(bytes));
            });
        !err.empty())
      return "cannot write the external weights of plan '" + path + "': " + err;
  // Write to a temporary file in the same directory, then rename, so that a
  // failure never leaves a half-written plan behind.
  return writeFileAtomically(path, [&](std::ostream &out) {
    static const char zeros[ct::kSectionAlign] = {};
    out.write(reinterpret_cast<const char *>(c.header.data()),
              static_cast<std::streamsize>(c.header.size()));
    uint64_t at = c.header.size();
    for (size_t i = 0; i < c.numSections; ++i) {
      out.write(zeros, static_cast<std::streamsize>(c.offsets[i] - at));
      at = c.offsets[i];
      for (const auto &[data, bytes] : c.sections[i].pieces) {
        out.write(reinterpret_cast<const char *>(data),
                  static_cast<std::streamsize>(bytes));
        at += bytes;
      }
    }
  });
}
