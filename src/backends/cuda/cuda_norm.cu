// memfit's normalization kernels (cuda_norm_launchers.h). Batch norm sums each
// channel in `chunks` blocks, one chunk of its m elements each (j = n
// spatial + s, visited as (n, s)), and a thread per channel adds the chunks
// in order; layer norm takes one block per row, and its parameter gradients
// sum chunks of rows per column the same way.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "backends/cuda/cuda_grid.cuh"
#include "backends/cuda/cuda_norm_launchers.h"

namespace memfit::cuda {
namespace {

// The scratch of batch norm: two sums per (channel, chunk), then per channel
// the two finished sums, the mean as normalized with and 1 / sqrt(var + eps).
struct ChannelScratch {
  double *partial0, *partial1, *sum0, *sum1, *mean, *inv_std;
};

ChannelScratch channel_scratch(const ChannelShape& v, void* workspace) {
  auto* d = static_cast<double*>(workspace);
  const int64_t parts = v.c * v.chunks;
  return {d,
          d + parts,
          d + 2 * parts,
          d + 2 * parts + v.c,
          d + 2 * parts + 2 * v.c,
          d + 2 * parts + 3 * v.c};
}

__device__ int64_t channel_at(const ChannelShape& v, int64_t ch, int64_t j) {
  return (j / v.spatial * v.c + ch) * v.spatial + j % v.spatial;
}

// Block b sums chunk b % chunks of channel b / chunks: [begin, end) of j.
struct ChunkOfChannel {
  int64_t ch, begin, end;
};
__device__ ChunkOfChannel chunk_of_channel(const ChannelShape& v) {
  const int64_t m = v.n * v.spatial;
  const int64_t len = (m + v.chunks - 1) / v.chunks;
  const int64_t chunk = blockIdx.x % v.chunks;
  const int64_t begin = std::min(m, chunk * len);
  return {blockIdx.x / v.chunks, begin, std::min(m, begin + len)};
}

// partial0 = sum of x, or with `centre` of (x - centre)^2.
__global__ void channel_sum_kernel(const float* x, const double* centre, ChannelShape v,
                                   double* partial0) {
  __shared__ double shared[kThreads];
  const ChunkOfChannel c = chunk_of_channel(v);
  double sum = 0.0;
  for (int64_t j = c.begin + threadIdx.x; j < c.end; j += kThreads) {
    const double value = x[channel_at(v, c.ch, j)];
    sum += centre == nullptr ? value : (value - centre[c.ch]) * (value - centre[c.ch]);
  }
  sum = block_sum(sum, shared);
  if (threadIdx.x == 0) partial0[blockIdx.x] = sum;
}

// partial0 = sum of dy, partial1 = sum of dy xhat.
__global__ void channel_grad_sum_kernel(const float* dy, const float* x, const float* mean,
                                        const float* var, double eps, ChannelShape v,
                                        double* partial0, double* partial1) {
  __shared__ double shared[kThreads];
  const ChunkOfChannel c = chunk_of_channel(v);
  const double inv_std = 1.0 / sqrt(static_cast<double>(var[c.ch]) + eps);
  const double centre = mean[c.ch];
  double sum_dy = 0.0, sum_dy_xhat = 0.0;
  for (int64_t j = c.begin + threadIdx.x; j < c.end; j += kThreads) {
    const int64_t at = channel_at(v, c.ch, j);
    sum_dy += dy[at];
    sum_dy_xhat += dy[at] * ((x[at] - centre) * inv_std);
  }
  sum_dy = block_sum(sum_dy, shared);
  sum_dy_xhat = block_sum(sum_dy_xhat, shared);
  if (threadIdx.x == 0) {
    partial0[blockIdx.x] = sum_dy;
    partial1[blockIdx.x] = sum_dy_xhat;
  }
}

// sum[ch] = the channel's chunks added in order (one thread per channel).
__global__ void channel_finish_kernel(const double* partial, ChannelShape v, double* sum) {
  MEMFIT_FOR_EACH(ch, v.c) {
    double total = 0.0;
    for (int64_t k = 0; k < v.chunks; ++k) total += partial[ch * v.chunks + k];
    sum[ch] = total;
  }
}

__global__ void divide_kernel(double* values, int64_t count, double by) {
  MEMFIT_FOR_EACH(i, count) values[i] /= by;
}

// The statistics as saved, the normalization's mean and 1 / sqrt(var + eps)
// from them, and the running statistics (from the unrounded ones).
__global__ void batch_norm_stats_kernel(BatchNormArgs a, ChannelShape v, double eps,
                                        double momentum, ChannelScratch s) {
  const double m = static_cast<double>(v.n * v.spatial);
  MEMFIT_FOR_EACH(ch, v.c) {
    const double mean = s.sum0[ch];
    const double var = s.sum1[ch] / m;
    a.mean[ch] = static_cast<float>(mean);
    a.var[ch] = static_cast<float>(var);
    s.mean[ch] = a.mean[ch];
    s.inv_std[ch] = 1.0 / sqrt(static_cast<double>(a.var[ch]) + eps);
    a.new_running_mean[ch] =
        static_cast<float>((1.0 - momentum) * a.running_mean[ch] + momentum * mean);
    a.new_running_var[ch] =
        static_cast<float>((1.0 - momentum) * a.running_var[ch] + momentum * var * m / (m - 1.0));
  }
}

__device__ float relu_if(bool relu, float y) { return relu && !(y > 0.0f) ? 0.0f : y; }

// y = relu_if(gamma (x - mean) inv_std + beta), mean and inv_std per channel
// from `mean`/`inv_std` (training) or from the running statistics.
__global__ void normalize_kernel(const float* x, const float* gamma, const float* beta,
                                 const double* mean, const double* inv_std,
                                 const float* running_mean, const float* running_var, double eps,
                                 bool relu, ChannelShape v, float* y) {
  MEMFIT_FOR_EACH(i, v.n * v.c * v.spatial) {
    const int64_t ch = i / v.spatial % v.c;
    const double centre = mean != nullptr ? mean[ch] : static_cast<double>(running_mean[ch]);
    const double scale =
        inv_std != nullptr ? inv_std[ch] : 1.0 / sqrt(static_cast<double>(running_var[ch]) + eps);
    y[i] = relu_if(relu, static_cast<float>(gamma[ch] * (x[i] - centre) * scale + beta[ch]));
  }
}

__global__ void batch_norm_grad_params_kernel(BatchNormGradArgs a, ChannelShape v,
                                              ChannelScratch s) {
  MEMFIT_FOR_EACH(ch, v.c) {
    a.dgamma[ch] = static_cast<float>(s.sum1[ch]);
    a.dbeta[ch] = static_cast<float>(s.sum0[ch]);
  }
}

__global__ void batch_norm_dx_kernel(BatchNormGradArgs a, ChannelShape v, double eps,
                                     bool inference, ChannelScratch s) {
  const double m = static_cast<double>(v.n * v.spatial);
  MEMFIT_FOR_EACH(i, v.n * v.c * v.spatial) {
    const int64_t ch = i / v.spatial % v.c;
    const double inv_std = 1.0 / sqrt(static_cast<double>(a.var[ch]) + eps);
    if (inference) {
      a.dx[i] = static_cast<float>(a.dy[i] * a.gamma[ch] * inv_std);
    } else {
      const double xhat = (a.x[i] - static_cast<double>(a.mean[ch])) * inv_std;
      a.dx[i] = static_cast<float>(a.gamma[ch] * inv_std *
                                   (a.dy[i] - s.sum0[ch] / m - xhat * s.sum1[ch] / m));
    }
  }
}

unsigned channel_blocks(const ChannelShape& v) { return static_cast<unsigned>(v.c * v.chunks); }

// One block per row: mean and rstd in double (two passes), then y.
__global__ void layer_norm_kernel(const float* x, const float* gamma, const float* beta, float* y,
                                  float* mean_out, float* rstd_out, int64_t d, double eps) {
  __shared__ double shared[kThreads];
  const int64_t r = blockIdx.x;
  const float* xr = x + r * d;
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < d; i += kThreads) sum += xr[i];
  const double mean = block_sum(sum, shared) / static_cast<double>(d);
  double square_sum = 0.0;
  for (int64_t i = threadIdx.x; i < d; i += kThreads) square_sum += (xr[i] - mean) * (xr[i] - mean);
  const double rstd = 1.0 / sqrt(block_sum(square_sum, shared) / static_cast<double>(d) + eps);
  for (int64_t i = threadIdx.x; i < d; i += kThreads) {
    y[r * d + i] = static_cast<float>(gamma[i] * (xr[i] - mean) * rstd + beta[i]);
  }
  if (threadIdx.x == 0) {
    mean_out[r] = static_cast<float>(mean);
    rstd_out[r] = static_cast<float>(rstd);
  }
}

// Column i's sums over chunk blockIdx.y of the rows: dy xhat and dy.
__global__ void layer_norm_column_kernel(const float* dy, const float* x, const float* mean,
                                         const float* rstd, int64_t rows, int64_t d, int64_t chunks,
                                         double* partial_dy_xhat, double* partial_dy) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= d) return;
  const int64_t len = (rows + chunks - 1) / chunks;
  const int64_t begin = std::min(rows, static_cast<int64_t>(blockIdx.y) * len);
  const int64_t end = std::min(rows, begin + len);
  double sum_dy_xhat = 0.0, sum_dy = 0.0;
  for (int64_t r = begin; r < end; ++r) {
    const double xhat = (x[r * d + i] - static_cast<double>(mean[r])) * rstd[r];
    sum_dy_xhat += dy[r * d + i] * xhat;
    sum_dy += dy[r * d + i];
  }
  partial_dy_xhat[blockIdx.y * d + i] = sum_dy_xhat;
  partial_dy[blockIdx.y * d + i] = sum_dy;
}

