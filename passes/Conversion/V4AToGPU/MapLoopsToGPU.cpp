//===- MapLoopsToGPU.cpp - loop nests of step functions as GPU launches ---===//
//
// The token-parallel loop lowering marks every loop whose iterations are
// independent as scf.parallel. Here the outer ones become the grid, the
// nested ones the threads of a block, and everything else in a kernel runs
// on thread 0 between barriers, so a kernel computes what the same loops
// compute on the CPU. The host keeps only what the runtime interprets:
// index arithmetic, allocations, views, copies and launches.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"

namespace v4a {
#define GEN_PASS_DEF_MAPLOOPSTOGPU
#include "passes/Passes.h.inc"
} // namespace v4a

using namespace mlir;

namespace {

/// Grid extents a launch never exceeds: grid-stride loops cover the rest.
constexpr int64_t kGridLimit[3] = {1 << 20, 65535, 65535};
/// Scratch regions start on 16-byte boundaries.
constexpr int64_t kScratchAlign = 16;

bool isIntegerLike(Type type) { return type.isIndex() || type.isInteger(); }

/// A call the runtime dispatches to a library (a GEMM).
bool isLibraryCall(Operation *op) {
  auto call = dyn_cast<func::CallOp>(op);
  return call && v4a::isLibraryGemm(call.getCallee());
}

/// Ops the host runs itself (the runtime interprets them).
bool isHostOp(Operation *op) {
  if (isLibraryCall(op))
    return true;
  if (isa<memref::AllocOp, memref::DeallocOp, memref::DimOp,
          memref::ExpandShapeOp, memref::CollapseShapeOp, memref::CastOp,
          memref::CopyOp, memref::GetGlobalOp, func::ReturnOp,
          arith::ConstantOp>(op))
    return true;
  if (auto load = dyn_cast<memref::LoadOp>(op))
    return isIntegerLike(load.getType());
  // Divisions by a size are not speculatable but are host work: the host
  // program refuses a zero divisor.
  return isMemoryEffectFree(op) && op->getNumRegions() == 0 &&
         llvm::all_of(op->getOperandTypes(), isIntegerLike) &&
         llvm::all_of(op->getResultTypes(), isIntegerLike);
}

/// Pure ops of other types stay where they are and are copied into each
/// launch that uses them.
bool isSinkable(Operation *op) {
  return op->getNumRegions() == 0 && isPure(op) && !isHostOp(op);
}

bool writesMemory(Operation *op) {
  bool writes = false;
  op->walk([&](Operation *nested) {
    if (auto effects = dyn_cast<MemoryEffectOpInterface>(nested)) {
      if (effects.hasEffect<MemoryEffects::Write>() ||
          effects.hasEffect<MemoryEffects::Free>())
        writes = true;
    } else if (!nested->hasTrait<OpTrait::HasRecursiveMemoryEffects>() &&
               !isPure(nested)) {
      writes = true;
    }
  });
  return writes;
}

bool holdsParallelLoop(Operation *op) {
  bool found = false;
  op->walk([&](scf::ParallelOp nested) {
    if (nested != op)
      found = true;
  });
  return found;
}

/// Where a launch's ids and sizes live, and where its host work goes.
struct LaunchContext {
  gpu::LaunchOp launch;
  /// Builds host ops right before the launch.
  OpBuilder host;
  Value threads;
  /// The block's linear index among the launch's blocks, and their count
  /// (host value).
  Value blockId, blockCount;
  Value threadId;
};

class KernelMapper {
public:
  KernelMapper(func::FuncOp func, int64_t threads)
      : func(func), threadCount(threads) {}

