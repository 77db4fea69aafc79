//===- CudaBackend.h - NVIDIA GPUs through the CUDA driver ------*- C++ -*-===//
//
// The CUDA driver (libcuda.so.1) is loaded at run time, so the runtime
// builds and its CPU backend runs where CUDA is absent; a missing driver or
// GPU is one error line. Memory is device memory, work goes on one stream,
// kernels come from PTX or cubin images. Plain C++.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_RUNTIME_CUDABACKEND_H
#define V4A_RUNTIME_CUDABACKEND_H

#include "runtime/Backend.h"
#include "runtime/HostProgram.h"

#include <array>

namespace v4a::rt {

class CudaBackend : public Backend {
public:
  /// Device `ordinal`, or null with `error` naming what is missing (the
  /// driver library, a GPU, the device).
  static std::unique_ptr<CudaBackend> create(int ordinal, std::string &error);
  ~CudaBackend() override;

  const char *name() const override { return "cuda"; }
  /// The device's name and compute capability (e.g. 90 for sm_90).
  const std::string &deviceName() const;
  int computeCapability() const;

  void *allocate(int64_t bytes, std::string &error) override;
  void release(void *memory) override;
  void copyToDevice(void *device, const void *host, int64_t bytes) override;
  void copyToHost(void *host, const void *device, int64_t bytes) override;
  /// Runs the function's host program (runtime/HostProgram.h) with the
  /// kernels of loadKernels.
  bool run(const step::Function &function, const std::vector<BufferArg> &args,
           std::string &error) override;
  /// Loads the PTX or cubin image the step functions' kernels come from.
  bool loadKernels(const std::string &image, std::string &error);
  /// Queues one product the way a host program's Gemm op runs it (the
  /// library, with fp8 rows padded as the op's type says) and sets `done`;
  /// `done` stays false when the library is absent or refuses the shape.
  bool gemm(const GemmCall &call, bool &done, std::string &error);
  bool prepareGemms(const std::vector<GemmCall> &shapes,
                    std::vector<GemmCall> &refused,
                    std::string &error) override;
  bool synchronize(std::string &error) override;
  void setTemporaries(void *base, int64_t bytes) override;
  bool memoryInfo(int64_t &free, int64_t &total) override;
  bool supportsGraphs() const override;
  bool beginGraph(std::string &error) override;
  void *endGraph(std::string &error) override;
  bool launchGraph(void *graph, std::string &error) override;
  void releaseGraph(void *graph) override;
  bool useStream(void *stream, std::string &error) override;
  void *currentStream() override;
  bool queueCopyToDevice(void *device, const void *host, int64_t bytes,
                         std::string &error) override;
  bool queueClear(void *device, int64_t bytes, std::string &error) override;
  bool queueCopiesOnDevice(const std::vector<DeviceCopy> &copies,
                           const void *table, std::string &error) override;
  bool queueCopyOnDevice(void *to, const void *from, int64_t bytes,
                         std::string &error) override;
  bool checkAccessible(const void *data, int64_t bytes, const std::string &what,
                       std::string &error) override;

  /// Loads a PTX (NUL-terminated text) or cubin image; returns a handle, or
  /// null with the driver's message.
  void *loadModule(const std::string &image, std::string &error);
  /// Queues kernel `name` of `module` on the stream; `params` point to the
  /// kernel's arguments in order.
  bool launch(void *module, const std::string &name,
              std::array<unsigned, 3> grid, std::array<unsigned, 3> block,
              unsigned sharedBytes, std::vector<void *> params,
              std::string &error);

  struct Driver;

private:
  CudaBackend();
  std::unique_ptr<Driver> driver;
};

} // namespace v4a::rt

#endif // V4A_RUNTIME_CUDABACKEND_H
