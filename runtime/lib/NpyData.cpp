//===- NpyData.cpp - Training batches from .npy files (--data) ------------===//

#include "tofu/runtime/NpyData.h"
#include "tofu/runtime/InputFile.h"
#include "tofu/runtime/ElementAccess.h"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

using namespace tofu::runtime;
using namespace tofu::plan;

namespace {

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    s += std::to_string(shape[i]) +
         (shape.size() == 1 ? "," : i + 1 < shape.size() ? ", " : "");
  return s + ")";
}

/// The text after `'key':` in a header dict, with leading spaces skipped, or
/// npos.
size_t valueOf(const std::string &dict, const std::string &key) {
  size_t p = dict.find("'" + key + "'");
  if (p == std::string::npos)
    return p;
  p = dict.find(':', p);
  if (p == std::string::npos)
    return p;
  ++p;
  while (p < dict.size() && dict[p] == ' ')
    ++p;
  return p;
}

std::string parseDict(const std::string &dict, NpyHeader &h) {
  size_t p = valueOf(dict, "descr");
  if (p == std::string::npos || p >= dict.size() || dict[p] != '\'')
    return "no 'descr' string";
  size_t e = dict.find('\'', p + 1);
  if (e == std::string::npos)
    return "unterminated 'descr'";
  h.descr = dict.substr(p + 1, e - p - 1);
  p = valueOf(dict, "fortran_order");
  if (p == std::string::npos)
    return "no 'fortran_order'";
  if (dict.compare(p, 4, "True") == 0)
    h.fortranOrder = true;
  else if (dict.compare(p, 5, "False") == 0)
    h.fortranOrder = false;
  else
    return "'fortran_order' is neither True nor False";
  p = valueOf(dict, "shape");
  if (p == std::string::npos || p >= dict.size() || dict[p] != '(')
    return "no 'shape' tuple";
  e = dict.find(')', p);
  if (e == std::string::npos)
    return "unterminated 'shape'";
  h.shape.clear();
  std::string tuple = dict.substr(p + 1, e - p - 1);
  size_t i = 0;
  while (i < tuple.size()) {
    while (i < tuple.size() && (tuple[i] == ' ' || tuple[i] == ','))
      ++i;
    if (i >= tuple.size())
      break;
    if (!std::isdigit(static_cast<unsigned char>(tuple[i])))
      return "bad 'shape' " + dict.substr(p, e - p + 1);
    int64_t v = 0;
    while (i < tuple.size() && std::isdigit(static_cast<unsigned char>(tuple[i]))) {
      if (v > (int64_t{1} << 50))
        return "'shape' dimension too large";
      v = v * 10 + (tuple[i++] - '0');
    }
    h.shape.push_back(v);
  }
  return "";
}

/// Copies box `region` of a dense row-major array of global shape `shape`
/// to `out` (dense, row-major over the box).
void copyBox(const uint8_t *full, const std::vector<int64_t> &shape,
             const Box &region, size_t es, uint8_t *out) {
  int64_t n = region.numElements();
  if (n == 0)
    return;
  size_t rank = shape.size();
  if (rank == 0) {
    std::memcpy(out, full, es);
    return;
  }
  std::vector<int64_t> strides(rank, 1);
  for (size_t i = rank; i-- > 1;)
    strides[i - 1] = strides[i] * shape[i];
  int64_t run = region.hi[rank - 1] - region.lo[rank - 1];
  std::vector<int64_t> idx(region.lo);
  for (int64_t r = 0, rows = n / run; r < rows; ++r) {
    int64_t off = 0;
    for (size_t i = 0; i < rank; ++i)
      off += idx[i] * strides[i];
    std::memcpy(out, full + off * es, run * es);
    out += run * es;
    for (size_t i = rank - 1; i-- > 0;) {
      if (++idx[i] < region.hi[i])
        break;
      idx[i] = region.lo[i];
    }
  }
}

uint64_t elementsOf(const std::vector<int64_t> &shape) {
  uint64_t n = 1;
  for (int64_t d : shape)
    n *= static_cast<uint64_t>(d);
  return n;
}

} // namespace

std::string tofu::runtime::npyDescr(DType dtype) {
  switch (dtype) {
  case DType::F32: return "<f4";
  case DType::I64: return "<i8";
  case DType::Bool: return "|b1";
  case DType::F64: return "<f8";
  case DType::I32: return "<i4";
  case DType::I16: return "<i2";
  case DType::I8: return "|i1";
  case DType::U8: return "|u1";
  case DType::U16: return "<u2";
  case DType::U32: return "<u4";
  case DType::U64: return "<u8";
  case DType::F16: return "<f2";
  case DType::BF16: return ""; // numpy has no bfloat16
  }
  return "";
}

