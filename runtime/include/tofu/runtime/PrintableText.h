//===- PrintableText.h - Names from models made safe for a terminal -*- C++ -*-===//
//
// Node, tensor and initializer names come from the model (or the plan) and
// may hold a newline or an escape sequence. Every place that prints such a
// name to a terminal line — tofu-run's errors, tofuc's --dump-plan text —
// writes it through printableLine. Header-only: the compiler's libraries and
// the runtime both include it.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_PRINTABLETEXT_H
#define TOFU_RUNTIME_PRINTABLETEXT_H

#include <cstdio>
#include <string>
#include <string_view>

namespace tofu::runtime {

/// `text` for one line on a terminal: control characters (a newline, the
/// ESC of an escape sequence, DEL) and the C1 controls U+0080..U+009F are
/// written as \xNN, so that a name taken from the plan or the model (a node,
/// a tensor, an initializer) cannot break the line or recolor the terminal.
/// Other UTF-8 (a path, a name in another script) is kept.
inline std::string printableLine(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  auto escape = [&out](unsigned char c) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "\\x%02x", c);
    out += buf;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) {
      escape(c);
    } else if (c == 0xc2 && i + 1 < text.size() &&
               static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      escape(c);
      escape(static_cast<unsigned char>(text[++i]));
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

} // namespace tofu::runtime

#endif // TOFU_RUNTIME_PRINTABLETEXT_H
