//===- Parser.h - TDL recursive-descent parser --------------------*- C++ -*-===//
//
// Parses a .tdl source into OpSpec and GradRule declarations, then runs the
// semantic checks of SpecChecker.h on each declaration. The first error stops
// parsing and is returned as `file:line:col: error: message`.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_LIB_TDL_PARSER_H
#define TOFU_LIB_TDL_PARSER_H

#include "AST.h"

#include <memory>
#include <vector>

namespace tofu::tdl {

struct ParsedFile {
  std::vector<std::unique_ptr<OpSpec>> ops;
  std::vector<std::unique_ptr<GradRule>> grads;
};

/// Parses `source` (named `*fileName` in diagnostics; the string must outlive
/// the result) and checks each declaration.
llvm::Expected<ParsedFile> parseTDL(const std::string *fileName,
                                    llvm::StringRef source);

} // namespace tofu::tdl

#endif // TOFU_LIB_TDL_PARSER_H
