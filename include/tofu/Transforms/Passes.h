//===- Passes.h - tofu passes -----------------------------------*- C++ -*-===//
//
// Declarations of all tofu passes (generated from dialects/tofu/Passes.td)
// and their registration.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_TRANSFORMS_PASSES_H
#define TOFU_TRANSFORMS_PASSES_H

#include "mlir/Pass/Pass.h"
#include "tofu/Dialect/Tofu.h"

namespace tofu {
#define GEN_PASS_DECL
#include "tofu/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "tofu/Passes.h.inc"
} // namespace tofu

#endif // TOFU_TRANSFORMS_PASSES_H
