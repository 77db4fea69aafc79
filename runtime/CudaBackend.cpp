//===- CudaBackend.cpp - NVIDIA GPUs through the CUDA driver --------------===//

#include "runtime/CudaBackend.h"

#include "core/FileIO.h"
#include "runtime/CudaGemm.h"
#include "runtime/HostProgram.h"
#include "runtime/StepGemms.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string_view>

namespace v4a::rt {

namespace {

// The driver API's handles and result codes, declared here so that the
// runtime needs no CUDA headers; the signatures are the driver's own.
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
struct CUctx_st;
struct CUstream_st;
struct CUmod_st;
struct CUfunc_st;
struct CUgraph_st;
struct CUgraphExec_st;
struct CUevent_st;
constexpr CUresult kSuccess = 0;
constexpr CUresult kNotFound = 500; // CUDA_ERROR_NOT_FOUND
/// CU_STREAM_CAPTURE_MODE_THREAD_LOCAL: other threads' unsafe calls do not
/// break a capture on this one.
constexpr int kCaptureThreadLocal = 1;
constexpr int kComputeCapabilityMajor = 75, kComputeCapabilityMinor = 76;
/// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, and the dynamic shared
/// memory any kernel may take without it.
constexpr int kMaxDynamicSharedAttribute = 8;
/// CU_POINTER_ATTRIBUTE_*: the context, memory type, device and allocation
/// range of a pointer; CU_MEMORYTYPE_HOST (0: memory CUDA does not know).
constexpr int kPointerContext = 1, kPointerMemoryType = 2,
              kPointerDeviceOrdinal = 9, kPointerRangeStart = 11,
              kPointerRangeSize = 12;
constexpr unsigned kMemoryTypeUnknown = 0, kMemoryTypeHost = 1;
/// CU_EVENT_DISABLE_TIMING, CU_STREAM_NON_BLOCKING.
constexpr unsigned kEventNoTiming = 2, kStreamNonBlocking = 1;
constexpr unsigned kDefaultSharedBytes = 48 * 1024;

/// CUlaunchAttribute and CUlaunchConfig as cuLaunchKernelEx takes them, for
/// the one attribute the runtime sets:
/// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION.
struct alignas(8) LaunchAttribute {
  int id;
  char pad[4];
  union {
    char bytes[64];
    int programmaticStreamSerializationAllowed;
  } value;
};

static_assert(sizeof(LaunchAttribute) == 72, "CUlaunchAttribute's layout");
constexpr int kProgrammaticStreamSerialization = 6;
/// What a driver that takes cuLaunchKernelEx but not the attribute says.
constexpr CUresult kNotSupported = 801, kInvalidValue = 1;
struct LaunchConfig {
  unsigned grid[3];
  unsigned block[3];
  unsigned sharedBytes;
  CUstream_st *stream;
  LaunchAttribute *attributes;
  unsigned attributeCount;
};
static_assert(sizeof(LaunchConfig) == 56, "CUlaunchConfig's layout");

} // namespace

struct CudaBackend::Driver {
  void *library = nullptr;
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*deviceGetCount)(int *) = nullptr;
  CUresult (*deviceGet)(CUdevice *, int) = nullptr;
  CUresult (*deviceGetName)(char *, int, CUdevice) = nullptr;
  CUresult (*deviceGetAttribute)(int *, int, CUdevice) = nullptr;
  CUresult (*primaryCtxRetain)(CUctx_st **, CUdevice) = nullptr;
  CUresult (*primaryCtxRelease)(CUdevice) = nullptr;
  CUresult (*ctxSetCurrent)(CUctx_st *) = nullptr;
  CUresult (*memAlloc)(CUdeviceptr *, size_t) = nullptr;
  CUresult (*memFree)(CUdeviceptr) = nullptr;
  CUresult (*memsetD8Async)(CUdeviceptr, unsigned char, size_t,
                            CUstream_st *) = nullptr;
  CUresult (*memcpyHtoDAsync)(CUdeviceptr, const void *, size_t,
                              CUstream_st *) = nullptr;
  CUresult (*memcpyDtoHAsync)(void *, CUdeviceptr, size_t,
                              CUstream_st *) = nullptr;
  CUresult (*memcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t,
                              CUstream_st *) = nullptr;
  CUresult (*streamCreate)(CUstream_st **, unsigned) = nullptr;
  CUresult (*streamSynchronize)(CUstream_st *) = nullptr;
  CUresult (*streamDestroy)(CUstream_st *) = nullptr;
  CUresult (*moduleLoadData)(CUmod_st **, const void *) = nullptr;
  CUresult (*moduleUnload)(CUmod_st *) = nullptr;
  CUresult (*moduleGetFunction)(CUfunc_st **, CUmod_st *,
                                const char *) = nullptr;
  CUresult (*launchKernel)(CUfunc_st *, unsigned, unsigned, unsigned, unsigned,
                           unsigned, unsigned, unsigned, CUstream_st *, void **,
                           void **) = nullptr;
  /// The driver refused a chained launch that it took plainly.
  bool serialLaunches = false;
  /// cuLaunchKernelEx, or null (a driver before CUDA 12).
  CUresult (*launchKernelEx)(const LaunchConfig *, CUfunc_st *, void **,
                             void **) = nullptr;
  CUresult (*funcSetAttribute)(CUfunc_st *, int, int) = nullptr;
  CUresult (*getErrorString)(CUresult, const char **) = nullptr;
  CUresult (*memGetInfo)(size_t *, size_t *) = nullptr;
  CUresult (*streamBeginCapture)(CUstream_st *, int) = nullptr;
  CUresult (*streamEndCapture)(CUstream_st *, CUgraph_st **) = nullptr;
  CUresult (*graphInstantiate)(CUgraphExec_st **, CUgraph_st *,
                               unsigned long long) = nullptr;
  CUresult (*graphLaunch)(CUgraphExec_st *, CUstream_st *) = nullptr;
  CUresult (*graphExecDestroy)(CUgraphExec_st *) = nullptr;
  CUresult (*graphDestroy)(CUgraph_st *) = nullptr;
  CUresult (*streamGetCtx)(CUstream_st *, CUctx_st **) = nullptr;
  CUresult (*streamWaitEvent)(CUstream_st *, CUevent_st *, unsigned) = nullptr;
  CUresult (*eventCreate)(CUevent_st **, unsigned) = nullptr;
  CUresult (*eventRecord)(CUevent_st *, CUstream_st *) = nullptr;
  CUresult (*eventDestroy)(CUevent_st *) = nullptr;
  CUresult (*pointerGetAttributes)(unsigned, int *, void **,
                                   CUdeviceptr) = nullptr;

