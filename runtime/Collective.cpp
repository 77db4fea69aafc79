//===- Collective.cpp - sums across GPUs through NCCL ---------------------===//

#include "runtime/Collective.h"

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <map>
#include <mutex>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace v4a::rt {

namespace {

// The few NCCL types the runtime uses, as nccl.h declares them (the library
// is opened at run time, its header is not needed to build).
using NcclResult = int;
constexpr NcclResult kNcclSuccess = 0, kNcclInProgress = 7;
constexpr int kNcclSum = 0, kNcclBfloat16 = 9;
struct NcclUniqueId {
  char internal[128];
};
/// ncclConfig_t as NCCL 2.14 defined it: later versions take this prefix,
/// told by `size` and `version`.
struct NcclConfig {
  size_t size = sizeof(NcclConfig);
  unsigned magic = 0xcafebeef;
  unsigned version = 21400;
  int blocking = INT_MIN, cgaClusterSize = INT_MIN, minCTAs = INT_MIN,
      maxCTAs = INT_MIN;
  const char *netName = nullptr;
  int splitShare = INT_MIN;
};

/// The deadline of a join, a sum or a published id, from V4A_NCCL_TIMEOUT.
std::chrono::seconds collectiveTimeout() {
  const char *text = std::getenv("V4A_NCCL_TIMEOUT");
  long seconds = text ? std::strtol(text, nullptr, 10) : 0;
  return std::chrono::seconds(seconds > 0 ? seconds : 120);
}

} // namespace

struct Collective::Library {
  void *handle = nullptr;
  std::string loadError;
  NcclResult (*getUniqueId)(NcclUniqueId *) = nullptr;
  NcclResult (*commInitRankConfig)(void **, int, NcclUniqueId, int,
                                   NcclConfig *) = nullptr;
  NcclResult (*commGetAsyncError)(void *, NcclResult *) = nullptr;
  NcclResult (*commFinalize)(void *) = nullptr;
  NcclResult (*commDestroy)(void *) = nullptr;
  NcclResult (*commAbort)(void *) = nullptr;
  NcclResult (*commCount)(void *, int *) = nullptr;
  NcclResult (*commUserRank)(void *, int *) = nullptr;
  NcclResult (*allReduce)(const void *, void *, size_t, int, int, void *,
                          void *) = nullptr;
  const char *(*getErrorString)(NcclResult) = nullptr;
  const char *(*getLastError)(void *) = nullptr;

  /// The process's NCCL (by the name V4A_NCCL_LIBRARY gives, or
  /// libnccl.so.2), loaded on first use; null with `error` when absent.
  static Library *get(std::string &error) {
    static std::mutex loading;
    static std::map<std::string, Library> loaded;
    const char *given = std::getenv("V4A_NCCL_LIBRARY");
    std::string name = given && *given ? given : "libnccl.so.2";
    std::lock_guard<std::mutex> lock(loading);
    auto it = loaded.find(name);
    if (it == loaded.end())
      it = loaded.emplace(name, load(name)).first;
    if (it->second.handle)
      return &it->second;
    error = it->second.loadError;
    return nullptr;
  }

