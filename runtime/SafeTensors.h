//===- SafeTensors.h - read and write .safetensors files --------*- C++ -*-===//
//
// The format: an 8-byte little-endian header length, a JSON header mapping
// tensor names to {dtype, shape, data_offsets}, then the data. Reading
// checks every field and bound and names the tensor at fault. Plain C++.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_RUNTIME_SAFETENSORS_H
#define V4A_RUNTIME_SAFETENSORS_H

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace v4a::st {

enum class DType { F32, BF16, F16, F8_E4M3, F8_E8M0, I32, I64, U8, BOOL };
const char *dtypeName(DType dtype);
int64_t dtypeSize(DType dtype);

struct Tensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
  int64_t numel() const;
  /// Values as f32 (F32, BF16, F16, I32, I64 widen); nothing for other
  /// dtypes or when the data does not match the shape.
  std::optional<std::vector<float>> toF32() const;
};

using File = std::map<std::string, Tensor>;

/// Which tensors to keep (all when empty).
using TensorFilter = std::function<bool(const std::string &name)>;

/// Parses safetensors bytes; on failure returns nothing and sets `error`
/// (naming the tensor when one is at fault). `only`, when given, keeps just
/// the tensors it accepts.
std::optional<File> parse(const uint8_t *bytes, size_t size, std::string &error,
                          const TensorFilter &only = {});
/// Reads a file: the header, then only the kept tensors' bytes (their total
/// checked against memory first). A FIFO or device is read as far as its
/// header says.
std::optional<File> read(const std::string &path, std::string &error,
                         const TensorFilter &only = {});

/// Serializes tensors in name order (deterministic bytes).
std::vector<uint8_t> serialize(const File &file);
/// Writes as io::writeFile does: atomically over a regular file, in place
/// to a device or FIFO.
bool write(const std::string &path, const File &file, std::string &error);

/// A BF16 tensor when `dtype` is BF16, otherwise F32.
Tensor fromF32(const std::vector<int64_t> &shape,
               const std::vector<float> &values, DType dtype = DType::F32);

} // namespace v4a::st

#endif // V4A_RUNTIME_SAFETENSORS_H
