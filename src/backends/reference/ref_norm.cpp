// Reference kernels of batch normalization (training and inference mode), layer
// normalization and their gradients. For batch norm, x is (N, C, spatial...)
// with 0 to 3 spatial dimensions; a channel's m = N S elements are visited as
// (n, s) with s over the S spatial positions. For layer norm, x is (..., D),
// seen as R = prod(...) rows of D elements.
#include <cmath>
#include <vector>

#include "backends/reference/ref_ops.h"
#include "backends/reference/ref_util.h"

namespace memfit {
namespace {

struct ChannelView {
  int64_t n, c, spatial;
  int64_t m() const { return n * spatial; }
  size_t at(int64_t in, int64_t ch, int64_t s) const {
    return static_cast<size_t>((in * c + ch) * spatial + s);
  }
};

ChannelView channel_view(const Shape& x) {
  MEMFIT_CHECK(x.size() >= 2 && x.size() <= 5);
  return {x[0], x[1], dims_product(x, 2, x.size())};
}

// The fused ReLU (BatchNormAttrs::relu) over a normalized value, as ref_relu
// computes it.
float relu_if(bool relu, float y) { return relu && !(y > 0.0f) ? 0.0f : y; }

}  // namespace

// Outputs: y (like x), mean (C), var (C, biased), new_running_mean (C), new_running_var (C);
// y = relu(normalized) with attrs.relu.
void ref_batch_norm(const RefCall& call) {
  const auto& attrs = call.attrs<BatchNormAttrs>();
  const ChannelView v = channel_view(call.in[0].shape);
  // The running variance is updated with the unbiased estimate var m / (m - 1),
  // which needs two elements per channel; shape inference rejects m = 1.
  MEMFIT_CHECK(v.m() > 1);
  const double m = static_cast<double>(v.m());
  const double momentum = attrs.momentum;
  const float* x = call.in_f32(0);             // (N, C, ...)
  const float* gamma = call.in_f32(1);         // (C)
  const float* beta = call.in_f32(2);          // (C)
  const float* running_mean = call.in_f32(3);  // (C)
  const float* running_var = call.in_f32(4);   // (C)
  float* y = call.out_f32(0);                  // (N, C, ...)
  float* mean_out = call.out_f32(1);           // (C)
  float* var_out = call.out_f32(2);            // (C)
  float* new_running_mean = call.out_f32(3);   // (C)
  float* new_running_var = call.out_f32(4);    // (C)
  for (int64_t ch = 0; ch < v.c; ++ch) {
    // Two passes (mean, then squared deviations) rather than E[x^2] - E[x]^2,
    // which cancels catastrophically when the mean is large.
    double sum = 0.0;
    for (int64_t in = 0; in < v.n; ++in) {
      for (int64_t s = 0; s < v.spatial; ++s) sum += x[v.at(in, ch, s)];
    }
    const double mean = sum / m;
    double square_sum = 0.0;
    for (int64_t in = 0; in < v.n; ++in) {
      for (int64_t s = 0; s < v.spatial; ++s) {
        const double d = x[v.at(in, ch, s)] - mean;
        square_sum += d * d;
      }
    }
    const double var = square_sum / m;
    // y is normalized with the statistics as saved (rounded to float), as
    // batch_norm_inference normalizes with given ones: a recomputed batch
    // norm (recompute_form) gives the same bits.
    mean_out[ch] = static_cast<float>(mean);
    var_out[ch] = static_cast<float>(var);
    const double saved_mean = mean_out[ch];
    const double inv_std = 1.0 / std::sqrt(static_cast<double>(var_out[ch]) + attrs.eps);
    for (int64_t in = 0; in < v.n; ++in) {
      for (int64_t s = 0; s < v.spatial; ++s) {
        const size_t at = v.at(in, ch, s);
        y[at] = relu_if(attrs.relu,
                        static_cast<float>(gamma[ch] * (x[at] - saved_mean) * inv_std + beta[ch]));
      }
    }
    new_running_mean[ch] =
        static_cast<float>((1.0 - momentum) * running_mean[ch] + momentum * mean);
    new_running_var[ch] =
        static_cast<float>((1.0 - momentum) * running_var[ch] + momentum * var * m / (m - 1.0));
  }
}

// With xhat = (x - mean) / sqrt(var + eps), per channel:
//   dbeta = sum dy, dgamma = sum dy xhat,
//   dx = gamma / sqrt(var + eps) (dy - dbeta / m - xhat dgamma / m).
// dx may alias dy: a channel's sums are complete before any of its dx is written,
// and dx of a channel overwrites only that channel's dy.
void ref_batch_norm_grad(const RefCall& call) {
  const auto& attrs = call.attrs<BatchNormAttrs>();
  const ChannelView v = channel_view(call.in[1].shape);
  const double m = static_cast<double>(v.m());
  const float* dy = call.in_f32(0);     // (N, C, ...)
  const float* x = call.in_f32(1);      // (N, C, ...)
  const float* gamma = call.in_f32(2);  // (C)
  const float* mean = call.in_f32(3);   // (C)
  const float* var = call.in_f32(4);    // (C)
  float* dx = call.out_f32(0);          // (N, C, ...), may be dy
  float* dgamma = call.out_f32(1);      // (C)
  float* dbeta = call.out_f32(2);       // (C)
  for (int64_t ch = 0; ch < v.c; ++ch) {
    const double inv_std = 1.0 / std::sqrt(static_cast<double>(var[ch]) + attrs.eps);
    double sum_dy = 0.0;
    double sum_dy_xhat = 0.0;
    for (int64_t in = 0; in < v.n; ++in) {
      for (int64_t s = 0; s < v.spatial; ++s) {
        const size_t at = v.at(in, ch, s);
        sum_dy += dy[at];
        sum_dy_xhat += dy[at] * ((x[at] - static_cast<double>(mean[ch])) * inv_std);
      }
    }
    for (int64_t in = 0; in < v.n; ++in) {
      for (int64_t s = 0; s < v.spatial; ++s) {
        const size_t at = v.at(in, ch, s);
        const double xhat = (x[at] - static_cast<double>(mean[ch])) * inv_std;
        dx[at] = static_cast<float>(gamma[ch] * inv_std *
                                    (dy[at] - sum_dy / m - xhat * sum_dy_xhat / m));
      }
    }
    dgamma[ch] = static_cast<float>(sum_dy_xhat);
    dbeta[ch] = static_cast<float>(sum_dy);
  }
}

// y = gamma (x - running_mean) / sqrt(running_var + eps) + beta, elementwise,
// so y may alias x.
void ref_batch_norm_inference(const RefCall& call) {
  const auto& attrs = call.attrs<BatchNormAttrs>();
  const ChannelView v = channel_view(call.in[0].shape);
  const float* x = call.in_f32(0);             // (N, C, ...)
  const float* gamma = call.in_f32(1);         // (C)
  const float* beta = call.in_f32(2);          // (C)
  const float* running_mean = call.in_f32(3);  // (C)
  const float* running_var = call.in_f32(4);   // (C)
  float* y = call.out_f32(0);                  // (N, C, ...), may be x
  for (int64_t ch = 0; ch < v.c; ++ch) {
    const double inv_std = 1.0 / std::sqrt(static_cast<double>(running_var[ch]) + attrs.eps);
    for (int64_t in = 0; in < v.n; ++in) {
      for (int64_t s = 0; s < v.spatial; ++s) {
        const size_t at = v.at(in, ch, s);
        y[at] = relu_if(attrs.relu,
                        static_cast<float>(gamma[ch] * (x[at] - static_cast<double>(running_mean[ch])) *
                                               inv_std +
                                           beta[ch]));
      }
    }
  }
}

// The statistics are constants: dx = dy gamma / sqrt(running_var + eps),
// dgamma = sum dy xhat, dbeta = sum dy. dx may alias dy: a channel's sums are
// complete before its dx is written.
void ref_batch_norm_inference_grad(const RefCall& call) {
  const auto& attrs = call.attrs<BatchNormAttrs>();
  const ChannelView v = channel_view(call.in[1].shape);
  const float* dy = call.in_f32(0);            // (N, C, ...)
  const float* x = call.in_f32(1);             // (N, C, ...)
  const float* gamma = call.in_f32(2);         // (C)
  const float* running_mean = call.in_f32(3);  // (C)
  const float* running_var = call.in_f32(4);   // (C)
  float* dx = call.out_f32(0);                 // (N, C, ...), may be dy
  float* dgamma = call.out_f32(1);             // (C)
  float* dbeta = call.out_f32(2);              // (C)
  for (int64_t ch = 0; ch < v.c; ++ch) {
    const double inv_std = 1.0 / std::sqrt(static_cast<double>(running_var[ch]) + attrs.eps);
    double sum_dy = 0.0;
    double sum_dy_xhat = 0.0;
    for (int64_t in = 0; in < v.n; ++in) {
      for (int64_t s = 0; s < v.spatial; ++s) {
        const size_t at = v.at(in, ch, s);
        sum_dy += dy[at];
        sum_dy_xhat += dy[at] * ((x[at] - static_cast<double>(running_mean[ch])) * inv_std);
      }
    }
    for (int64_t in = 0; in < v.n; ++in) {
      for (int64_t s = 0; s < v.spatial; ++s) {
        const size_t at = v.at(in, ch, s);
        dx[at] = static_cast<float>(dy[at] * gamma[ch] * inv_std);
      }
    }
    dgamma[ch] = static_cast<float>(sum_dy_xhat);
    dbeta[ch] = static_cast<float>(sum_dy);
  }
}

// Outputs: y (R, D), mean (R), rstd (R) = 1 / sqrt(var + eps), var biased.
void ref_layer_norm(const RefCall& call) {
  const auto& attrs = call.attrs<LayerNormAttrs>();
  const int64_t d = call.in[0].shape.back();
  const int64_t rows = num_elements(call.in[0].shape) / d;
  const float* x = call.in_f32(0);      // (R, D)
  const float* gamma = call.in_f32(1);  // (D)
  const float* beta = call.in_f32(2);   // (D)
  float* y = call.out_f32(0);           // (R, D)
  float* mean_out = call.out_f32(1);    // (R)
  float* rstd_out = call.out_f32(2);    // (R)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * d;
    // Two passes, as in batch norm: no cancellation for a large mean.
    double sum = 0.0;
    for (int64_t i = 0; i < d; ++i) sum += xr[i];
    const double mean = sum / static_cast<double>(d);
    double square_sum = 0.0;
    for (int64_t i = 0; i < d; ++i) square_sum += (xr[i] - mean) * (xr[i] - mean);
    const double rstd = 1.0 / std::sqrt(square_sum / static_cast<double>(d) + attrs.eps);
    for (int64_t i = 0; i < d; ++i) {
      y[r * d + i] = static_cast<float>(gamma[i] * (xr[i] - mean) * rstd + beta[i]);
    }
    mean_out[r] = static_cast<float>(mean);
    rstd_out[r] = static_cast<float>(rstd);
  }
}

