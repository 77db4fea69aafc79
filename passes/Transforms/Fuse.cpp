//===- Fuse.cpp - kernel regions of a step function -----------------------===//
//
// Groups the ops of each step function into the units a backend turns into
// one kernel: projections that read the same input become one merged GEMM
// region, and chains of row-wise ops where each result feeds only the next
// op (norm, RoPE, quantization, Hadamard, the compressor, a closing cache
// store) become one region.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/V4A/IR/V4AOps.h"

#include "mlir/IR/IRMapping.h"

namespace v4a {
#define GEN_PASS_DEF_FUSE
#include "passes/Passes.h.inc"
} // namespace v4a

using namespace mlir;
using namespace v4a;

namespace {

/// Ops that a chain may hold: row-wise, reading their input once.
bool isChainOp(Operation *op) {
  if (isa<RMSNormOp, RoPEOp, ActQuantOp, HadamardOp, CompressorOp>(op))
    return true;
  return isa<arith::TruncFOp, arith::ExtFOp>(op) &&
         isa<RankedTensorType>(op->getResult(0).getType());
}

/// The op that alone uses `op`'s only result, if any.
Operation *soleUser(Operation *op) {
  if (op->getNumResults() != 1 || !op->getResult(0).hasOneUse())
    return nullptr;
  Operation *user = *op->getResult(0).getUsers().begin();
  return user->getBlock() == op->getBlock() ? user : nullptr;
}

/// The kind of a region: its ops' names, in order.
std::string kindOf(ArrayRef<Operation *> ops) {
  std::string kind;
  for (Operation *op : ops) {
    StringRef name = op->getName().stripDialect();
    if (!kind.empty())
      kind += "_";
    kind += name.str();
  }
  return kind;
}

/// Moves `ops` (in block order, results used outside only from the last op
/// or from none) into one v4a.fused op at the place of the last one.
FusedOp outline(OpBuilder &b, StringRef kind, ArrayRef<Operation *> ops) {
  llvm::SetVector<Operation *> inside(ops.begin(), ops.end());
  llvm::SetVector<Value> inputs;
  for (Operation *op : ops)
    for (Value operand : op->getOperands())
      if (!inside.contains(operand.getDefiningOp()))
        inputs.insert(operand);
  SmallVector<Value> results;
  for (Operation *op : ops)
    for (Value result : op->getResults())
      if (llvm::any_of(result.getUsers(),
                       [&](Operation *user) { return !inside.contains(user); }))
        results.push_back(result);
  Operation *last = ops.back();
  b.setInsertionPoint(last);
  auto fused =
      FusedOp::create(b, last->getLoc(), ValueRange(results).getTypes(),
                      b.getStringAttr(kind), inputs.getArrayRef());
  Block *body = new Block();
  fused.getBody().push_back(body);
  IRMapping mapping;
  for (Value input : inputs)
    mapping.map(input, body->addArgument(input.getType(), input.getLoc()));
  b.setInsertionPointToStart(body);
  for (Operation *op : ops)
    b.clone(*op, mapping);
  SmallVector<Value> yielded;
  for (Value result : results)
    yielded.push_back(mapping.lookup(result));
  YieldOp::create(b, last->getLoc(), yielded);
  for (auto [result, replacement] : llvm::zip(results, fused.getResults()))
    result.replaceAllUsesWith(replacement);
  for (Operation *op : llvm::reverse(ops))
    op->erase();
  return fused;
}

/// Projections of one input (with the same kind of weight) into one region
/// at the place of the first; their other operands are function arguments.
void mergeProjections(OpBuilder &b, Block &block) {
  llvm::MapVector<std::pair<Value, int>, SmallVector<Operation *>> groups;
  for (auto linear : block.getOps<LinearOp>()) {
    int fp8 = linear.getScale() ? 1 : 0;
    bool argsOnly =
        llvm::all_of(ValueRange{linear.getWeight(), linear.getScale()},
                     [](Value v) { return !v || isa<BlockArgument>(v); });
    if (argsOnly)
      groups[{linear.getInput(), fp8}].push_back(linear);
  }
  for (auto &group : groups) {
    SmallVector<Operation *> &linears = group.second;
    if (linears.size() < 2)
      continue;
    // Next to the first projection, so that every result is ready where
    // the earliest one was; the others read the same input and arguments.
    Operation *at = linears.front();
    for (Operation *op : llvm::drop_begin(linears)) {
      op->moveAfter(at);
      at = op;
    }
    outline(b, "merged_linear", linears);
  }
}

/// Chains of row-wise ops, each result feeding only the next op; a cache
/// store of the last result closes the chain.
void fuseChains(OpBuilder &b, Block &block) {
  SmallVector<SmallVector<Operation *>> chains;
  llvm::DenseSet<Operation *> taken;
  for (Operation &op : block) {
    if (!isChainOp(&op) || taken.contains(&op))
      continue;
    SmallVector<Operation *> chain = {&op};
    Operation *next = soleUser(&op);
    while (next && isChainOp(next)) {
      chain.push_back(next);
      next = soleUser(next);
    }
    if (next && isa<CacheStoreOp>(next) &&
        cast<CacheStoreOp>(next).getRows() == chain.back()->getResult(0))
      chain.push_back(next);
    if (chain.size() < 2)
      continue;
    taken.insert(chain.begin(), chain.end());
    chains.push_back(chain);
  }
  for (ArrayRef<Operation *> chain : chains)
    outline(b, kindOf(chain), chain);
}

struct FusePass : public v4a::impl::FuseBase<FusePass> {
  void runOnOperation() override {
    OpBuilder b(&getContext());
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (!func->hasAttr("v4a.sched_meta_key") || func.isExternal())
        continue;
      mergeProjections(b, func.front());
      fuseChains(b, func.front());
    }
  }
};

} // namespace
