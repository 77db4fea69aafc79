//===- StepGemms.h - the library products of a step function ----*- C++ -*-===//
//
// The Gemm ops a step function's host program issues for a given token
// count, found by running the program over a device that only records: no
// memory is touched and nothing is launched. The runtime plans the
// library's algorithms from them at load, and the GEMM check on the GPU
// machine tests exactly these shapes. Plain C++.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_RUNTIME_STEPGEMMS_H
#define V4A_RUNTIME_STEPGEMMS_H

#include "runtime/HostProgram.h"

#include <string>
#include <vector>

namespace v4a::rt {

/// The Gemm ops of `function` in a step of `tokens` tokens, in program
/// order (their buffer pointers null). Arguments take their signature's
/// shapes; caches count as unbounded and device reads as zero, so only the
/// sizes that follow from the token count and the weights are meaningful.
bool stepGemms(const step::Function &function, int64_t tokens,
               std::vector<GemmCall> &calls, std::string &error);

/// The workspace bytes (workspaceBytes of each) of the temporaries
/// `function`'s host program allocates in a step of `tokens` tokens whose
/// context bound is `context`.
bool stepTemporaryBytes(const step::Function &function, int64_t tokens,
                        int64_t context, int64_t &bytes, std::string &error);

/// Whether two calls are the same product shape (pointers aside).
bool sameGemmShape(const GemmCall &a, const GemmCall &b);

/// A product shape and the first step that issues it.
struct StepProduct {
  /// Index into the functions.
  int function = -1;
  int64_t tokens = 0;
  GemmCall call;
};

/// The distinct product shapes the layers' step calls of `calls` issue at
/// each of `tokenCounts`, in the order they first appear.
bool distinctStepProducts(const std::vector<step::Function> &functions,
                          const std::vector<step::Call> &calls,
                          const std::vector<int64_t> &tokenCounts,
                          std::vector<StepProduct> &products,
                          std::string &error);

/// "bf16 gemm BATCH x TOKENS x OUT x IN" (fp8, bf16-f32 likewise).
std::string describeGemm(const GemmCall &call);

/// What a library product reads (A, B, the fp8 scales) and writes (D).
std::vector<MemoryAccess> gemmTouches(const GemmCall &call);

/// A recorded graph of a step function: its device ops (launches, library
/// GEMMs, copies) and the longest chain of them that wait for one another
/// when a StreamSchedule spreads them over `streams` streams.
struct GraphShape {
  int64_t ops = 0;
  int64_t depth = 0;
};
bool stepGraphShape(const step::Function &function, int64_t tokens,
                    int64_t context, int streams, GraphShape &shape,
                    std::string &error);

} // namespace v4a::rt

#endif // V4A_RUNTIME_STEPGEMMS_H
