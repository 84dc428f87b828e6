//===- TrainingAlgorithm.cpp - ONNX training_info -> training step --------===//
//
// Checks a model's TrainingInfoProto and its Gradient node for what tofuc
// maps onto a training step, and classifies the initializers that
// update_binding updates: trainable tensors (the Gradient's xs) and
// optimizer state (everything else, attached to a parameter).
//
//===----------------------------------------------------------------------===//
#include "tofu/Import/TrainingAlgorithm.h"

#include "llvm/ADT/StringSet.h"

#include <onnx/onnx_pb.h>

namespace tofu {

static llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 message.str());
}

bool isOnnxOptimizerOp(llvm::StringRef opType) {
  return opType == "Adam" || opType == "Momentum" || opType == "Adagrad";
}

/// Inputs per updated tensor of an optimizer op (X, G and its state).
static int inputsPerTensor(llvm::StringRef opType) {
  return opType == "Adam" ? 4 : 3;
}

static std::string nodeLabel(const onnx::NodeProto &node) {
  std::string name = node.name();
  if (name.empty() && node.output_size())
    name = node.output(0);
  return "node '" + name + "' (" + node.op_type() + ")";
}

llvm::Expected<std::vector<onnx::NodeProto>>
splitOptimizerNode(const onnx::NodeProto &node, llvm::StringRef name) {
  int perTensor = inputsPerTensor(node.op_type());
  int inputs = node.input_size();
  if (inputs < 2 + perTensor || (inputs - 2) % perTensor != 0)
    return fail(nodeLabel(node) + " has " + llvm::Twine(inputs) +
                " inputs; " + node.op_type() + " takes R, T and " +
                llvm::Twine(perTensor) + " inputs per updated tensor");
  int n = (inputs - 2) / perTensor;
  int outputsPerTensor = perTensor - 1;
  if (node.output_size() != n * outputsPerTensor)
    return fail(nodeLabel(node) + " updates " + llvm::Twine(n) +
                " tensors and so has " + llvm::Twine(n * outputsPerTensor) +
                " outputs, not " + llvm::Twine(node.output_size()));
  if (n == 1)
    return std::vector<onnx::NodeProto>{node};
  std::vector<onnx::NodeProto> pieces;
  for (int i = 0; i < n; ++i) {
    onnx::NodeProto piece = node;
    piece.set_name((name + "/" + llvm::Twine(i)).str());
    piece.clear_input();
    piece.clear_output();
    piece.add_input(node.input(0));
    piece.add_input(node.input(1));
    for (int k = 0; k < perTensor; ++k)
      piece.add_input(node.input(2 + k * n + i));
    for (int k = 0; k < outputsPerTensor; ++k)
      piece.add_output(node.output(k * n + i));
    pieces.push_back(std::move(piece));
  }
  return pieces;
}

/// The strings of attribute `name` of `node` (`ints`-style list), and
/// whether it is present.
static bool stringsAttr(const onnx::NodeProto &node, llvm::StringRef name,
                        std::vector<std::string> &out) {
  for (const auto &attr : node.attribute())
    if (attr.name() == name) {
      out.assign(attr.strings().begin(), attr.strings().end());
      return true;
    }
  return false;
}

static bool stringAttr(const onnx::NodeProto &node, llvm::StringRef name,
                       std::string &out) {
  for (const auto &attr : node.attribute())
    if (attr.name() == name) {
      out = attr.s();
      return true;
    }
  return false;
}

/// Checks one Gradient node and reads its y and xs.
static llvm::Expected<TrainingAlgorithm::Gradient>
readGradient(const onnx::NodeProto &node) {
  TrainingAlgorithm::Gradient result;
  result.node = &node;
  std::string where = nodeLabel(node);
  if (node.domain() != kOnnxTrainingDomain)
    return fail(where + ": Gradient belongs to the domain '" +
                kOnnxTrainingDomain + "', not '" + node.domain() + "'");
  std::vector<std::string> zs;
  if (!stringsAttr(node, "xs", result.xs) || result.xs.empty())
    return fail(where + ": the attribute 'xs' (the tensors to differentiate "
                        "with respect to) is missing or empty");
  if (!stringAttr(node, "y", result.y) || result.y.empty())
    return fail(where + ": the attribute 'y' (the differentiated scalar) is "
                        "missing");
  stringsAttr(node, "zs", zs);
  std::vector<std::string> expected = result.xs;
  expected.insert(expected.end(), zs.begin(), zs.end());
  bool same = node.input_size() == static_cast<int>(expected.size());
  for (int i = 0; same && i < node.input_size(); ++i)
    same = node.input(i) == expected[i];
  if (!same)
    return fail(where + ": its inputs must be the tensors named in 'xs' "
                        "followed by those in 'zs' (the gradient at the "
                        "values the graph computes); evaluating a gradient "
                        "at other values is not supported");
  if (node.output_size() > static_cast<int>(result.xs.size()))
    return fail(where + ": it has " + llvm::Twine(node.output_size()) +
                " outputs but 'xs' names " + llvm::Twine(result.xs.size()) +
                " tensors (one gradient each)");
  llvm::StringSet<> seen;
  for (const std::string &x : result.xs)
    if (!seen.insert(x).second)
      return fail(where + ": 'xs' names '" + x + "' twice");
  if (seen.contains(result.y))
    return fail(where + ": 'y' ('" + result.y + "') is also one of 'xs'");
  return result;
}