std::string tofu::runtime::npyTensorFileName(const std::string &name) {
  std::string f = name;
  for (char &c : f)
    if (c == '/')
      c = '_';
  return f + ".npy";
}

std::string tofu::runtime::readNpyHeader(const std::string &path,
                                         NpyHeader &h) {
  std::ifstream in;
  uint64_t size = 0;
  if (std::string err =
          openInputStream(path, "the .npy file", kMaxInputFileBytes, in, size);
      !err.empty())
    return err;
  char pre[12] = {};
  in.read(pre, 10);
  if (in.gcount() < 10 || std::memcmp(pre, "\x93NUMPY", 6) != 0)
    return "'" + path + "' is not a .npy file (no \\x93NUMPY magic); write "
           "it with numpy.save";
  unsigned major = static_cast<unsigned char>(pre[6]);
  uint64_t len = 0;
  if (major == 1) {
    len = static_cast<unsigned char>(pre[8]) |
          static_cast<unsigned char>(pre[9]) << 8;
    h.dataOffset = 10 + len;
  } else if (major == 2 || major == 3) {
    in.read(pre + 10, 2);
    if (in.gcount() < 2)
      return "corrupt .npy header in '" + path + "': truncated";
    for (int i = 3; i >= 0; --i)
      len = len << 8 | static_cast<unsigned char>(pre[8 + i]);
    h.dataOffset = 12 + len;
  } else {
    return "'" + path + "' has .npy format version " + std::to_string(major) +
           " (supported: 1, 2, 3)";
  }
  if (len > (1u << 20))
    return "corrupt .npy header in '" + path + "': header length " +
           std::to_string(len) + " is implausible";
  std::string dict(len, '\0');
  in.read(dict.data(), static_cast<std::streamsize>(len));
  if (static_cast<uint64_t>(in.gcount()) != len)
    return "corrupt .npy header in '" + path + "': the file ends inside the "
           "header";
  if (std::string err = parseDict(dict, h); !err.empty())
    return "corrupt .npy header in '" + path + "': " + err;
  return "";
}

std::string NpyDataset::path(int64_t batch, int32_t tensor) const {
  return dir + "/batch_" + std::to_string(batch) + "/" +
         npyTensorFileName(plan.tensors[tensor].name);
}

std::string NpyDataset::open(const std::string &folder) {
  namespace fs = std::filesystem;
  dir = folder;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return "--data: '" + dir + "' is not a directory";
  batches = 0;
  while (fs::is_directory(dir + "/batch_" + std::to_string(batches), ec))
    ++batches;
  if (batches == 0)
    return "--data: '" + dir + "' has no batch_0 folder (expected " + dir +
           "/batch_<i>/<input>.npy, i = 0, 1, ...)";
  fed.clear();
  for (size_t t = 0; t < plan.tensors.size(); ++t)
    if (plan.tensors[t].role == TensorRole::Input ||
        plan.tensors[t].role == TensorRole::Label)
      fed.push_back(static_cast<int32_t>(t));
  for (int64_t b = 0; b < batches; ++b)
    for (int32_t t : fed) {
      const TensorInfo &info = plan.tensors[t];
      std::string file = path(b, t);
      if (npyDescr(info.dtype).empty())
        return "--data: input '" + info.name + "' is " +
               dtypeNumpyName(info.dtype) +
               ", which numpy's .npy format cannot hold; feed it with "
               "synthetic data (no --data)";
      if (!fs::exists(fs::symlink_status(file, ec)))
        return "--data: missing file '" + file + "' (input '" + info.name +
               "', shape " + shapeText(info.shape) + ", dtype " +
               npyDescr(info.dtype) + ")";
      NpyHeader h;
      if (std::string err = readNpyHeader(file, h); !err.empty())
        return "--data: " + err;
      if (h.descr != npyDescr(info.dtype))
        return "--data: '" + file + "' has dtype '" + h.descr +
               "', expected '" + npyDescr(info.dtype) + "' for input '" +
               info.name + "' (convert with numpy's astype)";
      if (h.shape != info.shape)
        return "--data: '" + file + "' has shape " + shapeText(h.shape) +
               ", expected " + shapeText(info.shape) + " for input '" +
               info.name + "' (the plan's batch size is fixed at compile "
               "time)";
      if (h.fortranOrder)
        return "--data: '" + file + "' is in Fortran order; save a C-order "
               "array (numpy.ascontiguousarray)";
      uint64_t want = h.dataOffset +
                      elementsOf(info.shape) * dtypeSize(info.dtype);
      uint64_t size = fs::file_size(file, ec);
      if (ec || size != want)
        return "--data: '" + file + "' is " + std::to_string(size) +
               " bytes, expected " + std::to_string(want) +
               " for its header and data (truncated or corrupt?)";
    }
  return "";
}

