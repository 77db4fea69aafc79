//===- V4AOps.h - v4a operations --------------------------------*- C++ -*-===//

#ifndef V4A_DIALECTS_V4A_IR_V4AOPS_H
#define V4A_DIALECTS_V4A_IR_V4AOPS_H

#include "dialects/V4A/IR/V4ADialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir {
class RewriterBase;
} // namespace mlir

#define GET_OP_CLASSES
#include "dialects/V4A/IR/V4AOps.h.inc"

#endif // V4A_DIALECTS_V4A_IR_V4AOPS_H