  CUdevice device = 0;
  CUctx_st *context = nullptr;
  /// The stream work queues on: the backend's own, or a caller's
  /// (useStream).
  CUstream_st *stream = nullptr;
  CUstream_st *ownStream = nullptr;
  /// Graphs are recorded here: a non-blocking stream, so that other
  /// threads' work on the legacy default stream cannot break a recording.
  CUstream_st *captureStream = nullptr;
  /// Orders the work of one stream before the next one's.
  CUevent_st *handOver = nullptr;
  /// While a graph is recorded (on the own stream), the stream to return to.
  CUstream_st *recordingFrom = nullptr;
  std::vector<CUmod_st *> modules;
  /// The module step functions' kernels come from, and its functions.
  CUmod_st *kernels = nullptr;
  std::map<std::string, CUfunc_st *> functions;
  /// Kernels allowed more dynamic shared memory than the default window.
  std::set<std::string> sharedOptIn;
  std::string deviceName;
  int computeCapability = 0;
  /// The GEMM library, loaded at the first Gemm op; null when absent.
  std::unique_ptr<CudaGemm> gemm;
  bool gemmLoaded = false;
  CUdeviceptr gemmWorkspace = 0;
  /// Rows of fp8 products padded to a multiple of 4 land here first.
  CUdeviceptr gemmRows = 0;
  int64_t gemmRowBytes = 0;
  /// Rows of earlier, smaller sizes (graphs may point at them).
  std::vector<CUdeviceptr> retiredRows;
  /// Products whose generated kernel runs, already reported.
  std::set<std::string> gemmWarned;
  /// Why there is no GEMM library, when there is none.
  std::string gemmMissing;
  /// The workspace host programs place their temporaries in (null: their
  /// own allocations).
  char *temporaries = nullptr;
  int64_t temporaryBytes = 0;
  /// While a graph is recorded, each host program's ops spread over
  /// captureStream and these (StreamSchedule), each with a GEMM workspace
  /// of its own; empty: one stream in program order.
  bool recording = false;
  std::vector<CUstream_st *> sideStreams;
  std::vector<CUdeviceptr> sideWorkspaces;
  /// Recorded after the ops of a host program (one each), and at its start.
  std::vector<CUevent_st *> events;
  CUevent_st *programStart = nullptr;
  /// Recorded at a side stream's end when a program rejoins it.
  std::vector<CUevent_st *> streamEnds;
  /// The side streams could not be made (said once; not tried again).
  bool sideStreamsRefused = false;

  /// Makes the device's context current on the calling thread (the runtime
  /// uploads weights from several threads).
  void bind() const { ctxSetCurrent(context); }

  /// "what: the driver's message (code)", for a failed call.
  std::string describe(const std::string &what, CUresult result) const {
    const char *text = nullptr;
    if (!getErrorString || getErrorString(result, &text) != kSuccess || !text)
      text = "unknown error";
    return what + ": " + text + " (CUDA error " + std::to_string(result) + ")";
  }

  /// Resolves every entry point; false names the first one missing.
  bool resolve(std::string &error) {
    struct Entry {
      const char *symbol;
      void **slot;
    } entries[] = {
        {"cuInit", reinterpret_cast<void **>(&init)},
        {"cuDeviceGetCount", reinterpret_cast<void **>(&deviceGetCount)},
        {"cuDeviceGet", reinterpret_cast<void **>(&deviceGet)},
        {"cuDeviceGetName", reinterpret_cast<void **>(&deviceGetName)},
        {"cuDeviceGetAttribute",
         reinterpret_cast<void **>(&deviceGetAttribute)},
        {"cuDevicePrimaryCtxRetain",
         reinterpret_cast<void **>(&primaryCtxRetain)},
        {"cuDevicePrimaryCtxRelease_v2",
         reinterpret_cast<void **>(&primaryCtxRelease)},
        {"cuCtxSetCurrent", reinterpret_cast<void **>(&ctxSetCurrent)},
        {"cuMemAlloc_v2", reinterpret_cast<void **>(&memAlloc)},
        {"cuMemFree_v2", reinterpret_cast<void **>(&memFree)},
        {"cuMemsetD8Async", reinterpret_cast<void **>(&memsetD8Async)},
        {"cuMemcpyHtoDAsync_v2", reinterpret_cast<void **>(&memcpyHtoDAsync)},
        {"cuMemcpyDtoHAsync_v2", reinterpret_cast<void **>(&memcpyDtoHAsync)},
        {"cuMemcpyDtoDAsync_v2", reinterpret_cast<void **>(&memcpyDtoDAsync)},
        {"cuStreamCreate", reinterpret_cast<void **>(&streamCreate)},
        {"cuStreamSynchronize", reinterpret_cast<void **>(&streamSynchronize)},
        {"cuStreamDestroy_v2", reinterpret_cast<void **>(&streamDestroy)},
        {"cuModuleLoadData", reinterpret_cast<void **>(&moduleLoadData)},
        {"cuModuleUnload", reinterpret_cast<void **>(&moduleUnload)},
        {"cuModuleGetFunction", reinterpret_cast<void **>(&moduleGetFunction)},
        {"cuLaunchKernel", reinterpret_cast<void **>(&launchKernel)},
        {"cuFuncSetAttribute", reinterpret_cast<void **>(&funcSetAttribute)},
        {"cuGetErrorString", reinterpret_cast<void **>(&getErrorString)},
        {"cuMemGetInfo_v2", reinterpret_cast<void **>(&memGetInfo)},
        {"cuStreamBeginCapture_v2",
         reinterpret_cast<void **>(&streamBeginCapture)},
        {"cuStreamEndCapture", reinterpret_cast<void **>(&streamEndCapture)},
        {"cuGraphInstantiateWithFlags",
         reinterpret_cast<void **>(&graphInstantiate)},
        {"cuGraphLaunch", reinterpret_cast<void **>(&graphLaunch)},
        {"cuGraphExecDestroy", reinterpret_cast<void **>(&graphExecDestroy)},
        {"cuGraphDestroy", reinterpret_cast<void **>(&graphDestroy)},
        {"cuStreamGetCtx", reinterpret_cast<void **>(&streamGetCtx)},
        {"cuStreamWaitEvent", reinterpret_cast<void **>(&streamWaitEvent)},
        {"cuEventCreate", reinterpret_cast<void **>(&eventCreate)},
        {"cuEventRecord", reinterpret_cast<void **>(&eventRecord)},
        {"cuEventDestroy_v2", reinterpret_cast<void **>(&eventDestroy)},
        {"cuPointerGetAttributes",
         reinterpret_cast<void **>(&pointerGetAttributes)},
    };
    for (const Entry &entry : entries) {
      *entry.slot = dlsym(library, entry.symbol);
      if (!*entry.slot) {
        error = std::string("libcuda.so.1 lacks ") + entry.symbol +
                ": the CUDA driver is too old";
        return false;
      }
    }
    // Without it every launch is a plain one.
    launchKernelEx = reinterpret_cast<decltype(launchKernelEx)>(
        dlsym(library, "cuLaunchKernelEx"));
    return true;
  }

