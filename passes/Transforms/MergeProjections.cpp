//===- MergeProjections.cpp - one product per group of projections --------===//
//
// At decode a GEMM library call has a fixed minimum (about 8-11 us on the
// H200 for 128 tokens, split-K and its reduction) that small projections
// never leave: a step of V4-Flash pays it seven times for products of the
// layer's input alone. The projections v4a-fuse grouped by input become
// one product over their stacked weights, whose columns are then handed
// to each consumer; the runtime stacks the checkpoint's rows at load.
// Parts of one element type are the product's own columns (the GPU's row
// kernels read them in place); mixed parts take f32 sums, from which a bf16
// part is rounded where it is read.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/V4A/IR/V4AOps.h"

#include "llvm/ADT/BitVector.h"

namespace v4a {
#define GEN_PASS_DEF_MERGEPROJECTIONS
#include "passes/Passes.h.inc"
} // namespace v4a

using namespace mlir;
using namespace v4a;

namespace {

constexpr llvm::StringLiteral kBindAttr = "v4a.bind";

/// The step argument behind operand `value` of `region`, when the region
/// alone reads it.
BlockArgument soleArgument(FusedOp region, Value value) {
  auto inner = dyn_cast<BlockArgument>(value);
  if (!inner || inner.getOwner() != &region.getBody().front())
    return {};
  auto outer =
      dyn_cast<BlockArgument>(region.getInputs()[inner.getArgNumber()]);
  if (!outer || !outer.hasOneUse() ||
      !isa<func::FuncOp>(outer.getOwner()->getParentOp()))
    return {};
  return outer;
}

/// The rows of the linears' weights stacked.
int64_t stackedRows(ArrayRef<LinearOp> linears) {
  int64_t rows = 0;
  for (LinearOp linear : linears)
    rows += cast<RankedTensorType>(linear.getWeight().getType()).getDimSize(0);
  return rows;
}

/// The element type every one of the linears' results has, if any.
Type commonElementType(ArrayRef<LinearOp> linears) {
  auto elementOf = [](LinearOp linear) {
    return cast<ShapedType>(linear.getType()).getElementType();
  };
  Type element = elementOf(linears.front());
  for (LinearOp linear : linears)
    if (elementOf(linear) != element)
      return {};
  return element;
}

/// The projections of a region that can run as one product: bf16 weights
/// that are step arguments only it reads, one input, one k_block.
SmallVector<LinearOp> mergeableLinears(FusedOp region) {
  SmallVector<LinearOp> linears;
  for (Operation &op : region.getBody().front().without_terminator()) {
    auto linear = dyn_cast<LinearOp>(op);
    if (!linear || linear.getScale())
      return {};
    auto weight = cast<RankedTensorType>(linear.getWeight().getType());
    if (!weight.getElementType().isBF16() || !weight.hasStaticShape() ||
        !soleArgument(region, linear.getWeight()))
      return {};
    if (!linears.empty()) {
      LinearOp first = linears.front();
      if (linear.getInput() != first.getInput() ||
          linear.getKBlock() != first.getKBlock())
        return {};
    }
    linears.push_back(linear);
  }
  if (linears.size() < 2)
    return {};
  // A product wider than its input is large enough that the library's
  // minimum matters less, and f32 sums would double its bytes: only a
  // product of one element type is wide.
  auto weight = cast<RankedTensorType>(linears.front().getWeight().getType());
  if (!commonElementType(linears) &&
      stackedRows(linears) > weight.getDimSize(1))
    return {};
  return linears;
}

/// The stacked weight's binding: the projections' bindings in order.
FailureOr<std::string> stackedBind(FusedOp region, ArrayRef<LinearOp> linears) {
  std::string bind;
  for (LinearOp linear : linears) {
    BlockArgument arg = soleArgument(region, linear.getWeight());
    auto func = cast<func::FuncOp>(arg.getOwner()->getParentOp());
    auto name =
        func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kBindAttr);
    if (!name)
      return region.emitOpError()
             << "merges a weight argument without " << kBindAttr
             << " (argument " << arg.getArgNumber()
             << "): the runtime could not stack its rows";
    bind += (bind.empty() ? "" : "+") + name.str();
  }
  return bind;
}