// With xhat = (x - mean) rstd and g = dy gamma, per row:
//   dx = rstd (g - mean_D(g) - xhat mean_D(g xhat));
// over all rows: dgamma = sum dy xhat, dbeta = sum dy.
// dx may alias dy: dgamma and dbeta are complete before any dx is written, and
// a row's dx overwrites only that row's dy, after its sums are taken.
void ref_layer_norm_grad(const RefCall& call) {
  const int64_t d = call.in[1].shape.back();
  const int64_t rows = num_elements(call.in[1].shape) / d;
  const float* dy = call.in_f32(0);     // (R, D)
  const float* x = call.in_f32(1);      // (R, D)
  const float* gamma = call.in_f32(2);  // (D)
  const float* mean = call.in_f32(3);   // (R)
  const float* rstd = call.in_f32(4);   // (R)
  float* dx = call.out_f32(0);          // (R, D), may be dy
  float* dgamma = call.out_f32(1);      // (D)
  float* dbeta = call.out_f32(2);       // (D)
  auto xhat = [&](int64_t r, int64_t i) {
    return (x[r * d + i] - static_cast<double>(mean[r])) * rstd[r];
  };
  std::vector<double> sum_dy_xhat(static_cast<size_t>(d), 0.0), sum_dy(static_cast<size_t>(d), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < d; ++i) {
      sum_dy_xhat[static_cast<size_t>(i)] += dy[r * d + i] * xhat(r, i);
      sum_dy[static_cast<size_t>(i)] += dy[r * d + i];
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    double sum_g = 0.0;
    double sum_g_xhat = 0.0;
    for (int64_t i = 0; i < d; ++i) {
      const double g = static_cast<double>(dy[r * d + i]) * gamma[i];
      sum_g += g;
      sum_g_xhat += g * xhat(r, i);
    }
    const double n = static_cast<double>(d);
    for (int64_t i = 0; i < d; ++i) {
      const double g = static_cast<double>(dy[r * d + i]) * gamma[i];
      dx[r * d + i] = static_cast<float>(rstd[r] * (g - sum_g / n - xhat(r, i) * sum_g_xhat / n));
    }
  }
  for (int64_t i = 0; i < d; ++i) {
    dgamma[i] = static_cast<float>(sum_dy_xhat[static_cast<size_t>(i)]);
    dbeta[i] = static_cast<float>(sum_dy[static_cast<size_t>(i)]);
  }
}

}  // namespace memfit
