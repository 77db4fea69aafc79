//===- Package.h - a compiled model in one file -----------------*- C++ -*-===//
//
// A package holds what the runtime needs to run a model without the
// compiler: a manifest (format and compiler versions, target, the config's
// hash, cache plan options, kernels per sched_meta_key), the configuration
// and its layers, the step functions (signatures and host programs), the
// step schedule, and the kernels (PTX). The container is
//
//   "V4APKG\r\n" | u32 format version | u32 section count |
//   per section: u32 name bytes | name | u64 size | bytes
//
// (little-endian), every section a line-oriented text. Writing is
// deterministic; reading checks every count, size and reference before
// anything is allocated for it. Plain C++.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_CORE_PACKAGE_H
#define V4A_CORE_PACKAGE_H

#include "core/KVPlan.h"
#include "core/StepSignature.h"
#include "v4a/ModelConfig.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace v4a::pkg {

/// Version 6: every kernel waits for the grids before it at its entry
/// (v4a-chain-kernel-launches), so the runtime may launch it while they
/// end; version 5: launches say which buffers a kernel only reads; version 4:
/// the manifest may name a tensor-parallel degree (an older runtime would take
/// a rank for a smaller whole model); version 3: launches name their dynamic
/// shared memory; version 2: host programs may hand matrix products to a GEMM
/// library.
constexpr uint32_t kFormatVersion = 6;
constexpr const char *kCompilerVersion = "v4a 0.11";
/// The largest package the loader reads.
constexpr uint64_t kMaxPackageBytes = uint64_t(1) << 30;

struct Package {
  uint32_t formatVersion = kFormatVersion;
  std::string compilerVersion = kCompilerVersion;
  /// "sm_90a" (kernels in `ptx`, and in `cubin` for exactly that chip).
  std::string target;
  /// FNV-1a 64 of the configuration text, 16 hex digits.
  std::string configHash;
  std::string configJson;
  ModelConfig config;
  std::vector<LayerSpec> layers;
  plan::PlanOptions planOptions;
  /// Compiled for one rank of this tensor-parallel degree: `config` (and
  /// the configuration text) is a rank's, num_attention_heads and o_groups
  /// divided by it; the checkpoint is the whole model's.
  int64_t tensorParallel = 1;
  /// The step functions, metadata functions included.
  std::vector<step::Function> functions;
  /// The calls of one step, in order.
  std::vector<step::Call> calls;
  std::string ptx;
  /// The kernels assembled for `target` (ptxas), or empty: the driver then
  /// compiles the PTX when it loads it. An optional section.
  std::string cubin;
};

/// FNV-1a 64 of `text` as 16 hex digits.
std::string hashText(const std::string &text);

std::string serialize(const Package &package);

/// Parses a package; `target`, when not empty, must match. A package of
/// another format version or target is refused with a message naming both.
std::optional<Package> parse(const std::string &bytes,
                             const std::string &target, std::string &error);

/// Reads and parses the package file at `path`.
std::optional<Package> read(const std::string &path, const std::string &target,
                            std::string &error);

} // namespace v4a::pkg

#endif // V4A_CORE_PACKAGE_H
