#include "ops/conv_util.h"

#include <algorithm>
#include <string>

#include "core/check.h"
#include "ops/op_util.h"

namespace memfit::ops {
namespace {

// Stride and dilation in [1, 2^48], pad in [0, 2^48], and a dilated kernel
// extent below 2^48, so that the window arithmetic never overflows.
Status check_window(const Shape& w, const ConvWindow& win) {
  for (size_t i = 0; i < win.rank(); ++i) {
    if (win.stride[i] < 1 || win.dilation[i] < 1 || win.pad[i] < 0) {
      return Status::error("stride and dilation must be positive and pad non-negative");
    }
    if (win.stride[i] > kMaxElements || win.dilation[i] > kMaxElements ||
        win.pad[i] > kMaxElements) {
      return Status::error("stride, pad and dilation must be below 2^48");
    }
    if (w[2 + i] - 1 > kMaxElements / win.dilation[i]) {
      return Status::error("the dilated kernel is larger than 2^48");
    }
  }
  return Status::ok();
}

}  // namespace

Result<Shape> conv_output(const Shape& x, const Shape& w, const ConvWindow& win) {
  MEMFIT_CHECK(x.size() == win.rank() + 2 && w.size() == win.rank() + 2);
  const int64_t groups = win.groups;
  if (groups < 1 || groups > x[1] || x[1] % groups != 0 || w[0] % groups != 0) {
    return Status::error("groups (" + std::to_string(groups) +
                         ") must divide the input and output channels");
  }
  if (w[1] * groups != x[1]) {
    return Status::error("w " + shape_string(w) + " does not match " + std::to_string(x[1]) +
                         " input channels in " + std::to_string(groups) + " groups");
  }
  MEMFIT_RETURN_IF_ERROR(check_window(w, win));
  Shape y = {x[0], w[0]};
  for (size_t i = 0; i < win.rank(); ++i) {
    const int64_t out = window_out(x[2 + i], w[2 + i], win.stride[i], win.pad[i], win.dilation[i]);
    if (out < 1) {
      return Status::error("the kernel " + shape_string(w) + " does not fit the input " +
                           shape_string(x));
    }
    y.push_back(out);
  }
  return y;
}

Result<Shape> conv_transpose_output(const Shape& x, const Shape& w, const ConvWindow& win) {
  MEMFIT_CHECK(x.size() == win.rank() + 2 && w.size() == win.rank() + 2);
  const int64_t groups = win.groups;
  if (w[0] != x[1]) {
    return Status::error("w " + shape_string(w) + " must have one row per input channel (" +
                         std::to_string(x[1]) + "): (C, O/groups, K...)");
  }
  if (groups < 1 || groups > x[1] || x[1] % groups != 0) {
    return Status::error("groups (" + std::to_string(groups) + ") must divide the " +
                         std::to_string(x[1]) + " input channels");
  }
  if (w[1] > kMaxElements / groups) return Status::error("too many output channels");
  MEMFIT_RETURN_IF_ERROR(check_window(w, win));
  Shape y = {x[0], w[1] * groups};
  for (size_t i = 0; i < win.rank(); ++i) {
    const int64_t s = win.stride[i], p = win.pad[i], d = win.dilation[i];
    const int64_t op = win.output_padding[i];
    // As PyTorch: a longer padding would only repeat what a larger stride or dilation gives.
    if (op < 0 || op >= std::max(s, d)) {
      return Status::error("output_padding " + shape_string(win.output_padding) +
                           " must be non-negative and smaller than the stride or the dilation");
    }
    if (x[2 + i] - 1 > kMaxElements / s) return Status::error("the output is larger than 2^48");
    const int64_t out = (x[2 + i] - 1) * s - 2 * p + d * (w[2 + i] - 1) + op + 1;
    if (out < 1) {
      return Status::error("pad " + shape_string(win.pad) + " leaves no output of the input " +
                           shape_string(x) + " and the kernel " + shape_string(w));
    }
    y.push_back(out);
  }
  return y;
}

}  // namespace memfit::ops