__global__ void layer_norm_params_kernel(const double* partial_dy_xhat, const double* partial_dy,
                                         int64_t d, int64_t chunks, float* dgamma, float* dbeta) {
  MEMFIT_FOR_EACH(i, d) {
    double sum_dy_xhat = 0.0, sum_dy = 0.0;
    for (int64_t k = 0; k < chunks; ++k) {
      sum_dy_xhat += partial_dy_xhat[k * d + i];
      sum_dy += partial_dy[k * d + i];
    }
    dgamma[i] = static_cast<float>(sum_dy_xhat);
    dbeta[i] = static_cast<float>(sum_dy);
  }
}

// One block per row: dx from the row's sums of g and g xhat.
__global__ void layer_norm_dx_kernel(const float* dy, const float* x, const float* gamma,
                                     const float* mean, const float* rstd, float* dx, int64_t d) {
  __shared__ double shared[kThreads];
  const int64_t r = blockIdx.x;
  const double centre = mean[r];
  double sum_g = 0.0, sum_g_xhat = 0.0;
  for (int64_t i = threadIdx.x; i < d; i += kThreads) {
    const double g = static_cast<double>(dy[r * d + i]) * gamma[i];
    sum_g += g;
    sum_g_xhat += g * ((x[r * d + i] - centre) * rstd[r]);
  }
  sum_g = block_sum(sum_g, shared);
  sum_g_xhat = block_sum(sum_g_xhat, shared);
  const double n = static_cast<double>(d);
  for (int64_t i = threadIdx.x; i < d; i += kThreads) {
    const double g = static_cast<double>(dy[r * d + i]) * gamma[i];
    const double xhat = (x[r * d + i] - centre) * rstd[r];
    dx[r * d + i] = static_cast<float>(rstd[r] * (g - sum_g / n - xhat * sum_g_xhat / n));
  }
}

}  // namespace