  LogicalResult run();

private:
  LogicalResult mapParallel(scf::ParallelOp loop);
  LogicalResult mapSequence(ArrayRef<Operation *> ops);
  gpu::LaunchOp createLaunch(OpBuilder &b, Location loc, ArrayRef<Value> grid);
  LaunchContext contextOf(gpu::LaunchOp launch, ArrayRef<Value> grid);
  LogicalResult distribute(Block &block, LaunchContext &ctx);
  LogicalResult serialize(Block &block, LaunchContext &ctx);
  LogicalResult broadcastResults(scf::IfOp guard, LaunchContext &ctx);
  LogicalResult toScratch(memref::AllocOp alloc, LaunchContext &ctx,
                          bool perThread);
  FailureOr<Value> hoist(Value value, LaunchContext &ctx, IRMapping &map);
  void sinkInto(gpu::LaunchOp launch);

  func::FuncOp func;
  int64_t threadCount;
  int kernels = 0;
};

Value constantIndex(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantIndexOp::create(b, loc, value);
}

/// Iterations of [lower, upper) by step. Folded as it is built: a count
/// known at compile time becomes a constant that the kernel takes in (and
/// divides by with shifts or a multiplication), not a 64-bit division by a
/// kernel argument in every thread.
Value tripCount(OpBuilder &b, Location loc, Value lower, Value upper,
                Value step) {
  Value span = b.createOrFold<arith::SubIOp>(loc, upper, lower);
  Value count = b.createOrFold<arith::CeilDivSIOp>(loc, span, step);
  return b.createOrFold<arith::MaxSIOp>(loc, count, constantIndex(b, loc, 0));
}

gpu::LaunchOp KernelMapper::createLaunch(OpBuilder &b, Location loc,
                                         ArrayRef<Value> grid) {
  Value one = constantIndex(b, loc, 1);
  Value block = constantIndex(b, loc, threadCount);
  auto launch =
      gpu::LaunchOp::create(b, loc, grid[0], grid[1], grid[2], block, one, one);
  // Named after the step, not its entry wrapper (as the families' kernels).
  StringRef step = func.getName();
  step.consume_back("_entry");
  std::string name = (step + "_loops" + Twine(kernels++)).str();
  launch.setModuleAttr(FlatSymbolRefAttr::get(b.getContext(), "v4a_gpu"));
  launch.setFunctionAttr(FlatSymbolRefAttr::get(b.getContext(), name));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(&launch.getBody().front());
  gpu::TerminatorOp::create(b, loc);
  return launch;
}

LaunchContext KernelMapper::contextOf(gpu::LaunchOp launch,
                                      ArrayRef<Value> grid) {
  LaunchContext ctx{launch,  OpBuilder(launch), Value(),
                    Value(), Value(),           Value()};
  Location loc = launch.getLoc();
  ctx.blockCount = arith::MulIOp::create(
      ctx.host, loc, arith::MulIOp::create(ctx.host, loc, grid[0], grid[1]),
      grid[2]);
  OpBuilder b = OpBuilder::atBlockBegin(&launch.getBody().front());
  gpu::KernelDim3 ids = launch.getBlockIds();
  gpu::KernelDim3 sizes = launch.getGridSize();
  // x + X * (y + Y * z)
  Value yz = arith::AddIOp::create(
      b, loc, ids.y, arith::MulIOp::create(b, loc, sizes.y, ids.z));
  ctx.blockId = arith::AddIOp::create(
      b, loc, ids.x, arith::MulIOp::create(b, loc, sizes.x, yz));
  ctx.threadId = launch.getThreadIds().x;
  ctx.threads = launch.getBlockSize().x;
  return ctx;
}

/// A strided loop over [0, count) from `first` by `stride`; `body` gets the
/// linear index.
void stridedLoop(OpBuilder &b, Location loc, Value first, Value count,
                 Value stride,
                 const std::function<void(OpBuilder &, Value)> &body) {
  scf::ForOp::create(b, loc, first, count, stride, ValueRange{},
                     [&](OpBuilder &nested, Location, Value iv, ValueRange) {
                       body(nested, iv);
                       scf::YieldOp::create(nested, loc);
                     });
}

/// The loop's induction values for linear index `linear` over `counts`
/// (the last dimension varies fastest).
SmallVector<Value> delinearize(OpBuilder &b, Location loc, Value linear,
                               scf::ParallelOp loop, ArrayRef<Value> counts) {
  SmallVector<Value> ivs(counts.size());
  Value rest = linear;
  for (int64_t d = counts.size() - 1; d >= 0; --d) {
    // The linear index and the counts are never negative: unsigned
    // division needs no sign fix-up.
    Value index =
        d == 0 ? rest
               : arith::RemUIOp::create(b, loc, rest, counts[d]).getResult();
    if (d > 0)
      rest = arith::DivUIOp::create(b, loc, rest, counts[d]);
    Value scaled =
        arith::MulIOp::create(b, loc, index, loop.getStep()[d]).getResult();
    ivs[d] = arith::AddIOp::create(b, loc, loop.getLowerBound()[d], scaled);
  }
  return ivs;
}

/// Moves the body of `loop` (its induction variables replaced by `ivs`)
/// before `before`.
void inlineBody(scf::ParallelOp loop, ValueRange ivs, OpBuilder &b) {
  Block &body = *loop.getBody();
  IRMapping map;
  map.map(loop.getInductionVars(), ivs);
  for (Operation &op : body.without_terminator())
    b.clone(op, map);
}

FailureOr<Value> KernelMapper::hoist(Value value, LaunchContext &ctx,
                                     IRMapping &map) {
  if (Value known = map.lookupOrNull(value))
    return known;
  Operation *def = value.getDefiningOp();
  if (!ctx.launch->isAncestor(def ? def
                                  : value.getParentBlock()->getParentOp()))
    return value;
  if (!def || !isPure(def) || def->getNumRegions() != 0)
    return failure();
  for (Value operand : def->getOperands())
    if (failed(hoist(operand, ctx, map)))
      return failure();
  Operation *copy = ctx.host.clone(*def, map);
  return copy->getResult(cast<OpResult>(value).getResultNumber());
}

LogicalResult KernelMapper::toScratch(memref::AllocOp alloc, LaunchContext &ctx,
                                      bool perThread) {
  Location loc = alloc.getLoc();
  MemRefType type = alloc.getType();
  if (!type.getLayout().isIdentity())
    return alloc.emitError("v4a-map-loops-to-gpu: scratch with a layout");
  // Bytes of one copy, on the host.
  IRMapping map;
  int64_t elementBytes =
      std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
  Value bytes = constantIndex(ctx.host, loc, elementBytes);
  SmallVector<Value> hostSizes;
  unsigned dynamic = 0;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    Value extent;
    if (type.isDynamicDim(d)) {
      FailureOr<Value> size =
          hoist(alloc.getDynamicSizes()[dynamic++], ctx, map);
      if (failed(size))
        return alloc.emitError("v4a-map-loops-to-gpu: a scratch size that "
                               "the host cannot compute before the launch");
      extent = *size;
    } else {
      extent = constantIndex(ctx.host, loc, type.getDimSize(d));
    }
    bytes = arith::MulIOp::create(ctx.host, loc, bytes, extent);
  }
  Value align = constantIndex(ctx.host, loc, kScratchAlign);
  bytes = arith::MulIOp::create(
      ctx.host, loc, arith::CeilDivSIOp::create(ctx.host, loc, bytes, align),
      align);
  Value copies = ctx.blockCount;
  if (perThread)
    copies = arith::MulIOp::create(ctx.host, loc, copies,
                                   constantIndex(ctx.host, loc, threadCount));
  Value total = arith::MulIOp::create(ctx.host, loc, bytes, copies);
  auto byteType = MemRefType::get({ShapedType::kDynamic},
                                  IntegerType::get(alloc.getContext(), 8));
  Value buffer =
      memref::AllocOp::create(ctx.host, loc, byteType, ValueRange{total});
  // In the kernel: this block's (or thread's) copy.
  OpBuilder b(alloc);
  Value unit = ctx.blockId;
  if (perThread)
    unit = arith::AddIOp::create(
        b, loc, arith::MulIOp::create(b, loc, unit, ctx.threads), ctx.threadId);
  Value offset = arith::MulIOp::create(b, loc, unit, bytes);
  auto view = memref::ViewOp::create(b, loc, type, buffer, offset,
                                     alloc.getDynamicSizes());
  alloc.replaceAllUsesWith(view.getResult());
  alloc.erase();
  return success();
}

