//===- RoPEFrequencies.h - the rotary frequencies of a rope op --*- C++ -*-===//

#ifndef V4A_PASSES_CONVERSION_V4ATOCPU_ROPEFREQUENCIES_H
#define V4A_PASSES_CONVERSION_V4ATOCPU_ROPEFREQUENCIES_H

#include "dialects/V4A/IR/V4AOps.h"

namespace v4a {

/// The RoPE frequencies of the specification (section 2) as f32, rope_dim/2
/// of them, interpolated by `yarn` when present: the table the loop and the
/// GPU lowerings both read.
llvm::SmallVector<float> ropeFrequencies(int64_t ropeDim, double theta,
                                         YarnAttr yarn);

} // namespace v4a

#endif // V4A_PASSES_CONVERSION_V4ATOCPU_ROPEFREQUENCIES_H
