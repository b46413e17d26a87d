// memfit's elementwise CUDA kernels (cuda_launchers.h): fill, the tail of
// linear and matmul, dropout and the optimizers' updates.
// Grid-stride loops: any count runs on a bounded grid.
#include <cuda_runtime.h>

#include "backends/cuda/cuda_grid.cuh"
#include "backends/cuda/cuda_launchers.h"
#include "core/random.h"

namespace memfit::cuda {
namespace {

__global__ void fill_kernel(float* y, int64_t count, float value) {
  MEMFIT_FOR_EACH(i, count) y[i] = value;
}

__global__ void bias_add_relu_kernel(float* y, const float* bias, const float* add, int64_t count,
                                     int64_t channels, int64_t inner, bool relu) {
  MEMFIT_FOR_EACH(i, count) {
    float value = y[i];
    if (bias != nullptr) value += bias[i / inner % channels];
    if (add != nullptr) value += add[i];
    y[i] = relu ? fmaxf(value, 0.0f) : value;
  }
}

__global__ void dropout_kernel(const float* x, float* y, int64_t count, float p, uint64_t seed,
                               uint64_t step, uint64_t key) {
  const double keep_fraction = 1.0 - static_cast<double>(p);
  MEMFIT_FOR_EACH(i, count) {
    const bool keep = dropout_keeps(seed, step, key, static_cast<uint64_t>(i), p);
    y[i] = keep ? static_cast<float>(x[i] / keep_fraction) : 0.0f;
  }
}

__global__ void sgd_kernel(const float* w, const float* g, const float* v, float* w_next,
                           float* v_next, int64_t count, double lr, double momentum,
                           double weight_decay) {
  MEMFIT_FOR_EACH(i, count) {
    const double w_i = w[i];
    const double d = g[i] + weight_decay * w_i;
    const double v_i = v != nullptr ? momentum * v[i] + d : d;
    if (v_next != nullptr) v_next[i] = static_cast<float>(v_i);
    w_next[i] = static_cast<float>(w_i - lr * v_i);
  }
}

__global__ void adamw_kernel(const float* w, const float* g, const float* m, const float* v,
                             float* w_next, float* m_next, float* v_next, int64_t count, double lr,
                             double beta1, double beta2, double eps, double weight_decay,
                             double correction1, double correction2) {
  MEMFIT_FOR_EACH(i, count) {
    const double w_i = w[i];
    const double g_i = g[i];
    const double m_i = beta1 * m[i] + (1.0 - beta1) * g_i;
    const double v_i = beta2 * v[i] + (1.0 - beta2) * g_i * g_i;
    const double step = (m_i / correction1) / (sqrt(v_i / correction2) + eps);
    m_next[i] = static_cast<float>(m_i);
    v_next[i] = static_cast<float>(v_i);
    w_next[i] = static_cast<float>(w_i - lr * (weight_decay * w_i + step));
  }
}

}  // namespace

void launch_fill(float* y, int64_t count, float value, void* stream) {
  fill_kernel<<<blocks_for(count), kThreads, 0, as_stream(stream)>>>(y, count, value);
}

void launch_bias_add_relu(float* y, const float* bias, const float* add, int64_t count,
                          int64_t channels, int64_t inner, bool relu, void* stream) {
  bias_add_relu_kernel<<<blocks_for(count), kThreads, 0, as_stream(stream)>>>(
      y, bias, add, count, channels, inner, relu);
}

void launch_dropout(const float* x, float* y, int64_t count, float p, uint64_t seed, uint64_t step,
                    uint64_t key, void* stream) {
  dropout_kernel<<<blocks_for(count), kThreads, 0, as_stream(stream)>>>(x, y, count, p, seed, step,
                                                                        key);
}

void launch_sgd_update(const float* w, const float* g, const float* v, float* w_next, float* v_next,
                       int64_t count, double lr, double momentum, double weight_decay,
                       void* stream) {
  sgd_kernel<<<blocks_for(count), kThreads, 0, as_stream(stream)>>>(w, g, v, w_next, v_next, count,
                                                                    lr, momentum, weight_decay);
}

void launch_adamw_update(const float* w, const float* g, const float* m, const float* v,
                         float* w_next, float* m_next, float* v_next, int64_t count, double lr,
                         double beta1, double beta2, double eps, double weight_decay,
                         double correction1, double correction2, void* stream) {
  adamw_kernel<<<blocks_for(count), kThreads, 0, as_stream(stream)>>>(
      w, g, m, v, w_next, m_next, v_next, count, lr, beta1, beta2, eps, weight_decay, correction1,
      correction2);
}

}  // namespace memfit::cuda
