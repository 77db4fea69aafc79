//===- GpuSteps.cpp - step functions as GPU kernels and host programs -----===//

#include "lib/JIT/GpuSteps.h"

#include "lib/JIT/KernelAccess.h"
#include "lib/JIT/StepJit.h"
#include "passes/Conversion/V4AToGPU/TableCopy.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <optional>

using namespace mlir;

namespace v4a::jit {

// MLIR's GPU dialect, not the kernel families' namespace (v4a::gpu).
namespace gpu = ::mlir::gpu;

namespace {

/// Step functions to kernels in `gpu.module @v4a_gpu`: what a kernel family
/// covers straight to launches, the rest to loops over buffers whose nests
/// become launches.
std::string kernelPipeline(bool fp8Library, bool indexerFamily,
                           bool indexerE4M3) {
  return std::string("v4a-lower-to-gpu{indexer-family=") +
         (indexerFamily ? "1" : "0") +
         " indexer-e4m3=" + (indexerE4M3 ? "1" : "0") +
         "},v4a-lower-to-cpu{token-parallel=1 library-gemms=1 "
         "library-fp8-gemms=" +
         (fp8Library ? "1" : "0") +
         "},inline,symbol-dce,canonicalize,"
         "convert-elementwise-to-linalg,v4a-fuse-elementwise,"
         "one-shot-bufferize,v4a-elide-result-copies,"
         "convert-linalg-to-parallel-loops,lower-affine,canonicalize,"
         "v4a-map-loops-to-gpu,gpu-kernel-outlining,cse";
}

/// The CUDA toolkit whose libdevice (math functions) the kernels link:
/// $CUDA_HOME, $CUDA_PATH, or /usr/local/cuda.
std::optional<std::string> cudaToolkit(std::string &error) {
  std::vector<std::string> candidates;
  for (const char *variable : {"CUDA_HOME", "CUDA_PATH"})
    if (const char *value = std::getenv(variable))
      candidates.push_back(value);
  candidates.push_back("/usr/local/cuda");
  for (const std::string &path : candidates)
    if (llvm::sys::fs::exists(path + "/nvvm/libdevice/libdevice.10.bc"))
      return path;
  error = "no CUDA toolkit with nvvm/libdevice/libdevice.10.bc (looked in "
          "$CUDA_HOME, $CUDA_PATH and /usr/local/cuda): the kernels' math "
          "functions come from it";
  return std::nullopt;
}

/// The kernels to PTX, linked with the toolkit's libdevice.
std::string binaryPipeline(const std::string &chip,
                           const std::string &toolkit) {
  return "nvvm-attach-target{chip=" + chip +
         " features=+ptx80},gpu.module(expand-strided-metadata,lower-affine,"
         "convert-scf-to-cf,convert-gpu-to-nvvm,convert-nvvm-to-llvm,"
         "canonicalize,"
         "reconcile-unrealized-casts),gpu-module-to-binary{format=isa "
         "toolkit=" +
         toolkit + "}";
}

/// Kernels whose warpgroups trade registers (setmaxnreg) declare a block
/// per SM: ptxas honours the trades only when it knows a thread's registers
/// at entry, and otherwise ignores them (its C7508) and spills.
void declareRegisterTrades(ModuleOp module) {
  module.walk([](gpu::GPUFuncOp func) {
    if (!func.isKernel())
      return;
    WalkResult trades = func.walk(
        [](NVVM::SetMaxRegisterOp) { return WalkResult::interrupt(); });
    if (trades.wasInterrupted())
      func->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                    Builder(func.getContext()).getI32IntegerAttr(1));
  });
}

void registerOnce(MLIRContext *context) {
  static bool registered = [] {
    registerAllPasses();
    registerV4APasses();
    return true;
  }();
  (void)registered;
  DialectRegistry registry;
  // The conversions to LLVM of arith, memref, cf... that convert-gpu-to-nvvm
  // gathers come as dialect extensions.
  registerAllDialects(registry);
  registerAllExtensions(registry);
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  registerBuiltinDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  context->appendDialectRegistry(registry);
  context->loadAllAvailableDialects();
}

/// Builds the host program of one lowered entry function.
class HostProgramBuilder {
public:
  HostProgramBuilder(step::HostProgram &program,
                     const std::vector<step::Arg> &args)
      : program(program), args(args) {}

