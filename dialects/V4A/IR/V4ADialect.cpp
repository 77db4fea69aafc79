//===- V4ADialect.cpp - v4a dialect, attributes and types -----------------===//

#include "dialects/V4A/IR/V4ADialect.h"
#include "core/CacheLayout.h"
#include "dialects/V4A/IR/V4AOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace v4a;

#include "dialects/V4A/IR/V4ADialect.cpp.inc"
#include "dialects/V4A/IR/V4AEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/V4A/IR/V4AAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/V4A/IR/V4ATypes.cpp.inc"

void V4ADialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/V4A/IR/V4AOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/V4A/IR/V4AAttrs.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "dialects/V4A/IR/V4ATypes.cpp.inc"
      >();
}

LogicalResult YarnAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               APFloat factorValue, int64_t originalMaxPosition,
                               APFloat betaFastValue, APFloat betaSlowValue) {
  double factor = factorValue.convertToDouble();
  double betaFast = betaFastValue.convertToDouble();
  double betaSlow = betaSlowValue.convertToDouble();
  if (!(factor > 0.0))
    return emitError() << "yarn factor must be positive, got " << factor;
  if (originalMaxPosition < 0)
    return emitError() << "yarn original_max_position must be >= 0, got "
                       << originalMaxPosition;
  if (!(betaFast > 0.0) || !(betaSlow > 0.0))
    return emitError() << "yarn beta_fast and beta_slow must be positive";
  return success();
}

/// `keyword = value` of the plan's printed form.
static ParseResult parseField(AsmParser &parser, StringRef keyword,
                              int64_t &value) {
  return failure(parser.parseKeyword(keyword) || parser.parseEqual() ||
                 parser.parseInteger(value));
}

Attribute KVPlanAttr::parse(AsmParser &parser, Type) {
  int64_t contextTokens, pageSize, alignment, bytes;
  ArrayAttr buffers;
  if (parser.parseLess() ||
      parseField(parser, "context_tokens", contextTokens) ||
      parser.parseComma() || parseField(parser, "page_size", pageSize) ||
      parser.parseComma() || parseField(parser, "alignment", alignment) ||
      parser.parseComma() || parseField(parser, "bytes", bytes) ||
      parser.parseComma() || parser.parseKeyword("buffers") ||
      parser.parseEqual() || parser.parseAttribute(buffers) ||
      parser.parseGreater())
    return {};
  if (!llvm::all_of(buffers, llvm::IsaPred<CacheBufferAttr>)) {
    parser.emitError(parser.getNameLoc(),
                     "kv_plan buffers must all be #v4a.buffer attributes");
    return {};
  }
  return KVPlanAttr::get(parser.getContext(), contextTokens, pageSize,
                         alignment, bytes, buffers);
}

void KVPlanAttr::print(AsmPrinter &printer) const {
  printer << "<context_tokens = " << getContextTokens()
          << ", page_size = " << getPageSize()
          << ", alignment = " << getAlignment() << ", bytes = " << getBytes()
          << ", buffers = [";
  llvm::interleave(
      getBuffers(),
      [&](Attribute buffer) {
        printer.getStream() << "\n      ";
        printer.printAttribute(buffer);
      },
      [&] { printer << ","; });
  printer << "]>";
}

layout::RowKind v4a::toRowKind(CacheLayout layout) {
  switch (layout) {
  case CacheLayout::BF16:
    return layout::RowKind::BF16;
  case CacheLayout::FP8Model1:
    return layout::RowKind::FP8Model1;
  case CacheLayout::MXFP8:
    return layout::RowKind::MXFP8;
  case CacheLayout::IndexBF16:
    return layout::RowKind::IndexBF16;
  case CacheLayout::IndexFP8:
    return layout::RowKind::IndexFP8;
  case CacheLayout::IndexMXFP4:
    return layout::RowKind::IndexMXFP4;
  case CacheLayout::F32:
    return layout::RowKind::F32;
  }
  llvm_unreachable("unknown cache layout");
}

LogicalResult KVCacheType::verify(function_ref<InFlightDiagnostic()> emitError,
                                  CacheLayout cacheLayout, int64_t dim,
                                  int64_t pageSize) {
  if (pageSize <= 0)
    return emitError() << "kv_cache page_size must be positive, got "
                       << pageSize;
  std::string why;
  if (!layout::describeRow(toRowKind(cacheLayout), dim, &why))
    return emitError() << "kv_cache<" << stringifyCacheLayout(cacheLayout)
                       << ", dim = " << dim << ">: " << why;
  return success();
}
