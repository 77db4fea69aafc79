//===- CudaGemm.cpp - matrix products on cuBLASLt -------------------------===//

#include "runtime/CudaGemm.h"

#include <cstdlib>
#include <dlfcn.h>
#include <map>
#include <tuple>

namespace v4a::rt {

namespace {

// cuBLASLt's handles, codes and attribute numbers, declared here so that the
// runtime needs no CUDA headers; the values are the library's own.
using Status = int;
struct Handle;
struct MatmulDesc;
struct Layout;
struct Preference;
struct Algo {
  uint64_t data[8];
};
struct HeuristicResult {
  Algo algo;
  size_t workspaceSize;
  Status state;
  float wavesCount;
  int reserved[4];
};
constexpr Status kOk = 0;
constexpr int kComputeF32 = 68;   // CUBLAS_COMPUTE_32F
constexpr int kTypeF32 = 0;       // CUDA_R_32F
constexpr int kTypeBF16 = 14;     // CUDA_R_16BF
constexpr int kTypeE4M3 = 28;     // CUDA_R_8F_E4M3
constexpr int kDescTransA = 3;    // CUBLASLT_MATMUL_DESC_TRANSA
constexpr int kDescTransB = 4;    // CUBLASLT_MATMUL_DESC_TRANSB
constexpr int kOpN = 0, kOpT = 1; // CUBLAS_OP_N, CUBLAS_OP_T
constexpr int kDescAScalePointer = 17, kDescBScalePointer = 18;
constexpr int kDescAScaleMode = 31, kDescBScaleMode = 32;
// CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F and _BLK128x128_32F.
constexpr int32_t kScaleVec128 = 4, kScaleBlock128x128 = 5;
constexpr int kLayoutBatchCount = 5;
constexpr int kLayoutBatchOffset = 6;
constexpr int kPrefMaxWorkspace = 1;

/// One shape's descriptors and algorithm (or the library's refusal).
struct Plan {
  bool usable = false;
  MatmulDesc *desc = nullptr;
  Layout *a = nullptr, *b = nullptr, *d = nullptr;
  Algo algo{};
};

using ShapeKey = std::tuple<int, int64_t, int64_t, int64_t, int64_t, int64_t,
                            int64_t, int64_t, int64_t, int64_t, int64_t>;

} // namespace

struct CudaGemm::Library {
  void *handleLibrary = nullptr;
  Status (*create)(Handle **) = nullptr;
  Status (*destroy)(Handle *) = nullptr;
  Status (*descCreate)(MatmulDesc **, int, int) = nullptr;
  Status (*descDestroy)(MatmulDesc *) = nullptr;
  Status (*descSet)(MatmulDesc *, int, const void *, size_t) = nullptr;
  Status (*layoutCreate)(Layout **, int, uint64_t, uint64_t, int64_t) = nullptr;
  Status (*layoutDestroy)(Layout *) = nullptr;
  Status (*layoutSet)(Layout *, int, const void *, size_t) = nullptr;
  Status (*prefCreate)(Preference **) = nullptr;
  Status (*prefDestroy)(Preference *) = nullptr;
  Status (*prefSet)(Preference *, int, const void *, size_t) = nullptr;
  Status (*heuristic)(Handle *, MatmulDesc *, Layout *, Layout *, Layout *,
                      Layout *, Preference *, int, HeuristicResult *,
                      int *) = nullptr;
  Status (*matmul)(Handle *, MatmulDesc *, const void *, const void *, Layout *,
                   const void *, Layout *, const void *, const void *, Layout *,
                   void *, Layout *, const Algo *, void *, size_t,
                   void *) = nullptr;

  Handle *handle = nullptr;
  void *workspace = nullptr;
  int64_t workspaceBytes = 0;
  std::map<ShapeKey, Plan> plans;

  bool setScales(MatmulDesc *desc, const GemmCall &c);