  LogicalResult build(func::FuncOp func);

private:
  using Kind = step::HostOp::Kind;
  using Arith = step::HostOp::Arith;

  int define(Value value) {
    int id = program.values++;
    ids[value] = id;
    return id;
  }
  FailureOr<int> use(Operation *op, Value value) {
    auto it = ids.find(value);
    if (it == ids.end()) {
      op->emitError("v4a host program: operand not computed on the host");
      return failure();
    }
    return it->second;
  }
  /// The host values of `operands`, appended to `resolved`.
  LogicalResult resolve(Operation *op, Kind kind, ValueRange operands,
                        std::vector<int> &resolved) {
    bool onDevice = step::HostOp::actsOnDevice(kind);
    for (Value operand : operands) {
      if (onDevice && isHostArgument(operand))
        return op->emitError("v4a host program: the host-memory argument '")
               << args[cast<BlockArgument>(operand).getArgNumber()].bind
               << "' used on the device";
      FailureOr<int> id = use(op, operand);
      if (failed(id))
        return failure();
      resolved.push_back(*id);
    }
    return success();
  }
  /// A host value holding `value`.
  int constant(int64_t value) {
    step::HostOp hostOp;
    hostOp.kind = Kind::Const;
    hostOp.data = {value};
    int id = program.values++;
    hostOp.result = id;
    program.ops.push_back(std::move(hostOp));
    return id;
  }
  LogicalResult add(Operation *op, Kind kind, ValueRange operands,
                    std::vector<int64_t> data, Value result = Value(),
                    std::string kernel = "") {
    std::vector<int> resolved;
    if (failed(resolve(op, kind, operands, resolved)))
      return failure();
    return add(kind, std::move(resolved), std::move(data), result,
               std::move(kernel));
  }
  LogicalResult add(Kind kind, std::vector<int> operands,
                    std::vector<int64_t> data, Value result,
                    std::string kernel) {
    step::HostOp hostOp;
    hostOp.kind = kind;
    hostOp.operands = std::move(operands);
    hostOp.data = std::move(data);
    hostOp.kernel = std::move(kernel);
    if (result)
      hostOp.result = define(result);
    program.ops.push_back(std::move(hostOp));
    return success();
  }
  /// Whether `value` is an argument the runtime keeps in host memory.
  bool isHostArgument(Value value) const {
    auto arg = dyn_cast<BlockArgument>(value);
    return arg && arg.getOwner()->isEntryBlock() &&
           arg.getArgNumber() < args.size() &&
           step::isHostArg(args[arg.getArgNumber()]);
  }
  LogicalResult addArith(Operation *op);
  LogicalResult addShape(Operation *op, Kind kind, MemRefType type, Value first,
                         ValueRange dynamic, Value result,
                         std::vector<int64_t> prefix);
  LogicalResult addLaunch(gpu::LaunchFuncOp launch);
  LogicalResult addCollapse(memref::CollapseShapeOp collapse);
  LogicalResult addGemm(func::CallOp call);