  /// Finds kernel `name` among the loaded kernels (kNotFound where they
  /// lack it), once.
  CUresult lookUp(const std::string &name, CUfunc_st *&function) {
    auto it = functions.find(name);
    if (it != functions.end()) {
      function = it->second;
      return kSuccess;
    }
    if (!kernels)
      return kNotFound;
    CUresult result = moduleGetFunction(&function, kernels, name.c_str());
    if (result == kSuccess)
      functions.emplace(name, function);
    return result;
  }

  /// Queues `function` on `stream`. A generated kernel waits for the grids
  /// before it at its entry (v4a-chain-kernel-launches), so it is launched
  /// with programmatic stream serialization: its launch overlaps the end
  /// of the grid before. V4A_SERIAL_LAUNCHES=1 launches plainly.
  CUresult launchChained(CUfunc_st *function, std::array<unsigned, 3> grid,
                         std::array<unsigned, 3> block, unsigned sharedBytes,
                         CUstream_st *stream, void **params) {
    static const bool serialSetting = [] {
      const char *setting = std::getenv("V4A_SERIAL_LAUNCHES");
      return setting && std::string_view(setting) == "1";
    }();
    auto plain = [&] {
      return launchKernel(function, grid[0], grid[1], grid[2], block[0],
                          block[1], block[2], sharedBytes, stream, params,
                          nullptr);
    };
    if (serialSetting || serialLaunches || !launchKernelEx)
      return plain();
    LaunchAttribute chained{};
    chained.id = kProgrammaticStreamSerialization;
    chained.value.programmaticStreamSerializationAllowed = 1;
    LaunchConfig config{{grid[0], grid[1], grid[2]},
                        {block[0], block[1], block[2]},
                        sharedBytes,
                        stream,
                        &chained,
                        1};
    CUresult result = launchKernelEx(&config, function, params, nullptr);
    if (result != kNotSupported && result != kInvalidValue)
      return result;
    // A driver that refuses the attribute: plain launches from now on (one
    // that refuses the launch itself says so again).
    result = plain();
    serialLaunches = result == kSuccess;
    return result;
  }
};

CudaBackend::CudaBackend() : driver(std::make_unique<Driver>()) {}

/// Destroys the side streams of recordings, their GEMM workspaces and end
/// marks.
static void releaseSideStreams(CudaBackend::Driver &d) {
  for (CUstream_st *stream : d.sideStreams)
    d.streamDestroy(stream);
  for (CUdeviceptr memory : d.sideWorkspaces)
    if (memory)
      d.memFree(memory);
  for (CUevent_st *end : d.streamEnds)
    d.eventDestroy(end);
  d.sideStreams.clear();
  d.sideWorkspaces.clear();
  d.streamEnds.clear();
}

CudaBackend::~CudaBackend() {
  Driver &d = *driver;
  d.gemm.reset();
  d.retiredRows.push_back(d.gemmRows);
  d.retiredRows.push_back(d.gemmWorkspace);
  for (CUdeviceptr memory : d.retiredRows)
    if (memory)
      d.memFree(memory);
  releaseSideStreams(d);
  for (CUmod_st *module : d.modules)
    d.moduleUnload(module);
  d.events.push_back(d.handOver);
  d.events.push_back(d.programStart);
  for (CUevent_st *event : d.events)
    if (event)
      d.eventDestroy(event);
  for (CUstream_st *stream : {d.ownStream, d.captureStream})
    if (stream)
      d.streamDestroy(stream);
  if (d.context)
    d.primaryCtxRelease(d.device);
  if (d.library)
    dlclose(d.library);
}

std::unique_ptr<CudaBackend> CudaBackend::create(int ordinal,
                                                 std::string &error) {
  std::unique_ptr<CudaBackend> backend(new CudaBackend());
  Driver &d = *backend->driver;
  d.library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!d.library) {
    const char *why = dlerror();
    error = std::string("no CUDA driver: cannot load libcuda.so.1 (") +
            (why ? why : "not found") + ")";
    return nullptr;
  }
  if (!d.resolve(error))
    return nullptr;
  CUresult result = d.init(0);
  if (result != kSuccess) {
    error = d.describe("the CUDA driver cannot start (no GPU?)", result);
    return nullptr;
  }
  int count = 0;
  if ((result = d.deviceGetCount(&count)) != kSuccess) {
    error = d.describe("cannot count the GPUs", result);
    return nullptr;
  }
  if (ordinal < 0 || ordinal >= count) {
    error = "no GPU " + std::to_string(ordinal) + ": the driver sees " +
            std::to_string(count);
    return nullptr;
  }
  char name[256] = {};
  int major = 0, minor = 0;
  if ((result = d.deviceGet(&d.device, ordinal)) != kSuccess ||
      (result = d.deviceGetName(name, sizeof(name) - 1, d.device)) !=
          kSuccess ||
      (result = d.deviceGetAttribute(&major, kComputeCapabilityMajor,
                                     d.device)) != kSuccess ||
      (result = d.deviceGetAttribute(&minor, kComputeCapabilityMinor,
                                     d.device)) != kSuccess ||
      (result = d.primaryCtxRetain(&d.context, d.device)) != kSuccess ||
      (result = d.ctxSetCurrent(d.context)) != kSuccess ||
      (result = d.streamCreate(&d.ownStream, 0)) != kSuccess ||
      (result = d.streamCreate(&d.captureStream, kStreamNonBlocking)) !=
          kSuccess ||
      (result = d.eventCreate(&d.handOver, kEventNoTiming)) != kSuccess) {
    error = d.describe("cannot open GPU " + std::to_string(ordinal), result);
    return nullptr;
  }
  d.stream = d.ownStream;
  d.deviceName = name;
  d.computeCapability = 10 * major + minor;
  return backend;
}