/// Checks the values of an integer tensor that indexes: labels must lie in
/// [0, classes) or equal the losses' ignore_index; token ids (an integer
/// input with a class count: the rows of the table its Gathers index) in
/// [-rows, rows), as ONNX Gather takes them (negative ones count from the
/// end). "" when they do, else an error naming the file, the input, the
/// element and the value.
static std::string checkIndexValues(const TensorInfo &info,
                                    const std::string &file,
                                    const std::vector<uint8_t> &data) {
  if (!isIntegerDType(info.dtype) || info.numClasses <= 0)
    return "";
  const bool labels = info.role == TensorRole::Label;
  if (!labels && info.role != TensorRole::Input)
    return "";
  const double n = static_cast<double>(info.numClasses);
  const uint64_t count = elementsOf(info.shape);
  for (uint64_t i = 0; i < count; ++i) {
    double v = loadElement(data.data(), info.dtype, static_cast<int64_t>(i));
    // The value as the file holds it (a double rounds 64-bit ids, and
    // converting 2^63 - 1 back to long long overflows).
    std::string value;
    if (info.dtype == DType::I64 || info.dtype == DType::U64) {
      uint64_t raw;
      std::memcpy(&raw, data.data() + i * 8, 8);
      value = info.dtype == DType::I64
                  ? std::to_string(static_cast<int64_t>(raw))
                  : std::to_string(raw);
    } else {
      value = std::to_string(static_cast<long long>(v));
    }
    if (labels) {
      if ((v >= 0 && v < n) ||
          (info.ignoreIndex && v == static_cast<double>(*info.ignoreIndex)))
        continue;
      return "'" + file + "': label " + value + " at index " +
             std::to_string(i) + " is outside [0, " +
             std::to_string(info.numClasses) + ") (labels '" + info.name +
             "', " + std::to_string(info.numClasses) + " classes" +
             (info.ignoreIndex ? "; the loss ignores only " +
                                     std::to_string(*info.ignoreIndex)
                               : std::string("; the loss ignores none")) +
             ")";
    }
    if (v >= -n && v < n)
      continue;
    return "'" + file + "': token id " + value + " at index " +
           std::to_string(i) + " of input '" + info.name +
           "' is outside [-" + std::to_string(info.numClasses) + ", " +
           std::to_string(info.numClasses) + "): the table it indexes " +
           "(Gather) has " + std::to_string(info.numClasses) +
           " rows (negative ids count from the end, as in ONNX Gather)";
  }
  return "";
}

std::string NpyDataset::load(int64_t batch) {
  loaded.clear();
  loadedBatch = -1;
  for (int32_t t : fed) {
    const TensorInfo &info = plan.tensors[t];
    std::string file = path(batch, t);
    NpyHeader h;
    if (std::string err = readNpyHeader(file, h); !err.empty())
      return err;
    uint64_t bytes = elementsOf(info.shape) * dtypeSize(info.dtype);
    std::vector<uint8_t> data(bytes);
    std::ifstream in;
    uint64_t size = 0;
    if (std::string err = openInputStream(file, "the .npy file",
                                          kMaxInputFileBytes, in, size);
        !err.empty())
      return err;
    in.seekg(static_cast<std::streamoff>(h.dataOffset));
    in.read(reinterpret_cast<char *>(data.data()),
            static_cast<std::streamsize>(bytes));
    if (!in || static_cast<uint64_t>(in.gcount()) != bytes)
      return "cannot read the data of '" + file + "' (changed since it was "
             "checked?)";
    if (std::string err = checkIndexValues(info, file, data); !err.empty())
      return err;
    loaded[t] = std::move(data);
  }
  loadedBatch = batch;
  return "";
}

std::string NpyDataset::fill(int32_t tensor, const Box &region, int64_t step,
                             void *out) {
  if (batches == 0)
    return "no --data folder is open";
  int64_t batch = step % batches;
  if (batch != loadedBatch)
    if (std::string err = load(batch); !err.empty())
      return "--data: " + err;
  auto it = loaded.find(tensor);
  if (it == loaded.end())
    return "tensor '" + plan.tensors[tensor].name +
           "' is neither an input nor a label";
  const TensorInfo &info = plan.tensors[tensor];
  copyBox(it->second.data(), info.shape, region, dtypeSize(info.dtype),
          static_cast<uint8_t *>(out));
  return "";
}
