//===- Collective.h - sums across GPUs through NCCL -------------*- C++ -*-===//
//
// The all-reduce of tensor-parallel ranks (each rank one GPU): NCCL
// (libnccl.so.2, or the file $V4A_NCCL_LIBRARY names) is opened at run time
// like the driver, so the runtime builds and runs without it; a missing
// library is one error line. Communicators are non-blocking, so that a rank
// that never joins, or a peer that fails, is an error after a deadline
// ($V4A_NCCL_TIMEOUT seconds, default 120) instead of a hang. Plain C++.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_RUNTIME_COLLECTIVE_H
#define V4A_RUNTIME_COLLECTIVE_H

#include <array>
#include <cstdint>
#include <memory>
#include <string>

namespace v4a::rt {

/// A communicator's unique id: rank 0 makes it, every rank joins with it.
struct CollectiveId {
  std::array<char, 128> bytes{};
};

class Collective {
public:
  /// A fresh id for a communicator, or false with `error`.
  static bool makeId(CollectiveId &id, std::string &error);
  /// Joins communicator `id` as `rank` of `world` on the GPU whose context
  /// is current on the calling thread; returns once every rank has joined.
  static std::unique_ptr<Collective> join(const CollectiveId &id, int rank,
                                          int world, std::string &error);
  /// A communicator the caller made and keeps (an ncclComm_t); it must have
  /// been made blocking or settled by the caller before it is adopted.
  static std::unique_ptr<Collective> adopt(void *comm, std::string &error);
  ~Collective();

  int rank() const { return myRank; }
  int world() const { return size; }
  /// Sums `count` bf16 values at `data` (device memory of this rank's GPU)
  /// over every rank, in place, queued on `stream` (a CUstream; recorded
  /// when the stream records a graph). Every rank's sum is the same bits.
  bool allReduceBF16(void *data, int64_t count, void *stream,
                     std::string &error);

  struct Library;

private:
  Collective() = default;
  /// A communicator-less Collective over the process's NCCL.
  static std::unique_ptr<Collective> withLibrary(bool owned,
                                                 std::string &error);
  bool settle(const std::string &what, std::string &error);
  void drop();

  Library *library = nullptr;
  void *comm = nullptr;
  bool owned = false;
  int myRank = 0, size = 1;
};

/// Writes `id` to `path` for the other processes of a run: a new file (an
/// existing one is never replaced), readable by its owner alone.
bool publishCollectiveId(const std::string &path, const CollectiveId &id,
                         std::string &error);
/// Reads the id rank 0 published at `path`, waiting for it up to the
/// collective deadline.
bool readCollectiveId(const std::string &path, CollectiveId &id,
                      std::string &error);

} // namespace v4a::rt

#endif // V4A_RUNTIME_COLLECTIVE_H
