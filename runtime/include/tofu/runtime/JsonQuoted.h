//===- JsonQuoted.h - a string as a JSON string literal ---------*- C++ -*-===//
//
// The runtime writes its JSON (--trace, --calibrate, --kernel-times) by
// hand; names in it come from the plan (op and tensor names of any ONNX
// model), so every string goes through jsonQuoted.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_JSONQUOTED_H
#define TOFU_RUNTIME_JSONQUOTED_H

#include <cstdio>
#include <string>

namespace tofu::runtime {

/// `s` as a JSON string literal: quote and backslash escaped, control
/// characters as \uXXXX, every other byte as it is (UTF-8 passes through).
inline std::string jsonQuoted(const std::string &s) {
  std::string q = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      q += '\\';
      q += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      q += buf;
    } else {
      q += static_cast<char>(c);
    }
  }
  return q + "\"";
}

} // namespace tofu::runtime

#endif // TOFU_RUNTIME_JSONQUOTED_H
