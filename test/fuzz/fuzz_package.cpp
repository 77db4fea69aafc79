//===- fuzz_package.cpp - fuzz the package loader -------------------------===//
//
// Any byte string must parse into a package or give an error; a parsed
// package's host programs must validate or give an error, and the package
// must serialize to bytes that parse back to the same bytes.
//
//===----------------------------------------------------------------------===//

#include "core/Package.h"
#include "runtime/HostProgram.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string error;
  std::string bytes(reinterpret_cast<const char *>(data), size);
  std::optional<v4a::pkg::Package> package = v4a::pkg::parse(bytes, "", error);
  if (!package) {
    if (error.empty())
      std::abort();
    return 0;
  }
  for (const v4a::step::Function &function : package->functions)
    (void)v4a::rt::validateHostProgram(function, error);
  std::string again = v4a::pkg::serialize(*package);
  std::optional<v4a::pkg::Package> reparsed = v4a::pkg::parse(again, "", error);
  if (!reparsed || v4a::pkg::serialize(*reparsed) != again)
    std::abort();
  return 0;
}