const std::string &CudaBackend::deviceName() const {
  return driver->deviceName;
}
int CudaBackend::computeCapability() const { return driver->computeCapability; }

void *CudaBackend::allocate(int64_t bytes, std::string &error) {
  Driver &d = *driver;
  driver->bind();
  CUdeviceptr pointer = 0;
  // Never a null pointer for an empty buffer: descriptors need an address.
  size_t size = bytes > 0 ? static_cast<size_t>(bytes) : 1;
  CUresult result = d.memAlloc(&pointer, size);
  if (result == kSuccess)
    result = d.memsetD8Async(pointer, 0, size, d.stream);
  if (result != kSuccess) {
    error = d.describe("cannot allocate " +
                           io::formatBytes(static_cast<uint64_t>(bytes)) +
                           " on " + d.deviceName,
                       result);
    return nullptr;
  }
  return reinterpret_cast<void *>(pointer);
}

void CudaBackend::release(void *memory) {
  driver->bind();
  // Work queued on the memory finishes first.
  driver->streamSynchronize(driver->stream);
  driver->memFree(reinterpret_cast<CUdeviceptr>(memory));
}

void CudaBackend::copyToDevice(void *device, const void *host, int64_t bytes) {
  driver->bind();
  if (bytes > 0)
    driver->memcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(device), host, bytes,
                            driver->stream);
  // The host buffer may go away when this returns.
  driver->streamSynchronize(driver->stream);
}

void CudaBackend::copyToHost(void *host, const void *device, int64_t bytes) {
  driver->bind();
  if (bytes > 0)
    driver->memcpyDtoHAsync(host, reinterpret_cast<CUdeviceptr>(device), bytes,
                            driver->stream);
  driver->streamSynchronize(driver->stream);
}

namespace {

/// V4A_TRACE_LAUNCHES: launches and GEMMs printed (read once).
bool tracing() {
  static const bool trace = std::getenv("V4A_TRACE_LAUNCHES") != nullptr;
  return trace;
}

/// The backend as a host program's device.
class CudaHostDevice : public HostDevice {
public:
  CudaHostDevice(CudaBackend &backend, CudaBackend::Driver &driver)
      : backend(backend), d(driver) {
    if (d.recording && !d.sideStreams.empty())
      schedule.emplace(static_cast<int>(d.sideStreams.size()) + 1);
  }
  void *allocate(int64_t bytes, std::string &error) override;
  void release(void *memory) override {
    if (!d.temporaries)
      backend.release(memory);
  }
  bool copyOnDevice(void *to, const void *from, int64_t bytes,
                    std::string &error) override;
  bool readBack(void *host, const void *device, int64_t bytes,
                std::string &error) override;
  bool launchKernel(const std::string &kernel, std::array<unsigned, 3> grid,
                    std::array<unsigned, 3> block, unsigned sharedBytes,
                    std::vector<void *> params,
                    const std::vector<MemoryAccess> &touches,
                    std::string &error) override;
  bool gemm(const GemmCall &call, bool &done, std::string &error) override;
  /// `ran` once the side streams are rejoined (after a failed op too, so
  /// that a recording can end); a rejoin that fails after an op that ran
  /// is the error, after `context`.
  bool finish(bool ran, const std::string &context, std::string &error);

private:
  /// Brings the work of every stream the program used back onto the one it
  /// was given.
  bool rejoin(std::string &error);
  /// The stream the next op, which touches `touches`, goes to, after the
  /// waits the schedule asks for; null with `error`.
  CUstream_st *streamFor(std::vector<MemoryAccess> touches, std::string &error);
  /// Marks the end of the op just queued, for ops that may wait for it.
  bool queued(std::string &error);
  /// The event recorded after op `op` (created as the program grows).
  CUevent_st *eventOf(int op, std::string &error);
  /// Stream `s` of the schedule: 0 the program's own, then the side ones.
  CUstream_st *streamOf(int s) const {
    return s == 0 ? d.stream : d.sideStreams[s - 1];
  }

  CudaBackend &backend;
  CudaBackend::Driver &d;
  /// Workspace bytes this run's temporaries take so far.
  int64_t placed = 0;
  /// Several streams while a graph is recorded (V4A_GRAPH_STREAMS).
  std::optional<StreamSchedule> schedule;
};

} // namespace

/// V4A_FILL_TEMPORARIES: "zero" clears every temporary of a step, "poison"
/// fills it with 0xff bytes (NaN floats, -1 integers), so that a read of a
/// byte no kernel wrote shows in the outputs; unset or anything else: none.
static std::optional<unsigned char> temporaryFill() {
  static const std::optional<unsigned char> fill =
      []() -> std::optional<unsigned char> {
    const char *setting = std::getenv("V4A_FILL_TEMPORARIES");
    if (!setting)
      return std::nullopt;
    if (std::string_view(setting) == "zero")
      return 0;
    if (std::string_view(setting) == "poison")
      return 0xff;
    return std::nullopt;
  }();
  return fill;
}

/// V4A_GRAPH_STREAMS: how many streams a recorded step's host programs may
/// spread their ops over (1-8; 1: every op in program order). Unset: 4,
/// the best count measured (a whole V4-Flash decode step 9% shorter than
/// on one stream, bitwise the same).
static int graphStreams() {
  static const int streams = [] {
    const char *setting = std::getenv("V4A_GRAPH_STREAMS");
    return setting ? std::clamp(std::atoi(setting), 1, 8) : 4;
  }();
  return streams;
}

CUevent_st *CudaHostDevice::eventOf(int op, std::string &error) {
  while (static_cast<int>(d.events.size()) <= op) {
    CUevent_st *event = nullptr;
    CUresult result = d.eventCreate(&event, kEventNoTiming);
    if (result != kSuccess) {
      error = d.describe("cannot create an event on " + d.deviceName, result);
      return nullptr;
    }
    d.events.push_back(event);
  }
  return d.events[op];
}