/// Everything in `block` runs on one thread: nested parallel loops become
/// sequential, allocations per-thread scratch.
LogicalResult KernelMapper::serialize(Block &block, LaunchContext &ctx) {
  SmallVector<Operation *> ops;
  block.walk([&](Operation *op) { ops.push_back(op); });
  for (Operation *op : ops) {
    if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
      if (failed(toScratch(alloc, ctx, /*perThread=*/true)))
        return failure();
    } else if (isa<memref::DeallocOp>(op)) {
      op->erase();
    }
  }
  SmallVector<scf::ParallelOp> loops;
  block.walk([&](scf::ParallelOp loop) { loops.push_back(loop); });
  // Innermost first (walk is post-order), so bodies are final when moved.
  for (scf::ParallelOp loop : loops) {
    if (loop.getNumReductions() != 0)
      return loop.emitError("v4a-map-loops-to-gpu: parallel reductions");
    OpBuilder b(loop);
    Location loc = loop.getLoc();
    SmallVector<Value> ivs;
    // A nest of sequential loops, outermost first.
    std::function<void(OpBuilder &, unsigned)> nest = [&](OpBuilder &nb,
                                                          unsigned d) {
      if (d == loop.getNumLoops()) {
        inlineBody(loop, ivs, nb);
        return;
      }
      scf::ForOp::create(nb, loc, loop.getLowerBound()[d],
                         loop.getUpperBound()[d], loop.getStep()[d],
                         ValueRange{},
                         [&](OpBuilder &inner, Location, Value iv, ValueRange) {
                           ivs.push_back(iv);
                           nest(inner, d + 1);
                           ivs.pop_back();
                           scf::YieldOp::create(inner, loc);
                         });
    };
    nest(b, 0);
    loop.erase();
  }
  return success();
}

