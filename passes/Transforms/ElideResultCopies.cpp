//===- ElideResultCopies.cpp - results written where they are returned ---===//
//
// A step's entry function returns its results through output arguments:
// bufferization gives each result a buffer of its own (the lowered ops
// allocate what they write) and copies it into the output argument at the
// end. On the GPU each such copy is a device copy, a node of the step's
// graph: one for every layer's y and top-k and every metadata result. The
// buffer is the output argument instead, when the copy is the argument's
// only use and nothing touches the buffer after it.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/Interfaces/ViewLikeInterface.h"

namespace v4a {
#define GEN_PASS_DEF_ELIDERESULTCOPIES
#include "passes/Passes.h.inc"
} // namespace v4a

using namespace mlir;

namespace {

/// Whether `value`, or a view of it, has a use that comes after `op` in
/// op's block (a use nested in a later op included).
bool usedAfter(Value value, Operation *op) {
  Block *block = op->getBlock();
  for (Operation *user : value.getUsers()) {
    Operation *top = block->findAncestorOpInBlock(*user);
    if (!top || op->isBeforeInBlock(top))
      return true;
    if (auto view = dyn_cast<ViewLikeOpInterface>(user);
        view && view.getViewSource() == value &&
        llvm::any_of(user->getResults(),
                     [&](Value result) { return usedAfter(result, op); }))
      return true;
  }
  return false;
}

/// The allocation the copy's source is, when it can become the copy's
/// target: an output argument of the function that nothing else uses, of
/// the allocation's type, and an allocation nothing reads after the copy.
memref::AllocOp elidable(memref::CopyOp copy, Block &entry) {
  auto target = dyn_cast<BlockArgument>(copy.getTarget());
  auto alloc = copy.getSource().getDefiningOp<memref::AllocOp>();
  if (!target || target.getOwner() != &entry || !target.hasOneUse() || !alloc ||
      alloc->getBlock() != &entry || alloc.getType() != target.getType() ||
      usedAfter(alloc, copy))
    return {};
  return alloc;
}

struct ElideResultCopiesPass
    : public v4a::impl::ElideResultCopiesBase<ElideResultCopiesPass> {
  void runOnOperation() override {
    getOperation().walk([](func::FuncOp func) {
      if (func.isExternal())
        return;
      Block &entry = func.front();
      SmallVector<memref::CopyOp> copies(entry.getOps<memref::CopyOp>());
      for (memref::CopyOp copy : copies) {
        memref::AllocOp alloc = elidable(copy, entry);
        if (!alloc)
          continue;
        Value target = copy.getTarget();
        copy.erase();
        alloc.getResult().replaceAllUsesWith(target);
        alloc.erase();
      }
    });
  }
};

} // namespace
