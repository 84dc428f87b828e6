//===- TofuDialect.td - the tofu dialect -------------------*- tablegen -*-===//
#ifndef TOFU_DIALECT_TD
#define TOFU_DIALECT_TD

include "mlir/IR/OpBase.td"

def Tofu_Dialect : Dialect {
  let name = "tofu";
  let cppNamespace = "::tofu";
  let summary = "Training graphs and their partitioning across devices";
  let description = [{
    The `tofu` dialect represents a DNN training step and the decisions of the
    Tofu partitioner. Operators are generic: one `tofu.compute` op names its
    TDL specification (`tdl-specs/`), which is the single source of truth for
    the op's arity, attributes, shapes, partition strategies and gradient.
    Analysis results (basic strategies with their input regions, tilings,
    chosen strategies) are attributes, so every pass is testable as IR in,
    IR out.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

class Tofu_Op<string mnemonic, list<Trait> traits = []>
    : Op<Tofu_Dialect, mnemonic, traits>;

#endif // TOFU_DIALECT_TD