  std::string describe(const std::string &what, NcclResult result,
                       void *comm) const {
    std::string text = what + ": NCCL error " + std::to_string(result) + " (" +
                       getErrorString(result) + ")";
    const char *last = getLastError(comm);
    if (last && *last)
      text += ": " + std::string(last);
    return text;
  }

private:
  static Library load(const std::string &name) {
    Library l;
    l.handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!l.handle) {
      const char *why = dlerror();
      l.loadError = "no NCCL: cannot load " + name + " (" +
                    (why ? why : "not found") +
                    "; set V4A_NCCL_LIBRARY to its path)";
      return l;
    }
    struct Entry {
      const char *symbol;
      void **slot;
    } entries[] = {
        {"ncclGetUniqueId", reinterpret_cast<void **>(&l.getUniqueId)},
        {"ncclCommInitRankConfig",
         reinterpret_cast<void **>(&l.commInitRankConfig)},
        {"ncclCommGetAsyncError",
         reinterpret_cast<void **>(&l.commGetAsyncError)},
        {"ncclCommFinalize", reinterpret_cast<void **>(&l.commFinalize)},
        {"ncclCommDestroy", reinterpret_cast<void **>(&l.commDestroy)},
        {"ncclCommAbort", reinterpret_cast<void **>(&l.commAbort)},
        {"ncclCommCount", reinterpret_cast<void **>(&l.commCount)},
        {"ncclCommUserRank", reinterpret_cast<void **>(&l.commUserRank)},
        {"ncclAllReduce", reinterpret_cast<void **>(&l.allReduce)},
        {"ncclGetErrorString", reinterpret_cast<void **>(&l.getErrorString)},
        {"ncclGetLastError", reinterpret_cast<void **>(&l.getLastError)},
    };
    for (const Entry &entry : entries) {
      *entry.slot = dlsym(l.handle, entry.symbol);
      if (!*entry.slot) {
        l.loadError =
            name + " lacks " + entry.symbol + ": NCCL 2.14 or later is needed";
        dlclose(l.handle);
        l.handle = nullptr;
        return l;
      }
    }
    return l;
  }
};

bool Collective::makeId(CollectiveId &id, std::string &error) {
  Library *l = Library::get(error);
  if (!l)
    return false;
  NcclUniqueId raw;
  NcclResult result = l->getUniqueId(&raw);
  if (result != kNcclSuccess) {
    error = l->describe("cannot make a communicator id", result, nullptr);
    return false;
  }
  std::memcpy(id.bytes.data(), raw.internal, sizeof raw.internal);
  return true;
}

