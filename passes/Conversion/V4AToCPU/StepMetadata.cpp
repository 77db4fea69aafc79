//===- StepMetadata.cpp - per-token rows of a step's metadata -------------===//

#include "passes/Conversion/V4AToCPU/StepMetadata.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;

namespace v4a {

using IP = arith::CmpIPredicate;

int64_t windowRowsPerThread(int64_t window) { return window % 4 == 0 ? 4 : 1; }

void emitWindowRows(cpu::LoopEmitter &e, const StepTokens &in, Value tokens,
                    int64_t window, Value attend, Value store, Value t,
                    Value group) {
  Value zero = e.index(0), one = e.index(1), minusOne = e.index(-1);
  Value w = e.index(window);
  Value p = e.loadIndex(in.positions, {t});
  Value ring = e.mul(e.loadIndex(in.slots, {t}), w);
  Value firstRow = e.loadIndex(in.first, {t});
  // Positions of this sequence in the step: start .. lastPosition.
  Value start = e.sub(p, e.sub(t, firstRow));
  Value lastPosition = e.add(p, e.sub(e.loadIndex(in.last, {t}), t));
  Value oldest = e.max(zero, e.add(e.sub(p, w), one));
  auto attendRow = [&](Value j) {
    Value q = e.add(oldest, j);
    Value inStep = e.cmp(IP::sge, q, start);
    Value fromRing = e.add(tokens, e.add(ring, e.rem(q, w)));
    Value fromStep = e.add(firstRow, e.sub(q, start));
    Value row = e.select(inStep, fromStep, fromRing);
    e.storeInt(e.select(e.cmp(IP::sle, q, p), row, minusOne), attend, {t, j});
  };
  auto storeRow = [&] {
    Value kept = e.cmp(IP::slt, e.sub(lastPosition, p), w);
    e.storeInt(e.select(kept, e.add(ring, e.rem(p, w)), minusOne), store, {t});
  };
  if (!group) {
    e.loop(zero, w, attendRow);
    storeRow();
    return;
  }
  int64_t rows = windowRowsPerThread(window);
  Value groupStart = e.mul(group, e.index(rows));
  for (int64_t i = 0; i < rows; ++i)
    attendRow(e.add(groupStart, e.index(i)));
  e.ifThen(e.cmp(IP::eq, group, zero), storeRow);
}

void emitCompressedRows(cpu::LoopEmitter &e, const StepTokens &in,
                        int64_t ratio, int64_t slotRows, Value base,
                        Value complete, Value t) {
  Value zero = e.index(0), one = e.index(1), minusOne = e.index(-1);
  Value r = e.index(ratio);
  Value next = e.add(e.loadIndex(in.positions, {t}), one);
  Value first = e.mul(e.loadIndex(in.slots, {t}), e.index(slotRows));
  e.storeInt(first, base, {t});
  Value completes = e.cmp(IP::eq, e.rem(next, r), zero);
  Value row = e.sub(e.add(first, e.div(next, r)), one);
  e.storeInt(e.select(completes, row, minusOne), complete, {t});
}

} // namespace v4a
