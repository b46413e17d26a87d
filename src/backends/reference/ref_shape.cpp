// Reference kernels of the data-movement ops. They only copy elements, so they
// work on bytes and serve every dtype (f32 activations, i32 labels alike).
#include <algorithm>
#include <cstring>

#include "backends/reference/ref_ops.h"
#include "backends/reference/ref_util.h"

namespace memfit {
namespace {

const char* in_bytes(const RefCall& call, size_t i) {
  return static_cast<const char*>(call.args.inputs[i]);
}
char* out_bytes(const RefCall& call, size_t i) { return static_cast<char*>(call.args.outputs[i]); }

// Copies `count` elements of `elem` bytes; element counts become byte counts here only.
void copy_elements(char* dst, const char* src, int64_t count, size_t elem) {
  std::memcpy(dst, src, static_cast<size_t>(count) * elem);
}

// y[i] = x at the offset that y's coordinates of i reach with x_strides, one
// element at a time (bytes are copied, so any dtype).
void gather_strided(const RefCall& call, const std::vector<int64_t>& x_strides) {
  const Shape& y_shape = call.out[0].shape;
  const size_t elem = dtype_size(call.out[0].dtype);
  const int64_t count = num_elements(y_shape);
  const char* x = in_bytes(call, 0);
  char* y = out_bytes(call, 0);
  for (int64_t i = 0; i < count; ++i) {
    copy_elements(y + static_cast<size_t>(i) * elem,
                  x + static_cast<size_t>(strided_offset(i, y_shape, x_strides)) * elem, 1, elem);
  }
}

}  // namespace

// The elements are already in row-major order; only the shape changes. In place,
// the buffers are the same and there is nothing to do.
void ref_reshape(const RefCall& call) {
  const char* x = in_bytes(call, 0);
  char* y = out_bytes(call, 0);
  if (x == y) return;
  copy_elements(y, x, num_elements(call.out[0].shape), dtype_size(call.out[0].dtype));
}

void ref_broadcast_to(const RefCall& call) {
  const Shape& y_shape = call.out[0].shape;
  const std::vector<int64_t> x_strides = broadcast_strides(call.in[0].shape, y_shape);
  gather_strided(call, x_strides);
}

// y[c_0, ..., c_r] = x at coordinate c_i along dimension perm[i]: dimension i of
// y walks x with stride x_strides[perm[i]].
void ref_transpose(const RefCall& call) {
  const std::vector<int64_t>& perm = call.attrs<PermAttrs>().perm;
  const Shape& y_shape = call.out[0].shape;
  MEMFIT_CHECK(perm.size() == y_shape.size() && call.in[0].shape.size() == y_shape.size());
  const std::vector<int64_t> x_strides = row_major_strides(call.in[0].shape);
  std::vector<int64_t> strides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) strides[i] = x_strides[static_cast<size_t>(perm[i])];
  gather_strided(call, strides);
}

// Seen as (outer, len, inner) around the axis, each input contributes a block of
// len_k * inner elements to every outer row of y, after the blocks of the inputs before it.
void ref_concat(const RefCall& call) {
  const int64_t axis = call.attrs<AxisAttrs>().axis;
  const AxisView y_view = axis_view(call.out[0].shape, axis);
  const size_t elem = dtype_size(call.out[0].dtype);
  char* y = out_bytes(call, 0);
  int64_t y_start = 0;  // where input k starts along the axis of y
  for (size_t k = 0; k < call.in.size(); ++k) {
    const AxisView x_view = axis_view(call.in[k].shape, axis);
    MEMFIT_CHECK(x_view.outer == y_view.outer && x_view.inner == y_view.inner);
    const int64_t block = x_view.len * x_view.inner;
    const char* x = in_bytes(call, k);
    for (int64_t o = 0; o < y_view.outer; ++o) {
      copy_elements(y + static_cast<size_t>((o * y_view.len + y_start) * y_view.inner) * elem,
                    x + static_cast<size_t>(o * block) * elem, block, elem);
    }
    y_start += x_view.len;
  }
  MEMFIT_CHECK(y_start == y_view.len);
}

// y holds elements [start, start + len_y) along the axis of x.
void ref_slice(const RefCall& call) {
  const auto& attrs = call.attrs<SliceAttrs>();
  const AxisView x_view = axis_view(call.in[0].shape, attrs.axis);
  const AxisView y_view = axis_view(call.out[0].shape, attrs.axis);
  MEMFIT_CHECK(attrs.start >= 0 && attrs.end - attrs.start == y_view.len &&
               attrs.end <= x_view.len);
  const int64_t block = y_view.len * y_view.inner;
  const size_t elem = dtype_size(call.out[0].dtype);
  const char* x = in_bytes(call, 0);
  char* y = out_bytes(call, 0);
  for (int64_t o = 0; o < x_view.outer; ++o) {
    copy_elements(y + static_cast<size_t>(o * block) * elem,
                  x + static_cast<size_t>((o * x_view.len + attrs.start) * x_view.inner) * elem,
                  block, elem);
  }
}

