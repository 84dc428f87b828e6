//===- EmbeddedSpecs.h - tdl-specs/ texts compiled into the library -*- C++ -*-===//
//
// The generated EmbeddedSpecs.cpp (see EmbedSpecs.cmake) defines one entry
// per tdl-specs/*.tdl file, sorted by name, with the name diagnostics use
// (`tdl-specs/nn.tdl`).
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_LIB_TDL_EMBEDDEDSPECS_H
#define TOFU_LIB_TDL_EMBEDDEDSPECS_H

#include <cstddef>

namespace tofu::tdl {

struct EmbeddedSpec {
  const char *fileName;
  const char *text;
  size_t size;
};

extern const EmbeddedSpec kEmbeddedSpecs[];
extern const size_t kNumEmbeddedSpecs;

} // namespace tofu::tdl

#endif // TOFU_LIB_TDL_EMBEDDEDSPECS_H
