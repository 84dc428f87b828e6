//===- tofu-opt.cpp - run tofu passes on textual IR -----------------------===//
#include "tofu/Transforms/Passes.h"

#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<tofu::TofuDialect, mlir::func::FuncDialect>();
  tofu::registerTofuPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "tofu pass driver\n", registry));
}
