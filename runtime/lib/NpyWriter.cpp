//===- NpyWriter.cpp - Write NumPy .npy files -----------------------------===//

#include "tofu/runtime/NpyWriter.h"
#include "tofu/runtime/AtomicFile.h"
#include "tofu/runtime/NpyData.h"

#include <cerrno>
#include <cstring>
#include <fstream>

using namespace tofu::runtime;
using namespace tofu::plan;

std::string tofu::runtime::npyHeader(DType dtype,
                                     const std::vector<int64_t> &shape) {
  std::string dict = "{'descr': '";
  dict += npyDescr(dtype);
  dict += "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i)
    dict += std::to_string(shape[i]) + (shape.size() == 1 || i + 1 < shape.size()
                                            ? ","
                                            : "") +
            (i + 1 < shape.size() ? " " : "");
  dict += "), }";
  // magic(6) + version(2) + length(2) + dict + padding + '\n' = k * 64.
  size_t unpadded = 10 + dict.size() + 1;
  size_t padded = (unpadded + 63) / 64 * 64;
  dict.append(padded - unpadded, ' ');
  dict += '\n';
  std::string header = "\x93NUMPY";
  header += '\x01';
  header += '\x00';
  header += static_cast<char>(dict.size() & 0xff);
  header += static_cast<char>((dict.size() >> 8) & 0xff);
  return header + dict;
}

std::string tofu::runtime::writeNpy(const std::string &path, DType dtype,
                                    const std::vector<int64_t> &shape,
                                    const std::vector<uint8_t> &data) {
  if (npyDescr(dtype).empty())
    return "cannot write '" + path + "': numpy's .npy format has no " +
           dtypeNumpyName(dtype) + " type";
  std::string header = npyHeader(dtype, shape);
  return writeFileAtomically(path, [&](std::ostream &out) {
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(reinterpret_cast<const char *>(data.data()),
              static_cast<std::streamsize>(data.size()));
  });
}