CUstream_st *CudaHostDevice::streamFor(std::vector<MemoryAccess> touches,
                                       std::string &error) {
  if (!schedule)
    return d.stream;
  CUresult result = kSuccess;
  if (schedule->size() == 0)
    result = d.eventRecord(d.programStart, d.stream);
  StreamSchedule::Placement placement = schedule->place(std::move(touches));
  CUstream_st *stream = streamOf(placement.stream);
  if (result == kSuccess && placement.joinsStart)
    result = d.streamWaitEvent(stream, d.programStart, 0);
  for (int op : placement.waits) {
    if (result != kSuccess)
      break;
    CUevent_st *event = eventOf(op, error);
    if (!event)
      return nullptr;
    result = d.streamWaitEvent(stream, event, 0);
  }
  if (result != kSuccess) {
    error =
        d.describe("cannot order a step's streams on " + d.deviceName, result);
    return nullptr;
  }
  return stream;
}

bool CudaHostDevice::queued(std::string &error) {
  if (!schedule)
    return true;
  int op = schedule->size() - 1;
  CUevent_st *event = eventOf(op, error);
  if (!event)
    return false;
  CUresult result = d.eventRecord(event, streamOf(schedule->stream(op)));
  if (result != kSuccess) {
    error = d.describe("cannot mark an op's end on " + d.deviceName, result);
    return false;
  }
  return true;
}

bool CudaHostDevice::rejoin(std::string &error) {
  if (!schedule)
    return true;
  std::vector<int> tails = schedule->rejoin();
  std::vector<int> streams;
  for (int op : tails)
    streams.push_back(schedule->stream(op));
  schedule.reset();
  // A fresh mark at each stream's end, not its last op's event: after a
  // failed op that event may not have been recorded in this program.
  for (int s : streams) {
    CUevent_st *end = d.streamEnds[s - 1];
    CUresult result = d.eventRecord(end, streamOf(s));
    if (result == kSuccess)
      result = d.streamWaitEvent(d.stream, end, 0);
    if (result != kSuccess) {
      error =
          d.describe("cannot join a step's streams on " + d.deviceName, result);
      return false;
    }
  }
  return true;
}

bool CudaHostDevice::finish(bool ran, const std::string &context,
                            std::string &error) {
  std::string why;
  if (rejoin(why) || !ran)
    return ran;
  error = context + why;
  return false;
}

void *CudaHostDevice::allocate(int64_t bytes, std::string &error) {
  if (!d.temporaries)
    return backend.allocate(bytes, error);
  int64_t size = workspaceBytes(bytes);
  if (size > d.temporaryBytes - placed) {
    error = "the step's temporaries need more than the " +
            io::formatBytes(static_cast<uint64_t>(d.temporaryBytes)) +
            " workspace planned for them (" +
            io::formatBytes(static_cast<uint64_t>(placed + size)) + " so far)";
    return nullptr;
  }
  char *memory = d.temporaries + placed;
  placed += size;
  // A temporary holds what the last step left there: the step functions
  // write every byte they read (an allocation's contents are undefined to
  // them), and a fill would be a graph node per temporary.
  std::optional<unsigned char> fill = temporaryFill();
  if (!fill)
    return memory;
  CUstream_st *stream = streamFor({{memory, size, true}}, error);
  if (!stream)
    return nullptr;
  CUresult result = d.memsetD8Async(reinterpret_cast<CUdeviceptr>(memory),
                                    *fill, static_cast<size_t>(size), stream);
  if (result != kSuccess) {
    error = d.describe("cannot fill a temporary on " + d.deviceName, result);
    return nullptr;
  }
  return queued(error) ? memory : nullptr;
}

bool CudaHostDevice::copyOnDevice(void *to, const void *from, int64_t bytes,
                                  std::string &error) {
  CUstream_st *stream =
      streamFor({{from, bytes, false}, {to, bytes, true}}, error);
  if (!stream)
    return false;
  CUresult result =
      d.memcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(to),
                        reinterpret_cast<CUdeviceptr>(from), bytes, stream);
  if (result != kSuccess) {
    error = d.describe("cannot copy on " + d.deviceName, result);
    return false;
  }
  return queued(error);
}

bool CudaHostDevice::readBack(void *host, const void *device, int64_t bytes,
                              std::string &error) {
  CUresult result = d.memcpyDtoHAsync(
      host, reinterpret_cast<CUdeviceptr>(device), bytes, d.stream);
  if (result == kSuccess)
    result = d.streamSynchronize(d.stream);
  if (result != kSuccess)
    error = d.describe("cannot read back from " + d.deviceName, result);
  return result == kSuccess;
}

bool CudaHostDevice::launchKernel(const std::string &kernel,
                                  std::array<unsigned, 3> grid,
                                  std::array<unsigned, 3> block,
                                  unsigned sharedBytes,
                                  std::vector<void *> params,
                                  const std::vector<MemoryAccess> &touches,
                                  std::string &error) {
  CUfunc_st *function = nullptr;
  CUresult found = d.lookUp(kernel, function);
  if (found != kSuccess) {
    // Only "not found" means the package lacks it; any other failure is
    // the context's (a fault of an earlier launch, say).
    error = found == kNotFound
                ? "the loaded kernels lack " + kernel
                : d.describe("cannot look up kernel " + kernel, found);
    return false;
  }
  // Past the default window a kernel must ask for its dynamic shared memory;
  // a kernel's amount is fixed by the compiler, so asking once is enough.
  if (sharedBytes > kDefaultSharedBytes &&
      d.sharedOptIn.insert(kernel).second) {
    CUresult result = d.funcSetAttribute(function, kMaxDynamicSharedAttribute,
                                         static_cast<int>(sharedBytes));
    if (result != kSuccess) {
      d.sharedOptIn.erase(kernel);
      error = d.describe("kernel " + kernel + " cannot have " +
                             std::to_string(sharedBytes) +
                             " bytes of shared memory on " + d.deviceName,
                         result);
      return false;
    }
  }
  // V4A_TRACE_LAUNCHES=1 prints each launch and waits for it, so that a
  // failing or hanging kernel is named.
  bool trace = tracing();
  if (trace)
    std::fprintf(stderr, "launch %s grid %u %u %u block %u\n", kernel.c_str(),
                 grid[0], grid[1], grid[2], block[0]);
  CUstream_st *stream = streamFor(touches, error);
  if (!stream)
    return false;
  CUresult result = d.launchChained(function, grid, block, sharedBytes, stream,
                                    params.data());
  if (result == kSuccess && trace)
    result = d.streamSynchronize(stream);
  if (result != kSuccess) {
    error = d.describe("cannot launch kernel " + kernel, result);
    return false;
  }
  return queued(error);
}

