//===- TofuAttrs.td - tofu attributes ----------------------*- tablegen -*-===//
#ifndef TOFU_ATTRS_TD
#define TOFU_ATTRS_TD

include "TofuDialect.td"
include "mlir/IR/AttrTypeBase.td"

class Tofu_Attr<string name, string attrMnemonic>
    : AttrDef<Tofu_Dialect, name> {
  let mnemonic = attrMnemonic;
}

def Tofu_IntervalAttr : Tofu_Attr<"Interval", "interval"> {
  let summary = "A symbolic interval, affine in the output extents (paper §4.2)";
  let description = [{
    The half-open range `[Σ_i lower[i]·S_i + lowerConst,
    Σ_i upper[i]·S_i + upperConst)` where the symbols `S_i` are the extents of
    the op's output dimensions `X0, X1, ...` followed by the extents of its
    reduction variables (in the order the TDL analysis lists them). Lower and
    upper bounds keep separate constants so that asymmetric halos are exact.

    Syntax: `#tofu.interval<[l0, l1, ...] + lc, [u0, u1, ...] + uc>`, e.g.
    `#tofu.interval<[0.5, 0] + 0, [1, 0] + 2>` is `[X0/2, X0 + 2)`. Both
    coefficient lists have one entry per symbol, so they must have equal
    length.
  }];
  let parameters = (ins
    "::mlir::DenseF64ArrayAttr":$lower,
    "::mlir::FloatAttr":$lowerConst,
    "::mlir::DenseF64ArrayAttr":$upper,
    "::mlir::FloatAttr":$upperConst);
  let builders = [
    AttrBuilder<(ins "::llvm::ArrayRef<double>":$lower, "double":$lowerConst,
                     "::llvm::ArrayRef<double>":$upper, "double":$upperConst), [{
      auto f64 = ::mlir::Float64Type::get($_ctxt);
      return $_get($_ctxt, ::mlir::DenseF64ArrayAttr::get($_ctxt, lower),
                   ::mlir::FloatAttr::get(f64, lowerConst),
                   ::mlir::DenseF64ArrayAttr::get($_ctxt, upper),
                   ::mlir::FloatAttr::get(f64, upperConst));
    }]>
  ];
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def Tofu_StrategyAttr : Tofu_Attr<"Strategy", "strategy"> {
  let summary = "A basic partition strategy of an op, or the one chosen";
  let description = [{
    A way to split one op between worker groups (paper §4.2): `split` cuts
    output `output` along its dimension `dim` (case 1); `reduce` cuts the
    reduction variable `var` (case 2: every group produces a partial output
    that is then summed). `regions`, when present, holds the analysis result
    for 2 workers: for worker w and input i, an array of one
    `#tofu.interval` per input dimension (an empty array for an absent
    optional input).

    Syntax:
      `#tofu.strategy<split 0 dim 1>`
      `#tofu.strategy<reduce "k" 0>`                (variable name, index)
      `#tofu.strategy<split 0 dim 0, regions [[...], [...]]>`
  }];
  let parameters = (ins
    "::mlir::StringAttr":$kind,
    "int64_t":$output,
    "int64_t":$dim,
    "::mlir::StringAttr":$var,
    "::mlir::ArrayAttr":$regions);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def Tofu_TilingAttr : Tofu_Attr<"Tiling", "tiling"> {
  let summary = "How a tensor is cut across devices: one cut per recursion step";
  let description = [{
    An ordered list of cuts `(dim, parts)`, one per recursion step of the
    partitioner (DESIGN.md §3). A tensor of shape [256, 1024] tiled
    `#tofu.tiling<[(0, 2), (1, 4)]>` on 8 devices holds a 128×256 block per
    device. Dimensions that do not divide evenly are cut into parts whose
    sizes differ by at most one. An empty list means replicated (only for
    tensors with nothing to cut, e.g. scalars). Every `parts` is >= 1 and
    every `dim` >= 0; the dimension is checked against the tensor's rank
    where the tiling is attached (`tofu.tilings`).
  }];
  let parameters = (ins ArrayRefParameter<"int64_t">:$dims,
                        ArrayRefParameter<"int64_t">:$parts);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

#endif // TOFU_ATTRS_TD
