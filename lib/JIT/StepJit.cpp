//===- StepJit.cpp - compile step functions for the host CPU --------------===//

#include "lib/JIT/StepJit.h"

#include "dialects/V4A/IR/V4AOps.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <algorithm>
#include <set>

using namespace mlir;

namespace v4a::jit {

namespace {

constexpr llvm::StringLiteral kBindAttr = "v4a.bind";

std::optional<step::Element> elementOf(Type type) {
  if (isa<KVCacheType>(type))
    return step::Element::Bytes;
  Type element = cast<ShapedType>(type).getElementType();
  if (element.isBF16())
    return step::Element::BF16;
  if (element.isF32())
    return step::Element::F32;
  if (element.isInteger(32))
    return step::Element::I32;
  if (element.isInteger(64))
    return step::Element::I64;
  if (isa<Float8E4M3FNType>(element))
    return step::Element::E4M3;
  if (isa<Float8E8M0FNUType>(element))
    return step::Element::UE8M0;
  return std::nullopt;
}

/// The memref an argument of type `type` travels as.
MemRefType memrefOf(Type type) {
  if (isa<KVCacheType>(type))
    return MemRefType::get({ShapedType::kDynamic},
                           IntegerType::get(type.getContext(), 8));
  auto tensor = cast<RankedTensorType>(type);
  return MemRefType::get(tensor.getShape(), tensor.getElementType());
}

LogicalResult describe(func::FuncOp func, step::Function &out) {
  out.name = func.getName().str();
  auto add = [&](Type type, DictionaryAttr attrs,
                 bool output) -> LogicalResult {
    auto bind = attrs ? attrs.getAs<StringAttr>(kBindAttr) : StringAttr();
    std::optional<step::Element> element = elementOf(type);
    if (!bind || !element)
      return func.emitOpError() << "has an argument or result without a "
                                   "v4a.bind or with an unsupported type "
                                << type;
    step::Arg arg;
    arg.bind = bind.str();
    arg.element = *element;
    arg.output = output;
    if (auto tensor = dyn_cast<RankedTensorType>(type))
      for (int64_t d : tensor.getShape())
        arg.shape.push_back(ShapedType::isDynamic(d) ? -1 : d);
    else
      arg.shape = {-1};
    out.args.push_back(arg);
    return success();
  };
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (failed(add(func.getArgumentTypes()[i], func.getArgAttrDict(i), false)))
      return failure();
  for (unsigned i = 0; i < func.getNumResults(); ++i)
    if (failed(add(func.getResultTypes()[i], func.getResultAttrDict(i), true)))
      return failure();
  return success();
}

/// `NAME_entry`: memref arguments (outputs last) around a call of NAME,
/// which becomes private so that it is inlined and dropped.
void addEntry(OpBuilder &b, func::FuncOp func) {
  Location loc = func.getLoc();
  SmallVector<Type> types;
  for (Type type : func.getArgumentTypes())
    types.push_back(memrefOf(type));
  for (Type type : func.getResultTypes())
    types.push_back(memrefOf(type));
  b.setInsertionPointAfter(func);
  auto entry = func::FuncOp::create(b, loc, (func.getName() + "_entry").str(),
                                    b.getFunctionType(types, {}));
  entry->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  Block *block = entry.addEntryBlock();
  b.setInsertionPointToStart(block);
  SmallVector<Value> operands;
  for (auto [i, type] : llvm::enumerate(func.getArgumentTypes())) {
    Value arg = block->getArgument(i);
    if (isa<KVCacheType>(type))
      operands.push_back(
          UnrealizedConversionCastOp::create(b, loc, type, arg).getResult(0));
    else
      operands.push_back(bufferization::ToTensorOp::create(b, loc, type, arg,
                                                           /*restrict=*/true));
  }
  auto call = func::CallOp::create(b, loc, func, operands);
  unsigned inputs = func.getNumArguments();
  for (auto [i, result] : llvm::enumerate(call.getResults()))
    bufferization::MaterializeInDestinationOp::create(
        b, loc, Type(), result, block->getArgument(inputs + i),
        /*restrict=*/true, /*writable=*/true);
  func::ReturnOp::create(b, loc);
  func.setPrivate();
}

} // namespace

std::vector<step::Call> stepCalls(ModuleOp module,
                                  const std::set<int64_t> &layers,
                                  std::vector<std::string> &names) {
  auto indexOf = [&](llvm::StringRef name) {
    auto it = std::find(names.begin(), names.end(), name.str());
    if (it == names.end())
      it = names.insert(names.end(), name.str());
    return static_cast<int>(it - names.begin());
  };
  std::vector<step::Call> calls;
  for (auto program : module.getOps<ProgramOp>()) {
    // Metadata the program computes and no selected layer has read yet.
    std::set<std::string> pending;
    for (Operation &op : program.getBody().front()) {
      if (auto meta = dyn_cast<RunMetaOp>(op)) {
        pending.insert(meta.getFunction().str());
        continue;
      }
      auto run = cast<RunStepOp>(op);
      if (!layers.count(static_cast<int64_t>(run.getLayer())))
        continue;
      auto step = module.lookupSymbol<func::FuncOp>(run.getFunction());
      auto meta = step->getAttrOfType<FlatSymbolRefAttr>("v4a.meta");
      if (pending.erase(meta.getValue().str())) {
        step::Call call;
        call.function = indexOf(meta.getValue());
        calls.push_back(call);
      }
      step::Call call;
      call.function = indexOf(run.getFunction());
      call.meta = indexOf(meta.getValue());
      call.layer = static_cast<int64_t>(run.getLayer());
      calls.push_back(call);
    }
  }
  return calls;
}

LogicalResult prepareEntries(ModuleOp module,
                             const std::vector<std::string> &names,
                             std::vector<step::Function> &functions,
                             std::string &error) {
  std::set<std::string> wanted(names.begin(), names.end());
  for (Operation &op : llvm::make_early_inc_range(*module.getBody())) {
    auto func = dyn_cast<func::FuncOp>(op);
    if (!func || !wanted.count(func.getName().str()))
      op.erase();
  }
  functions.clear();
  OpBuilder b(module.getContext());
  for (const std::string &name : names) {
    auto func = module.lookupSymbol<func::FuncOp>(name);
    if (!func) {
      error = "no step function '" + name + "' to compile";
      return failure();
    }
    step::Function signature;
    if (failed(describe(func, signature))) {
      error = "cannot describe step function '" + name + "'";
      return failure();
    }
    functions.push_back(signature);
    addEntry(b, func);
  }
  return success();
}

std::unique_ptr<CpuJit> compileSteps(std::unique_ptr<MLIRContext> context,
                                     OwningOpRef<ModuleOp> module,
                                     const std::vector<std::string> &names,
                                     std::vector<step::Function> &functions,
                                     std::string &error, bool tokenParallel) {
  if (failed(prepareEntries(*module, names, functions, error)))
    return nullptr;
  std::unique_ptr<CpuJit> jit = CpuJit::compile(
      std::move(context), std::move(module), error, tokenParallel);
  if (!jit)
    return nullptr;
  for (step::Function &function : functions) {
    function.entry = jit->lookupPacked(function.name + "_entry");
    if (!function.entry) {
      error = "compiled steps lack '" + function.name + "_entry'";
      return nullptr;
    }
  }
  return jit;
}

} // namespace v4a::jit