/// `block` runs on every thread of a block, in step: nested parallel loops
/// are spread over the threads, other writes happen on thread 0, with
/// barriers around both.
LogicalResult KernelMapper::distribute(Block &block, LaunchContext &ctx) {
  SmallVector<Operation *> ops;
  for (Operation &op : block.without_terminator())
    ops.push_back(&op);
  Location loc = ctx.launch.getLoc();
  auto barrierAt = [&](OpBuilder &b) { gpu::BarrierOp::create(b, loc); };
  for (size_t i = 0; i < ops.size(); ++i) {
    Operation *op = ops[i];
    if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
      if (failed(toScratch(alloc, ctx, /*perThread=*/false)))
        return failure();
      continue;
    }
    if (isa<memref::DeallocOp>(op)) {
      op->erase();
      continue;
    }
    if (auto loop = dyn_cast<scf::ParallelOp>(op)) {
      if (loop.getNumReductions() != 0)
        return loop.emitError("v4a-map-loops-to-gpu: parallel reductions");
      OpBuilder b(loop);
      barrierAt(b);
      SmallVector<Value> counts;
      Value total = constantIndex(b, loc, 1);
      for (unsigned d = 0; d < loop.getNumLoops(); ++d) {
        counts.push_back(tripCount(b, loc, loop.getLowerBound()[d],
                                   loop.getUpperBound()[d], loop.getStep()[d]));
        total = b.createOrFold<arith::MulIOp>(loc, total, counts.back());
      }
      Block *bodyBlock = nullptr;
      stridedLoop(b, loc, ctx.threadId, total, ctx.threads,
                  [&](OpBuilder &nb, Value linear) {
                    SmallVector<Value> ivs =
                        delinearize(nb, loc, linear, loop, counts);
                    inlineBody(loop, ivs, nb);
                    bodyBlock = nb.getInsertionBlock();
                  });
      barrierAt(b);
      loop.erase();
      if (failed(serialize(*bodyBlock, ctx)))
        return failure();
      continue;
    }
    if (holdsParallelLoop(op)) {
      // Uniform control flow around parallel work: recurse.
      for (Region &region : op->getRegions())
        for (Block &nested : region)
          if (failed(distribute(nested, ctx)))
            return failure();
      continue;
    }
    if (!writesMemory(op))
      continue;
    // Consecutive writers share one thread-0 section.
    size_t last = i;
    while (last + 1 < ops.size() && !isa<scf::ParallelOp>(ops[last + 1]) &&
           !isa<memref::AllocOp, memref::DeallocOp>(ops[last + 1]) &&
           !holdsParallelLoop(ops[last + 1]) && writesMemory(ops[last + 1]))
      ++last;
    OpBuilder b(op);
    barrierAt(b);
    Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                        ctx.threadId, constantIndex(b, loc, 0));
    auto guard = scf::IfOp::create(b, loc, first, /*withElseRegion=*/false);
    Operation *yield = guard.thenBlock()->getTerminator();
    for (size_t j = i; j <= last; ++j)
      ops[j]->moveBefore(yield);
    b.setInsertionPointAfter(guard);
    barrierAt(b);
    if (failed(broadcastResults(guard, ctx)) ||
        failed(serialize(*guard.thenBlock(), ctx)))
      return failure();
    i = last;
  }
  return success();
}

