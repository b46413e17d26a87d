// memfit's CUDA kernels for activations, their gradients and the
// broadcasting binary ops (cuda_launchers.h), each formula in double and
// rounded once, as the reference kernels.
#include <cuda_runtime.h>

#include "backends/cuda/cuda_grid.cuh"
#include "backends/cuda/cuda_launchers.h"

namespace memfit::cuda {
namespace {

__device__ double normal_cdf(double x) { return 0.5 * (1.0 + erf(x / 1.4142135623730951)); }
__device__ double normal_pdf(double x) { return exp(-0.5 * x * x) / 2.5066282746310002; }

__global__ void unary_kernel(Unary op, const float* x, float* y, int64_t count, double alpha) {
  MEMFIT_FOR_EACH(i, count) {
    const double v = x[i];
    double r = 0.0;
    switch (op) {
      case Unary::relu:
        r = v > 0.0 ? v : 0.0;
        break;
      case Unary::gelu:
        r = v * normal_cdf(v);
        break;
      case Unary::tanh:
        r = tanh(v);
        break;
      case Unary::sigmoid:
        r = 1.0 / (1.0 + exp(-v));
        break;
      case Unary::scale:
        r = alpha * v;
        break;
    }
    y[i] = static_cast<float>(r);
  }
}

__global__ void unary_grad_kernel(UnaryGrad op, const float* dy, const float* other, float* dx,
                                  int64_t count) {
  MEMFIT_FOR_EACH(i, count) {
    const double d = dy[i];
    const double o = other[i];
    double r = 0.0;
    switch (op) {
      case UnaryGrad::relu:
        r = o > 0.0 ? d : 0.0;
        break;
      case UnaryGrad::gelu:
        r = d * (normal_cdf(o) + o * normal_pdf(o));
        break;
      case UnaryGrad::tanh:
        r = d * (1.0 - o * o);
        break;
      case UnaryGrad::sigmoid:
        r = d * o * (1.0 - o);
        break;
    }
    dx[i] = static_cast<float>(r);
  }
}

__global__ void binary_kernel(Binary op, const float* a, const float* b, float* y,
                              BroadcastShape shape, int64_t count) {
  MEMFIT_FOR_EACH(i, count) {
    int64_t a_at = 0, b_at = 0, rest = i;
    for (int d = shape.rank - 1; d >= 0; --d) {
      const int64_t index = rest % shape.sizes[d];
      rest /= shape.sizes[d];
      a_at += index * shape.a_strides[d];
      b_at += index * shape.b_strides[d];
    }
    const double u = a[a_at], v = b[b_at];
    y[i] = static_cast<float>(op == Binary::add ? u + v : op == Binary::sub ? u - v : u * v);
  }
}

}  // namespace

void launch_unary(Unary op, const float* x, float* y, int64_t count, double alpha, void* stream) {
  unary_kernel<<<blocks_for(count), kThreads, 0, as_stream(stream)>>>(op, x, y, count, alpha);
}

void launch_unary_grad(UnaryGrad op, const float* dy, const float* other, float* dx, int64_t count,
                       void* stream) {
  unary_grad_kernel<<<blocks_for(count), kThreads, 0, as_stream(stream)>>>(op, dy, other, dx,
                                                                           count);
}

void launch_binary(Binary op, const float* a, const float* b, float* y, const BroadcastShape& shape,
                   void* stream) {
  int64_t count = 1;
  for (int d = 0; d < shape.rank; ++d) count *= shape.sizes[d];
  binary_kernel<<<blocks_for(count), kThreads, 0, as_stream(stream)>>>(op, a, b, y, shape, count);
}

}  // namespace memfit::cuda
