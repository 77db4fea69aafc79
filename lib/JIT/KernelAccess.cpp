//===- KernelAccess.cpp - what a kernel does to its buffers ---------------===//

#include "lib/JIT/KernelAccess.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

using namespace mlir;

namespace v4a::jit {

namespace {

/// Follows a buffer argument through the values derived from it: views of
/// it, and integers or pointers computed from its address. Stops at the
/// first use that may write through it (or that it cannot see through).
class ReadOnlyWalk {
public:
  bool run(Value argument) {
    pending.push_back(argument);
    while (!pending.empty()) {
      Value value = pending.pop_back_val();
      if (!seen.insert(value).second)
        continue;
      for (OpOperand &use : value.getUses())
        if (!visit(use))
          return false;
    }
    return true;
  }

private:
  /// False when `use` may write through the buffer.
  bool visit(OpOperand &use) {
    Operation *user = use.getOwner();
    Value used = use.get();
    if (isa<MemRefType>(used.getType()))
      return visitBuffer(user, used);
    return visitAddress(user, use);
  }

  bool visitBuffer(Operation *user, Value buffer) {
    if (auto load = dyn_cast<memref::LoadOp>(user))
      return load.getMemRef() == buffer;
    if (auto load = dyn_cast<vector::LoadOp>(user))
      return load.getBase() == buffer;
    if (auto read = dyn_cast<vector::TransferReadOp>(user))
      return read.getBase() == buffer;
    if (isa<memref::DimOp>(user))
      return true;
    if (auto view = dyn_cast<ViewLikeOpInterface>(user)) {
      if (view.getViewSource() != buffer)
        return false;
      follow(user);
      return true;
    }
    if (isa<memref::ExtractAlignedPointerAsIndexOp>(user)) {
      follow(user);
      return true;
    }
    return false;
  }

  /// An integer or pointer computed from the buffer's address.
  bool visitAddress(Operation *user, OpOperand &use) {
    if (auto load = dyn_cast<LLVM::LoadOp>(user))
      return load.getAddr() == use.get();
    if (auto copy = dyn_cast<NVVM::CpAsyncOp>(user))
      return copy.getSrc() == use.get() && copy.getDst() != use.get();
    // An index into another buffer reads or writes that one, not this.
    if (auto load = dyn_cast<memref::LoadOp>(user))
      return load.getMemRef() != use.get();
    if (auto load = dyn_cast<vector::LoadOp>(user))
      return load.getBase() != use.get();
    if (user->hasTrait<OpTrait::IsTerminator>() || !isPure(user))
      return false;
    follow(user);
    return true;
  }

  void follow(Operation *op) {
    for (Value result : op->getResults())
      pending.push_back(result);
  }

  llvm::SmallVector<Value> pending;
  llvm::DenseSet<Value> seen;
};

} // namespace

llvm::SmallVector<bool> readOnlyArguments(gpu::GPUFuncOp kernel) {
  llvm::SmallVector<bool> readOnly;
  for (BlockArgument argument : kernel.getArguments())
    readOnly.push_back(isa<MemRefType>(argument.getType()) &&
                       ReadOnlyWalk().run(argument));
  return readOnly;
}

} // namespace v4a::jit
