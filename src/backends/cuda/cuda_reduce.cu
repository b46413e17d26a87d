// memfit's reducing CUDA kernels (cuda_launchers.h): sums over axes, and the
// softmax cross-entropy loss and its gradient. One block per output element
// or row; each thread sums a fixed stride of the elements in double, then
// the block adds the threads' sums as a tree: the same order, and so the
// same bits, on every run.
#include <cuda_runtime.h>

#include <cmath>

#include "backends/cuda/cuda_grid.cuh"
#include "backends/cuda/cuda_launchers.h"

namespace memfit::cuda {
namespace {

// The offset in x of index `i` of a row-major space of `rank` sizes laid out
// with `strides`.
__device__ int64_t strided(int64_t i, int rank, const int64_t* sizes, const int64_t* strides) {
  int64_t offset = 0;
  for (int d = rank - 1; d >= 0; --d) {
    offset += i % sizes[d] * strides[d];
    i /= sizes[d];
  }
  return offset;
}

__global__ void reduce_sum_kernel(const float* x, float* y, ReduceShape shape, int64_t reduced,
                                  double scale) {
  __shared__ double shared[kThreads];
  const int64_t base = strided(blockIdx.x, shape.kept_rank, shape.kept_sizes, shape.kept_strides);
  double sum = 0.0;
  for (int64_t j = threadIdx.x; j < reduced; j += kThreads) {
    sum += x[base + strided(j, shape.reduced_rank, shape.reduced_sizes, shape.reduced_strides)];
  }
  sum = block_sum(sum, shared);
  if (threadIdx.x == 0) y[blockIdx.x] = static_cast<float>(sum * scale);
}

// The row's largest logit and sum of exp(logit - max), in double.
struct RowExp {
  double max, sum;
};

__device__ RowExp row_exp(const float* row, int64_t classes, double* shared) {
  double max = -INFINITY;
  for (int64_t j = threadIdx.x; j < classes; j += kThreads)
    max = fmax(max, static_cast<double>(row[j]));
  max = block_max(max, shared);
  double sum = 0.0;
  for (int64_t j = threadIdx.x; j < classes; j += kThreads) sum += exp(row[j] - max);
  return RowExp{max, block_sum(sum, shared)};
}

__global__ void cross_entropy_rows_kernel(const float* logits, const int32_t* labels,
                                          double* row_losses, int64_t classes) {
  __shared__ double shared[kThreads];
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * classes;
  const RowExp e = row_exp(row, classes, shared);
  if (threadIdx.x == 0) {
    const int32_t label = labels[blockIdx.x];
    row_losses[blockIdx.x] = label >= 0 && label < classes ? e.max + log(e.sum) - row[label] : NAN;
  }
}

__global__ void mean_kernel(const double* values, int64_t count, float* mean) {
  __shared__ double shared[kThreads];
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < count; i += kThreads) sum += values[i];
  sum = block_sum(sum, shared);
  if (threadIdx.x == 0) mean[0] = static_cast<float>(sum / static_cast<double>(count));
}

__global__ void cross_entropy_grad_kernel(const float* dloss, const float* logits,
                                          const int32_t* labels, float* dlogits, int64_t rows,
                                          int64_t classes) {
  __shared__ double shared[kThreads];
  const int64_t r = blockIdx.x;
  const float* row = logits + r * classes;
  const RowExp e = row_exp(row, classes, shared);
  const int32_t label = labels[r];
  const bool valid = label >= 0 && label < classes;
  const double per_row = static_cast<double>(dloss[0]) / static_cast<double>(rows);
  for (int64_t j = threadIdx.x; j < classes; j += kThreads) {
    const double p = exp(row[j] - e.max) / e.sum;
    dlogits[r * classes + j] =
        valid ? static_cast<float>(per_row * (p - (j == label ? 1.0 : 0.0))) : NAN;
  }
}

// One row of (outer, len, inner) per block: element j at first + j * inner.
__global__ void rows_kernel(RowOp op, const float* x, const float* y, float* out, int64_t len,
                            int64_t inner) {
  __shared__ double shared[kThreads];
  const int64_t first = blockIdx.x / inner * len * inner + blockIdx.x % inner;
  if (op == RowOp::softmax || op == RowOp::log_softmax) {
    double max = -INFINITY;
    for (int64_t j = threadIdx.x; j < len; j += kThreads)
      max = fmax(max, static_cast<double>(x[first + j * inner]));
    max = block_max(max, shared);
    double sum = 0.0;
    for (int64_t j = threadIdx.x; j < len; j += kThreads) sum += exp(x[first + j * inner] - max);
    sum = block_sum(sum, shared);
    const double log_sum_exp = max + log(sum);
    for (int64_t j = threadIdx.x; j < len; j += kThreads) {
      const int64_t at = first + j * inner;
      out[at] =
          static_cast<float>(op == RowOp::softmax ? exp(x[at] - max) / sum : x[at] - log_sum_exp);
    }
    return;
  }
  // Gradients: x is dy. softmax: dx = y (dy - sum dy y); log_softmax: dx = dy - exp(y) sum dy.
  double reduced = 0.0;
  for (int64_t j = threadIdx.x; j < len; j += kThreads) {
    const int64_t at = first + j * inner;
    reduced += op == RowOp::softmax_grad ? static_cast<double>(x[at]) * y[at] : x[at];
  }
  reduced = block_sum(reduced, shared);
  for (int64_t j = threadIdx.x; j < len; j += kThreads) {
    const int64_t at = first + j * inner;
    out[at] = static_cast<float>(op == RowOp::softmax_grad
                                     ? y[at] * (x[at] - reduced)
                                     : x[at] - exp(static_cast<double>(y[at])) * reduced);
  }
}

}  // namespace

void launch_rows(RowOp op, const float* first, const float* second, float* out, int64_t outer,
                 int64_t len, int64_t inner, void* stream) {
  rows_kernel<<<static_cast<unsigned>(outer * inner), kThreads, 0, as_stream(stream)>>>(
      op, first, second, out, len, inner);
}

void launch_reduce_sum(const float* x, float* y, const ReduceShape& shape, double scale,
                       void* stream) {
  int64_t outputs = 1, reduced = 1;
  for (int d = 0; d < shape.kept_rank; ++d) outputs *= shape.kept_sizes[d];
  for (int d = 0; d < shape.reduced_rank; ++d) reduced *= shape.reduced_sizes[d];
  reduce_sum_kernel<<<static_cast<unsigned>(outputs), kThreads, 0, as_stream(stream)>>>(
      x, y, shape, reduced, scale);
}

void launch_softmax_cross_entropy(const float* logits, const int32_t* labels, float* loss,
                                  double* row_losses, int64_t rows, int64_t classes, void* stream) {
  cross_entropy_rows_kernel<<<static_cast<unsigned>(rows), kThreads, 0, as_stream(stream)>>>(
      logits, labels, row_losses, classes);
  mean_kernel<<<1, kThreads, 0, as_stream(stream)>>>(row_losses, rows, loss);
}

void launch_softmax_cross_entropy_grad(const float* dloss, const float* logits,
                                       const int32_t* labels, float* dlogits, int64_t rows,
                                       int64_t classes, void* stream) {
  cross_entropy_grad_kernel<<<static_cast<unsigned>(rows), kThreads, 0, as_stream(stream)>>>(
      dloss, logits, labels, dlogits, rows, classes);
}

}  // namespace memfit::cuda
