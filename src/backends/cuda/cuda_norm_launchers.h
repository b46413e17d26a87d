// The launchers of memfit's normalization kernels on CUDA (cuda_norm.cu): batch norm in
// training and inference mode, layer norm, and their gradients, with the
// reference kernels' formulas (src/backends/reference/ref_norm.cpp): sums in
// double, every output rounded once. Sums over many elements run in two
// stages: blocks sum fixed chunks (a block's threads in a fixed tree), then
// one thread per result adds the chunks in order, so every run gives the
// same bits. Each launcher's scratch is the kernel's planned workspace, of
// the bytes its *_workspace_bytes function gives.
#pragma once

#include <cstddef>
#include <cstdint>

namespace memfit::cuda {

// x (N, C, spatial...) as (n, c, spatial): channel c's m = n spatial
// elements; `chunks` blocks sum each channel (batch_norm_chunks).
struct ChannelShape {
  int64_t n = 0, c = 0, spatial = 0, chunks = 1;
};
int64_t batch_norm_chunks(int64_t n, int64_t spatial);
size_t batch_norm_workspace_bytes(const ChannelShape& shape);

// Training mode: mean and (biased) var per channel, in two passes;
// y = relu_if(gamma (x - mean) / sqrt(var + eps) + beta) with the statistics
// as saved (rounded to float); the running statistics move by `momentum`,
// the variance's as var m / (m - 1).
struct BatchNormArgs {
  const float *x, *gamma, *beta, *running_mean, *running_var;
  float *y, *mean, *var, *new_running_mean, *new_running_var;
};
void launch_batch_norm(const BatchNormArgs& args, const ChannelShape& shape, double eps,
                       double momentum, bool relu, void* workspace, void* stream);

// y = relu_if(gamma (x - running_mean) / sqrt(running_var + eps) + beta);
// y may be x.
void launch_batch_norm_inference(const float* x, const float* gamma, const float* beta,
                                 const float* running_mean, const float* running_var, float* y,
                                 const ChannelShape& shape, double eps, bool relu, void* stream);

// With xhat = (x - mean) / sqrt(var + eps): dbeta = sum dy, dgamma = sum dy
// xhat; training mode: dx = gamma / sqrt(var + eps) (dy - dbeta / m - xhat
// dgamma / m); inference mode (the statistics are constants, the running
// ones): dx = dy gamma / sqrt(var + eps). dx may be dy.
struct BatchNormGradArgs {
  const float *dy, *x, *gamma, *mean, *var;
  float *dx, *dgamma, *dbeta;
};
void launch_batch_norm_grad(const BatchNormGradArgs& args, const ChannelShape& shape, double eps,
                            bool inference, void* workspace, void* stream);

// x (rows, d): per row mean and rstd = 1 / sqrt(var + eps) (var biased);
// y = gamma (x - mean) rstd + beta.
void launch_layer_norm(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                       float* rstd, int64_t rows, int64_t d, double eps, void* stream);

// dgamma = sum over rows of dy xhat, dbeta = sum dy (`chunks` blocks of rows,
// layer_norm_chunks); per row, with g = dy gamma: dx = rstd (g - mean(g) -
// xhat mean(g xhat)). dx may be dy.
int64_t layer_norm_chunks(int64_t rows);
size_t layer_norm_grad_workspace_bytes(int64_t rows, int64_t d);
void launch_layer_norm_grad(const float* dy, const float* x, const float* gamma, const float* mean,
                            const float* rstd, float* dx, float* dgamma, float* dbeta, int64_t rows,
                            int64_t d, void* workspace, void* stream);

}  // namespace memfit::cuda