/// Values that thread 0's section `guard` yields to the code after it (a
/// reduction loop that also writes, whose single-iteration parallel parent
/// was folded away) reach every thread through the block's scratch: thread
/// 0 stores them, the others load them after the closing barrier.
LogicalResult KernelMapper::broadcastResults(scf::IfOp guard,
                                             LaunchContext &ctx) {
  Operation *closingBarrier = guard->getNextNode();
  for (Operation &op : guard.thenBlock()->without_terminator()) {
    for (Value result : op.getResults()) {
      auto isOutside = [&](OpOperand &use) {
        return !guard->isProperAncestor(use.getOwner());
      };
      if (llvm::none_of(result.getUses(), isOutside))
        continue;
      Location loc = op.getLoc();
      if (!result.getType().isIntOrIndexOrFloat())
        return op.emitError("v4a-map-loops-to-gpu: a sequential op in a "
                            "kernel writes memory and yields a value that "
                            "is not a scalar");
      OpBuilder b(guard);
      auto slot = memref::AllocOp::create(
          b, loc, MemRefType::get({1}, result.getType()));
      Value zero = constantIndex(b, loc, 0);
      b.setInsertionPoint(guard.thenBlock()->getTerminator());
      memref::StoreOp::create(b, loc, result, slot, ValueRange{zero});
      b.setInsertionPointAfter(closingBarrier);
      Value shared =
          memref::LoadOp::create(b, loc, slot, ValueRange{zero}).getResult();
      result.replaceUsesWithIf(shared, isOutside);
      if (failed(toScratch(slot, ctx, /*perThread=*/false)))
        return failure();
    }
  }
  return success();
}

/// A barrier right after another one orders nothing more.
void dropRepeatedBarriers(gpu::LaunchOp launch) {
  SmallVector<gpu::BarrierOp> repeated;
  launch.walk([&](gpu::BarrierOp barrier) {
    if (isa_and_nonnull<gpu::BarrierOp>(barrier->getPrevNode()))
      repeated.push_back(barrier);
  });
  for (gpu::BarrierOp barrier : repeated)
    barrier.erase();
}

void KernelMapper::sinkInto(gpu::LaunchOp launch) {
  dropRepeatedBarriers(launch);
  Region &body = launch.getBody();
  bool changed = true;
  while (changed) {
    changed = false;
    llvm::SetVector<Value> above;
    getUsedValuesDefinedAbove(body, above);
    for (Value value : above) {
      Operation *def = value.getDefiningOp();
      if (!def || !(isSinkable(def) || isa<arith::ConstantOp>(def) ||
                    isa<memref::GetGlobalOp>(def)))
        continue;
      OpBuilder b = OpBuilder::atBlockBegin(&body.front());
      Operation *copy = b.clone(*def);
      replaceAllUsesInRegionWith(value, copy->getResult(0), body);
      changed = true;
    }
  }
}