int64_t batch_norm_chunks(int64_t n, int64_t spatial) {
  return std::clamp<int64_t>(n * spatial / 8192, 1, 256);
}

size_t batch_norm_workspace_bytes(const ChannelShape& shape) {
  return static_cast<size_t>(2 * shape.c * shape.chunks + 4 * shape.c) * sizeof(double);
}

void launch_batch_norm(const BatchNormArgs& args, const ChannelShape& shape, double eps,
                       double momentum, bool relu, void* workspace, void* stream) {
  const ChannelScratch s = channel_scratch(shape, workspace);
  const cudaStream_t st = as_stream(stream);
  const int per_channel = blocks_for(shape.c);
  channel_sum_kernel<<<channel_blocks(shape), kThreads, 0, st>>>(args.x, nullptr, shape,
                                                                 s.partial0);
  channel_finish_kernel<<<per_channel, kThreads, 0, st>>>(s.partial0, shape, s.sum0);
  divide_kernel<<<per_channel, kThreads, 0, st>>>(s.sum0, shape.c,
                                                  static_cast<double>(shape.n * shape.spatial));
  channel_sum_kernel<<<channel_blocks(shape), kThreads, 0, st>>>(args.x, s.sum0, shape, s.partial0);
  channel_finish_kernel<<<per_channel, kThreads, 0, st>>>(s.partial0, shape, s.sum1);
  batch_norm_stats_kernel<<<per_channel, kThreads, 0, st>>>(args, shape, eps, momentum, s);
  normalize_kernel<<<blocks_for(shape.n * shape.c * shape.spatial), kThreads, 0, st>>>(
      args.x, args.gamma, args.beta, s.mean, s.inv_std, nullptr, nullptr, eps, relu, shape, args.y);
}