LogicalResult mergeRegion(FusedOp region) {
  SmallVector<LinearOp> linears = mergeableLinears(region);
  if (linears.empty())
    return success();
  FailureOr<std::string> bind = stackedBind(region, linears);
  if (failed(bind))
    return failure();
  MLIRContext *context = region.getContext();
  Block &body = region.getBody().front();
  auto func = region->getParentOfType<func::FuncOp>();

  int64_t rows = stackedRows(linears);
  SmallVector<Type> parts;
  llvm::BitVector oldArgs(func.getNumArguments());
  llvm::BitVector oldInputs(region.getInputs().size());
  for (LinearOp linear : linears) {
    parts.push_back(linear.getType());
    oldArgs.set(soleArgument(region, linear.getWeight()).getArgNumber());
    oldInputs.set(cast<BlockArgument>(linear.getWeight()).getArgNumber());
  }
  LinearOp first = linears.front();
  auto weightType = cast<RankedTensorType>(first.getWeight().getType());
  auto stackedType = RankedTensorType::get({rows, weightType.getDimSize(1)},
                                           weightType.getElementType());

  // The stacked argument takes the place of the first weight's.
  unsigned at = oldArgs.find_first();
  auto attrs = DictionaryAttr::get(
      context, {NamedAttribute(StringAttr::get(context, kBindAttr),
                               StringAttr::get(context, *bind))});
  if (failed(func.insertArgument(at, stackedType, attrs, region.getLoc())))
    return region.emitOpError() << "cannot add the stacked weight argument";
  // The old weights from `at` on now sit one place further.
  llvm::BitVector shifted(func.getNumArguments());
  for (unsigned i : oldArgs.set_bits())
    shifted.set(i >= at ? i + 1 : i);
  region.getInputsMutable().append(func.getArgument(at));
  Value stacked = body.addArgument(stackedType, region.getLoc());

  OpBuilder b(first);
  auto inputType = cast<RankedTensorType>(first.getInput().getType());
  // Parts of one type are the product's columns as they are; mixed parts
  // take f32 sums, each bf16 part rounded from them by the split as the
  // library rounds a bf16 product's.
  Type element = commonElementType(linears);
  auto productType = RankedTensorType::get({inputType.getDimSize(0), rows},
                                           element ? element : b.getF32Type());
  Value product =
      LinearOp::create(b, first.getLoc(), productType, first.getInput(),
                       stacked, Value(), first.getKBlockAttr());
  auto split = SplitColumnsOp::create(b, first.getLoc(), parts, product);
  for (auto [linear, part] : llvm::zip(linears, split.getParts())) {
    linear.getResult().replaceAllUsesWith(part);
    linear.erase();
  }

  oldInputs.resize(body.getNumArguments());
  for (unsigned i = oldInputs.size(); i-- > 0;)
    if (oldInputs.test(i))
      region.getInputsMutable().erase(i);
  body.eraseArguments(oldInputs);
  if (failed(func.eraseArguments(shifted)))
    return region.emitOpError() << "cannot remove the merged weight arguments";
  return success();
}

struct MergeProjectionsPass
    : public v4a::impl::MergeProjectionsBase<MergeProjectionsPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (!func->hasAttr("v4a.sched_meta_key") || func.isExternal())
        continue;
      SmallVector<FusedOp> regions;
      for (auto region : func.front().getOps<FusedOp>())
        if (region.getKind() == "merged_linear")
          regions.push_back(region);
      for (FusedOp region : regions)
        if (failed(mergeRegion(region)))
          return signalPassFailure();
    }
  }
};

} // namespace