LogicalResult KernelMapper::mapParallel(scf::ParallelOp loop) {
  if (loop.getNumReductions() != 0)
    return loop.emitError("v4a-map-loops-to-gpu: parallel reductions");
  OpBuilder b(loop);
  Location loc = loop.getLoc();
  SmallVector<Value> counts;
  for (unsigned d = 0; d < loop.getNumLoops(); ++d)
    counts.push_back(tripCount(b, loc, loop.getLowerBound()[d],
                               loop.getUpperBound()[d], loop.getStep()[d]));
  Value one = constantIndex(b, loc, 1);
  if (!holdsParallelLoop(loop)) {
    // One iteration per thread of the whole grid.
    Value total = one;
    for (Value count : counts)
      total = b.createOrFold<arith::MulIOp>(loc, total, count);
    Value threads = constantIndex(b, loc, threadCount);
    Value limit = constantIndex(b, loc, kGridLimit[0]);
    Value blocks = arith::MinSIOp::create(
        b, loc, arith::CeilDivSIOp::create(b, loc, total, threads), limit);
    SmallVector<Value> grid = {blocks, one, one};
    gpu::LaunchOp launch = createLaunch(b, loc, grid);
    LaunchContext ctx = contextOf(launch, grid);
    OpBuilder kb(launch.getBody().front().getTerminator());
    Value first = arith::AddIOp::create(
        kb, loc, arith::MulIOp::create(kb, loc, ctx.blockId, ctx.threads),
        ctx.threadId);
    Value stride =
        arith::MulIOp::create(kb, loc, launch.getGridSize().x, ctx.threads);
    Block *bodyBlock = nullptr;
    stridedLoop(kb, loc, first, total, stride, [&](OpBuilder &nb, Value g) {
      inlineBody(loop, delinearize(nb, loc, g, loop, counts), nb);
      bodyBlock = nb.getInsertionBlock();
    });
    loop.erase();
    if (failed(serialize(*bodyBlock, ctx)))
      return failure();
    sinkInto(launch);
    return success();
  }
  // A block per iteration of the first three dimensions.
  SmallVector<Value> grid;
  for (unsigned d = 0; d < 3; ++d)
    grid.push_back(d < counts.size() ? arith::MinSIOp::create(
                                           b, loc, counts[d],
                                           constantIndex(b, loc, kGridLimit[d]))
                                           .getResult()
                                     : one);
  gpu::LaunchOp launch = createLaunch(b, loc, grid);
  LaunchContext ctx = contextOf(launch, grid);
  OpBuilder kb(launch.getBody().front().getTerminator());
  gpu::KernelDim3 ids = launch.getBlockIds(), sizes = launch.getGridSize();
  Value idOf[3] = {ids.x, ids.y, ids.z},
        sizeOf[3] = {sizes.x, sizes.y, sizes.z};
  SmallVector<Value> ivs;
  Block *bodyBlock = nullptr;
  std::function<void(OpBuilder &, unsigned)> nest = [&](OpBuilder &nb,
                                                        unsigned d) {
    if (d == counts.size()) {
      inlineBody(loop, ivs, nb);
      bodyBlock = nb.getInsertionBlock();
      return;
    }
    Value first = d < 3 ? idOf[d] : constantIndex(nb, loc, 0);
    Value stride = d < 3 ? sizeOf[d] : one;
    stridedLoop(nb, loc, first, counts[d], stride,
                [&](OpBuilder &inner, Value i) {
                  Value scaled =
                      arith::MulIOp::create(inner, loc, i, loop.getStep()[d]);
                  ivs.push_back(arith::AddIOp::create(
                      inner, loc, loop.getLowerBound()[d], scaled));
                  nest(inner, d + 1);
                  ivs.pop_back();
                });
  };
  nest(kb, 0);
  loop.erase();
  if (failed(distribute(*bodyBlock, ctx)))
    return failure();
  // The next iteration of a grid-stride loop reuses the block's scratch.
  OpBuilder end = OpBuilder::atBlockTerminator(bodyBlock);
  gpu::BarrierOp::create(end, loc);
  sinkInto(launch);
  return success();
}

