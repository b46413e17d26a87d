// Reference kernels of matmul and linear: one double accumulator per output element.
#include "backends/reference/ref_ops.h"
#include "backends/reference/ref_util.h"

namespace memfit {

void ref_matmul(const RefCall& call) {
  const auto& attrs = call.attrs<MatmulAttrs>();
  const Shape& a_shape = call.in[0].shape;
  const Shape& b_shape = call.in[1].shape;
  const Shape& y_shape = call.out[0].shape;
  MEMFIT_CHECK(a_shape.size() >= 2 && y_shape.size() == a_shape.size());
  MEMFIT_CHECK(b_shape.size() == 2 || b_shape.size() == a_shape.size());
  const size_t rank = y_shape.size();
  const int64_t m = y_shape[rank - 2];
  const int64_t n = y_shape[rank - 1];
  const int64_t k = attrs.trans_a ? a_shape[rank - 2] : a_shape[rank - 1];
  const int64_t batch = dims_product(y_shape, 0, rank - 2);
  // A 2-D b is shared by every batch: its batch stride is 0.
  const int64_t b_batch_stride = b_shape.size() == 2 ? 0 : k * n;
  const float* a = call.in_f32(0);  // (batch, M, K), or (batch, K, M) when trans_a
  const float* b = call.in_f32(1);  // (batch or 1, K, N), or (batch or 1, N, K) when trans_b
  float* y = call.out_f32(0);       // (batch, M, N); may be c
  // With c, the product rounded to float plus c, rounded again: the bits of a
  // matmul followed by an add.
  const float* c = call.in.size() == 3 ? call.in_f32(2) : nullptr;
  for (int64_t t = 0; t < batch; ++t) {
    const float* a_t = a + t * m * k;
    const float* b_t = b + t * b_batch_stride;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0.0;
        for (int64_t p = 0; p < k; ++p) {
          const double a_ip = attrs.trans_a ? a_t[p * m + i] : a_t[i * k + p];
          const double b_pj = attrs.trans_b ? b_t[j * k + p] : b_t[p * n + j];
          sum += a_ip * b_pj;
        }
        const int64_t at = (t * m + i) * n + j;
        y[at] = c ? static_cast<float>(static_cast<double>(static_cast<float>(sum)) + c[at])
                  : static_cast<float>(sum);
      }
    }
  }
}

void ref_linear(const RefCall& call) {
  const int64_t n = call.in[0].shape[0];
  const int64_t in_features = call.in[0].shape[1];
  const int64_t out_features = call.in[1].shape[0];
  const float* x = call.in_f32(0);                                     // (N, I)
  const float* w = call.in_f32(1);                                     // (O, I)
  const float* bias = call.in.size() >= 3 ? call.in_f32(2) : nullptr;  // (O)
  // With c: x w^T + b rounded to float plus c, rounded again, the bits of a
  // linear followed by an add.
  const float* c = call.in.size() == 4 ? call.in_f32(3) : nullptr;  // (N, O)
  float* y = call.out_f32(0);                                       // (N, O); may be c
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t o = 0; o < out_features; ++o) {
      double sum = bias != nullptr ? bias[o] : 0.0;
      for (int64_t i = 0; i < in_features; ++i) {
        sum += static_cast<double>(x[r * in_features + i]) * w[o * in_features + i];
      }
      const int64_t at = r * out_features + o;
      y[at] = c ? static_cast<float>(static_cast<double>(static_cast<float>(sum)) + c[at])
                : static_cast<float>(sum);
    }
  }
}

}  // namespace memfit
