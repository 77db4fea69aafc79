//===- FileIO.h - bounded reads and writes that never damage a target -*- C++ -*-===//
//
// Every file the tools read or write goes through here. Reads refuse
// directories and stop at a stated limit, so `/dev/zero` or a huge file is
// an error line, not an out-of-memory kill. Writes keep what the user owns:
// a regular file (or a new one) is replaced atomically through a unique
// temporary file in its directory with its mode kept, a symlink is followed
// to its target, and a device, FIFO or "-" (standard output) is written in
// place. On failure an existing file is untouched. Plain C++ and POSIX.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_RUNTIME_FILEIO_H
#define V4A_RUNTIME_FILEIO_H

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace v4a::io {

/// Limits for reads: a config or an index is small; a checkpoint is bounded by
/// the machine's memory.
constexpr uint64_t kConfigLimit = uint64_t(64) << 20;

/// The machine's physical memory in bytes, or nothing when unknown.
std::optional<uint64_t> physicalMemory();

/// "12.5 GiB" style text for a byte count.
std::string formatBytes(uint64_t bytes);

/// Reads `path` ("-" is standard input) whole. A directory, an unreadable
/// file, or more than `limit` bytes is an error naming the path and the limit;
/// `what` names the kind of file in that message ("config", "checkpoint").
std::optional<std::string> readFile(const std::string &path, uint64_t limit,
                                    std::string_view what, std::string &error);

/// Writes `bytes` to `path` as described above.
bool writeFile(const std::string &path, std::string_view bytes,
               std::string &error);

} // namespace v4a::io

#endif // V4A_RUNTIME_FILEIO_H
