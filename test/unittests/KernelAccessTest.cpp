//===- KernelAccessTest.cpp - which buffers a kernel only reads -----------===//
//
// A buffer argument counts as read-only only when every use is seen to
// read: a false "read-only" would let the runtime run a writer beside its
// readers. Anything the walk cannot see through counts as a write.
//
//===----------------------------------------------------------------------===//

#include "lib/JIT/KernelAccess.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;

namespace {

constexpr const char *kKernels = R"mlir(
gpu.module @kernels {
  // Loads, a view that is loaded, a vector load, a dimension: reads.
  // A store, a store through a view: writes.
  gpu.func @direct(%a: memref<?xf32>, %b: memref<?xf32>, %c: memref<8x8xf32>,
                   %d: memref<8x8xf32>, %e: memref<?xf32>, %n: index) kernel {
    %c0 = arith.constant 0 : index
    %x = memref.load %a[%c0] : memref<?xf32>
    memref.store %x, %b[%c0] : memref<?xf32>
    %row = memref.subview %c[0, 0] [1, 8] [1, 1] : memref<8x8xf32> to memref<8xf32, strided<[1]>>
    %y = memref.load %row[%c0] : memref<8xf32, strided<[1]>>
    %out = memref.subview %d[0, 0] [1, 8] [1, 1] : memref<8x8xf32> to memref<8xf32, strided<[1]>>
    memref.store %y, %out[%c0] : memref<8xf32, strided<[1]>>
    %v = vector.load %e[%c0] : memref<?xf32>, vector<4xf32>
    %size = memref.dim %e, %c0 : memref<?xf32>
    gpu.return
  }
  // Addresses: loaded from or copied from (read); stored to, or handed to
  // code the walk cannot see into (write).
  gpu.func @addresses(%a: memref<?xi8>, %b: memref<?xi8>, %c: memref<?xi8>,
                      %d: memref<?xi8>, %smem: memref<64xi8, #gpu.address_space<workgroup>>) kernel {
    %c16 = arith.constant 16 : i64
    %pa = memref.extract_aligned_pointer_as_index %a : memref<?xi8> -> index
    %ia = arith.index_cast %pa : index to i64
    %ja = arith.addi %ia, %c16 : i64
    %qa = llvm.inttoptr %ja : i64 to !llvm.ptr<1>
    %x = llvm.load %qa : !llvm.ptr<1> -> i32
    %pb = memref.extract_aligned_pointer_as_index %b : memref<?xi8> -> index
    %ib = arith.index_cast %pb : index to i64
    %qb = llvm.inttoptr %ib : i64 to !llvm.ptr<1>
    llvm.store %x, %qb : i32, !llvm.ptr<1>
    %pc = memref.extract_aligned_pointer_as_index %c : memref<?xi8> -> index
    %ic = arith.index_cast %pc : index to i64
    %qc = llvm.inttoptr %ic : i64 to !llvm.ptr<1>
    %ps = memref.extract_aligned_pointer_as_index %smem : memref<64xi8, #gpu.address_space<workgroup>> -> index
    %is = arith.index_cast %ps : index to i64
    %qs = llvm.inttoptr %is : i64 to !llvm.ptr<3>
    nvvm.cp.async.shared.global %qs, %qc, 16, cache = cg : !llvm.ptr<3>, !llvm.ptr<1>
    %pd = memref.extract_aligned_pointer_as_index %d : memref<?xi8> -> index
    %id = arith.index_cast %pd : index to i64
    llvm.inline_asm has_side_effects "st.global.u32 [$0], 0;", "l" %id : (i64) -> ()
    gpu.return
  }
}
)mlir";

class KernelAccessTest : public ::testing::Test {
protected:
  void SetUp() override {
    context.loadDialect<arith::ArithDialect, gpu::GPUDialect, LLVM::LLVMDialect,
                        NVVM::NVVMDialect, memref::MemRefDialect,
                        vector::VectorDialect>();
    module = parseSourceString<ModuleOp>(kKernels, &context);
    ASSERT_TRUE(module);
  }
  SmallVector<bool> readOnly(StringRef kernel) {
    auto gpuModule = *module->getOps<gpu::GPUModuleOp>().begin();
    return v4a::jit::readOnlyArguments(
        gpuModule.lookupSymbol<gpu::GPUFuncOp>(kernel));
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

TEST_F(KernelAccessTest, LoadsAndViewsReadStoresWrite) {
  EXPECT_EQ(readOnly("direct"),
            (SmallVector<bool>{true, false, true, false, true, false}));
}

TEST_F(KernelAccessTest, AddressesLoadedOrCopiedFromAreRead) {
  EXPECT_EQ(readOnly("addresses"),
            (SmallVector<bool>{true, false, true, false, false}));
}

} // namespace