LogicalResult KernelMapper::mapSequence(ArrayRef<Operation *> ops) {
  Block &top = func.getBody().front();
  for (Operation *op : ops)
    for (Operation *user : op->getUsers())
      if (!llvm::is_contained(ops, top.findAncestorOpInBlock(*user)))
        return op->emitError("v4a-map-loops-to-gpu: a value of a kernel ")
               << "(" << op->getName() << ") is used on the host by "
               << user->getName();
  OpBuilder b(ops.back());
  Location loc = ops.front()->getLoc();
  Value one = constantIndex(b, loc, 1);
  SmallVector<Value> grid = {one, one, one};
  gpu::LaunchOp launch = createLaunch(b, loc, grid);
  LaunchContext ctx = contextOf(launch, grid);
  Operation *terminator = launch.getBody().front().getTerminator();
  for (Operation *op : ops)
    op->moveBefore(terminator);
  if (failed(distribute(launch.getBody().front(), ctx)))
    return failure();
  sinkInto(launch);
  return success();
}

LogicalResult KernelMapper::run() {
  if (func.isExternal())
    return success();
  SmallVector<Operation *> body;
  for (Operation &op : func.getBody().front())
    body.push_back(&op);
  SmallVector<Operation *> pending;
  auto flush = [&]() -> LogicalResult {
    if (pending.empty())
      return success();
    LogicalResult result = mapSequence(pending);
    pending.clear();
    return result;
  };
  // Values the host has: arguments and results of host ops on them.
  llvm::DenseSet<Value> onHost(func.getArguments().begin(),
                               func.getArguments().end());
  auto operandsOnHost = [&](Operation *op) {
    return llvm::all_of(op->getOperands(),
                        [&](Value v) { return onHost.contains(v); });
  };
  for (Operation *op : body) {
    if (op->hasTrait<OpTrait::IsTerminator>()) {
      if (failed(flush()))
        return failure();
      continue;
    }
    if (isHostOp(op) && operandsOnHost(op)) {
      // Host work that touches memory waits for the kernels before it;
      // sizes, allocations and views need not.
      if ((isa<memref::CopyOp, memref::LoadOp>(op) || isLibraryCall(op)) &&
          failed(flush()))
        return failure();
      onHost.insert(op->getResults().begin(), op->getResults().end());
      continue;
    }
    if (isSinkable(op) && operandsOnHost(op)) {
      onHost.insert(op->getResults().begin(), op->getResults().end());
      continue;
    }
    if (auto launch = dyn_cast<gpu::LaunchOp>(op)) {
      // A kernel of a family (v4a-lower-to-gpu): already a launch; the
      // constants folding hoisted out of it go back in.
      if (failed(flush()))
        return failure();
      sinkInto(launch);
      continue;
    }
    if (auto loop = dyn_cast<scf::ParallelOp>(op)) {
      if (failed(flush()) || failed(mapParallel(loop)))
        return failure();
      continue;
    }
    pending.push_back(op);
  }
  if (failed(flush()))
    return failure();
  // Pure ops every launch copied.
  for (Operation &op :
       llvm::make_early_inc_range(llvm::reverse(func.getBody().front())))
    if (isSinkable(&op) && op.use_empty())
      op.erase();
  return success();
}

struct MapLoopsToGPUPass
    : public v4a::impl::MapLoopsToGPUBase<MapLoopsToGPUPass> {
  using MapLoopsToGPUBase::MapLoopsToGPUBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    UnitAttr::get(module.getContext()));
    for (auto func : llvm::to_vector(module.getOps<func::FuncOp>()))
      if (failed(KernelMapper(func, threads).run()))
        return signalPassFailure();
  }
};

} // namespace
