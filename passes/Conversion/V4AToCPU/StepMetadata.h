//===- StepMetadata.h - per-token rows of a step's metadata -----*- C++ -*-===//
//
// The rows one token of a batched step reads and writes (v4a.step_window,
// v4a.step_compressed), emitted for token `t` over buffers: the CPU lowering
// loops over the tokens, a GPU kernel gives each thread one token (or a
// few of its window rows).
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

/// The window rows of a token that one GPU thread emits: a thread per row
/// loads the token's four values for each (1 M threads at a prefill of
/// 8,192 tokens), a thread per token leaves most of the GPU idle at decode.
int64_t windowRowsPerThread(int64_t window);

/// attend[t, 0..window) and store[t] of v4a.step_window; with `group`,
/// only its windowRowsPerThread rows of attend[t] (and store[t] when
/// `group` is 0).
void emitWindowRows(cpu::LoopEmitter &e, const StepTokens &in,
                    mlir::Value tokens, int64_t window, mlir::Value attend,
                    mlir::Value store, mlir::Value t,
                    mlir::Value group = mlir::Value());

/// base[t] and complete[t] of v4a.step_compressed.
void emitCompressedRows(cpu::LoopEmitter &e, const StepTokens &in,
                        int64_t ratio, int64_t slotRows, mlir::Value base,
                        mlir::Value complete, mlir::Value t);

} // namespace v4a

#endif // V4A_PASSES_CONVERSION_V4ATOCPU_STEPMETADATA_H
