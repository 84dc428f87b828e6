//===- EinsumNormalization.cpp - Einsum's equation as label lists ---------===//
//
// See EinsumNormalization.h.
//
//===----------------------------------------------------------------------===//
#include "tofu/Import/EinsumNormalization.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace tofu {

namespace {

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 message.str());
}

/// One side of the equation: its letters, and where its ellipsis is
/// (-1: none), as the index among the letters it precedes.
struct Term {
  std::string letters;
  int ellipsisAt = -1;
};

llvm::Expected<Term> parseTerm(llvm::StringRef text, llvm::StringRef where,
                               llvm::StringRef equation) {
  Term term;
  for (size_t i = 0; i < text.size();) {
    if (text.substr(i).starts_with("...")) {
      if (term.ellipsisAt >= 0)
        return error(where + ": equation '" + equation +
                     "' has two ellipses in one term");
      term.ellipsisAt = static_cast<int>(term.letters.size());
      i += 3;
      continue;
    }
    char c = text[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
      return error(where + ": equation '" + equation +
                   "' has the character '" + std::string(1, c) +
                   "' (letters, '...', ',' and '->' are allowed)");
    term.letters += c;
    ++i;
  }
  return term;
}

} // namespace

llvm::Error normalizeEinsum(
    onnx::NodeProto &node, llvm::StringRef where,
    llvm::function_ref<std::optional<tdl::TensorType>(llvm::StringRef)>
        typeOf) {
  std::string equation;
  for (const auto &attr : node.attribute())
    if (attr.name() == "equation")
      equation = attr.s();
  equation.erase(std::remove(equation.begin(), equation.end(), ' '),
                 equation.end());
  llvm::StringRef eq(equation);
  auto [lhs, rhs] = eq.split("->");
  bool explicitOutput = eq.contains("->");
  llvm::SmallVector<llvm::StringRef> sides;
  lhs.split(sides, ',');
  if (static_cast<int>(sides.size()) != node.input_size())
    return error(where + ": equation '" + equation + "' has " +
                 llvm::Twine(sides.size()) + " terms for " +
                 llvm::Twine(node.input_size()) + " inputs");
  std::vector<Term> terms;
  std::vector<std::vector<int64_t>> shapes;
  int64_t ellipsisRank = 0;
  for (auto [k, side] : llvm::enumerate(sides)) {
    auto term = parseTerm(side, where, equation);
    if (!term)
      return term.takeError();
    std::optional<tdl::TensorType> type = typeOf(node.input(k));
    if (!type)
      return error(where + ": the shape of input '" + node.input(k) +
                   "' is not known");
    int64_t rank = type->dims.size();
    int64_t letters = term->letters.size();
    if (term->ellipsisAt < 0 ? rank != letters : rank < letters)
      return error(where + ": term '" + side + "' of equation '" + equation +
                   "' does not match the rank " + llvm::Twine(rank) +
                   " of input '" + node.input(k) + "'");
    ellipsisRank = std::max(ellipsisRank, rank - letters);
    terms.push_back(*term);
    shapes.push_back(type->dims);
  }
  // Labels 0 .. ellipsisRank-1 are the ellipsis dims (aligned from the
  // right), then one label per letter in order of appearance.
  std::map<char, int64_t> labelOf;
  std::vector<int64_t> extents(ellipsisRank, 1);
  std::map<char, int> count;
  std::vector<int64_t> flat;
  for (size_t k = 0; k < terms.size(); ++k) {
    // An index, not a structured binding: C++17 lambdas cannot capture those.
    const auto &term = terms[k];
    int64_t rank = shapes[k].size();
    int64_t own = rank - static_cast<int64_t>(term.letters.size());
    int64_t d = 0;
    auto addDim = [&](int64_t label, bool broadcastable) -> llvm::Error {
      int64_t size = shapes[k][d++];
      int64_t &extent = extents[label];
      if (broadcastable && (size == 1 || extent == 1))
        extent = std::max(extent, size);
      else if (extent != size)
        return error(where + ": equation '" + equation + "': dim " +
                     llvm::Twine(d - 1) + " of input '" + node.input(k) +
                     "' has size " + llvm::Twine(size) + ", another dim of " +
                     "its label " + llvm::Twine(extent));
      flat.push_back(label);
      return llvm::Error::success();
    };
    for (size_t j = 0; j <= term.letters.size(); ++j) {
      if (static_cast<int>(j) == term.ellipsisAt)
        for (int64_t e = 0; e < own; ++e)
          if (auto err = addDim(ellipsisRank - own + e, true))
            return err;
      if (j == term.letters.size())
        break;
      char c = term.letters[j];
      ++count[c];
      auto [it, inserted] =
          labelOf.emplace(c, static_cast<int64_t>(extents.size()));
      if (inserted)
        extents.push_back(shapes[k][d]);
      if (auto err = addDim(it->second, false))
        return err;
    }
  }
  std::vector<int64_t> out;
  if (explicitOutput) {
    auto term = parseTerm(rhs, where, equation);
    if (!term)
      return term.takeError();
    for (size_t j = 0; j <= term->letters.size(); ++j) {
      if (static_cast<int>(j) == term->ellipsisAt)
        for (int64_t e = 0; e < ellipsisRank; ++e)
          out.push_back(e);
      if (j == term->letters.size())
        break;
      char c = term->letters[j];
      auto it = labelOf.find(c);
      if (it == labelOf.end())
        return error(where + ": equation '" + equation +
                     "': output label '" + std::string(1, c) +
                     "' is in no input");
      if (llvm::is_contained(out, it->second))
        return error(where + ": equation '" + equation +
                     "': output label '" + std::string(1, c) +
                     "' is repeated");
      out.push_back(it->second);
    }
    if (term->ellipsisAt < 0 && ellipsisRank > 0)
      return error(where + ": equation '" + equation +
                   "': the inputs have an ellipsis, the output none");
  } else {
    for (int64_t e = 0; e < ellipsisRank; ++e)
      out.push_back(e);
    for (auto [c, n] : count) // std::map: alphabetical (A-Z before a-z)
      if (n == 1)
        out.push_back(labelOf[c]);
  }
  auto setInts = [&](const char *name, const std::vector<int64_t> &values) {
    auto *attr = node.add_attribute();
    attr->set_name(name);
    attr->set_type(onnx::AttributeProto::INTS);
    for (int64_t v : values)
      attr->add_ints(v);
  };
  setInts("terms", flat);
  setInts("out", out);
  setInts("extents", extents);
  return llvm::Error::success();
}

} // namespace tofu
