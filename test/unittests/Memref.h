//===- Memref.h - buffer descriptors of compiled kernels --------*- C++ -*-===//
//
// The descriptor layout in which compiled v4a kernels take their buffers
// (the ranked memref C interface): base pointers, offset, sizes, strides.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_TEST_UNITTESTS_MEMREF_H
#define V4A_TEST_UNITTESTS_MEMREF_H

#include <array>
#include <cstdint>

namespace v4a::rt {

template <typename T, int Rank> struct Memref {
  T *allocated = nullptr;
  T *aligned = nullptr;
  int64_t offset = 0;
  int64_t sizes[Rank] = {};
  int64_t strides[Rank] = {};
};

/// A row-major view of `data` with the given sizes.
template <typename T, int Rank>
Memref<T, Rank> view(T *data, const std::array<int64_t, Rank> &sizes) {
  Memref<T, Rank> m;
  m.allocated = m.aligned = data;
  int64_t stride = 1;
  for (int i = Rank - 1; i >= 0; --i) {
    m.sizes[i] = sizes[i];
    m.strides[i] = stride;
    stride *= sizes[i];
  }
  return m;
}

} // namespace v4a::rt

#endif // V4A_TEST_UNITTESTS_MEMREF_H