  step::HostProgram &program;
  const std::vector<step::Arg> &args;
  llvm::DenseMap<Value, int> ids;
  /// The Gemm op whose fallback is the next launch, if any.
  std::optional<size_t> pendingGemm;
};

std::optional<step::HostOp::Arith> arithOf(Operation *op) {
  using A = step::HostOp::Arith;
  if (isa<arith::AddIOp>(op))
    return A::Add;
  if (isa<arith::SubIOp>(op))
    return A::Sub;
  if (isa<arith::MulIOp>(op))
    return A::Mul;
  if (isa<arith::DivSIOp>(op))
    return A::DivS;
  if (isa<arith::RemSIOp>(op))
    return A::RemS;
  if (isa<arith::CeilDivSIOp>(op))
    return A::CeilDivS;
  if (isa<arith::FloorDivSIOp>(op))
    return A::FloorDivS;
  if (isa<arith::MinSIOp>(op))
    return A::MinS;
  if (isa<arith::MaxSIOp>(op))
    return A::MaxS;
  if (isa<arith::DivUIOp>(op))
    return A::DivU;
  if (isa<arith::RemUIOp>(op))
    return A::RemU;
  if (isa<arith::MinUIOp>(op))
    return A::MinU;
  if (isa<arith::MaxUIOp>(op))
    return A::MaxU;
  if (isa<arith::SelectOp>(op))
    return A::Select;
  if (auto cmp = dyn_cast<arith::CmpIOp>(op)) {
    switch (cmp.getPredicate()) {
    case arith::CmpIPredicate::eq:
      return A::Eq;
    case arith::CmpIPredicate::ne:
      return A::Ne;
    case arith::CmpIPredicate::slt:
      return A::Slt;
    case arith::CmpIPredicate::sle:
      return A::Sle;
    case arith::CmpIPredicate::sgt:
      return A::Sgt;
    case arith::CmpIPredicate::sge:
      return A::Sge;
    case arith::CmpIPredicate::ult:
      return A::Ult;
    case arith::CmpIPredicate::ule:
      return A::Ule;
    case arith::CmpIPredicate::ugt:
      return A::Ugt;
    case arith::CmpIPredicate::uge:
      return A::Uge;
    }
  }
  return std::nullopt;
}

LogicalResult HostProgramBuilder::addArith(Operation *op) {
  if (isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtSIOp,
          arith::ExtUIOp, arith::TruncIOp>(op)) {
    Type type = op->getResult(0).getType();
    if (type.isInteger(32)) {
      return add(op, Kind::Arith, op->getOperands(),
                 {static_cast<int64_t>(Arith::Trunc32)}, op->getResult(0));
    }
    if (!type.isIndex() && !type.isInteger(64))
      return op->emitError("v4a host program: integers of ")
             << type << " on the host";
    // Same value as an int64.
    FailureOr<int> id = use(op, op->getOperand(0));
    if (failed(id))
      return failure();
    ids[op->getResult(0)] = *id;
    return success();
  }
  std::optional<Arith> arith = arithOf(op);
  if (!arith)
    return op->emitError("v4a host program: no host form for ")
           << op->getName();
  return add(op, Kind::Arith, op->getOperands(), {static_cast<int64_t>(*arith)},
             op->getResult(0));
}

LogicalResult HostProgramBuilder::addShape(Operation *op, Kind kind,
                                           MemRefType type, Value first,
                                           ValueRange dynamic, Value result,
                                           std::vector<int64_t> prefix) {
  if (!type.getLayout().isIdentity())
    return op->emitError("v4a host program: a buffer with a layout");
  std::vector<int64_t> data = std::move(prefix);
  data.push_back(type.getRank());
  for (int64_t d : type.getShape())
    data.push_back(ShapedType::isDynamic(d) ? -1 : d);
  SmallVector<Value> operands;
  if (first)
    operands.push_back(first);
  llvm::append_range(operands, dynamic);
  return add(op, kind, operands, std::move(data), result);
}

LogicalResult HostProgramBuilder::addLaunch(gpu::LaunchFuncOp launch) {
  if (launch.hasClusterSize())
    return launch.emitError("v4a host program: clusters");
  gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
  gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
  std::vector<int> extents;
  if (failed(resolve(launch, Kind::Launch,
                     {grid.x, grid.y, grid.z, block.x, block.y, block.z},
                     extents)))
    return failure();
  if (Value shared = launch.getDynamicSharedMemorySize()) {
    if (failed(resolve(launch, Kind::Launch, shared, extents)))
      return failure();
  } else {
    extents.push_back(constant(0));
  }
  auto kernel = SymbolTable::lookupNearestSymbolFrom<gpu::GPUFuncOp>(
      launch, launch.getKernel());
  if (!kernel)
    return launch.emitError("v4a host program: no kernel ")
           << launch.getKernel();
  SmallVector<bool> readOnly = readOnlyArguments(kernel);
  SmallVector<Value> operands;
  std::vector<int64_t> kinds;
  for (auto [arg, onlyRead] :
       llvm::zip_equal(launch.getKernelOperands(), readOnly)) {
    Type type = arg.getType();
    if (type.isIndex() || type.isInteger(64)) {
      kinds.push_back(static_cast<int64_t>(step::HostOp::ParamKind::I64));
    } else if (type.isInteger(32)) {
      kinds.push_back(static_cast<int64_t>(step::HostOp::ParamKind::I32));
    } else if (auto memref = dyn_cast<MemRefType>(type)) {
      if (!memref.getLayout().isIdentity())
        return launch.emitError("v4a host program: a kernel buffer with a "
                                "layout");
      kinds.push_back(
          static_cast<int64_t>(onlyRead ? step::HostOp::ParamKind::ReadBuffer
                                        : step::HostOp::ParamKind::Buffer));
    } else {
      return launch.emitError("v4a host program: a kernel argument of type ")
             << type;
    }
    operands.push_back(arg);
  }
  if (pendingGemm) {
    program.ops[*pendingGemm].data[1] =
        static_cast<int64_t>(program.ops.size() - *pendingGemm);
    pendingGemm.reset();
  }
  if (failed(resolve(launch, Kind::Launch, operands, extents)))
    return failure();
  return add(Kind::Launch, std::move(extents), std::move(kinds), Value(),
             launch.getKernelName().str());
}

/// A collapsed view: each dynamic extent is the product of its group's
/// source extents, computed on the host from the source's dimensions.
LogicalResult
HostProgramBuilder::addCollapse(memref::CollapseShapeOp collapse) {
  MemRefType type = collapse.getResultType();
  Value source = collapse.getSrc();
  FailureOr<int> sourceId = use(collapse, source);
  if (failed(sourceId))
    return failure();
  std::vector<int> extents;
  for (auto [i, group] : llvm::enumerate(collapse.getReassociationIndices())) {
    if (!type.isDynamicDim(i))
      continue;
    std::optional<int> product;
    for (int64_t d : group) {
      step::HostOp dim;
      dim.kind = Kind::Dim;
      dim.operands = {*sourceId};
      dim.data = {d};
      dim.result = program.values++;
      program.ops.push_back(dim);
      if (!product) {
        product = dim.result;
        continue;
      }
      step::HostOp mul;
      mul.kind = Kind::Arith;
      mul.operands = {*product, dim.result};
      mul.data = {static_cast<int64_t>(Arith::Mul)};
      mul.result = program.values++;
      program.ops.push_back(mul);
      product = mul.result;
    }
    extents.push_back(*product);
  }
  if (!type.getLayout().isIdentity())
    return collapse.emitError("v4a host program: a buffer with a layout");
  step::HostOp view;
  view.kind = Kind::View;
  view.operands = {*sourceId};
  view.operands.insert(view.operands.end(), extents.begin(), extents.end());
  view.data.push_back(type.getRank());
  for (int64_t d : type.getShape())
    view.data.push_back(ShapedType::isDynamic(d) ? -1 : d);
  view.result = define(collapse.getResult());
  program.ops.push_back(std::move(view));
  return success();
}

/// A library GEMM: its fallback is the launch of the loops that followed
/// the call.
LogicalResult HostProgramBuilder::addGemm(func::CallOp call) {
  using GemmType = step::HostOp::GemmType;
  StringRef callee = call.getCallee();
  bool fp8 = callee == kGemmFP8;
  if (!isLibraryGemm(callee) || call.getNumOperands() != (fp8 ? 15u : 13u))
    return call.emitError("v4a host program: an unknown library call");
  if (pendingGemm)
    return call.emitError("v4a host program: a gemm without its fallback");
  pendingGemm = program.ops.size();
  GemmType type = fp8                      ? GemmType::FP8
                  : callee == kGemmBF16F32 ? GemmType::BF16F32
                                           : GemmType::BF16;
  return add(call, Kind::Gemm, call.getOperands(),
             {static_cast<int64_t>(type), 0});
}

LogicalResult HostProgramBuilder::build(func::FuncOp func) {
  for (BlockArgument arg : func.getArguments())
    define(arg);
  for (Operation &op : func.getBody().front()) {
    LogicalResult done = success();
    if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
      auto value = dyn_cast<IntegerAttr>(constant.getValue());
      if (!value) {
        if (!op.use_empty())
          return op.emitError("v4a host program: a non-integer constant");
        continue;
      }
      done = add(&op, Kind::Const, {}, {value.getValue().getSExtValue()},
                 constant.getResult());
    } else if (auto dim = dyn_cast<memref::DimOp>(op)) {
      std::optional<int64_t> index = dim.getConstantIndex();
      if (!index)
        return op.emitError("v4a host program: a dimension not constant");
      done = add(&op, Kind::Dim, dim.getSource(), {*index}, dim.getResult());
    } else if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
      int64_t bytes =
          std::max<int64_t>(1, alloc.getType().getElementTypeBitWidth() / 8);
      done = addShape(&op, Kind::Alloc, alloc.getType(), Value(),
                      alloc.getDynamicSizes(), alloc.getResult(), {bytes});
    } else if (auto expand = dyn_cast<memref::ExpandShapeOp>(op)) {
      done = addShape(&op, Kind::View, expand.getResultType(), expand.getSrc(),
                      expand.getOutputShape(), expand.getResult(), {});
      // Dynamic output sizes: only the dynamic ones are operands.
      if (succeeded(done)) {
        step::HostOp &view = program.ops.back();
        std::vector<int> kept = {view.operands[0]};
        auto sizes = expand.getMixedOutputShape();
        for (auto [i, size] : llvm::enumerate(sizes))
          if (expand.getResultType().isDynamicDim(i))
            kept.push_back(*use(&op, cast<Value>(size)));
        view.operands = kept;
      }
    } else if (auto collapse = dyn_cast<memref::CollapseShapeOp>(op)) {
      // Collapsed sizes are products of the source's.
      done = addCollapse(collapse);
    } else if (auto cast = dyn_cast<memref::CastOp>(op)) {
      FailureOr<int> id = use(&op, cast.getSource());
      if (failed(id))
        return failure();
      ids[cast.getResult()] = *id;
    } else if (auto copy = dyn_cast<memref::CopyOp>(op)) {
      done = add(&op, Kind::Copy, {copy.getSource(), copy.getTarget()}, {});
    } else if (auto load = dyn_cast<memref::LoadOp>(op)) {
      if (!isHostArgument(load.getMemRef()))
        return op.emitError("v4a host program: a read of device memory on "
                            "the host (a size that depends on device data)");
      SmallVector<Value> operands = {load.getMemRef()};
      llvm::append_range(operands, load.getIndices());
      int64_t bytes = std::max<int64_t>(
          1, load.getMemRefType().getElementTypeBitWidth() / 8);
      done = add(&op, Kind::Load, operands, {bytes}, load.getResult());
    } else if (auto launch = dyn_cast<gpu::LaunchFuncOp>(op)) {
      done = addLaunch(launch);
    } else if (auto call = dyn_cast<func::CallOp>(op)) {
      done = addGemm(call);
    } else if (isa<memref::DeallocOp, func::ReturnOp>(op)) {
      continue;
    } else if (op.getNumResults() == 1 && op.getNumRegions() == 0) {
      done = addArith(&op);
    } else {
      return op.emitError("v4a host program: no host form for ")
             << op.getName();
    }
    if (failed(done))
      return failure();
  }
  if (pendingGemm)
    return func.emitError("v4a host program: a gemm without its fallback");
  return success();
}