/// The GEMM library with its workspace, loaded at its first use; null when
/// absent.
static CudaGemm *loadGemm(CudaBackend &backend, CudaBackend::Driver &d) {
  if (d.gemmLoaded)
    return d.gemm.get();
  d.gemmLoaded = true;
  std::string why;
  void *workspace = backend.allocate(CudaGemm::kWorkspaceBytes, why);
  if (workspace) {
    d.gemmWorkspace = reinterpret_cast<CUdeviceptr>(workspace);
    d.gemm = CudaGemm::load(workspace, CudaGemm::kWorkspaceBytes, why);
    if (!d.gemm) {
      backend.release(workspace);
      d.gemmWorkspace = 0;
    }
  }
  if (tracing())
    std::fprintf(stderr, "gemm library: %s\n",
                 d.gemm ? "cuBLASLt" : why.c_str());
  if (!d.gemm)
    d.gemmMissing = why;
  return d.gemm.get();
}

/// An fp8 product runs over B's rows padded to a multiple of 4.
static GemmCall paddedRows(const GemmCall &call) {
  GemmCall padded = call;
  if (call.type == step::HostOp::GemmType::FP8)
    padded.n = (call.n + 3) / 4 * 4;
  return padded;
}

/// Room for the padded rows of an fp8 product's result; false (the
/// generated kernel runs) when there is none.
static bool reserveRows(CudaBackend &backend, CudaBackend::Driver &d,
                        int64_t bytes) {
  if (bytes <= d.gemmRowBytes)
    return true;
  // Recorded graphs may still write the old rows: they stay until the
  // backend goes.
  if (d.gemmRows)
    d.retiredRows.push_back(d.gemmRows);
  d.gemmRows = 0;
  d.gemmRowBytes = 0;
  std::string why;
  void *rows = backend.allocate(bytes, why);
  if (!rows)
    return false;
  d.gemmRows = reinterpret_cast<CUdeviceptr>(rows);
  d.gemmRowBytes = bytes;
  return true;
}

bool CudaHostDevice::gemm(const GemmCall &call, bool &done,
                          std::string &error) {
  done = false;
  CudaGemm *library = loadGemm(backend, d);
  if (!library)
    return true;
  // The rows past N of a padded fp8 product go to a scratch buffer.
  GemmCall padded = paddedRows(call);
  if (padded.n != call.n) {
    if (!reserveRows(backend, d, padded.n * call.m * 2))
      return true;
    padded.d = reinterpret_cast<void *>(d.gemmRows);
  }
  std::vector<MemoryAccess> touches = gemmTouches(call);
  if (padded.d != call.d)
    touches.push_back({padded.d, padded.n * call.m * 2, true});
  CUstream_st *stream = streamFor(std::move(touches), error);
  if (!stream)
    return false;
  int on = schedule ? schedule->stream(schedule->size() - 1) : 0;
  void *workspace =
      on == 0 ? nullptr : reinterpret_cast<void *>(d.sideWorkspaces[on - 1]);
  if (!library->run(padded, stream, workspace, done, error))
    return false;
  // A shape the load did not prepare and the library refuses is said once.
  if (!done && !call.empty() && d.gemmWarned.insert(describeGemm(call)).second)
    std::fprintf(stderr,
                 "v4a: warning: cuBLASLt has no algorithm for a %s; its "
                 "generated kernel runs it\n",
                 describeGemm(call).c_str());
  if (done && padded.d != call.d) {
    // On the product's stream, right behind it, before its end is marked.
    CUresult result =
        d.memcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(call.d), d.gemmRows,
                          call.n * call.m * 2, stream);
    if (result != kSuccess) {
      error = d.describe("cannot copy a product's rows", result);
      return false;
    }
  }
  if (tracing())
    std::fprintf(stderr, "gemm %lld x %lld x %lld x %lld: %s\n",
                 static_cast<long long>(call.batch),
                 static_cast<long long>(call.n), static_cast<long long>(call.m),
                 static_cast<long long>(call.k),
                 done ? "cuBLASLt" : "the generated kernel");
  // Marked also when the library declined and queued nothing: a later wait
  // on it is then a point of the stream no later than needed.
  return queued(error);
}

bool CudaBackend::loadKernels(const std::string &image, std::string &error) {
  void *module = loadModule(image, error);
  if (!module)
    return false;
  driver->kernels = static_cast<CUmod_st *>(module);
  driver->functions.clear();
  driver->sharedOptIn.clear();
  return true;
}

bool CudaBackend::run(const step::Function &function,
                      const std::vector<BufferArg> &args, std::string &error) {
  if (!driver->kernels) {
    error = function.name + ": no kernels loaded (compile for the GPU and "
                            "run a package)";
    return false;
  }
  if (function.host.ops.empty()) {
    error = function.name + ": compiled without a host program (not for "
                            "the GPU)";
    return false;
  }
  driver->bind();
  CudaHostDevice device(*this, *driver);
  bool ran = runHostProgram(function, args, device, error);
  return device.finish(ran, function.name + ": ", error);
}

bool CudaBackend::prepareGemms(const std::vector<GemmCall> &shapes,
                               std::vector<GemmCall> &refused,
                               std::string &error) {
  Driver &d = *driver;
  d.bind();
  CudaGemm *library = loadGemm(*this, d);
  if (!library) {
    // Said once for all products, not once per shape.
    if (!shapes.empty() && d.gemmWarned.insert("").second)
      std::fprintf(stderr,
                   "v4a: warning: no GEMM library (%s); the generated "
                   "kernels run every product\n",
                   d.gemmMissing.c_str());
    return true;
  }
  for (const GemmCall &shape : shapes) {
    // An empty product has nothing to run on either path.
    if (shape.empty())
      continue;
    GemmCall padded = paddedRows(shape);
    bool usable =
        library->prepare(padded) &&
        (padded.n == shape.n || reserveRows(*this, d, padded.n * shape.m * 2));
    if (!usable) {
      refused.push_back(shape);
      d.gemmWarned.insert(describeGemm(shape));
    }
  }
  return true;
}

bool CudaBackend::gemm(const GemmCall &call, bool &done, std::string &error) {
  driver->bind();
  CudaHostDevice device(*this, *driver);
  bool ran = device.gemm(call, done, error);
  return device.finish(ran, "", error);
}

