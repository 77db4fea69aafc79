//===- StreamSchedule.h - a host program's ops over streams -----*- C++ -*-===//
//
// Places the device ops of one host program on a few streams: an op waits
// only for the earlier ops whose memory it conflicts with (one of the two
// writes bytes the other touches), so that independent chains (a layer's
// compressors, its indexer and its query path) run side by side in a
// recorded graph. Each op goes where it can start soonest, counted in ops
// (a graph's launch gaps are per node). Stream 0 is the one the program
// was given; the others start from its state at the program's start and
// rejoin it at the end, so that to the work before and after, the program
// is one op as before. Plain C++: the device records and waits on events
// where it says.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_RUNTIME_STREAMSCHEDULE_H
#define V4A_RUNTIME_STREAMSCHEDULE_H

#include <cstdint>
#include <vector>

namespace v4a::rt {

/// Device memory an op reads, or writes (and may read).
struct MemoryAccess {
  const void *begin = nullptr;
  int64_t bytes = 0;
  bool writes = false;
};

/// Whether two ops touching `a` and `b` must run in program order.
bool conflicts(const std::vector<MemoryAccess> &a,
               const std::vector<MemoryAccess> &b);

class StreamSchedule {
public:
  /// `streams` >= 1; with 1 every op goes to stream 0 in order.
  explicit StreamSchedule(int streams);

  struct Placement {
    int stream = 0;
    /// Earlier ops (by the index `place` returned) the stream must wait for
    /// before this op (the device marks each op's end once it is queued).
    std::vector<int> waits;
    /// Whether the stream, not yet used by this program, must first wait
    /// for stream 0's state at the program's start.
    bool joinsStart = false;
  };

  /// Places the next op, which touches `accesses`; its index is `size()`
  /// before the call.
  Placement place(std::vector<MemoryAccess> accesses);
  int size() const { return static_cast<int>(ops.size()); }
  int stream(int op) const { return ops[op].stream; }

  /// The ops stream 0 must wait for at the end so that it has every
  /// stream's work behind it (at most one per other stream).
  std::vector<int> rejoin() const;

private:
  struct Op {
    int stream = 0;
    int sequence = 0;
    /// Ops on the longest chain of waits that ends with this one.
    int depth = 0;
    std::vector<MemoryAccess> accesses;
    /// Per stream, how many of its ops are done when this one is.
    std::vector<int> clock;
  };

  int streamCount;
  std::vector<Op> ops;
  /// Per stream: per stream, how many of its ops precede the stream's next.
  std::vector<std::vector<int>> clocks;
  /// Per stream: the index of its last op, -1 if none.
  std::vector<int> last;
};

} // namespace v4a::rt

#endif // V4A_RUNTIME_STREAMSCHEDULE_H