/// Constant tables (memref.global) that kernels read move into the kernel
/// module.
void copyGlobalsIntoKernels(ModuleOp module) {
  for (auto kernels : module.getOps<gpu::GPUModuleOp>()) {
    OpBuilder b = OpBuilder::atBlockBegin(kernels.getBody());
    kernels.walk([&](memref::GetGlobalOp get) {
      if (kernels.lookupSymbol(get.getNameAttr()))
        return;
      if (auto global = module.lookupSymbol<memref::GlobalOp>(get.getName()))
        b.clone(*global);
    });
  }
  for (auto func : module.getOps<func::FuncOp>())
    func.walk([](memref::GetGlobalOp get) {
      if (get.use_empty())
        get.erase();
    });
}

/// The first line of ptxas's messages (in the file at `logPath`) that
/// reports an error or a fatal condition, else its first line.
std::string firstErrorOf(llvm::StringRef logPath) {
  auto messages = llvm::MemoryBuffer::getFile(logPath);
  if (!messages)
    return "ptxas failed without a message";
  llvm::StringRef all = (*messages)->getBuffer(), rest = all;
  while (!rest.empty()) {
    auto [line, next] = rest.split('\n');
    if (line.contains("error   :") || line.contains("fatal   :"))
      return line.trim().str();
    rest = next;
  }
  llvm::StringRef first = all.trim().split('\n').first;
  return first.empty() ? "ptxas failed without a message" : first.str();
}

