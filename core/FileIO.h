//===- FileIO.h - bounded reads and safe writes -----------------*- C++ -*-===//
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

#ifndef V4A_CORE_FILEIO_H
#define V4A_CORE_FILEIO_H

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace v4a::io {

/// Limits for reads: a config or an index is small; a checkpoint is bounded by
/// the machine's memory.
constexpr uint64_t kConfigLimit = uint64_t(64) << 20;

/// The memory this process may use, in bytes: the machine's physical memory,
/// or a smaller cgroup limit; nothing when unknown.
std::optional<uint64_t> physicalMemory();

/// Whether `bytes` fit in the machine's memory; otherwise `error` says
/// "WHAT needs N, more than this machine's M of memory".
bool fitsInMemory(double bytes, const std::string &what, std::string &error);

/// "12.5 GiB" style text for a byte count.
std::string formatBytes(uint64_t bytes);
/// formatBytes of a size computed in floating point ("more than 1 EiB" for
/// absurd ones).
std::string formatSize(double bytes);

/// An open file being read from the start: a regular file knows its size,
/// a device or FIFO does not.
class InputFile {
public:
  /// Opens `path` ("-" is standard input); a directory or an unreadable file
  /// is an error naming the path and `what` it should be.
  static std::optional<InputFile>
  open(const std::string &path, std::string_view what, std::string &error);
  InputFile(InputFile &&other) noexcept;
  InputFile &operator=(InputFile &&) = delete;
  ~InputFile();

  bool isRegular() const { return regular; }
  /// The size of a regular file.
  uint64_t size() const { return bytes; }
  /// Appends up to `count` bytes to `out`; fewer only at the end of the file.
  bool read(std::string &out, uint64_t count, std::string &error);
  /// Reads exactly `count` bytes at `offset` of a regular file into `out`
  /// (without moving the file's position, which standard input shares).
  bool readAt(uint8_t *out, uint64_t offset, uint64_t count,
              std::string &error);

private:
  InputFile(std::string path, int fd, bool regular, uint64_t bytes)
      : path(std::move(path)), fd(fd), regular(regular), bytes(bytes) {}
  std::string path;
  int fd;
  bool regular;
  uint64_t bytes;
};

/// Reads `path` ("-" is standard input) whole. A directory, an unreadable
/// file, or more than `limit` bytes is an error naming the path and the limit;
/// `what` names the kind of file in that message ("config", "checkpoint").
std::optional<std::string> readFile(const std::string &path, uint64_t limit,
                                    std::string_view what, std::string &error);

/// Writes `bytes` to `path` as described above.
bool writeFile(const std::string &path, std::string_view bytes,
               std::string &error);

} // namespace v4a::io

#endif // V4A_CORE_FILEIO_H