  bool resolve(std::string &why) {
    struct Entry {
      const char *symbol;
      void **slot;
    } entries[] = {
        {"cublasLtCreate", reinterpret_cast<void **>(&create)},
        {"cublasLtDestroy", reinterpret_cast<void **>(&destroy)},
        {"cublasLtMatmulDescCreate", reinterpret_cast<void **>(&descCreate)},
        {"cublasLtMatmulDescDestroy", reinterpret_cast<void **>(&descDestroy)},
        {"cublasLtMatmulDescSetAttribute", reinterpret_cast<void **>(&descSet)},
        {"cublasLtMatrixLayoutCreate",
         reinterpret_cast<void **>(&layoutCreate)},
        {"cublasLtMatrixLayoutDestroy",
         reinterpret_cast<void **>(&layoutDestroy)},
        {"cublasLtMatrixLayoutSetAttribute",
         reinterpret_cast<void **>(&layoutSet)},
        {"cublasLtMatmulPreferenceCreate",
         reinterpret_cast<void **>(&prefCreate)},
        {"cublasLtMatmulPreferenceDestroy",
         reinterpret_cast<void **>(&prefDestroy)},
        {"cublasLtMatmulPreferenceSetAttribute",
         reinterpret_cast<void **>(&prefSet)},
        {"cublasLtMatmulAlgoGetHeuristic",
         reinterpret_cast<void **>(&heuristic)},
        {"cublasLtMatmul", reinterpret_cast<void **>(&matmul)},
    };
    for (const Entry &entry : entries) {
      *entry.slot = dlsym(handleLibrary, entry.symbol);
      if (!*entry.slot) {
        why = std::string("libcublasLt lacks ") + entry.symbol;
        return false;
      }
    }
    return true;
  }

  /// A column-major layout of `rows` x `cols`, `ld` apart, in `batch`
  /// batches `offset` apart.
  Layout *layout(int type, int64_t rows, int64_t cols, int64_t ld,
                 int64_t batch, int64_t offset) {
    Layout *l = nullptr;
    if (layoutCreate(&l, type, rows, cols, ld) != kOk)
      return nullptr;
    int32_t count = static_cast<int32_t>(batch);
    if (layoutSet(l, kLayoutBatchCount, &count, sizeof(count)) != kOk ||
        layoutSet(l, kLayoutBatchOffset, &offset, sizeof(offset)) != kOk) {
      layoutDestroy(l);
      return nullptr;
    }
    return l;
  }

