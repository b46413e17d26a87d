// Batch normalization and its gradient (training and inference mode) on
// channel-blocked tensors (c8, c16), as OpenMP loops over the channel blocks.
// oneDNN 2.6 has fast kernels for these layouts, but they synchronize their
// threads with a spin barrier that stalls for 100 ms and more per call when
// OpenMP threads wait passively (OMP_WAIT_POLICY=passive, measured on this
// project's machine: 127 ms against 1.9 ms for a (8, 64, 56, 56) tensor);
// these loops have no barrier inside a kernel.
//
// Each channel is reduced by one thread, over (n, s) in the reference
// kernel's order, in double, and every output is the reference's expression
// rounded once: the results equal the reference kernels' bit for bit, for
// any thread count. Padding lanes (channels C..C'-1) are written as zeros.
#include <cmath>
#include <variant>

#include "backends/cpu/cpu_kernels.h"
#include "core/check.h"

namespace memfit::cpu {
namespace {

constexpr int64_t kMaxBlock = 16;

// x (N, C, S...) in blocks of b channels: channel c of image n at spatial
// offset s lies at ((n B + c / b) S + s) b + c % b, B = C' / b blocks.
struct BlockedView {
  int64_t n = 0, c = 0, block = 1, blocks = 0, spatial = 1;
  BlockedView(const Shape& shape, Layout layout)
      : n(shape[0]), c(shape[1]), block(layout_block(layout)) {
    MEMFIT_CHECK(block > 1 && block <= kMaxBlock);
    blocks = (c + block - 1) / block;
    for (size_t d = 2; d < shape.size(); ++d) spatial *= shape[d];
  }
  double m() const { return static_cast<double>(n * spatial); }
  // Offset of lane 0 of block k at (image, s).
  int64_t at(int64_t image, int64_t k, int64_t s) const {
    return ((image * blocks + k) * spatial + s) * block;
  }
  // Lanes of block k that hold channels.
  int64_t lanes(int64_t k) const { return std::min(block, c - k * block); }
};

// Calls f(offset) for every (n, s) of block k, in the reference's order.
template <class F>
void for_each_position(const BlockedView& v, int64_t k, F&& f) {
  for (int64_t image = 0; image < v.n; ++image) {
    for (int64_t s = 0; s < v.spatial; ++s) f(v.at(image, k, s));
  }
}

// Zeros in the padding lanes of block k of `out`.
void zero_padding(const BlockedView& v, int64_t k, float* out) {
  const int64_t lanes = v.lanes(k);
  if (lanes == v.block) return;
  for_each_position(v, k, [&](int64_t at) {
    for (int64_t l = lanes; l < v.block; ++l) out[at + l] = 0.0f;
  });
}

// The fused ReLU (BatchNormAttrs::relu) over a normalized value, as the
// eltwise kernels compute it.
inline float relu_if(bool relu, float y) { return relu && !(y > 0.0f) ? 0.0f : y; }

// Inputs x, gamma, beta, running_mean, running_var; outputs y, mean, var,
// new_running_mean, new_running_var (ref_batch_norm's formulas).
class BatchNormKernel final : public Kernel {
 public:
  BatchNormKernel(const BlockedView& v, const BatchNormAttrs& attrs) : v_(v), attrs_(attrs) {}

