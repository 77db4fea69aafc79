//===- DequantizeFP8Weights.cpp - fp8 products as exact bf16 products -----===//
//
// An fp8 linear (e4m3 weight with 128x128 block scales, the activation
// quantized per 1x128 block) is the same product as a bf16 linear of the
// dequantized weight and the fake-quantized activation: every e4m3 value
// times its power-of-two scale is a bf16 value, and block sums scaled by
// powers of two round as the unscaled ones. A GEMM library's bf16 product
// accumulates in f32 where its fp8 product does not (Hopper's fp8 tensor
// cores keep about 14 bits), so GPU steps take this form: the weight
// argument becomes bf16 (the runtime dequantizes the checkpoint at load),
// its scale argument goes, and one act_quant per input feeds the products.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/V4A/IR/V4AOps.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace v4a {
#define GEN_PASS_DEF_DEQUANTIZEFP8WEIGHTS
#include "passes/Passes.h.inc"
} // namespace v4a

using namespace mlir;
using namespace v4a;

namespace {

/// The width of an fp8 linear's activation blocks and weight scale blocks.
constexpr int64_t kBlock = 128;

bool isFP8(Value weight) {
  return isa<Float8E4M3FNType>(
      cast<ShapedType>(weight.getType()).getElementType());
}

/// The activation quantization of an fp8 linear as an op of its own, placed
/// where `input` is defined (the step's start for an argument).
Value quantizedInput(OpBuilder &b, Value input,
                     llvm::DenseMap<Value, Value> &quantized) {
  if (Value q = quantized.lookup(input))
    return q;
  OpBuilder::InsertionGuard guard(b);
  if (Operation *def = input.getDefiningOp())
    b.setInsertionPointAfter(def);
  else
    b.setInsertionPointToStart(cast<BlockArgument>(input).getOwner());
  Value q = ActQuantOp::create(b, input.getLoc(), input.getType(), input,
                               QuantFormat::E4M3, uint64_t(kBlock),
                               IntegerAttr(), /*pow2_scale=*/true);
  quantized[input] = q;
  return q;
}

/// Makes the fp8 `weight` argument of `op` a bf16 one and marks its scale
/// argument for removal; false (nothing changed) when the input width is
/// not whole blocks. Fails unless both are arguments of the step that only
/// `op` uses.
FailureOr<bool> retypeWeight(Operation *op, func::FuncOp func,
                             Value weightValue, Value scaleValue,
                             llvm::BitVector &unusedScales) {
  auto weight = dyn_cast<BlockArgument>(weightValue);
  auto scale = dyn_cast<BlockArgument>(scaleValue);
  if (!weight || !scale || weight.getOwner() != &func.front() ||
      scale.getOwner() != &func.front())
    return op->emitOpError()
           << "needs its fp8 weight and scale as arguments of the step "
              "function, which take them from the checkpoint";
  if (!weight.hasOneUse() || !scale.hasOneUse())
    return op->emitOpError()
           << "shares its fp8 weight or scale with another op; they cannot "
              "change for one of them";
  auto type = cast<RankedTensorType>(weight.getType());
  // A partial last block quantizes on its own; act_quant takes whole
  // blocks, so such products stay fp8. So do f32 scales: only powers of
  // two (ue8m0) keep the dequantized weight exact in bf16.
  auto scaleType = cast<RankedTensorType>(scale.getType());
  if (type.isDynamicDim(1) || type.getDimSize(1) % kBlock != 0 ||
      !isa<Float8E8M0FNUType>(scaleType.getElementType()))
    return false;
  weight.setType(type.clone(Builder(op->getContext()).getBF16Type()));
  unusedScales.set(scale.getArgNumber());
  return true;
}

LogicalResult dequantizeLinear(OpBuilder &b, func::FuncOp func, LinearOp linear,
                               llvm::DenseMap<Value, Value> &quantized,
                               llvm::BitVector &unusedScales) {
  FailureOr<bool> retyped = retypeWeight(linear, func, linear.getWeight(),
                                         linear.getScale(), unusedScales);
  if (failed(retyped) || !*retyped)
    return failure(failed(retyped));
  b.setInsertionPoint(linear);
  Value input = quantizedInput(b, linear.getInput(), quantized);
  auto replacement = LinearOp::create(b, linear.getLoc(), linear.getType(),
                                      input, linear.getWeight(), Value(),
                                      b.getI64IntegerAttr(kBlock));
  linear.replaceAllUsesWith(replacement.getResult());
  linear.erase();
  return success();
}

/// wo_b quantizes its input inside the op: it leaves the op, which keeps
/// wo_a's product, as an act_quant of that product and a linear on the
/// bf16 weight.
LogicalResult dequantizeWoB(OpBuilder &b, func::FuncOp func,
                            GroupedOutputOp output,
                            llvm::DenseMap<Value, Value> &quantized,
                            llvm::BitVector &unusedScales) {
  FailureOr<bool> retyped = retypeWeight(output, func, output.getWoB(),
                                         output.getWoBScale(), unusedScales);
  if (failed(retyped) || !*retyped)
    return failure(failed(retyped));
  b.setInsertionPoint(output);
  auto woA = cast<RankedTensorType>(output.getWoA().getType());
  auto loraType = RankedTensorType::get(
      {output.getType().getDimSize(0), woA.getDimSize(0)}, b.getBF16Type());
  Location loc = output.getLoc();
  Value lora = GroupedOutputOp::create(b, loc, loraType, output.getInput(),
                                       output.getWoA(), output.getWoAScale(),
                                       Value(), Value(), output.getGroups());
  int64_t groups = output.getGroups();
  int64_t groupWidth = loraType.getDimSize(1) / groups;
  Value input;
  if (groups > 1 && !loraType.isDynamicDim(1) && groupWidth % kBlock == 0) {
    // Quantized as [T, groups, o_lora]: the blocks never straddle a group,
    // and rows of o_lora suit row kernels whatever the group count.
    SmallVector<ReassociationIndices> rows = {{0}, {1, 2}};
    Value grouped = tensor::ExpandShapeOp::create(
        b, loc,
        RankedTensorType::get({loraType.getDimSize(0), groups, groupWidth},
                              b.getBF16Type()),
        lora, rows);
    input = tensor::CollapseShapeOp::create(
        b, loc, loraType, quantizedInput(b, grouped, quantized), rows);
  } else {
    input = quantizedInput(b, lora, quantized);
  }
  auto product =
      LinearOp::create(b, loc, output.getType(), input, output.getWoB(),
                       Value(), b.getI64IntegerAttr(kBlock));
  output.replaceAllUsesWith(product.getResult());
  output.erase();
  return success();
}

LogicalResult dequantizeStep(func::FuncOp func) {
  OpBuilder b(func.getContext());
  llvm::DenseMap<Value, Value> quantized;
  llvm::BitVector unusedScales(func.getNumArguments());
  SmallVector<Operation *> products;
  func.walk([&](Operation *op) {
    if (auto linear = dyn_cast<LinearOp>(op);
        linear && linear.getScale() && isFP8(linear.getWeight()))
      products.push_back(op);
    if (auto output = dyn_cast<GroupedOutputOp>(op);
        output && output.getWoBScale() && isFP8(output.getWoB()))
      products.push_back(op);
  });
  for (Operation *op : products) {
    LogicalResult done = isa<LinearOp>(op)
                             ? dequantizeLinear(b, func, cast<LinearOp>(op),
                                                quantized, unusedScales)
                             : dequantizeWoB(b, func, cast<GroupedOutputOp>(op),
                                             quantized, unusedScales);
    if (failed(done))
      return failure();
  }
  if (unusedScales.none())
    return success();
  if (failed(func.eraseArguments(unusedScales)))
    return failure();
  func.setType(FunctionType::get(func.getContext(),
                                 func.front().getArgumentTypes(),
                                 func.getResultTypes()));
  return success();
}

struct DequantizeFP8WeightsPass
    : public v4a::impl::DequantizeFP8WeightsBase<DequantizeFP8WeightsPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (!func->hasAttr("v4a.sched_meta_key") || func.isExternal())
        continue;
      if (failed(dequantizeStep(func)))
        return signalPassFailure();
    }
  }
};

} // namespace
