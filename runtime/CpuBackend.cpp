//===- CpuBackend.cpp - the host CPU as a runtime backend -----------------===//

#include "runtime/Backend.h"

#include "core/FileIO.h"

#include <cstdlib>
#include <cstring>

namespace v4a::rt {

Backend::~Backend() = default;

bool Backend::prepareGemms(const std::vector<GemmCall> &,
                           std::vector<GemmCall> &, std::string &) {
  return true;
}

bool Backend::beginGraph(std::string &error) {
  error = std::string("the ") + name() + " backend has no graphs";
  return false;
}

void *Backend::endGraph(std::string &error) {
  error = std::string("the ") + name() + " backend has no graphs";
  return nullptr;
}

bool Backend::launchGraph(void *, std::string &error) {
  error = std::string("the ") + name() + " backend has no graphs";
  return false;
}

bool Backend::useStream(void *stream, std::string &error) {
  if (!stream)
    return true;
  error = std::string("the ") + name() + " backend has no streams";
  return false;
}

// A backend whose memory is the host's copies in place.
bool Backend::queueCopyToDevice(void *device, const void *host, int64_t bytes,
                                std::string &) {
  copyToDevice(device, host, bytes);
  return true;
}

bool Backend::queueCopyOnDevice(void *to, const void *from, int64_t bytes,
                                std::string &) {
  if (bytes > 0)
    std::memmove(to, from, bytes);
  return true;
}

bool Backend::queueCopiesOnDevice(const std::vector<DeviceCopy> &copies,
                                  const void *, std::string &error) {
  for (const DeviceCopy &copy : copies)
    if (!queueCopyOnDevice(copy.to, copy.from, copy.bytes, error))
      return false;
  return true;
}

bool Backend::queueClear(void *device, int64_t bytes, std::string &) {
  if (bytes > 0)
    std::memset(device, 0, bytes);
  return true;
}

namespace {

/// A memref descriptor as MLIR's C interface lays it out: allocated and
/// aligned pointers, offset, sizes, strides (row-major).
std::vector<int64_t> descriptorOf(const BufferArg &arg) {
  auto pointer = reinterpret_cast<int64_t>(arg.data);
  std::vector<int64_t> words = {pointer, pointer, 0};
  words.insert(words.end(), arg.shape.begin(), arg.shape.end());
  std::vector<int64_t> strides(arg.shape.size(), 1);
  for (size_t i = arg.shape.size(); i-- > 1;)
    strides[i - 1] = strides[i] * arg.shape[i];
  words.insert(words.end(), strides.begin(), strides.end());
  return words;
}

class CpuBackend : public Backend {
public:
  const char *name() const override { return "cpu"; }

  void *allocate(int64_t bytes, std::string &error) override {
    // Never a null pointer for an empty buffer: descriptors need an address.
    void *memory = std::calloc(bytes > 0 ? bytes : 1, 1);
    if (!memory)
      error = "cannot allocate " +
              io::formatBytes(static_cast<uint64_t>(bytes)) + " of host memory";
    return memory;
  }
  void release(void *memory) override { std::free(memory); }
  void copyToDevice(void *device, const void *host, int64_t bytes) override {
    if (bytes > 0)
      std::memcpy(device, host, bytes);
  }
  void copyToHost(void *host, const void *device, int64_t bytes) override {
    if (bytes > 0)
      std::memcpy(host, device, bytes);
  }

  bool run(const step::Function &function, const std::vector<BufferArg> &args,
           std::string &error) override {
    if (args.size() != function.args.size() || !function.entry) {
      error = function.name + ": " + std::to_string(args.size()) +
              " buffers for " + std::to_string(function.args.size()) +
              " arguments";
      return false;
    }
    std::vector<std::vector<int64_t>> descriptors;
    descriptors.reserve(args.size());
    for (const BufferArg &arg : args)
      descriptors.push_back(descriptorOf(arg));
    std::vector<void *> pointers, packed;
    for (std::vector<int64_t> &d : descriptors)
      pointers.push_back(d.data());
    for (void *&p : pointers)
      packed.push_back(&p);
    function.entry(packed.data());
    return true;
  }

  bool synchronize(std::string &) override { return true; }
};

} // namespace

std::unique_ptr<Backend> createCpuBackend() {
  return std::make_unique<CpuBackend>();
}

} // namespace v4a::rt
