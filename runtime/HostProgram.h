//===- HostProgram.h - run the host side of a GPU step function -*- C++ -*-===//
//
// A step function compiled for a GPU is a host program (core/StepSignature.h):
// sizes computed from the arguments' shapes, temporary buffers, shape views,
// copies, reads of host arguments and kernel launches. This interprets it
// over any device that can allocate, copy and launch, checking every size,
// index and launch extent first, so a bad program or a bad argument is an
// error line and never a wild access. Plain C++.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_RUNTIME_HOSTPROGRAM_H
#define V4A_RUNTIME_HOSTPROGRAM_H

#include "runtime/Backend.h"
#include "runtime/StreamSchedule.h"

#include <array>
#include <string>
#include <vector>

namespace v4a::rt {

/// What a host program needs from a device.
class HostDevice {
public:
  virtual ~HostDevice();
  virtual void *allocate(int64_t bytes, std::string &error) = 0;
  virtual void release(void *memory) = 0;
  virtual bool copyOnDevice(void *to, const void *from, int64_t bytes,
                            std::string &error) = 0;
  /// Waits for the queued work, then copies `bytes` to the host (only the
  /// GEMM comparison does: a host program never reads the device).
  virtual bool readBack(void *host, const void *device, int64_t bytes,
                        std::string &error) = 0;
  /// `touches`: the buffers the kernel may read and write (its own
  /// arguments' bytes), for a device that runs ops side by side.
  virtual bool launchKernel(const std::string &kernel,
                            std::array<unsigned, 3> grid,
                            std::array<unsigned, 3> block, unsigned sharedBytes,
                            std::vector<void *> params,
                            const std::vector<MemoryAccess> &touches,
                            std::string &error) = 0;
  /// Runs a checked Gemm op (core/StepSignature.h) on a GEMM library and
  /// sets `done`, or leaves `done` false for the program's own kernel (no
  /// library, or a shape it refuses). False only on a failure after the
  /// library accepted the product.
  virtual bool gemm(const GemmCall &call, bool &done, std::string &error);
  /// Whether V4A_GEMM_COMPARE may run library products beside their
  /// fallbacks here (a device that only records says no).
  virtual bool comparesGemms() const { return true; }
};

/// V4A_GEMM_COMPARE=1: library products are compared with their generated
/// kernels (read once).
bool comparingGemms();

/// Checks that every operand is defined before it is used, every result is
/// defined once, and each op has the operands and data its kind needs.
bool validateHostProgram(const step::Function &function, std::string &error);

/// Runs the host program of `function` over `args` (one per signature
/// argument). Temporary buffers are released before returning.
bool runHostProgram(const step::Function &function,
                    const std::vector<BufferArg> &args, HostDevice &device,
                    std::string &error);

} // namespace v4a::rt

#endif // V4A_RUNTIME_HOSTPROGRAM_H
