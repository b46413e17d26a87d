// Index arithmetic shared by the reference kernels. Everything here is plain
// row-major bookkeeping, kept in one place so that each kernel reads as its formula.
#pragma once

#include <cstdint>
#include <vector>

#include "core/check.h"
#include "memfit/attrs.h"

namespace memfit {

// The product of shape[begin, end); 1 for an empty range.
inline int64_t dims_product(const Shape& shape, size_t begin, size_t end) {
  int64_t product = 1;
  for (size_t d = begin; d < end; ++d) product *= shape[d];
  return product;
}

// Row-major strides of `shape`, in elements.
inline std::vector<int64_t> row_major_strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= shape[d];
  }
  return strides;
}

// Strides, one per dimension of `out`, that read a row-major tensor of shape
// `in` as if it were broadcast to `out` (NumPy: shapes aligned on the right; a
// dimension of size 1, or a missing one, repeats, i.e. has stride 0).
inline std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out) {
  MEMFIT_CHECK(in.size() <= out.size());
  const std::vector<int64_t> in_strides = row_major_strides(in);
  std::vector<int64_t> strides(out.size(), 0);
  const size_t lead = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) {
    MEMFIT_CHECK(in[d] == out[lead + d] || in[d] == 1);
    strides[lead + d] = in[d] == 1 ? 0 : in_strides[d];
  }
  return strides;
}

// The offset, under `strides`, of row-major element `index` of a tensor of shape `shape`.
inline int64_t strided_offset(int64_t index, const Shape& shape,
                              const std::vector<int64_t>& strides) {
  int64_t offset = 0;
  for (size_t d = shape.size(); d-- > 0;) {
    offset += (index % shape[d]) * strides[d];
    index /= shape[d];
  }
  return offset;
}

// A row-major tensor seen as (outer, len, inner) around `axis`: element
// (o, j, i) lives at (o * len + j) * inner + i.
struct AxisView {
  int64_t outer = 1;
  int64_t len = 1;
  int64_t inner = 1;
};

inline AxisView axis_view(const Shape& shape, int64_t axis) {
  MEMFIT_CHECK(axis >= 0 && static_cast<size_t>(axis) < shape.size());
  const size_t a = static_cast<size_t>(axis);
  return {dims_product(shape, 0, a), shape[a], dims_product(shape, a + 1, shape.size())};
}

}  // namespace memfit
