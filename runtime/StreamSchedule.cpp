//===- StreamSchedule.cpp - a host program's ops over a few streams -------===//

#include "runtime/StreamSchedule.h"

#include <algorithm>
#include <cstdint>
#include <tuple>

namespace v4a::rt {

namespace {

bool overlap(const MemoryAccess &a, const MemoryAccess &b) {
  auto begin = [](const MemoryAccess &m) {
    return reinterpret_cast<uintptr_t>(m.begin);
  };
  return a.bytes > 0 && b.bytes > 0 &&
         begin(a) < begin(b) + static_cast<uintptr_t>(b.bytes) &&
         begin(b) < begin(a) + static_cast<uintptr_t>(a.bytes);
}

} // namespace

bool conflicts(const std::vector<MemoryAccess> &a,
               const std::vector<MemoryAccess> &b) {
  // An op that names no memory may touch any: it keeps its place.
  if (a.empty() || b.empty())
    return true;
  for (const MemoryAccess &x : a)
    for (const MemoryAccess &y : b)
      if ((x.writes || y.writes) && overlap(x, y))
        return true;
  return false;
}

StreamSchedule::StreamSchedule(int streams)
    : streamCount(std::max(streams, 1)),
      clocks(streamCount, std::vector<int>(streamCount, 0)),
      last(streamCount, -1) {}

StreamSchedule::Placement
StreamSchedule::place(std::vector<MemoryAccess> accesses) {
  // The earlier ops this one must follow, latest first.
  std::vector<int> after;
  for (int j = size() - 1; j >= 0; --j)
    if (conflicts(ops[j].accesses, accesses))
      after.push_back(j);
  // Counted in ops, it can start once the deepest of them is done; it goes
  // where it starts soonest: on a stream whose last op is no deeper, one
  // that ends with an op it needs (no wait) first, then the deepest such
  // (emptier streams stay free for work that can start sooner).
  int needed = 0;
  for (int j : after)
    needed = std::max(needed, ops[j].depth);
  auto tailDepth = [&](int s) { return last[s] < 0 ? 0 : ops[last[s]].depth; };
  auto rank = [&](int s) {
    bool continues = last[s] >= 0 && std::find(after.begin(), after.end(),
                                               last[s]) != after.end();
    return std::make_tuple(std::max(tailDepth(s), needed), !continues,
                           -tailDepth(s), s);
  };
  Placement placement;
  for (int s = 1; s < streamCount; ++s)
    if (rank(s) < rank(placement.stream))
      placement.stream = s;
  int s = placement.stream;
  placement.joinsStart = s != 0 && last[s] < 0;
  std::vector<int> &clock = clocks[s];
  for (int j : after) {
    const Op &before = ops[j];
    if (clock[before.stream] >= before.sequence)
      continue; // Already behind it, through its stream or another wait.
    placement.waits.push_back(j);
    for (int k = 0; k < streamCount; ++k)
      clock[k] = std::max(clock[k], before.clock[k]);
  }
  Op op;
  op.stream = s;
  op.depth = std::max(tailDepth(s), needed) + 1;
  op.sequence = ++clock[s];
  op.accesses = std::move(accesses);
  op.clock = clock;
  last[s] = size();
  ops.push_back(std::move(op));
  return placement;
}

std::vector<int> StreamSchedule::rejoin() const {
  std::vector<int> tails;
  for (int s = 1; s < streamCount; ++s)
    if (last[s] >= 0 && clocks[0][s] < ops[last[s]].sequence)
      tails.push_back(last[s]);
  return tails;
}

} // namespace v4a::rt
