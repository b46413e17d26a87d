// Reference kernels of embedding, embedding_grad, causal_mask and where.
#include <string>
#include <vector>

#include "backends/reference/ref_ops.h"
#include "backends/reference/ref_util.h"
#include "ops/op_util.h"

namespace memfit {
namespace {

// The row of ids[n]. Kernels cannot return a Status, and an id outside the
// table is bad data that no shape check sees: checked_table_row stops the step.
int64_t checked_row(const RefCall& call, const int32_t* ids, int64_t n, int64_t rows) {
  return ops::checked_table_row(call.node, ids[n], n, rows);
}

}  // namespace

// y[n, :] = table[ids[n], :] for every flat position n of ids.
void ref_embedding(const RefCall& call) {
  const int64_t rows = call.in[1].shape[0];
  const int64_t dim = call.in[1].shape[1];
  const int64_t count = num_elements(call.in[0].shape);
  const int32_t* ids = call.in_i32(0);  // (...)
  const float* table = call.in_f32(1);  // (V, D)
  float* y = call.out_f32(0);           // (..., D)
  for (int64_t n = 0; n < count; ++n) {
    const float* row = table + checked_row(call, ids, n, rows) * dim;
    for (int64_t d = 0; d < dim; ++d) y[n * dim + d] = row[d];
  }
}

// dtable = 0, then dtable[ids[n], :] += dy[n, :] for n = 0, 1, ... in order, in
// double, rounded once at the end: the sum of a row does not depend on threads
// or on anything but the ids, so repeated runs give identical bits.
void ref_embedding_grad(const RefCall& call) {
  const int64_t rows = call.out[0].shape[0];
  const int64_t dim = call.out[0].shape[1];
  const int64_t count = num_elements(call.in[1].shape);
  const float* dy = call.in_f32(0);     // (..., D)
  const int32_t* ids = call.in_i32(1);  // (...)
  float* dtable = call.out_f32(0);      // (V, D)
  std::vector<double> sum(static_cast<size_t>(rows * dim), 0.0);
  for (int64_t n = 0; n < count; ++n) {
    double* row = sum.data() + checked_row(call, ids, n, rows) * dim;
    for (int64_t d = 0; d < dim; ++d) row[d] += dy[n * dim + d];
  }
  if (call.in.size() == 3) {
    // dtable = acc + the table above, as add rounds it: in double, once.
    // acc may share dtable's buffer.
    const float* acc = call.in_f32(2);
    for (int64_t i = 0; i < rows * dim; ++i) {
      dtable[i] = static_cast<float>(static_cast<double>(acc[i]) +
                                     static_cast<double>(static_cast<float>(sum[static_cast<size_t>(i)])));
    }
    return;
  }
  for (int64_t i = 0; i < rows * dim; ++i)
    dtable[i] = static_cast<float>(sum[static_cast<size_t>(i)]);
}

// x seen as (batch, Tq, Tk): element (b, i, j) becomes `value` where j > i + offset.
// Elementwise, so y may alias x.
void ref_causal_mask(const RefCall& call) {
  const auto& attrs = call.attrs<CausalMaskAttrs>();
  const Shape& shape = call.in[0].shape;
  const size_t rank = shape.size();
  MEMFIT_CHECK(rank >= 2);
  const int64_t tq = shape[rank - 2];
  const int64_t tk = shape[rank - 1];
  const int64_t batch = dims_product(shape, 0, rank - 2);
  const float* x = call.in_f32(0);  // (..., Tq, Tk)
  float* y = call.out_f32(0);       // (..., Tq, Tk), may be x
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < tq; ++i) {
      for (int64_t j = 0; j < tk; ++j) {
        const int64_t at = (b * tq + i) * tk + j;
        y[at] = j > i + attrs.offset ? attrs.value : x[at];
      }
    }
  }
}

// y[i] = cond[i'] != 0 ? a[i] : b[i], cond read through broadcast strides.
// Each y[i] reads only a[i] and b[i], so y may alias a or b.
void ref_where(const RefCall& call) {
  const Shape& y_shape = call.out[0].shape;
  const std::vector<int64_t> cond_strides = broadcast_strides(call.in[0].shape, y_shape);
  const int64_t count = num_elements(y_shape);
  const int32_t* cond = call.in_i32(0);  // broadcast to y's shape
  const float* a = call.in_f32(1);
  const float* b = call.in_f32(2);
  float* y = call.out_f32(0);
  for (int64_t i = 0; i < count; ++i) {
    y[i] = cond[strided_offset(i, y_shape, cond_strides)] != 0 ? a[i] : b[i];
  }
}

}  // namespace memfit
