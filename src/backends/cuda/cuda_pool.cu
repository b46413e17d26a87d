// memfit's pooling CUDA kernels (cuda_launchers.h): max and average pooling,
// 2-D and 3-D, and their gradients, with the reference's windows, ties and
// order of sums.
#include <cuda_runtime.h>

#include "backends/cuda/cuda_grid.cuh"
#include "backends/cuda/cuda_launchers.h"

namespace memfit::cuda {
namespace {

// The in-range part of dimension d of the window of output index `o_d`.
struct Span {
  int64_t begin, end;
};
__device__ Span window(const PoolShape& s, int d, int64_t o_d) {
  const int64_t first = o_d * s.stride[d] - s.pad[d];
  return Span{first < 0 ? 0 : first, first + s.kernel[d] < s.in[d] ? first + s.kernel[d] : s.in[d]};
}

// The volume offset of the first largest element of the window of output
// (oz, oy, ox) (with a volume; -1 without), and the count of its elements
// inside the input.
struct Window {
  int64_t argmax, inside;
};
__device__ Window scan(const PoolShape& s, const float* volume, int64_t oz, int64_t oy,
                       int64_t ox) {
  const Span z = window(s, 0, oz), y = window(s, 1, oy), x = window(s, 2, ox);
  Window w{-1, 0};
  for (int64_t i = z.begin; i < z.end; ++i) {
    for (int64_t j = y.begin; j < y.end; ++j) {
      for (int64_t k = x.begin; k < x.end; ++k) {
        const int64_t at = (i * s.in[1] + j) * s.in[2] + k;
        if (volume != nullptr && (w.argmax < 0 || volume[at] > volume[w.argmax])) w.argmax = at;
        ++w.inside;
      }
    }
  }
  return w;
}

__device__ double divisor(const PoolShape& s, int64_t inside) {
  return static_cast<double>(s.include_pad ? s.kernel[0] * s.kernel[1] * s.kernel[2] : inside);
}

__global__ void pool_kernel(Pool pool, const float* x, float* y, PoolShape s) {
  const int64_t out_volume = s.out[0] * s.out[1] * s.out[2];
  const int64_t in_volume = s.in[0] * s.in[1] * s.in[2];
  MEMFIT_FOR_EACH(i, s.planes * out_volume) {
    const int64_t o = i % out_volume;
    const float* volume = x + i / out_volume * in_volume;
    const int64_t oz = o / (s.out[1] * s.out[2]), oy = o / s.out[2] % s.out[1], ox = o % s.out[2];
    if (pool == Pool::max) {
      y[i] = volume[scan(s, volume, oz, oy, ox).argmax];
      continue;
    }
    const Span z = window(s, 0, oz), yy = window(s, 1, oy), xx = window(s, 2, ox);
    double sum = 0.0;
    int64_t inside = 0;
    for (int64_t a = z.begin; a < z.end; ++a) {
      for (int64_t b = yy.begin; b < yy.end; ++b) {
        for (int64_t c = xx.begin; c < xx.end; ++c) {
          sum += volume[(a * s.in[1] + b) * s.in[2] + c];
          ++inside;
        }
      }
    }
    y[i] = static_cast<float>(sum / divisor(s, inside));
  }
}

// The outputs along dimension d whose windows hold input index `at`.
__device__ Span covering(const PoolShape& s, int d, int64_t at) {
  // o stride - pad <= at < o stride - pad + kernel
  const int64_t high = at + s.pad[d];
  const int64_t low = high - s.kernel[d] + 1;
  const int64_t begin = low <= 0 ? 0 : (low + s.stride[d] - 1) / s.stride[d];
  const int64_t last = high / s.stride[d];
  return Span{begin, last + 1 < s.out[d] ? last + 1 : s.out[d]};
}

__global__ void pool_grad_kernel(Pool pool, const float* dy, const float* x, float* dx,
                                 PoolShape s) {
  const int64_t out_volume = s.out[0] * s.out[1] * s.out[2];
  const int64_t in_volume = s.in[0] * s.in[1] * s.in[2];
  MEMFIT_FOR_EACH(i, s.planes * in_volume) {
    const int64_t p = i / in_volume, at = i % in_volume;
    const float* volume = x != nullptr ? x + p * in_volume : nullptr;
    const float* plane_dy = dy + p * out_volume;
    const int64_t z = at / (s.in[1] * s.in[2]), y = at / s.in[2] % s.in[1], xi = at % s.in[2];
    const Span oz = covering(s, 0, z), oy = covering(s, 1, y), ox = covering(s, 2, xi);
    double sum = 0.0;
    for (int64_t a = oz.begin; a < oz.end; ++a) {
      for (int64_t b = oy.begin; b < oy.end; ++b) {
        for (int64_t c = ox.begin; c < ox.end; ++c) {
          const int64_t o = (a * s.out[1] + b) * s.out[2] + c;
          const Window w = scan(s, volume, a, b, c);
          if (pool == Pool::max) {
            if (w.argmax == at) sum += plane_dy[o];
          } else {
            sum += plane_dy[o] / divisor(s, w.inside);
          }
        }
      }
    }
    dx[i] = static_cast<float>(sum);
  }
}

}  // namespace

void launch_pool(Pool pool, const float* x, float* y, const PoolShape& shape, void* stream) {
  const int64_t count = shape.planes * shape.out[0] * shape.out[1] * shape.out[2];
  pool_kernel<<<blocks_for(count), kThreads, 0, as_stream(stream)>>>(pool, x, y, shape);
}

void launch_pool_grad(Pool pool, const float* dy, const float* x, float* dx, const PoolShape& shape,
                      void* stream) {
  const int64_t count = shape.planes * shape.in[0] * shape.in[1] * shape.in[2];
  pool_grad_kernel<<<blocks_for(count), kThreads, 0, as_stream(stream)>>>(
      pool, dy, pool == Pool::max ? x : nullptr, dx, shape);
}

}  // namespace memfit::cuda
