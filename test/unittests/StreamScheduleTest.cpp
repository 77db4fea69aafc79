//===- StreamScheduleTest.cpp - a host program's ops over a few streams ---===//
//
// Every two ops that conflict (one writes bytes the other touches) must run
// in program order through the streams' order and the waits the schedule
// asks for; ops that do not conflict should land on streams side by side.
//
//===----------------------------------------------------------------------===//

#include "runtime/StreamSchedule.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

using namespace v4a::rt;

namespace {

char memory[4096];

MemoryAccess reads(int at, int bytes) { return {memory + at, bytes, false}; }
MemoryAccess writes(int at, int bytes) { return {memory + at, bytes, true}; }

/// Whether op `i` finishes before op `j` starts, from the placements alone:
/// the order of ops on one stream, and the waits.
class HappensBefore {
public:
  void add(const StreamSchedule::Placement &placement) {
    int op = static_cast<int>(edges.size());
    edges.emplace_back();
    for (int waited : placement.waits)
      edges[op].push_back(waited);
    auto it = lastOn.find(placement.stream);
    if (it != lastOn.end())
      edges[op].push_back(it->second);
    lastOn[placement.stream] = op;
  }
  bool precedes(int i, int j) const {
    std::vector<int> stack = {j};
    std::vector<bool> seen(edges.size(), false);
    while (!stack.empty()) {
      int at = stack.back();
      stack.pop_back();
      for (int before : edges[at]) {
        if (before == i)
          return true;
        if (!seen[before]) {
          seen[before] = true;
          stack.push_back(before);
        }
      }
    }
    return false;
  }

private:
  std::vector<std::vector<int>> edges;
  std::map<int, int> lastOn;
};

TEST(StreamScheduleTest, OneStreamKeepsProgramOrder) {
  StreamSchedule schedule(1);
  for (int i = 0; i < 5; ++i) {
    StreamSchedule::Placement p = schedule.place({writes(64 * i, 64)});
    EXPECT_EQ(p.stream, 0);
    EXPECT_TRUE(p.waits.empty());
    EXPECT_FALSE(p.joinsStart);
  }
  EXPECT_TRUE(schedule.rejoin().empty());
}

TEST(StreamScheduleTest, IndependentChainsRunSideBySideAndJoin) {
  StreamSchedule schedule(4);
  // Chain a: 0 -> 2; chain b: 1 -> 3; op 4 reads both results.
  auto a0 = schedule.place({reads(0, 64), writes(1024, 64)});
  auto b0 = schedule.place({reads(0, 64), writes(2048, 64)});
  auto a1 = schedule.place({reads(1024, 64), writes(1088, 64)});
  auto b1 = schedule.place({reads(2048, 64), writes(2112, 64)});
  EXPECT_EQ(a0.stream, 0);
  EXPECT_NE(b0.stream, 0);
  EXPECT_TRUE(b0.joinsStart);
  EXPECT_EQ(a1.stream, a0.stream);
  EXPECT_EQ(b1.stream, b0.stream);
  EXPECT_TRUE(a1.waits.empty());
  EXPECT_TRUE(b1.waits.empty());
  // Behind one chain (the first stream of the two), waiting for the other.
  auto join = schedule.place({reads(1088, 64), reads(2112, 64)});
  EXPECT_EQ(join.stream, a1.stream);
  EXPECT_EQ(join.waits, std::vector<int>{3});
  EXPECT_TRUE(schedule.rejoin().empty());
}

TEST(StreamScheduleTest, ReadersShareAndAWriterWaitsForThemAll) {
  StreamSchedule schedule(3);
  schedule.place({writes(0, 256)});
  auto r1 = schedule.place({reads(0, 128), writes(512, 8)});
  auto r2 = schedule.place({reads(128, 128), writes(1024, 8)});
  // Both read what op 0 wrote: behind it, one of them through a wait.
  EXPECT_EQ(r1.stream, 0);
  EXPECT_NE(r2.stream, 0);
  EXPECT_EQ(r2.waits, std::vector<int>{0});
  // Overwriting the read bytes must wait for both readers.
  // Behind one reader, and a wait for the other.
  auto w = schedule.place({writes(64, 128)});
  EXPECT_EQ(w.stream, r1.stream);
  EXPECT_EQ(w.waits, std::vector<int>{2});
  EXPECT_TRUE(schedule.rejoin().empty());
}

TEST(StreamScheduleTest, AnOpGoesWhereItStartsSoonest) {
  StreamSchedule schedule(2);
  auto a = schedule.place({writes(0, 64)});
  auto b0 = schedule.place({writes(256, 64)});
  auto b1 = schedule.place({reads(256, 64), writes(320, 64)});
  auto b2 = schedule.place({reads(320, 64), writes(384, 64)});
  EXPECT_NE(b0.stream, a.stream);
  EXPECT_EQ(b2.stream, b0.stream);
  auto other = schedule.place({writes(1024, 64)});
  EXPECT_EQ(other.stream, a.stream);
  // It needs only `a`: behind `other` (two ops deep), not behind the
  // three-op chain on the stream that was used longest ago.
  auto reader = schedule.place({reads(0, 64), writes(2048, 64)});
  EXPECT_EQ(reader.stream, a.stream);
  EXPECT_TRUE(reader.waits.empty());
  (void)b1;
}

TEST(StreamScheduleTest, AnOpWithoutAccessesIsABarrier) {
  StreamSchedule schedule(4);
  schedule.place({writes(0, 64)});
  schedule.place({writes(64, 64)});
  auto barrier = schedule.place({});
  EXPECT_EQ(barrier.waits.size(), 1u);
  auto next = schedule.place({writes(512, 64)});
  EXPECT_EQ(next.stream, barrier.stream);
  EXPECT_TRUE(next.waits.empty());
}

TEST(StreamScheduleTest, RandomProgramsOrderEveryConflict) {
  std::mt19937 random(7);
  int concurrentPairs = 0;
  for (int trial = 0; trial < 200; ++trial) {
    int streams = 1 + trial % 4;
    StreamSchedule schedule(streams);
    HappensBefore order;
    std::vector<std::vector<MemoryAccess>> accesses;
    int ops = 5 + random() % 40;
    int sideBySide = 0;
    for (int i = 0; i < ops; ++i) {
      std::vector<MemoryAccess> touched;
      int count = random() % 4;
      for (int k = 0; k < count; ++k) {
        int at = random() % 4000, bytes = 1 + random() % 96;
        touched.push_back({memory + at, bytes, random() % 3 == 0});
      }
      accesses.push_back(touched);
      StreamSchedule::Placement p = schedule.place(touched);
      ASSERT_GE(p.stream, 0);
      ASSERT_LT(p.stream, streams);
      for (int waited : p.waits)
        ASSERT_LT(waited, i);
      order.add(p);
    }
    // Rejoined, stream 0 has every op behind it.
    StreamSchedule::Placement end;
    end.waits = schedule.rejoin();
    order.add(end);
    for (int j = 0; j < ops; ++j) {
      for (int i = 0; i < j; ++i) {
        if (conflicts(accesses[i], accesses[j])) {
          EXPECT_TRUE(order.precedes(i, j))
              << "trial " << trial << ": op " << i << " before op " << j;
        } else if (!order.precedes(i, j)) {
          ++sideBySide;
        }
      }
      EXPECT_TRUE(order.precedes(j, ops)) << "trial " << trial;
    }
    if (streams == 1) {
      EXPECT_EQ(sideBySide, 0);
    }
    concurrentPairs += sideBySide;
  }
  // Independent ops do get streams of their own.
  EXPECT_GT(concurrentPairs, 1000);
}

} // namespace