/// Waits, up to the deadline, for the communicator's last call to finish
/// (non-blocking communicators return before they are done). On an error or
/// at the deadline the communicator is no longer used (and aborted when it
/// is this one's own).
bool Collective::settle(const std::string &what, std::string &error) {
  auto deadline = std::chrono::steady_clock::now() + collectiveTimeout();
  NcclResult state = kNcclInProgress;
  while (true) {
    NcclResult result = library->commGetAsyncError(comm, &state);
    if (result != kNcclSuccess)
      state = result;
    if (state != kNcclInProgress)
      break;
    if (std::chrono::steady_clock::now() > deadline) {
      error = what + ": no answer from every rank within " +
              std::to_string(collectiveTimeout().count()) +
              " s (V4A_NCCL_TIMEOUT)";
      drop();
      return false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  if (state == kNcclSuccess)
    return true;
  error = library->describe(what, state, comm);
  drop();
  return false;
}

void Collective::drop() {
  if (owned)
    library->commAbort(comm);
  comm = nullptr;
}

std::unique_ptr<Collective> Collective::withLibrary(bool owned,
                                                    std::string &error) {
  Library *library = Library::get(error);
  if (!library)
    return nullptr;
  std::unique_ptr<Collective> c(new Collective());
  c->library = library;
  c->owned = owned;
  return c;
}

std::unique_ptr<Collective> Collective::join(const CollectiveId &id, int rank,
                                             int world, std::string &error) {
  if (world < 1 || rank < 0 || rank >= world) {
    error = "rank " + std::to_string(rank) + " of " + std::to_string(world) +
            ": a rank is in 0 .. world - 1";
    return nullptr;
  }
  std::unique_ptr<Collective> c = withLibrary(/*owned=*/true, error);
  if (!c)
    return nullptr;
  Library *l = c->library;
  c->myRank = rank;
  c->size = world;
  NcclConfig config;
  config.blocking = 0;
  NcclUniqueId raw;
  std::memcpy(raw.internal, id.bytes.data(), sizeof raw.internal);
  std::string what = "rank " + std::to_string(rank) + " of " +
                     std::to_string(world) + " cannot join the communicator";
  NcclResult result =
      l->commInitRankConfig(&c->comm, world, raw, rank, &config);
  if (result != kNcclSuccess && result != kNcclInProgress) {
    error = l->describe(what, result, c->comm);
    if (c->comm)
      l->commAbort(c->comm);
    c->comm = nullptr;
    return nullptr;
  }
  if (!c->settle(what, error))
    return nullptr;
  return c;
}

std::unique_ptr<Collective> Collective::adopt(void *comm, std::string &error) {
  if (!comm) {
    error = "a null NCCL communicator";
    return nullptr;
  }
  std::unique_ptr<Collective> c = withLibrary(/*owned=*/false, error);
  if (!c)
    return nullptr;
  Library *l = c->library;
  c->comm = comm;
  NcclResult result = l->commCount(comm, &c->size);
  if (result == kNcclSuccess)
    result = l->commUserRank(comm, &c->myRank);
  if (result != kNcclSuccess) {
    error = l->describe("not a usable NCCL communicator", result, comm);
    c->comm = nullptr;
    return nullptr;
  }
  return c;
}

Collective::~Collective() {
  if (!comm || !owned)
    return;
  std::string ignored;
  NcclResult result = library->commFinalize(comm);
  if ((result == kNcclSuccess || result == kNcclInProgress) &&
      settle("closing the communicator", ignored))
    library->commDestroy(comm);
  else if (comm)
    library->commAbort(comm);
}

bool Collective::allReduceBF16(void *data, int64_t count, void *stream,
                               std::string &error) {
  if (!comm) {
    error = "the communicator was aborted after an earlier failure";
    return false;
  }
  if (count <= 0)
    return true;
  NcclResult result = library->allReduce(data, data, static_cast<size_t>(count),
                                         kNcclBfloat16, kNcclSum, comm, stream);
  std::string what = "the all-reduce of " + std::to_string(count) +
                     " bf16 values (rank " + std::to_string(myRank) + " of " +
                     std::to_string(size) + ")";
  if (result == kNcclSuccess || result == kNcclInProgress)
    return settle(what, error);
  error = library->describe(what, result, comm);
  return false;
}

bool publishCollectiveId(const std::string &path, const CollectiveId &id,
                         std::string &error) {
  // Written whole under a private name, then linked to `path`: link never
  // replaces an existing file, and a reader never sees a partial id.
  std::string staging = path + ".v4a-" + std::to_string(getpid());
  int fd = open(staging.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    error = "cannot create " + staging + ": " + std::strerror(errno);
    return false;
  }
  bool written = write(fd, id.bytes.data(), id.bytes.size()) ==
                 static_cast<ssize_t>(id.bytes.size());
  int saved = errno;
  close(fd);
  if (!written) {
    unlink(staging.c_str());
    error = "cannot write " + staging + ": " + std::strerror(saved);
    return false;
  }
  bool linked = link(staging.c_str(), path.c_str()) == 0;
  saved = errno;
  unlink(staging.c_str());
  if (!linked) {
    error = saved == EEXIST
                ? path + " exists: the communicator id goes to a new file "
                         "(remove it, or name another)"
                : "cannot create " + path + ": " + std::strerror(saved);
    return false;
  }
  return true;
}

bool readCollectiveId(const std::string &path, CollectiveId &id,
                      std::string &error) {
  auto deadline = std::chrono::steady_clock::now() + collectiveTimeout();
  while (true) {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd >= 0) {
      struct stat info;
      bool regular = fstat(fd, &info) == 0 && S_ISREG(info.st_mode);
      ssize_t got = regular ? read(fd, id.bytes.data(), id.bytes.size()) : -1;
      char extra;
      bool more = regular && read(fd, &extra, 1) > 0;
      close(fd);
      if (!regular || got != static_cast<ssize_t>(id.bytes.size()) || more) {
        error = path + " is not a communicator id (" +
                std::to_string(id.bytes.size()) + " bytes written by rank 0)";
        return false;
      }
      return true;
    }
    if (errno != ENOENT) {
      error = "cannot read " + path + ": " + std::strerror(errno);
      return false;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      error = path + ": rank 0 did not publish the communicator id within " +
              std::to_string(collectiveTimeout().count()) +
              " s (V4A_NCCL_TIMEOUT)";
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

} // namespace v4a::rt
