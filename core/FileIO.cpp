//===- FileIO.cpp - bounded reads and writes that never damage a target ---===//

#include "core/FileIO.h"

#include <algorithm>
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

/// A cgroup's memory limit (v2, then v1), when one is set.
static std::optional<uint64_t> cgroupMemoryLimit() {
  for (const char *path : {"/sys/fs/cgroup/memory.max",
                           "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::FILE *file = std::fopen(path, "r");
    if (!file)
      continue;
    unsigned long long limit = 0;
    bool number = std::fscanf(file, "%llu", &limit) == 1;
    std::fclose(file);
    if (number)
      return static_cast<uint64_t>(limit);
  }
  return std::nullopt;
}

std::optional<uint64_t> physicalMemory() {
  long pages = ::sysconf(_SC_PHYS_PAGES), pageSize = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || pageSize <= 0)
    return std::nullopt;
  uint64_t physical =
      static_cast<uint64_t>(pages) * static_cast<uint64_t>(pageSize);
  std::optional<uint64_t> cgroup = cgroupMemoryLimit();
  return cgroup ? std::min(physical, *cgroup) : physical;
}

bool fitsInMemory(double bytes, const std::string &what, std::string &error) {
  std::optional<uint64_t> memory = physicalMemory();
  if (!memory || bytes <= static_cast<double>(*memory))
    return true;
  error = what + " needs " + formatSize(bytes) + ", more than this machine's " +
          formatBytes(*memory) + " of memory";
  return false;
}

std::string formatSize(double bytes) {
  return bytes >= 1e18 ? std::string("more than 1 EiB")
                       : formatBytes(static_cast<uint64_t>(bytes));
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

std::optional<InputFile> InputFile::open(const std::string &path,
                                         std::string_view what,
                                         std::string &error) {
  int fd = path == "-" ? ::dup(0) : ::open(path.c_str(), O_RDONLY);
  struct stat status;
  if (fd < 0 || ::fstat(fd, &status) != 0) {
    error = path + ": cannot open: " + systemError();
    if (fd >= 0)
      ::close(fd);
    return std::nullopt;
  }
  if (S_ISDIR(status.st_mode)) {
    ::close(fd);
    error =
        path + ": is a directory, expected a " + std::string(what) + " file";
    return std::nullopt;
  }
  bool regular = S_ISREG(status.st_mode);
  return InputFile(path, fd, regular,
                   regular ? static_cast<uint64_t>(status.st_size) : 0);
}

InputFile::InputFile(InputFile &&other) noexcept
    : path(std::move(other.path)), fd(other.fd), regular(other.regular),
      bytes(other.bytes) {
  other.fd = -1;
}

InputFile::~InputFile() {
  if (fd >= 0)
    ::close(fd);
}

bool InputFile::read(std::string &out, uint64_t count, std::string &error) {
  std::vector<char> chunk(1 << 16);
  while (count > 0) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(count, chunk.size()));
    ssize_t got = ::read(fd, chunk.data(), want);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0) {
      error = path + ": cannot read: " + systemError();
      return false;
    }
    if (got == 0)
      return true;
    out.append(chunk.data(), got);
    count -= got;
  }
  return true;
}

bool InputFile::readAt(uint8_t *out, uint64_t offset, uint64_t count,
                       std::string &error) {
  while (count > 0) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(count, 1 << 30));
    ssize_t got = ::pread(fd, out, want, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0) {
      error = path + ": cannot read " + std::to_string(count) +
              " bytes at offset " + std::to_string(offset) +
              (got == 0 ? ": the file ends first" : ": " + systemError());
      return false;
    }
    out += got;
    offset += got;
    count -= got;
  }
  return true;
}

std::optional<std::string> readFile(const std::string &path, uint64_t limit,
                                    std::string_view what, std::string &error) {
  std::optional<InputFile> file = InputFile::open(path, what, error);
  if (!file)
    return std::nullopt;
  std::string limitText = std::string(what) + " limit of " + formatBytes(limit);
  if (file->isRegular() && file->size() > limit) {
    error =
        path + ": " + formatBytes(file->size()) + " exceeds the " + limitText;
    return std::nullopt;
  }
  std::string bytes;
  if (file->isRegular())
    bytes.reserve(file->size());
  // One byte past the limit tells a file that ends at it from a longer one.
  if (!file->read(bytes, limit + 1, error))
    return std::nullopt;
  if (bytes.size() > limit) {
    error = path + ": more than the " + limitText + " (not a " +
            std::string(what) + " file?)";
    return std::nullopt;
  }
  return bytes;
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
  // ".NAME.XXXXXX" tells whose temporary it is; a name near NAME_MAX gets a
  // short one.
  std::string temporary =
      dir + "/." + (base.size() > 200 ? "v4a" : base) + ".XXXXXX";
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