  /// Row-major D[n, m] = B[n, :] . A[m, :] is, column-major, D^T = A^T B^T
  /// over A^T [K x M] (transposed: M x K), B^T [K x N] and D^T [M x N].
  /// fp8: A scaled per 128x128 block, B per 1x128 block along K (the
  /// scale pointers change per call; the modes do not).
  Plan plan(const GemmCall &c) {
    Plan p;
    bool fp8 = c.type == step::HostOp::GemmType::FP8;
    int input = fp8 ? kTypeE4M3 : kTypeBF16;
    int32_t transA = kOpT, transB = kOpN;
    if (descCreate(&p.desc, kComputeF32, kTypeF32) != kOk)
      return p;
    p.a = layout(input, c.k, c.m, c.lda, c.batch, c.strideA);
    p.b = layout(input, c.k, c.n, c.ldb, c.batch, c.strideB);
    bool f32Result = c.type == step::HostOp::GemmType::BF16F32;
    p.d = layout(f32Result ? kTypeF32 : kTypeBF16, c.m, c.n, c.ldd, c.batch,
                 c.strideD);
    if (fp8 && (descSet(p.desc, kDescAScaleMode, &kScaleBlock128x128,
                        sizeof(int32_t)) != kOk ||
                descSet(p.desc, kDescBScaleMode, &kScaleVec128,
                        sizeof(int32_t)) != kOk ||
                !setScales(p.desc, c)))
      return p;
    Preference *pref = nullptr;
    uint64_t bytes = static_cast<uint64_t>(workspaceBytes);
    HeuristicResult result{};
    int found = 0;
    if (p.a && p.b && p.d &&
        descSet(p.desc, kDescTransA, &transA, sizeof(transA)) == kOk &&
        descSet(p.desc, kDescTransB, &transB, sizeof(transB)) == kOk &&
        prefCreate(&pref) == kOk &&
        prefSet(pref, kPrefMaxWorkspace, &bytes, sizeof(bytes)) == kOk &&
        heuristic(handle, p.desc, p.a, p.b, p.d, p.d, pref, 1, &result,
                  &found) == kOk &&
        found > 0 && result.state == kOk) {
      p.usable = true;
      p.algo = result.algo;
    }
    if (pref)
      prefDestroy(pref);
    return p;
  }
};

bool CudaGemm::Library::setScales(MatmulDesc *desc, const GemmCall &c) {
  // A shape planned before its first call has no scales yet; the heuristic
  // refuses null scale pointers, so device memory (the workspace) stands in
  // until the call sets the real ones.
  const void *a = c.aScale ? c.aScale : workspace;
  const void *b = c.bScale ? c.bScale : workspace;
  return descSet(desc, kDescAScalePointer, &a, sizeof(a)) == kOk &&
         descSet(desc, kDescBScalePointer, &b, sizeof(b)) == kOk;
}

CudaGemm::CudaGemm() : library(std::make_unique<Library>()) {}

CudaGemm::~CudaGemm() {
  Library &l = *library;
  for (auto &[key, plan] : l.plans) {
    for (Layout *layout : {plan.a, plan.b, plan.d})
      if (layout)
        l.layoutDestroy(layout);
    if (plan.desc)
      l.descDestroy(plan.desc);
  }
  if (l.handle)
    l.destroy(l.handle);
  if (l.handleLibrary)
    dlclose(l.handleLibrary);
}

std::unique_ptr<CudaGemm>
CudaGemm::load(void *workspace, int64_t workspaceBytes, std::string &why) {
  const char *setting = std::getenv("V4A_GEMM_LIBRARY");
  if (setting && std::string(setting) == "0") {
    why = "V4A_GEMM_LIBRARY=0";
    return nullptr;
  }
  std::unique_ptr<CudaGemm> gemm(new CudaGemm());
  Library &l = *gemm->library;
  for (const char *name : {"libcublasLt.so.13", "libcublasLt.so"})
    if ((l.handleLibrary = dlopen(name, RTLD_NOW | RTLD_LOCAL)))
      break;
  if (!l.handleLibrary) {
    why = "cannot load libcublasLt.so.13";
    return nullptr;
  }
  if (!l.resolve(why))
    return nullptr;
  if (l.create(&l.handle) != kOk) {
    why = "cuBLASLt does not start";
    return nullptr;
  }
  l.workspace = workspace;
  l.workspaceBytes = workspaceBytes;
  return gemm;
}

/// The plan of `call`'s shape, made at its first use; null for a shape the
/// library cannot take (empty, or a batch past its range).
static Plan *planOf(CudaGemm::Library &l, const GemmCall &call) {
  if (call.empty() || call.batch > INT32_MAX)
    return nullptr;
  ShapeKey key{static_cast<int>(call.type),
               call.m,
               call.n,
               call.k,
               call.lda,
               call.ldb,
               call.ldd,
               call.batch,
               call.strideA,
               call.strideB,
               call.strideD};
  auto it = l.plans.find(key);
  if (it == l.plans.end())
    it = l.plans.emplace(key, l.plan(call)).first;
  return &it->second;
}

bool CudaGemm::prepare(const GemmCall &call) {
  Plan *plan = planOf(*library, call);
  return plan && plan->usable;
}

bool CudaGemm::run(const GemmCall &call, void *stream, void *workspace,
                   bool &done, std::string &error) {
  Library &l = *library;
  done = false;
  Plan *found = planOf(l, call);
  if (!found || !found->usable)
    return true;
  Plan &plan = *found;
  if (call.type == step::HostOp::GemmType::FP8 &&
      !l.setScales(plan.desc, call)) {
    error = "cuBLASLt refuses the scales of an fp8 product";
    return false;
  }
  float alpha = 1.0f, beta = 0.0f;
  Status status = l.matmul(l.handle, plan.desc, &alpha, call.a, plan.a, call.b,
                           plan.b, &beta, call.d, plan.d, call.d, plan.d,
                           &plan.algo, workspace ? workspace : l.workspace,
                           static_cast<size_t>(l.workspaceBytes), stream);
  // A product the library turns down when it runs (it writes nothing then)
  // goes to the generated kernel, now and for the rest of the run.
  if (status != kOk) {
    plan.usable = false;
    return true;
  }
  done = true;
  return true;
}

} // namespace v4a::rt
