// pack_layout and unpack_layout (memfit/ir.h): a tensor between the plain
// layout and a blocked one, on the host. The executor converts persistent
// state with them as it loads and stores it, so checkpoints and the host's
// StateStore hold the plain layout whatever the backend chose.
//
// A rank-r tensor (d0, d1, S...) with S the spatial dimensions flattened to s:
//   c8/c16 (block b):  [d0][d1 / b][s][d1 % b]
//   oi8/oi16 (block b): [d0 / b][d1 / b][s][d1 % b][d0 % b]
// with d1 (and for oi, d0) padded to whole blocks; padding is zero.
// Cost: one pass over the stored elements.
#include <algorithm>

#include "core/check.h"
#include "memfit/ir.h"

namespace memfit {
namespace {

// Calls copy(plain_index, stored_index) for every element of `shape`.
template <class Copy>
void for_each_element(const Shape& shape, Layout layout, Copy copy) {
  MEMFIT_CHECK(shape.size() >= 2);
  const int64_t b = layout_block(layout);
  const int64_t d0 = shape[0], d1 = shape[1];
  int64_t spatial = 1;
  for (size_t i = 2; i < shape.size(); ++i) spatial *= shape[i];
  const int64_t blocks1 = (d1 + b - 1) / b;
  const bool weights = is_weight_layout(layout);
  for (int64_t i0 = 0; i0 < d0; ++i0) {
    for (int64_t i1 = 0; i1 < d1; ++i1) {
      const int64_t plain_base = (i0 * d1 + i1) * spatial;
      // Stored index of (i0, i1, s = 0) and the stride between spatial positions.
      int64_t base = 0, stride = 0;
      if (weights) {
        base = ((i0 / b * blocks1 + i1 / b) * spatial * b + i1 % b) * b + i0 % b;
        stride = b * b;
      } else {
        base = (i0 * blocks1 + i1 / b) * spatial * b + i1 % b;
        stride = b;
      }
      for (int64_t s = 0; s < spatial; ++s) copy(plain_base + s, base + s * stride);
    }
  }
}

}  // namespace

void pack_layout(const float* plain, const Shape& shape, Layout layout, float* stored) {
  if (layout == Layout::plain) {
    std::copy(plain, plain + num_elements(shape), stored);
    return;
  }
  std::fill(stored, stored + stored_elements(shape, layout), 0.0f);
  for_each_element(shape, layout, [&](int64_t p, int64_t s) { stored[s] = plain[p]; });
}

void unpack_layout(const float* stored, const Shape& shape, Layout layout, float* plain) {
  if (layout == Layout::plain) {
    std::copy(stored, stored + num_elements(shape), plain);
    return;
  }
  for_each_element(shape, layout, [&](int64_t p, int64_t s) { plain[p] = stored[s]; });
}

}  // namespace memfit
