//===- fuzz_safetensors.cpp - fuzz the safetensors reader -----------------===//
//
// Any byte string must parse into tensors whose data lies inside the input,
// or give an error; a parsed file must serialize and parse back to itself.
//
//===----------------------------------------------------------------------===//

#include "runtime/SafeTensors.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string error;
  std::optional<v4a::st::File> file = v4a::st::parse(data, size, error);
  if (!file)
    return 0;
  for (const auto &[name, tensor] : *file)
    if (static_cast<int64_t>(tensor.data.size()) !=
        tensor.numel() * v4a::st::dtypeSize(tensor.dtype))
      std::abort();
  std::vector<uint8_t> bytes = v4a::st::serialize(*file);
  std::optional<v4a::st::File> again =
      v4a::st::parse(bytes.data(), bytes.size(), error);
  if (!again || again->size() != file->size())
    std::abort();
  for (const auto &[name, tensor] : *file) {
    auto it = again->find(name);
    if (it == again->end() || it->second.shape != tensor.shape ||
        it->second.dtype != tensor.dtype || it->second.data != tensor.data)
      std::abort();
  }
  return 0;
}