bool CudaBackend::synchronize(std::string &error) {
  Driver &d = *driver;
  d.bind();
  CUresult result = d.streamSynchronize(d.stream);
  if (result != kSuccess)
    error =
        d.describe("the work queued on " + d.deviceName + " failed", result);
  return result == kSuccess;
}

void CudaBackend::setTemporaries(void *base, int64_t bytes) {
  driver->temporaries = static_cast<char *>(base);
  driver->temporaryBytes = base ? bytes : 0;
}

bool CudaBackend::memoryInfo(int64_t &free, int64_t &total) {
  driver->bind();
  size_t available = 0, capacity = 0;
  if (driver->memGetInfo(&available, &capacity) != kSuccess)
    return false;
  free = static_cast<int64_t>(available);
  total = static_cast<int64_t>(capacity);
  return true;
}

bool CudaBackend::supportsGraphs() const {
  // Tracing waits after each launch and the GEMM comparison reads results
  // back: neither can be recorded.
  return !tracing() && !comparingGemms();
}

constexpr size_t kEventsAhead = 128;

/// The streams, GEMM workspaces and events a recording spreads its host
/// programs over (V4A_GRAPH_STREAMS), made before it starts; false leaves
/// the recording on one stream.
static bool prepareSideStreams(CudaBackend &backend, CudaBackend::Driver &d) {
  int wanted = graphStreams() - 1;
  if (static_cast<int>(d.sideStreams.size()) == wanted || d.sideStreamsRefused)
    return true;
  if (!d.programStart &&
      d.eventCreate(&d.programStart, kEventNoTiming) != kSuccess)
    return false;
  // Events for the ops of a host program, made before the recording (a
  // longer program makes more as it goes).
  while (d.events.size() < kEventsAhead) {
    CUevent_st *event = nullptr;
    if (d.eventCreate(&event, kEventNoTiming) != kSuccess)
      return false;
    d.events.push_back(event);
  }
  bool withGemms = loadGemm(backend, d) != nullptr;
  while (static_cast<int>(d.sideStreams.size()) < wanted) {
    CUstream_st *stream = nullptr;
    std::string why;
    void *workspace =
        withGemms ? backend.allocate(CudaGemm::kWorkspaceBytes, why) : nullptr;
    if ((withGemms && !workspace) ||
        d.streamCreate(&stream, kStreamNonBlocking) != kSuccess) {
      if (workspace)
        backend.release(workspace);
      return false;
    }
    d.sideStreams.push_back(stream);
    d.sideWorkspaces.push_back(reinterpret_cast<CUdeviceptr>(workspace));
    CUevent_st *end = nullptr;
    if (d.eventCreate(&end, kEventNoTiming) != kSuccess)
      return false;
    d.streamEnds.push_back(end);
  }
  return true;
}

bool CudaBackend::beginGraph(std::string &error) {
  Driver &d = *driver;
  d.bind();
  if (!prepareSideStreams(*this, d)) {
    // Fewer streams than asked for: the step stays correct on one.
    d.sideStreamsRefused = true;
    std::fprintf(stderr,
                 "v4a: warning: V4A_GRAPH_STREAMS=%d: cannot make %d more "
                 "streams with a %lld MiB GEMM workspace each on %s; graphs "
                 "record on one stream\n",
                 graphStreams(), graphStreams() - 1,
                 static_cast<long long>(CudaGemm::kWorkspaceBytes >> 20),
                 d.deviceName.c_str());
    releaseSideStreams(d);
  }
  // Recorded on a stream of its own: a caller's stream may get work from
  // other threads meanwhile, which must not become part of the graph.
  d.recordingFrom = d.stream;
  d.stream = d.captureStream;
  CUresult result = d.streamBeginCapture(d.stream, kCaptureThreadLocal);
  if (result != kSuccess) {
    d.stream = d.recordingFrom;
    error = d.describe("cannot record a graph on " + d.deviceName, result);
    return false;
  }
  d.recording = true;
  return true;
}

void *CudaBackend::endGraph(std::string &error) {
  Driver &d = *driver;
  d.bind();
  CUgraph_st *graph = nullptr;
  CUresult result = d.streamEndCapture(d.stream, &graph);
  d.stream = d.recordingFrom;
  d.recording = false;
  if (result != kSuccess) {
    error = d.describe("cannot record a graph on " + d.deviceName, result);
    return nullptr;
  }
  CUgraphExec_st *exec = nullptr;
  result = d.graphInstantiate(&exec, graph, 0);
  d.graphDestroy(graph);
  if (result != kSuccess) {
    error = d.describe("cannot instantiate a graph on " + d.deviceName, result);
    return nullptr;
  }
  return exec;
}

bool CudaBackend::launchGraph(void *graph, std::string &error) {
  Driver &d = *driver;
  d.bind();
  CUresult result =
      d.graphLaunch(static_cast<CUgraphExec_st *>(graph), d.stream);
  if (result != kSuccess)
    error = d.describe("cannot launch a graph on " + d.deviceName, result);
  return result == kSuccess;
}

void *CudaBackend::currentStream() {
  driver->bind();
  return driver->stream;
}

bool CudaBackend::useStream(void *stream, std::string &error) {
  Driver &d = *driver;
  d.bind();
  auto *next = stream ? static_cast<CUstream_st *>(stream) : d.ownStream;
  if (next == d.stream)
    return true;
  CUctx_st *context = nullptr;
  CUresult result = d.streamGetCtx(next, &context);
  if (result != kSuccess) {
    error = d.describe("the stream is not a stream of " + d.deviceName, result);
    return false;
  }
  if (context != d.context) {
    error = "the stream belongs to another CUDA context than the model's (the "
            "primary context of " +
            d.deviceName + ")";
    return false;
  }
  // What the old stream queued (the last step, a cache write) comes first.
  result = d.eventRecord(d.handOver, d.stream);
  if (result == kSuccess)
    result = d.streamWaitEvent(next, d.handOver, 0);
  // Back to the own stream even so: the caller's may be gone soon.
  if (result == kSuccess || next == d.ownStream)
    d.stream = next;
  if (result != kSuccess)
    error = d.describe("cannot order the streams on " + d.deviceName, result);
  return result == kSuccess;
}

bool CudaBackend::queueCopyToDevice(void *device, const void *host,
                                    int64_t bytes, std::string &error) {
  Driver &d = *driver;
  d.bind();
  // From pageable memory the driver stages the bytes before it returns.
  CUresult result =
      bytes > 0 ? d.memcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(device), host,
                                    bytes, d.stream)
                : kSuccess;
  if (result != kSuccess)
    error = d.describe("cannot copy to " + d.deviceName, result);
  return result == kSuccess;
}

