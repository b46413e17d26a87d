// The launchers of memfit's own CUDA kernels in cuda_activation.cu,
// cuda_eltwise.cu, cuda_pool.cu and cuda_reduce.cu (compiled by nvcc), in
// plain C++ types for the backend's host code (the kernel files, compiled by
// the C++ compiler); cuda_norm_launchers.h, cuda_sequence_launchers.h and
// cuda_shape_launchers.h declare the other .cu files' launchers. Each
// function launches on `stream` (a cudaStream_t) and returns at once. They
// follow the reference kernels' formulas (src/backends/reference/): sums and
// the optimizers' arithmetic in double, rounded once; every reduction in a
// fixed order, so that a step gives the same bits every time it runs. A
// launch error stays with the runtime and is reported when the device next
// synchronizes (cudaGetLastError).
#pragma once

#include <cstdint>

namespace memfit::cuda {

// Up to this many dimensions in the strided kernels.
inline constexpr int kMaxDims = 8;

// y[i] = value.
void launch_fill(float* y, int64_t count, float value, void* stream);

// y (count elements, viewed as (outer, channels, inner)): y += bias[channel]
// (when bias), then y += add (when add, of y's shape), then y = max(y, 0)
// (when relu). The tail of the products after cuBLAS (inner 1: a bias per
// column) and of the convolutions after cuDNN (inner H W).
void launch_bias_add_relu(float* y, const float* bias, const float* add, int64_t count,
                          int64_t channels, int64_t inner, bool relu, void* stream);

// y = f(x): relu, gelu (x Phi(x)), tanh, sigmoid, scale (alpha x).
enum class Unary { relu, gelu, tanh, sigmoid, scale };
void launch_unary(Unary op, const float* x, float* y, int64_t count, double alpha, void* stream);

// dx = f(dy, other), other being y (relu, tanh, sigmoid) or x (gelu).
enum class UnaryGrad { relu, gelu, tanh, sigmoid };
void launch_unary_grad(UnaryGrad op, const float* dy, const float* other, float* dx, int64_t count,
                       void* stream);

// y = a op b, a and b broadcast to y's shape: element i of y reads a and b at
// the offsets their strides (0 along a broadcast dimension) give.
enum class Binary { add, sub, mul };
struct BroadcastShape {
  int rank = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t a_strides[kMaxDims] = {}, b_strides[kMaxDims] = {};
};
void launch_binary(Binary op, const float* a, const float* b, float* y, const BroadcastShape& shape,
                   void* stream);

// Along one axis of a tensor viewed as (outer, len, inner): softmax (x),
// its gradient (dy, y), log_softmax (x) and its gradient (dy, y); out may
// be the first input. One block per row, sums in double in a fixed order.
enum class RowOp { softmax, softmax_grad, log_softmax, log_softmax_grad };
void launch_rows(RowOp op, const float* first, const float* second, float* out, int64_t outer,
                 int64_t len, int64_t inner, void* stream);

// y = keep ? x / (1 - p) : 0, keep drawn by dropout_keeps(seed, step, key, i, p)
// (src/core/random.h): the mask bits of every backend.
void launch_dropout(const float* x, float* y, int64_t count, float p, uint64_t seed, uint64_t step,
                    uint64_t key, void* stream);

// Pooling of `planes` (N C) volumes (D, H, W) into (OD, OH, OW), 2-D pooling
// being D = OD = 1 with a window of depth 1; the window of output o starts
// at o stride - pad, as ref_pool.cpp. Max: the first largest element of the
// window (strict >); average: divided by the window's elements inside the
// input, or by the whole window with include_pad. The gradients run one
// thread per input element and add the outputs whose windows hold it in
// ascending order, in double: the reference's order, without atomics.
struct PoolShape {
  int64_t planes = 0;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  int64_t kernel[3] = {1, 1, 1}, stride[3] = {1, 1, 1}, pad[3] = {0, 0, 0};
  bool include_pad = false;
};
enum class Pool { max, average };
void launch_pool(Pool pool, const float* x, float* y, const PoolShape& shape, void* stream);
// max: (dy, x) -> dx; average: dy -> dx (x unused).
void launch_pool_grad(Pool pool, const float* dy, const float* x, float* dx, const PoolShape& shape,
                      void* stream);

// The sum over the axes not kept: y[o] = sum over j of x[offset(o) + offset(j)],
// where o runs over the kept axes (sizes kept_sizes, strides in x
// kept_strides) and j over the reduced ones, each sum in double in a fixed
// order, times `scale`.
struct ReduceShape {
  int kept_rank = 0, reduced_rank = 0;
  int64_t kept_sizes[kMaxDims] = {}, kept_strides[kMaxDims] = {};
  int64_t reduced_sizes[kMaxDims] = {}, reduced_strides[kMaxDims] = {};
};
void launch_reduce_sum(const float* x, float* y, const ReduceShape& shape, double scale,
                       void* stream);

// loss = mean over rows of (log sum exp(logits_r) - logits_r[label_r]);
// `row_losses` holds one double per row (workspace). A label out of range
// gives NaN.
void launch_softmax_cross_entropy(const float* logits, const int32_t* labels, float* loss,
                                  double* row_losses, int64_t rows, int64_t classes, void* stream);
// dlogits = dloss (softmax(logits_r) - onehot(label_r)) / rows.
void launch_softmax_cross_entropy_grad(const float* dloss, const float* logits,
                                       const int32_t* labels, float* dlogits, int64_t rows,
                                       int64_t classes, void* stream);

// The optimizers' updates, element by element, in place allowed (w_next may
// be w, and so on), as ref_sgd_update and ref_adamw_update.
void launch_sgd_update(const float* w, const float* g, const float* v, float* w_next, float* v_next,
                       int64_t count, double lr, double momentum, double weight_decay,
                       void* stream);
void launch_adamw_update(const float* w, const float* g, const float* m, const float* v,
                         float* w_next, float* m_next, float* v_next, int64_t count, double lr,
                         double beta1, double beta2, double eps, double weight_decay,
                         double correction1, double correction2, void* stream);

}  // namespace memfit::cuda
