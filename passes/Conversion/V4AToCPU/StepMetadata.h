//===- StepMetadata.h - per-token rows of a step's metadata -----*- C++ -*-===//
//
// The rows one token of a batched step reads and writes (v4a.step_window,
// v4a.step_compressed), emitted for token `t` over buffers: the CPU lowering
// loops over the tokens, a GPU kernel gives each thread one token.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_PASSES_CONVERSION_V4ATOCPU_STEPMETADATA_H
#define V4A_PASSES_CONVERSION_V4ATOCPU_STEPMETADATA_H

#include "passes/Conversion/V4AToCPU/LoopEmitter.h"

namespace v4a {

/// The packed tokens' positions, sequence slots and first/last rows ([T]).
struct StepTokens {
  mlir::Value positions, slots, first, last;
};

/// attend[t, 0..window) and store[t] of v4a.step_window; with `only`,
/// attend[t, only] alone (and store[t] when `only` is 0).
void emitWindowRows(cpu::LoopEmitter &e, const StepTokens &in,
                    mlir::Value tokens, int64_t window, mlir::Value attend,
                    mlir::Value store, mlir::Value t,
                    mlir::Value only = mlir::Value());

/// base[t] and complete[t] of v4a.step_compressed.
void emitCompressedRows(cpu::LoopEmitter &e, const StepTokens &in,
                        int64_t ratio, int64_t slotRows, mlir::Value base,
                        mlir::Value complete, mlir::Value t);

} // namespace v4a

#endif // V4A_PASSES_CONVERSION_V4ATOCPU_STEPMETADATA_H