void launch_batch_norm_inference(const float* x, const float* gamma, const float* beta,
                                 const float* running_mean, const float* running_var, float* y,
                                 const ChannelShape& shape, double eps, bool relu, void* stream) {
  normalize_kernel<<<blocks_for(shape.n * shape.c * shape.spatial), kThreads, 0,
                     as_stream(stream)>>>(x, gamma, beta, nullptr, nullptr, running_mean,
                                          running_var, eps, relu, shape, y);
}

void launch_batch_norm_grad(const BatchNormGradArgs& args, const ChannelShape& shape, double eps,
                            bool inference, void* workspace, void* stream) {
  const ChannelScratch s = channel_scratch(shape, workspace);
  const cudaStream_t st = as_stream(stream);
  const int per_channel = blocks_for(shape.c);
  channel_grad_sum_kernel<<<channel_blocks(shape), kThreads, 0, st>>>(
      args.dy, args.x, args.mean, args.var, eps, shape, s.partial0, s.partial1);
  channel_finish_kernel<<<per_channel, kThreads, 0, st>>>(s.partial0, shape, s.sum0);
  channel_finish_kernel<<<per_channel, kThreads, 0, st>>>(s.partial1, shape, s.sum1);
  batch_norm_grad_params_kernel<<<per_channel, kThreads, 0, st>>>(args, shape, s);
  batch_norm_dx_kernel<<<blocks_for(shape.n * shape.c * shape.spatial), kThreads, 0, st>>>(
      args, shape, eps, inference, s);
}

void launch_layer_norm(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                       float* rstd, int64_t rows, int64_t d, double eps, void* stream) {
  layer_norm_kernel<<<static_cast<unsigned>(rows), kThreads, 0, as_stream(stream)>>>(
      x, gamma, beta, y, mean, rstd, d, eps);
}

int64_t layer_norm_chunks(int64_t rows) { return std::clamp<int64_t>(rows / 64, 1, 128); }

size_t layer_norm_grad_workspace_bytes(int64_t rows, int64_t d) {
  return static_cast<size_t>(2 * layer_norm_chunks(rows) * d) * sizeof(double);
}

void launch_layer_norm_grad(const float* dy, const float* x, const float* gamma, const float* mean,
                            const float* rstd, float* dx, float* dgamma, float* dbeta, int64_t rows,
                            int64_t d, void* workspace, void* stream) {
  const int64_t chunks = layer_norm_chunks(rows);
  auto* partial_dy_xhat = static_cast<double*>(workspace);
  double* partial_dy = partial_dy_xhat + chunks * d;
  const cudaStream_t st = as_stream(stream);
  const dim3 columns(static_cast<unsigned>((d + kThreads - 1) / kThreads),
                     static_cast<unsigned>(chunks));
  layer_norm_column_kernel<<<columns, kThreads, 0, st>>>(dy, x, mean, rstd, rows, d, chunks,
                                                         partial_dy_xhat, partial_dy);
  layer_norm_params_kernel<<<blocks_for(d), kThreads, 0, st>>>(partial_dy_xhat, partial_dy, d,
                                                               chunks, dgamma, dbeta);
  layer_norm_dx_kernel<<<static_cast<unsigned>(rows), kThreads, 0, st>>>(dy, x, gamma, mean, rstd,
                                                                         dx, d);
}

}  // namespace memfit::cuda