// dx is zero outside [start, end) along the axis and dy inside it; with a
// second input acc, dx is acc outside and acc + dy inside (f32 only).
void ref_slice_grad(const RefCall& call) {
  const auto& attrs = call.attrs<SliceAttrs>();
  const AxisView dy_view = axis_view(call.in[0].shape, attrs.axis);
  const AxisView dx_view = axis_view(call.out[0].shape, attrs.axis);
  MEMFIT_CHECK(attrs.start >= 0 && attrs.end - attrs.start == dy_view.len &&
               attrs.end <= dx_view.len);
  const int64_t block = dy_view.len * dy_view.inner;
  const size_t elem = dtype_size(call.out[0].dtype);
  const char* dy = in_bytes(call, 0);
  char* dx = out_bytes(call, 0);
  if (call.in.size() == 2) {
    const float* acc = call.in_f32(1);
    float* out = call.out_f32(0);
    const auto* part = reinterpret_cast<const float*>(dy);
    if (out != acc) std::memmove(out, acc, static_cast<size_t>(num_elements(call.out[0].shape)) * sizeof(float));
    for (int64_t o = 0; o < dx_view.outer; ++o) {
      float* row = out + (o * dx_view.len + attrs.start) * dx_view.inner;
      for (int64_t j = 0; j < block; ++j) row[j] += part[o * block + j];
    }
    return;
  }
  // All-zero bytes are 0.0f and 0 alike.
  std::memset(dx, 0, static_cast<size_t>(num_elements(call.out[0].shape)) * elem);
  for (int64_t o = 0; o < dx_view.outer; ++o) {
    copy_elements(dx + static_cast<size_t>((o * dx_view.len + attrs.start) * dx_view.inner) * elem,
                  dy + static_cast<size_t>(o * block) * elem, block, elem);
  }
}

// Output k holds elements [start_k, start_k + sizes[k]) along the axis of x,
// start_k the sum of the sizes before it.
void ref_split(const RefCall& call) {
  const int64_t axis = call.attrs<SplitAttrs>().axis;
  const AxisView x_view = axis_view(call.in[0].shape, axis);
  const size_t elem = dtype_size(call.in[0].dtype);
  const char* x = in_bytes(call, 0);
  int64_t x_start = 0;
  for (size_t k = 0; k < call.out.size(); ++k) {
    const AxisView y_view = axis_view(call.out[k].shape, axis);
    MEMFIT_CHECK(y_view.outer == x_view.outer && y_view.inner == x_view.inner);
    const int64_t block = y_view.len * y_view.inner;
    char* y = out_bytes(call, k);
    for (int64_t o = 0; o < x_view.outer; ++o) {
      copy_elements(y + static_cast<size_t>(o * block) * elem,
                    x + static_cast<size_t>((o * x_view.len + x_start) * x_view.inner) * elem,
                    block, elem);
    }
    x_start += y_view.len;
  }
  MEMFIT_CHECK(x_start == x_view.len);
}

// pad and pad_grad are f32 only (the padding value is a float).
// y = value everywhere, then x copied one innermost row at a time to the
// offset that `before` gives: row r of x (its coordinates over the outer
// dimensions) lands at those coordinates + before in y.
void ref_pad(const RefCall& call) {
  const auto& attrs = call.attrs<PadAttrs>();
  const Shape& x_shape = call.in[0].shape;
  const Shape& y_shape = call.out[0].shape;
  MEMFIT_CHECK(attrs.before.size() == x_shape.size() && y_shape.size() == x_shape.size());
  const float* x = call.in_f32(0);
  float* y = call.out_f32(0);
  const int64_t y_count = num_elements(y_shape);
  for (int64_t i = 0; i < y_count; ++i) y[i] = attrs.value;
  if (x_shape.empty()) {
    y[0] = x[0];
    return;
  }
  const size_t last = x_shape.size() - 1;
  const Shape rows(x_shape.begin(), x_shape.end() - 1);  // x's outer dimensions
  const std::vector<int64_t> y_strides = row_major_strides(y_shape);
  int64_t origin = 0;  // offset in y of x's first element
  for (size_t d = 0; d < x_shape.size(); ++d) origin += attrs.before[d] * y_strides[d];
  const std::vector<int64_t> row_strides(y_strides.begin(), y_strides.end() - 1);
  const int64_t row_count = num_elements(rows);
  for (int64_t r = 0; r < row_count; ++r) {
    std::copy_n(x + r * x_shape[last], x_shape[last],
                y + origin + strided_offset(r, rows, row_strides));
  }
}

// The inverse walk of ref_pad: dx row r is read from dy at the padded offset.
void ref_pad_grad(const RefCall& call) {
  const auto& attrs = call.attrs<PadAttrs>();
  const Shape& dy_shape = call.in[0].shape;
  const Shape& dx_shape = call.out[0].shape;
  MEMFIT_CHECK(attrs.before.size() == dx_shape.size() && dy_shape.size() == dx_shape.size());
  const float* dy = call.in_f32(0);
  float* dx = call.out_f32(0);
  if (dx_shape.empty()) {
    dx[0] = dy[0];
    return;
  }
  const size_t last = dx_shape.size() - 1;
  const Shape rows(dx_shape.begin(), dx_shape.end() - 1);
  const std::vector<int64_t> dy_strides = row_major_strides(dy_shape);
  int64_t origin = 0;
  for (size_t d = 0; d < dx_shape.size(); ++d) origin += attrs.before[d] * dy_strides[d];
  const std::vector<int64_t> row_strides(dy_strides.begin(), dy_strides.end() - 1);
  const int64_t row_count = num_elements(rows);
  for (int64_t r = 0; r < row_count; ++r) {
    std::copy_n(dy + origin + strided_offset(r, rows, row_strides), dx_shape[last],
                dx + r * dx_shape[last]);
  }
}

}  // namespace memfit
