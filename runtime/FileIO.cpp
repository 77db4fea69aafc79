//===- FileIO.cpp - bounded reads and writes that never damage a target ---===//

#include "runtime/FileIO.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace v4a::io {

static std::string systemError() { return std::strerror(errno); }

std::optional<uint64_t> physicalMemory() {
  long pages = ::sysconf(_SC_PHYS_PAGES), pageSize = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || pageSize <= 0)
    return std::nullopt;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(pageSize);
}

std::string formatBytes(uint64_t bytes) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  if (unit == 0)
    std::snprintf(text, sizeof(text), "%llu B",
                  static_cast<unsigned long long>(bytes));
  else
    std::snprintf(text, sizeof(text), "%.1f %s", value, units[unit]);
  return text;
}

namespace {
/// Closes a descriptor when it goes out of scope.
struct Descriptor {
  int fd;
  explicit Descriptor(int fd) : fd(fd) {}
  ~Descriptor() {
    if (fd >= 0)
      ::close(fd);
  }
  Descriptor(const Descriptor &) = delete;
  Descriptor &operator=(const Descriptor &) = delete;
};
} // namespace

std::optional<std::string> readFile(const std::string &path, uint64_t limit,
                                    std::string_view what, std::string &error) {
  bool stdinPath = path == "-";
  Descriptor file(stdinPath ? ::dup(0) : ::open(path.c_str(), O_RDONLY));
  struct stat status;
  if (file.fd < 0 || ::fstat(file.fd, &status) != 0) {
    error = path + ": cannot open: " + systemError();
    return std::nullopt;
  }
  if (S_ISDIR(status.st_mode)) {
    error = path + ": is a directory, expected a " + std::string(what) + " file";
    return std::nullopt;
  }
  std::string limitText = std::string(what) + " limit of " + formatBytes(limit);
  if (S_ISREG(status.st_mode) && static_cast<uint64_t>(status.st_size) > limit) {
    error = path + ": " + formatBytes(status.st_size) + " exceeds the " +
            limitText;
    return std::nullopt;
  }
  std::string bytes;
  if (S_ISREG(status.st_mode))
    bytes.reserve(status.st_size);
  std::vector<char> chunk(1 << 16);
  while (true) {
    ssize_t got = ::read(file.fd, chunk.data(), chunk.size());
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0) {
      error = path + ": cannot read: " + systemError();
      return std::nullopt;
    }
    if (got == 0)
      return bytes;
    if (bytes.size() + static_cast<uint64_t>(got) > limit) {
      error = path + ": more than the " + limitText + " (not a " +
              std::string(what) + " file?)";
      return std::nullopt;
    }
    bytes.append(chunk.data(), got);
  }
}

static bool writeAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t put = ::write(fd, bytes.data(), bytes.size());
    if (put < 0 && errno == EINTR)
      continue;
    if (put <= 0)
      return false;
    bytes.remove_prefix(put);
  }
  return true;
}

/// The path a chain of symlinks ends at (which may not exist yet), or
/// nothing for a loop.
static std::optional<std::string> followLinks(std::string path) {
  for (int hops = 0; hops < 40; ++hops) {
    struct stat status;
    if (::lstat(path.c_str(), &status) != 0 || !S_ISLNK(status.st_mode))
      return path;
    std::vector<char> target(4096);
    ssize_t size = ::readlink(path.c_str(), target.data(), target.size());
    if (size < 0 || static_cast<size_t>(size) == target.size())
      return std::nullopt;
    std::string next(target.data(), size);
    size_t slash = path.rfind('/');
    if (next.front() != '/' && slash != std::string::npos)
      next = path.substr(0, slash + 1) + next;
    path = next;
  }
  return std::nullopt;
}

/// Writes a device, FIFO or standard output where it is.
static bool writeInPlace(const std::string &path, std::string_view bytes,
                         std::string &error) {
  Descriptor out(path == "-" ? ::dup(1) : ::open(path.c_str(), O_WRONLY));
  if (out.fd < 0 || !writeAll(out.fd, bytes)) {
    error = path + ": cannot write: " + systemError();
    return false;
  }
  return true;
}

/// Replaces (or creates) the regular file `target` atomically.
static bool replaceRegular(const std::string &path, const std::string &target,
                           const struct stat *existing, std::string_view bytes,
                           std::string &error) {
  size_t slash = target.rfind('/');
  std::string dir = slash == std::string::npos ? "." : target.substr(0, slash);
  std::string base =
      slash == std::string::npos ? target : target.substr(slash + 1);
  std::string temporary = dir + "/." + base + ".XXXXXX";
  std::vector<char> name(temporary.begin(), temporary.end());
  name.push_back('\0');
  Descriptor out(::mkstemp(name.data()));
  if (out.fd < 0) {
    error = path + ": cannot create a temporary file in " + dir + ": " +
            systemError();
    return false;
  }
  mode_t mode;
  if (existing) {
    mode = existing->st_mode & 07777;
    // Keep the owner where we may (as root); otherwise the file is ours.
    if (::fchown(out.fd, existing->st_uid, existing->st_gid) != 0)
      errno = 0;
  } else {
    mode_t mask = ::umask(0);
    ::umask(mask);
    mode = 0666 & ~mask;
  }
  bool ok = ::fchmod(out.fd, mode) == 0 && writeAll(out.fd, bytes) &&
            ::fsync(out.fd) == 0;
  std::string why = ok ? "" : systemError();
  if (ok && ::rename(name.data(), target.c_str()) != 0) {
    ok = false;
    why = systemError();
  }
  if (!ok) {
    ::unlink(name.data());
    error = path + ": cannot write: " + why;
  }
  return ok;
}

bool writeFile(const std::string &path, std::string_view bytes,
               std::string &error) {
  if (path.empty()) {
    error = "an empty output path";
    return false;
  }
  if (path == "-")
    return writeInPlace(path, bytes, error);
  struct stat status;
  if (::stat(path.c_str(), &status) != 0) {
    if (errno != ENOENT) {
      error = path + ": cannot write: " + systemError();
      return false;
    }
    // A new file, possibly at the end of a dangling symlink.
    std::optional<std::string> target = followLinks(path);
    if (!target) {
      error = path + ": too many levels of symbolic links";
      return false;
    }
    return replaceRegular(path, *target, nullptr, bytes, error);
  }
  if (S_ISDIR(status.st_mode)) {
    error = path + ": is a directory";
    return false;
  }
  // Devices, FIFOs and sockets (also behind /dev/stdout) are written where
  // they are.
  if (!S_ISREG(status.st_mode))
    return writeInPlace(path, bytes, error);
  char *resolved = ::realpath(path.c_str(), nullptr);
  if (!resolved) {
    error = path + ": cannot write: " + systemError();
    return false;
  }
  std::string target = resolved;
  std::free(resolved);
  if (::access(target.c_str(), W_OK) != 0) {
    error = path + ": cannot write: " + systemError();
    return false;
  }
  return replaceRegular(path, target, &status, bytes, error);
}

} // namespace v4a::io
