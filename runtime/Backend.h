//===- Backend.h - memory and execution of one device -----------*- C++ -*-===//
//
// What the runtime needs from a device: memory for caches, weights and step
// buffers, copies to and from the host, running a compiled function with
// one buffer per argument, and waiting for the work it queued. The CPU is
// the first backend (host memory, functions called in place); a CUDA
// backend implements the same with device memory, a stream and kernels
// loaded from a package. Plain C++.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_RUNTIME_BACKEND_H
#define V4A_RUNTIME_BACKEND_H

#include "core/StepSignature.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace v4a::rt {

/// A buffer argument of a compiled function: device memory and its shape
/// (row-major; bytes for a cache).
struct BufferArg {
  void *data = nullptr;
  std::vector<int64_t> shape;
};

/// A Gemm op's operands (core/StepSignature.h), checked against the
/// buffers' extents.
struct GemmCall {
  step::HostOp::GemmType type = step::HostOp::GemmType::BF16;
  const void *a = nullptr, *b = nullptr;
  void *d = nullptr;
  /// FP8: the f32 block scales of A and B.
  const void *aScale = nullptr, *bScale = nullptr;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldd = 0, batch = 1;
  int64_t strideA = 0, strideB = 0, strideD = 0;

  /// A product of no element: nothing to run on any path.
  bool empty() const { return m == 0 || n == 0 || k == 0 || batch == 0; }
};

/// A device-to-device copy of `bytes` from `from` to `to`.
struct DeviceCopy {
  void *to = nullptr;
  const void *from = nullptr;
  int64_t bytes = 0;
};

using step::CopyEntry;
using step::kCopyAlignment;

/// Every buffer a step workspace places starts at a multiple of this (the
/// GEMM library's and the widest vector access's alignment, and more).
constexpr int64_t kWorkspaceAlignment = 256;
/// The workspace bytes a buffer of `bytes` takes.
inline int64_t workspaceBytes(int64_t bytes) {
  int64_t size = bytes > 0 ? bytes : 1;
  return (size + kWorkspaceAlignment - 1) / kWorkspaceAlignment *
         kWorkspaceAlignment;
}

class Backend {
public:
  virtual ~Backend();
  virtual const char *name() const = 0;
  /// Zeroed device memory, or null with `error` naming the size.
  virtual void *allocate(int64_t bytes, std::string &error) = 0;
  virtual void release(void *memory) = 0;
  virtual void copyToDevice(void *device, const void *host, int64_t bytes) = 0;
  virtual void copyToHost(void *host, const void *device, int64_t bytes) = 0;
  /// Queues `function` with one buffer per argument, in signature order.
  virtual bool run(const step::Function &function,
                   const std::vector<BufferArg> &args, std::string &error) = 0;
  /// Waits until everything queued has finished; false with the device's
  /// message when queued work failed (the device state is then unknown).
  virtual bool synchronize(std::string &error) = 0;
  /// Where run() places the temporaries of host programs (a GPU's): the
  /// bytes [base, base + bytes), reused by every run (the work of one stream
  /// is ordered) and not cleared: a temporary holds what an earlier run
  /// left. Null: each run allocates and releases its own.
  virtual void setTemporaries(void *base, int64_t bytes) {}
  /// The stream later work queues on: a stream of the backend's device
  /// and context (a CUstream on CUDA), or null for the backend's own.
  /// Work queued before is ordered before work queued after. The CPU has
  /// no streams: only null.
  virtual bool useStream(void *stream, std::string &error);
  /// The stream work queues on now (the recording one while a graph is
  /// recorded), or null where there are none.
  virtual void *currentStream() { return nullptr; }
  /// Queue copies without waiting for them: host to device (the host bytes
  /// may be reused when it returns) and device to device.
  virtual bool queueCopyToDevice(void *device, const void *host, int64_t bytes,
                                 std::string &error);
  virtual bool queueCopyOnDevice(void *to, const void *from, int64_t bytes,
                                 std::string &error);
  /// Queues device-to-device copies whose destinations do not overlap, in
  /// any order among themselves (a step's inputs and outputs are one copy a
  /// layer). `table`: null, or device memory that holds `copies` as
  /// CopyEntry rows by the time the copies run, which a device with a table
  /// copy kernel runs in one launch.
  virtual bool queueCopiesOnDevice(const std::vector<DeviceCopy> &copies,
                                   const void *table, std::string &error);
  /// Queues setting `bytes` at `device` to zero.
  virtual bool queueClear(void *device, int64_t bytes, std::string &error);
  /// Whether the `bytes` at `data` are memory the backend's functions can
  /// read and write (on a GPU: an allocation of its context that holds
  /// them); `what` names the buffer in the error.
  virtual bool checkAccessible(const void *data, int64_t bytes,
                               const std::string &what, std::string &error) {
    return true;
  }
  /// Free and total device memory; false when the backend cannot tell (the
  /// host's memory is checked apart).
  virtual bool memoryInfo(int64_t &free, int64_t &total) { return false; }

  /// Graphs: what run() queues between beginGraph and endGraph is recorded
  /// instead of run, and endGraph returns it ready to launch, replaying the
  /// same work on the same buffers. Backends without them return false.
  virtual bool supportsGraphs() const { return false; }
  virtual bool beginGraph(std::string &error);
  /// The recorded graph, or null with `error` (recording stops either way).
  virtual void *endGraph(std::string &error);
  virtual bool launchGraph(void *graph, std::string &error);
  virtual void releaseGraph(void *graph) {}
  /// Readies the GEMM library for these product shapes (pointers aside)
  /// before any step: an algorithm and the memory each needs; `refused`
  /// gets the shapes whose generated kernel will run instead. Backends
  /// without a library have nothing to do.
  virtual bool prepareGemms(const std::vector<GemmCall> &shapes,
                            std::vector<GemmCall> &refused, std::string &error);
};

/// The host CPU: memory from the heap, functions called on the calling
/// thread (their loops run on the OpenMP runtime).
std::unique_ptr<Backend> createCpuBackend();

/// Device memory that returns itself to its backend.
class DeviceBuffer {
public:
  DeviceBuffer() = default;
  DeviceBuffer(Backend *backend, void *data, int64_t bytes,
               std::vector<int64_t> shape)
      : backend(backend), memory(data), size(bytes), dims(std::move(shape)) {}
  DeviceBuffer(DeviceBuffer &&other) noexcept { *this = std::move(other); }
  DeviceBuffer &operator=(DeviceBuffer &&other) noexcept {
    if (this != &other) {
      reset();
      backend = other.backend;
      memory = other.memory;
      size = other.size;
      dims = std::move(other.dims);
      other.memory = nullptr;
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer() { reset(); }

  void *data() const { return memory; }
  int64_t bytes() const { return size; }
  const std::vector<int64_t> &shape() const { return dims; }
  BufferArg arg() const { return {memory, dims}; }

private:
  void reset() {
    if (memory)
      backend->release(memory);
    memory = nullptr;
  }
  Backend *backend = nullptr;
  void *memory = nullptr;
  int64_t size = 0;
  std::vector<int64_t> dims;
};

} // namespace v4a::rt

#endif // V4A_RUNTIME_BACKEND_H