  void run(const KernelArgs& args) override {
    const auto* x = static_cast<const float*>(args.inputs[0]);
    const auto* gamma = static_cast<const float*>(args.inputs[1]);
    const auto* beta = static_cast<const float*>(args.inputs[2]);
    const auto* running_mean = static_cast<const float*>(args.inputs[3]);
    const auto* running_var = static_cast<const float*>(args.inputs[4]);
    auto* y = static_cast<float*>(args.outputs[0]);
    auto* mean_out = static_cast<float*>(args.outputs[1]);
    auto* var_out = static_cast<float*>(args.outputs[2]);
    auto* new_mean = static_cast<float*>(args.outputs[3]);
    auto* new_var = static_cast<float*>(args.outputs[4]);
    const double m = v_.m(), momentum = attrs_.momentum;
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < v_.blocks; ++k) {
      const int64_t lanes = v_.lanes(k), c0 = k * v_.block;
      double sum[kMaxBlock] = {}, square_sum[kMaxBlock] = {}, mean[kMaxBlock], inv_std[kMaxBlock];
      for_each_position(v_, k, [&](int64_t at) {
        for (int64_t l = 0; l < lanes; ++l) sum[l] += x[at + l];
      });
      for (int64_t l = 0; l < lanes; ++l) mean[l] = sum[l] / m;
      for_each_position(v_, k, [&](int64_t at) {
        for (int64_t l = 0; l < lanes; ++l) {
          const double d = x[at + l] - mean[l];
          square_sum[l] += d * d;
        }
      });
      double saved_mean[kMaxBlock];
      for (int64_t l = 0; l < lanes; ++l) {
        const int64_t ch = c0 + l;
        const double var = square_sum[l] / m;
        mean_out[ch] = static_cast<float>(mean[l]);
        var_out[ch] = static_cast<float>(var);
        saved_mean[l] = mean_out[ch];
        inv_std[l] = 1.0 / std::sqrt(static_cast<double>(var_out[ch]) + attrs_.eps);
        new_mean[ch] = static_cast<float>((1.0 - momentum) * running_mean[ch] + momentum * mean[l]);
        new_var[ch] = static_cast<float>((1.0 - momentum) * running_var[ch] +
                                         momentum * var * m / (m - 1.0));
      }
      for_each_position(v_, k, [&](int64_t at) {
        for (int64_t l = 0; l < lanes; ++l) {
          y[at + l] = relu_if(attrs_.relu, static_cast<float>(gamma[c0 + l] * (x[at + l] - saved_mean[l]) *
                                                                  inv_std[l] +
                                                              beta[c0 + l]));
        }
      });
      zero_padding(v_, k, y);
    }
  }

 private:
  BlockedView v_;
  BatchNormAttrs attrs_;
};

// Inputs dy, x, gamma, mean, var (batch statistics, or the running ones in
// inference mode); outputs dx, dgamma, dbeta. dx may alias dy: a block's sums
// are complete before any of its dx is written.
class BatchNormGradKernel final : public Kernel {
 public:
  BatchNormGradKernel(const BlockedView& v, const BatchNormAttrs& attrs, bool inference)
      : v_(v), attrs_(attrs), inference_(inference) {}

  void run(const KernelArgs& args) override {
    const auto* dy = static_cast<const float*>(args.inputs[0]);
    const auto* x = static_cast<const float*>(args.inputs[1]);
    const auto* gamma = static_cast<const float*>(args.inputs[2]);
    const auto* mean = static_cast<const float*>(args.inputs[3]);
    const auto* var = static_cast<const float*>(args.inputs[4]);
    auto* dx = static_cast<float*>(args.outputs[0]);
    auto* dgamma = static_cast<float*>(args.outputs[1]);
    auto* dbeta = static_cast<float*>(args.outputs[2]);
    const double m = v_.m();
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < v_.blocks; ++k) {
      const int64_t lanes = v_.lanes(k), c0 = k * v_.block;
      double inv_std[kMaxBlock], mu[kMaxBlock], sum_dy[kMaxBlock] = {}, sum_dy_xhat[kMaxBlock] = {};
      for (int64_t l = 0; l < lanes; ++l) {
        inv_std[l] = 1.0 / std::sqrt(static_cast<double>(var[c0 + l]) + attrs_.eps);
        mu[l] = mean[c0 + l];
      }
      for_each_position(v_, k, [&](int64_t at) {
        for (int64_t l = 0; l < lanes; ++l) {
          sum_dy[l] += dy[at + l];
          sum_dy_xhat[l] += dy[at + l] * ((x[at + l] - mu[l]) * inv_std[l]);
        }
      });
      if (inference_) {
        for_each_position(v_, k, [&](int64_t at) {
          for (int64_t l = 0; l < lanes; ++l) {
            dx[at + l] = static_cast<float>(dy[at + l] * gamma[c0 + l] * inv_std[l]);
          }
        });
      } else {
        for_each_position(v_, k, [&](int64_t at) {
          for (int64_t l = 0; l < lanes; ++l) {
            const double xhat = (x[at + l] - mu[l]) * inv_std[l];
            dx[at + l] = static_cast<float>(gamma[c0 + l] * inv_std[l] *
                                            (dy[at + l] - sum_dy[l] / m - xhat * sum_dy_xhat[l] / m));
          }
        });
      }
      zero_padding(v_, k, dx);
      for (int64_t l = 0; l < lanes; ++l) {
        dgamma[c0 + l] = static_cast<float>(sum_dy_xhat[l]);
        dbeta[c0 + l] = static_cast<float>(sum_dy[l]);
      }
    }
  }

