// Reference kernels of softmax, log-softmax, their gradients and the
// softmax cross-entropy loss. A "row" is the set of elements along the axis for
// one (outer, inner) position: element j of row (o, i) lives at (o len + j) inner + i.
// In place, each row's reductions are complete before the row is overwritten,
// and rows do not overlap.
#include <algorithm>
#include <cmath>

#include "backends/reference/ref_ops.h"
#include "backends/reference/ref_util.h"

namespace memfit {
namespace {

// Calls f(offset of element 0, stride between elements, len) once per row of
// a tensor of shape `shape` along `axis`.
template <class F>
void for_each_row(const Shape& shape, int64_t axis, F f) {
  const AxisView v = axis_view(shape, axis);
  for (int64_t o = 0; o < v.outer; ++o) {
    for (int64_t i = 0; i < v.inner; ++i) f(o * v.len * v.inner + i, v.inner, v.len);
  }
}

// max_j x_j and sum_j exp(x_j - max) of one row; subtracting the max keeps exp finite.
struct RowExp {
  double max = 0.0;
  double sum = 0.0;
};

RowExp row_exp(const float* x, int64_t first, int64_t stride, int64_t len) {
  RowExp r;
  r.max = x[first];
  for (int64_t j = 1; j < len; ++j)
    r.max = std::max(r.max, static_cast<double>(x[first + j * stride]));
  for (int64_t j = 0; j < len; ++j) r.sum += std::exp(x[first + j * stride] - r.max);
  return r;
}

int64_t checked_label(const int32_t* labels, int64_t n, int64_t classes) {
  const int64_t label = labels[n];
  MEMFIT_CHECK(label >= 0 && label < classes);
  return label;
}

}  // namespace

void ref_softmax(const RefCall& call) {
  const float* x = call.in_f32(0);
  float* y = call.out_f32(0);  // may be x
  for_each_row(call.in[0].shape, call.attrs<AxisAttrs>().axis,
               [&](int64_t first, int64_t stride, int64_t len) {
                 const RowExp r = row_exp(x, first, stride, len);
                 for (int64_t j = 0; j < len; ++j) {
                   const int64_t at = first + j * stride;
                   y[at] = static_cast<float>(std::exp(x[at] - r.max) / r.sum);
                 }
               });
}

// dx = y (dy - sum_j dy_j y_j)
void ref_softmax_grad(const RefCall& call) {
  const float* dy = call.in_f32(0);
  const float* y = call.in_f32(1);
  float* dx = call.out_f32(0);  // may be dy
  for_each_row(call.in[0].shape, call.attrs<AxisAttrs>().axis,
               [&](int64_t first, int64_t stride, int64_t len) {
                 double dot = 0.0;
                 for (int64_t j = 0; j < len; ++j) {
                   const int64_t at = first + j * stride;
                   dot += static_cast<double>(dy[at]) * y[at];
                 }
                 for (int64_t j = 0; j < len; ++j) {
                   const int64_t at = first + j * stride;
                   dx[at] = static_cast<float>(y[at] * (dy[at] - dot));
                 }
               });
}

// y = x - max - log(sum_j exp(x_j - max))
void ref_log_softmax(const RefCall& call) {
  const float* x = call.in_f32(0);
  float* y = call.out_f32(0);  // may be x
  for_each_row(call.in[0].shape, call.attrs<AxisAttrs>().axis,
               [&](int64_t first, int64_t stride, int64_t len) {
                 const RowExp r = row_exp(x, first, stride, len);
                 const double log_sum_exp = r.max + std::log(r.sum);
                 for (int64_t j = 0; j < len; ++j) {
                   const int64_t at = first + j * stride;
                   y[at] = static_cast<float>(x[at] - log_sum_exp);
                 }
               });
}

// dx = dy - exp(y) sum_j dy_j
void ref_log_softmax_grad(const RefCall& call) {
  const float* dy = call.in_f32(0);
  const float* y = call.in_f32(1);
  float* dx = call.out_f32(0);  // may be dy
  for_each_row(call.in[0].shape, call.attrs<AxisAttrs>().axis,
               [&](int64_t first, int64_t stride, int64_t len) {
                 double sum = 0.0;
                 for (int64_t j = 0; j < len; ++j) sum += dy[first + j * stride];
                 for (int64_t j = 0; j < len; ++j) {
                   const int64_t at = first + j * stride;
                   dx[at] = static_cast<float>(dy[at] - std::exp(static_cast<double>(y[at])) * sum);
                 }
               });
}

// loss = mean over n of logsumexp(logits_n) - logits_n[label_n]
void ref_softmax_cross_entropy(const RefCall& call) {
  const int64_t n = call.in[0].shape[0];
  const int64_t classes = call.in[0].shape[1];
  const float* logits = call.in_f32(0);    // (N, C)
  const int32_t* labels = call.in_i32(1);  // (N)
  float* loss = call.out_f32(0);           // ()
  double total = 0.0;
  for (int64_t r = 0; r < n; ++r) {
    const RowExp e = row_exp(logits, r * classes, 1, classes);
    const int64_t label = checked_label(labels, r, classes);
    total += e.max + std::log(e.sum) - logits[r * classes + label];
  }
  loss[0] = static_cast<float>(total / static_cast<double>(n));
}

// dlogits = dloss (softmax(logits_n) - onehot(label_n)) / N
void ref_softmax_cross_entropy_grad(const RefCall& call) {
  const int64_t n = call.in[1].shape[0];
  const int64_t classes = call.in[1].shape[1];
  const double dloss = call.in_f32(0)[0];  // ()
  const float* logits = call.in_f32(1);    // (N, C)
  const int32_t* labels = call.in_i32(2);  // (N)
  float* dlogits = call.out_f32(0);        // (N, C)
  const double per_row = dloss / static_cast<double>(n);
  for (int64_t r = 0; r < n; ++r) {
    const RowExp e = row_exp(logits, r * classes, 1, classes);
    const int64_t label = checked_label(labels, r, classes);
    for (int64_t j = 0; j < classes; ++j) {
      const double p = std::exp(logits[r * classes + j] - e.max) / e.sum;
      dlogits[r * classes + j] = static_cast<float>(per_row * (p - (j == label ? 1.0 : 0.0)));
    }
  }
}

}  // namespace memfit
