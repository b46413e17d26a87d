// Window arithmetic shared by the convolutions (conv2d, conv3d and the
// transposed ones): any of their attribute structs seen as R spatial
// dimensions, R = 2 or 3, so that one set of shape rules serves all of them.
#pragma once

#include <cstdint>
#include <vector>

#include "memfit/ir.h"

namespace memfit::ops {

struct ConvWindow {
  std::vector<int64_t> stride, pad, dilation;  // R each
  std::vector<int64_t> output_padding;         // R; zeros except for the transposed convolutions
  int64_t groups = 1;
  size_t rank() const { return stride.size(); }
};

template <class A>
ConvWindow conv_window(const A& a) {
  ConvWindow win{{a.stride.begin(), a.stride.end()},
                 {a.pad.begin(), a.pad.end()},
                 {a.dilation.begin(), a.dilation.end()},
                 std::vector<int64_t>(a.stride.size(), 0),
                 a.groups};
  if constexpr (requires { a.output_padding; }) {
    win.output_padding.assign(a.output_padding.begin(), a.output_padding.end());
  }
  return win;
}

// The output of a convolution of x (N, C, S...) with w (O, C/groups, K...):
// (N, O, (S + 2 pad - dilation (K - 1) - 1) / stride + 1 ...), floored. x and w
// have rank R + 2; errors say which shape or attribute is wrong.
Result<Shape> conv_output(const Shape& x, const Shape& w, const ConvWindow& win);

// The output of a transposed convolution of x (N, C, S...) with w (C, O/groups, K...):
// (N, O, (S - 1) stride - 2 pad + dilation (K - 1) + output_padding + 1 ...).
Result<Shape> conv_transpose_output(const Shape& x, const Shape& w, const ConvWindow& win);

}  // namespace memfit::ops
