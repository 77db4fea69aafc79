//===- V4ADialect.h - v4a dialect, attributes and types ---------*- C++ -*-===//

#ifndef V4A_DIALECTS_V4A_IR_V4ADIALECT_H
#define V4A_DIALECTS_V4A_IR_V4ADIALECT_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"

#include "core/CacheLayout.h"

#include "dialects/V4A/IR/V4ADialect.h.inc"
#include "dialects/V4A/IR/V4AEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/V4A/IR/V4AAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/V4A/IR/V4ATypes.h.inc"

namespace v4a {
/// The row layout a cache type's layout enum stands for.
layout::RowKind toRowKind(CacheLayout layout);
} // namespace v4a

#endif // V4A_DIALECTS_V4A_IR_V4ADIALECT_H
