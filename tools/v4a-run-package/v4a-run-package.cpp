//===- v4a-run-package.cpp - run a compiled package, runtime only ---------===//
//
// The deployment runner: no compiler, MLIR or LLVM. See RunPackage.cpp.
//
//===----------------------------------------------------------------------===//

#include "tools/v4a-run-package/RunPackage.h"

int main(int argc, char **argv) {
  return v4a::runPackage("v4a-run-package", argc, argv);
}