bool CudaBackend::queueClear(void *device, int64_t bytes, std::string &error) {
  Driver &d = *driver;
  d.bind();
  CUresult result =
      bytes > 0 ? d.memsetD8Async(reinterpret_cast<CUdeviceptr>(device), 0,
                                  static_cast<size_t>(bytes), d.stream)
                : kSuccess;
  if (result != kSuccess)
    error = d.describe("cannot clear memory on " + d.deviceName, result);
  return result == kSuccess;
}

bool CudaBackend::queueCopyOnDevice(void *to, const void *from, int64_t bytes,
                                    std::string &error) {
  Driver &d = *driver;
  d.bind();
  CUresult result = bytes > 0
                        ? d.memcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(to),
                                            reinterpret_cast<CUdeviceptr>(from),
                                            bytes, d.stream)
                        : kSuccess;
  if (result != kSuccess)
    error = d.describe("cannot copy on " + d.deviceName, result);
  return result == kSuccess;
}

/// Whether the copies can run as table entries: every address and size a
/// multiple of the kernel's access.
static bool tableCopiesFit(const std::vector<DeviceCopy> &copies) {
  auto aligned = [](uint64_t value) { return value % kCopyAlignment == 0; };
  return std::all_of(copies.begin(), copies.end(), [&](const DeviceCopy &c) {
    return aligned(reinterpret_cast<uint64_t>(c.to)) &&
           aligned(reinterpret_cast<uint64_t>(c.from)) && aligned(c.bytes);
  });
}

bool CudaBackend::queueCopiesOnDevice(const std::vector<DeviceCopy> &copies,
                                      const void *table, std::string &error) {
  Driver &d = *driver;
  d.bind();
  CUfunc_st *function = nullptr;
  int64_t most = 0;
  for (const DeviceCopy &copy : copies)
    most = std::max(most, copy.bytes);
  if (!table || copies.size() < 2 || copies.size() > 65535 || most == 0 ||
      !tableCopiesFit(copies) ||
      d.lookUp(step::kTableCopyKernel, function) != kSuccess)
    return Backend::queueCopiesOnDevice(copies, table, error);
  // The rows grid-stride over blocks of 256 threads, four accesses a thread
  // at the widest row.
  constexpr int64_t kThreads = 256, kChunksPerThread = 4;
  int64_t blocks = (most / kCopyAlignment + kThreads * kChunksPerThread - 1) /
                   (kThreads * kChunksPerThread);
  uint64_t address = reinterpret_cast<uint64_t>(table);
  void *params[] = {&address};
  CUresult result =
      d.launchChained(function,
                      {static_cast<unsigned>(std::min<int64_t>(blocks, 65535)),
                       static_cast<unsigned>(copies.size()), 1},
                      {kThreads, 1, 1}, 0, d.stream, params);
  // V4A_TRACE_LAUNCHES=1 names a failing kernel: this one too.
  if (result == kSuccess && tracing())
    result = d.streamSynchronize(d.stream);
  if (result != kSuccess)
    error = d.describe(
        "cannot launch kernel " + std::string(step::kTableCopyKernel), result);
  return result == kSuccess;
}

bool CudaBackend::checkAccessible(const void *data, int64_t bytes,
                                  const std::string &what, std::string &error) {
  Driver &d = *driver;
  d.bind();
  auto pointer = reinterpret_cast<CUdeviceptr>(data);
  // One driver call for every attribute (four calls a buffer took ~24 us
  // of a whole-model step's 88 buffers, one takes ~15): memory CUDA does
  // not know gets zeros, not an error.
  unsigned type = kMemoryTypeUnknown;
  CUctx_st *context = nullptr;
  int ordinal = -1;
  CUdeviceptr start = 0;
  size_t size = 0;
  int attributes[] = {kPointerMemoryType, kPointerContext,
                      kPointerDeviceOrdinal, kPointerRangeStart,
                      kPointerRangeSize};
  void *values[] = {&type, &context, &ordinal, &start, &size};
  static_assert(std::size(attributes) == std::size(values));
  if (d.pointerGetAttributes(std::size(attributes), attributes, values,
                             pointer) != kSuccess ||
      type == kMemoryTypeUnknown || type == kMemoryTypeHost) {
    error = what + " is host memory, not memory of " + d.deviceName;
    return false;
  }
  // Memory mapped through the virtual memory API has no context: its
  // device decides.
  bool ours = context == d.context || (!context && ordinal == d.device);
  if (!ours) {
    error = what +
            " is memory of another GPU or CUDA context than the "
            "model's (the primary context of " +
            d.deviceName + ")";
    return false;
  }
  if (size > 0 && pointer + static_cast<CUdeviceptr>(bytes) > start + size) {
    error = what + " needs " + std::to_string(bytes) + " bytes but its " +
            "allocation ends " + std::to_string(start + size - pointer) +
            " bytes after it";
    return false;
  }
  return true;
}

void CudaBackend::releaseGraph(void *graph) {
  driver->bind();
  driver->graphExecDestroy(static_cast<CUgraphExec_st *>(graph));
}

void *CudaBackend::loadModule(const std::string &image, std::string &error) {
  Driver &d = *driver;
  driver->bind();
  CUmod_st *module = nullptr;
  CUresult result = d.moduleLoadData(&module, image.c_str());
  if (result != kSuccess) {
    error = d.describe("cannot load a kernel image on " + d.deviceName, result);
    return nullptr;
  }
  d.modules.push_back(module);
  return module;
}

bool CudaBackend::launch(void *module, const std::string &name,
                         std::array<unsigned, 3> grid,
                         std::array<unsigned, 3> block, unsigned sharedBytes,
                         std::vector<void *> params, std::string &error) {
  Driver &d = *driver;
  CUfunc_st *function = nullptr;
  CUresult result = d.moduleGetFunction(
      &function, static_cast<CUmod_st *>(module), name.c_str());
  if (result == kSuccess)
    result =
        d.launchKernel(function, grid[0], grid[1], grid[2], block[0], block[1],
                       block[2], sharedBytes, d.stream, params.data(), nullptr);
  if (result != kSuccess) {
    error = d.describe("cannot launch kernel " + name, result);
    return false;
  }
  return true;
}

} // namespace v4a::rt