llvm::Expected<TrainingAlgorithm>
analyzeTrainingAlgorithm(const onnx::ModelProto &model) {
  TrainingAlgorithm result;
  for (const auto &node : model.graph().node())
    result.nodes.push_back(&node);
  if (model.training_info_size() > 1)
    return fail("the model carries " +
                llvm::Twine(model.training_info_size()) +
                " TrainingInfoProtos (a training step in several stages, "
                "like block coordinate descent); tofuc builds one training "
                "step: keep one (del model.training_info[1:])");
  const onnx::TrainingInfoProto *info =
      model.training_info_size() ? &model.training_info(0) : nullptr;
  if (info) {
    result.present = true;
    const onnx::GraphProto &init = info->initialization();
    // The importer evaluates the initialization graph and folds its results
    // into the initializers before this runs (InitializationGraph.h).
    if (init.node_size() > 0 || info->initialization_binding_size() > 0)
      return fail("training_info[0] still has an initialization graph (" +
                  llvm::Twine(init.node_size()) + " nodes, " +
                  llvm::Twine(info->initialization_binding_size()) +
                  " bindings); fold it into the initializers first "
                  "(applyInitializationGraph)");
    for (const auto &node : info->algorithm().node())
      result.nodes.push_back(&node);
  }

  // Several Gradient nodes are one training step: those of one scalar
  // share its backward pass, each other scalar has its own. Two nodes that
  // both name an output tensor are an invalid graph, which the ONNX checker
  // reports.
  llvm::StringSet<> allXs;
  for (const onnx::NodeProto *node : result.nodes) {
    if (node->op_type() != "Gradient")
      continue;
    auto gradient = readGradient(*node);
    if (!gradient)
      return gradient.takeError();
    for (const std::string &x : gradient->xs)
      if (allXs.insert(x).second)
        result.xs.push_back(x);
    result.gradients.push_back(std::move(*gradient));
  }
  if (!result.gradients.empty())
    result.loss = result.gradients.front().y;
  if (!info)
    return result;
  if (result.gradients.empty())
    return fail("training_info[0]'s algorithm has no Gradient node; tofuc "
                "builds a training step from the gradient of a loss: add a "
                "Gradient (ai.onnx.preview.training) of the loss, or remove "
                "training_info (del model.training_info[:]) and choose the "
                "step with --loss and --optimizer");

  // update_binding: keys are initializers, each at most once; values are
  // outputs of the algorithm or of the inference graph.
  llvm::StringSet<> initializers, outputs;
  for (const auto &tensor : model.graph().initializer())
    initializers.insert(tensor.name());
  for (const auto &tensor : info->algorithm().initializer())
    if (!initializers.insert(tensor.name()).second)
      return fail("training_info[0]'s algorithm redefines the initializer '" +
                  tensor.name() + "' of the inference graph");
  for (const auto &value : model.graph().output())
    outputs.insert(value.name());
  for (const auto &value : info->algorithm().output())
    outputs.insert(value.name());
  llvm::StringSet<> keys;
  for (const auto &binding : info->update_binding()) {
    const std::string &key = binding.key(), &value = binding.value();
    if (!initializers.contains(key))
      return fail("training_info[0].update_binding updates '" + key +
                  "', which is not an initializer of the graph or of the "
                  "algorithm");
    if (!keys.insert(key).second)
      return fail("training_info[0].update_binding updates '" + key +
                  "' twice");
    if (!outputs.contains(value))
      return fail("training_info[0].update_binding gives '" + key +
                  "' the value '" + value +
                  "', which is not an output of the algorithm or the graph");
    result.updates.push_back({key, value});
  }
  if (result.updates.empty())
    return fail("training_info[0].update_binding is empty: the algorithm "
                "updates nothing");

  llvm::StringSet<> xs;
  for (const std::string &x : result.xs)
    xs.insert(x);
  std::string firstTrained;
  for (const auto &[key, value] : result.updates)
    if (xs.contains(key) && firstTrained.empty())
      firstTrained = key;
  if (firstTrained.empty())
    return fail("training_info[0].update_binding updates none of the "
                "Gradient nodes' 'xs'; tofuc trains the tensors the gradient "
                "is taken of");

  // Optimizer state: the V/H of an optimizer's X, shared R/T with the
  // first X that uses them.
  for (const onnx::NodeProto *node : result.nodes) {
    if (node->domain() != kOnnxTrainingDomain ||
        !isOnnxOptimizerOp(node->op_type()))
      continue;
    auto pieces = splitOptimizerNode(*node, node->name());
    if (!pieces)
      return pieces.takeError();
    for (const onnx::NodeProto &piece : *pieces) {
      const std::string &x = piece.input(2);
      for (int k = 0; k < piece.input_size(); ++k)
        if (k != 2 && k != 3)
          result.stateOf.try_emplace(piece.input(k), x);
    }
  }
  for (const auto &[key, value] : result.updates) {
    if (xs.contains(key)) {
      auto it = result.stateOf.find(key);
      if (it != result.stateOf.end() && it->second != key)
        return fail("'" + key + "' is both differentiated ('xs' of the "
                    "Gradient) and optimizer state of '" + it->second + "'");
      result.stateOf.erase(key);
      continue;
    }
    result.stateOf.try_emplace(key, firstTrained);
  }
  // Only updated tensors are state.
  llvm::StringSet<> updated = keys;
  for (auto it = result.stateOf.begin(); it != result.stateOf.end();) {
    auto next = std::next(it);
    if (!updated.contains(it->getKey()))
      result.stateOf.erase(it);
    it = next;
  }
  return result;
}

} // namespace tofu
