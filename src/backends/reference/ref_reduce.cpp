// Reference kernels of reduce_sum, reduce_mean and fill.
#include <vector>

#include "backends/reference/ref_ops.h"
#include "backends/reference/ref_util.h"

namespace memfit {
namespace {

// Sums x over `axes` into one double per output element; returns how many
// input elements each output element sums (the divisor of the mean).
//
// The output keeps the order of x's remaining dimensions, so with or without
// keepdims its flat layout is that of the "kept" shape: x's shape with the
// reduced dimensions set to 1. Element i of x adds into output element
// strided_offset(i) under the strides that broadcast the kept shape to x's shape,
// i.e. a reduction is the adjoint of a broadcast.
int64_t reduce_into(const RefCall& call, std::vector<double>& sums) {
  const auto& attrs = call.attrs<ReduceAttrs>();
  const Shape& x_shape = call.in[0].shape;
  Shape kept = x_shape;
  for (int64_t axis : attrs.axes) {
    MEMFIT_CHECK(axis >= 0 && static_cast<size_t>(axis) < x_shape.size());
    kept[static_cast<size_t>(axis)] = 1;
  }
  const std::vector<int64_t> strides = broadcast_strides(kept, x_shape);
  const int64_t count = num_elements(x_shape);
  const int64_t kept_count = num_elements(kept);
  MEMFIT_CHECK(kept_count == num_elements(call.out[0].shape));
  sums.assign(static_cast<size_t>(kept_count), 0.0);
  const float* x = call.in_f32(0);
  for (int64_t i = 0; i < count; ++i) {
    sums[static_cast<size_t>(strided_offset(i, x_shape, strides))] += x[i];
  }
  int64_t reduced = 1;
  for (int64_t axis : attrs.axes) reduced *= x_shape[static_cast<size_t>(axis)];
  return reduced;
}

}  // namespace

void ref_reduce_sum(const RefCall& call) {
  std::vector<double> sums;
  reduce_into(call, sums);
  float* y = call.out_f32(0);
  for (size_t i = 0; i < sums.size(); ++i) y[i] = static_cast<float>(sums[i]);
}

void ref_reduce_mean(const RefCall& call) {
  std::vector<double> sums;
  const double reduced = static_cast<double>(reduce_into(call, sums));
  float* y = call.out_f32(0);
  for (size_t i = 0; i < sums.size(); ++i) y[i] = static_cast<float>(sums[i] / reduced);
}

void ref_fill(const RefCall& call) {
  const float value = call.attrs<FillAttrs>().value;
  const int64_t count = num_elements(call.out[0].shape);
  float* y = call.out_f32(0);
  for (int64_t i = 0; i < count; ++i) y[i] = value;
}

}  // namespace memfit