 private:
  BlockedView v_;
  BatchNormAttrs attrs_;
  bool inference_;
};

// Inputs x, gamma, beta, running_mean, running_var; output y. y may alias x.
class BatchNormInferenceKernel final : public Kernel {
 public:
  BatchNormInferenceKernel(const BlockedView& v, const BatchNormAttrs& attrs) : v_(v), attrs_(attrs) {}

  void run(const KernelArgs& args) override {
    const auto* x = static_cast<const float*>(args.inputs[0]);
    const auto* gamma = static_cast<const float*>(args.inputs[1]);
    const auto* beta = static_cast<const float*>(args.inputs[2]);
    const auto* running_mean = static_cast<const float*>(args.inputs[3]);
    const auto* running_var = static_cast<const float*>(args.inputs[4]);
    auto* y = static_cast<float*>(args.outputs[0]);
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < v_.blocks; ++k) {
      const int64_t lanes = v_.lanes(k), c0 = k * v_.block;
      double inv_std[kMaxBlock], mu[kMaxBlock];
      for (int64_t l = 0; l < lanes; ++l) {
        inv_std[l] = 1.0 / std::sqrt(static_cast<double>(running_var[c0 + l]) + attrs_.eps);
        mu[l] = running_mean[c0 + l];
      }
      for_each_position(v_, k, [&](int64_t at) {
        for (int64_t l = 0; l < lanes; ++l) {
          y[at + l] = relu_if(attrs_.relu, static_cast<float>(gamma[c0 + l] * (x[at + l] - mu[l]) * inv_std[l] +
                                                              beta[c0 + l]));
        }
      });
      zero_padding(v_, k, y);
    }
  }

 private:
  BlockedView v_;
  BatchNormAttrs attrs_;
};

}  // namespace

std::unique_ptr<Kernel> make_blocked_batch_norm_kernel(const Graph& graph, const Node& node) {
  const auto& attrs = std::get<BatchNormAttrs>(node.attrs);
  const bool grad = node.op == OpKind::batch_norm_grad || node.op == OpKind::batch_norm_inference_grad;
  const Value& x = graph.value(node.inputs[grad ? 1 : 0]);
  const BlockedView view(x.type.shape, x.layout);
  switch (node.op) {
    case OpKind::batch_norm:
      return std::make_unique<BatchNormKernel>(view, attrs);
    case OpKind::batch_norm_inference:
      return std::make_unique<BatchNormInferenceKernel>(view, attrs);
    case OpKind::batch_norm_grad:
      return std::make_unique<BatchNormGradKernel>(view, attrs, false);
    case OpKind::batch_norm_inference_grad:
      return std::make_unique<BatchNormGradKernel>(view, attrs, true);
    default:
      MEMFIT_CHECK(false);
      return nullptr;
  }
}

}  // namespace memfit::cpu