/// The PTX assembled for `chip` by the toolkit's ptxas; empty (no error)
/// without ptxas.
std::optional<std::string> assemble(const std::string &ptx,
                                    const std::string &chip,
                                    const std::string &toolkit,
                                    std::string &error) {
  std::string ptxas = toolkit + "/bin/ptxas";
  if (!llvm::sys::fs::can_execute(ptxas))
    return std::string();
  llvm::SmallString<128> input, output;
  if (llvm::sys::fs::createTemporaryFile("v4a-kernels", "ptx", input)) {
    error = "cannot create a temporary file for ptxas";
    return std::nullopt;
  }
  llvm::FileRemover removeInput(input);
  if (llvm::sys::fs::createTemporaryFile("v4a-kernels", "cubin", output)) {
    error = "cannot create a temporary file for ptxas";
    return std::nullopt;
  }
  llvm::FileRemover removeOutput(output);
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(input, ec);
    if (!ec) {
      os << ptx;
      os.close();
      ec = os.error();
      os.clear_error();
    }
    if (ec) {
      error = "cannot write " + input.str().str() + ": " + ec.message();
      return std::nullopt;
    }
  }
  // ptxas's messages are kept for its failure: on success they are
  // advisories (performance, unusual but valid PTX) that the benchmarks'
  // notes record, not the user's concern.
  llvm::SmallString<128> logPath;
  if (llvm::sys::fs::createTemporaryFile("v4a-ptxas", "log", logPath)) {
    error = "cannot create a temporary file for ptxas";
    return std::nullopt;
  }
  llvm::FileRemover removeLog(logPath);
  std::string message;
  llvm::SmallVector<llvm::StringRef> args = {ptxas, "-arch", chip,
                                             "-o",  output,  input};
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, logPath.str(),
                                                logPath.str()};
  if (llvm::sys::ExecuteAndWait(ptxas, args, std::nullopt, redirects, 0, 0,
                                &message) != 0) {
    error = "ptxas cannot assemble the kernels: " +
            (message.empty() ? firstErrorOf(logPath) : message);
    return std::nullopt;
  }
  auto cubin = llvm::MemoryBuffer::getFile(output);
  if (!cubin) {
    error = "ptxas wrote no " + output.str().str();
    return std::nullopt;
  }
  return (*cubin)->getBuffer().str();
}

std::string firstDiagnostic(const std::string &messages) {
  return messages.empty() ? std::string("pipeline failed") : messages;
}

} // namespace

std::optional<GpuSteps> compileGpuSteps(ModuleOp module,
                                        const std::vector<std::string> &names,
                                        const std::string &chip,
                                        std::string &error,
                                        std::string *kernelIR, bool fp8Library,
                                        bool indexerFamily, bool indexerE4M3) {
  MLIRContext *context = module.getContext();
  registerOnce(context);
  std::string messages;
  ScopedDiagnosticHandler handler(context, [&](Diagnostic &diag) {
    if (messages.empty())
      messages = diag.str();
    return success();
  });
  GpuSteps steps;
  if (failed(prepareEntries(module, names, steps.functions, error)))
    return std::nullopt;
  PassManager kernels(context);
  if (failed(parsePassPipeline(
          kernelPipeline(fp8Library, indexerFamily, indexerE4M3), kernels)) ||
      failed(kernels.run(module))) {
    error = "cannot map the step functions to GPU kernels: " +
            firstDiagnostic(messages);
    return std::nullopt;
  }
  copyGlobalsIntoKernels(module);
  declareRegisterTrades(module);
  // The runtime's copies of a step's inputs and outputs; then every kernel,
  // that one too, waits for the grids before it.
  for (auto kernels : module.getOps<gpu::GPUModuleOp>())
    v4a::gpu::buildTableCopyKernel(kernels);
  PassManager chain(context);
  chain.addPass(createChainKernelLaunches());
  if (failed(chain.run(module))) {
    error = "cannot chain the GPU kernels: " + firstDiagnostic(messages);
    return std::nullopt;
  }
  if (kernelIR) {
    llvm::raw_string_ostream os(*kernelIR);
    module.print(os);
    return steps;
  }
  for (step::Function &function : steps.functions) {
    auto entry = module.lookupSymbol<func::FuncOp>(function.name + "_entry");
    if (!entry ||
        failed(HostProgramBuilder(function.host, function.args).build(entry))) {
      error = "cannot build the host program of '" + function.name +
              "': " + firstDiagnostic(messages);
      return std::nullopt;
    }
  }
  std::optional<std::string> toolkit = cudaToolkit(error);
  if (!toolkit)
    return std::nullopt;
  PassManager binary(context);
  if (failed(parsePassPipeline(binaryPipeline(chip, *toolkit), binary)) ||
      failed(binary.run(module))) {
    error = "cannot generate the GPU kernels: " + firstDiagnostic(messages);
    return std::nullopt;
  }
  for (auto object : module.getOps<gpu::BinaryOp>())
    for (Attribute attr : object.getObjects())
      steps.ptx += cast<gpu::ObjectAttr>(attr).getObject().str();
  if (steps.ptx.empty()) {
    error = "the step functions have no GPU kernels";
    return std::nullopt;
  }
  // A function left undefined would fail only when the driver loads the
  // kernels.
  size_t external = steps.ptx.find(".extern .func");
  if (external != std::string::npos) {
    error =
        "the kernels call functions libdevice did not define: " +
        steps.ptx.substr(external, steps.ptx.find('\n', external) - external);
    return std::nullopt;
  }
  std::optional<std::string> cubin = assemble(steps.ptx, chip, *toolkit, error);
  if (!cubin)
    return std::nullopt;
  steps.cubin = std::move(*cubin);
  return steps;
}

} // namespace v4a::jit
