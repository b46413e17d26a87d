// Batch normalization (training mode, inference mode) and layer normalization
// and their gradients on oneDNN, plus what oneDNN does not do: the
// running-statistics update, and converting layer norm's variance to the rstd
// that the op saves.
#include <cmath>
#include <variant>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/dnnl_util.h"
#include "core/check.h"

namespace memfit::cpu {
namespace {

using dnnl::memory;

const dnnl::normalization_flags kFlags =
    dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;

// The descriptor of input `i`, which every (N, C, ...) operand of a batch-norm
// node shares: x, y, dy, dx are all in one layout.
memory::desc same_layout_md(const Graph& graph, const Node& node, size_t i) {
  const memory::desc x = input_md(graph, node, i);
  MEMFIT_CHECK(input_md(graph, node, 0) == x && output_md(graph, node, 0) == x);
  return x;
}

dnnl::batch_normalization_forward::primitive_desc forward_pd(const memory::desc& x, float eps) {
  const dnnl::batch_normalization_forward::desc desc(dnnl::prop_kind::forward_training, x, eps,
                                                     kFlags);
  return {desc, kernel_attr(), engine()};
}

// The fused ReLU (BatchNormAttrs::relu) over y in plain layout, after
// oneDNN's normalization: the bits of a separate ReLU.
void relu_in_place(float* y, int64_t count) {
#pragma omp parallel for simd schedule(static) if (worth_threads(static_cast<size_t>(count) * sizeof(float)))
  for (int64_t i = 0; i < count; ++i) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
}

// The inference kernel with the fused ReLU.
class ReluAfterKernel final : public PrimitiveKernel {
 public:
  explicit ReluAfterKernel(int64_t count) : count_(count) {}

 private:
  void finish(const KernelArgs& args) override { relu_in_place(static_cast<float*>(args.outputs[0]), count_); }
  int64_t count_;
};

// Inputs x (N, C, H, W) or (N, C), gamma, beta, running_mean, running_var (C);
// outputs y (like x), mean, var, new_running_mean, new_running_var (C).
class BatchNormKernel final : public PrimitiveKernel {
 public:
  // x: x's and y's descriptor, in their layout.
  BatchNormKernel(const Shape& x_shape, const memory::desc& x, const BatchNormAttrs& attrs)
      : channels_(x_shape[1]),
        relu_(attrs.relu),
        elements_(num_elements(x_shape)),
        momentum_(attrs.momentum),
        m_(static_cast<float>(num_elements(x_shape) / x_shape[1])) {
    const memory::desc c = plain_md({channels_});
    add(forward_pd(x, attrs.eps),
        {input_arg(DNNL_ARG_SRC, 0, x), input_arg(DNNL_ARG_SCALE, 1, c),
         input_arg(DNNL_ARG_SHIFT, 2, c), output_arg(DNNL_ARG_DST, 0, x),
         output_arg(DNNL_ARG_MEAN, 1, c), output_arg(DNNL_ARG_VARIANCE, 2, c)});
  }

 private:
  // The running statistics; oneDNN's variance is biased, the running one is
  // not: var_unbiased = var m / (m - 1).
  // Each element is read before it is written, so running and new may alias.
  void finish(const KernelArgs& args) override {
    if (relu_) relu_in_place(static_cast<float*>(args.outputs[0]), elements_);
    const auto* mean = static_cast<const float*>(args.outputs[1]);
    const auto* var = static_cast<const float*>(args.outputs[2]);
    const auto* running_mean = static_cast<const float*>(args.inputs[3]);
    const auto* running_var = static_cast<const float*>(args.inputs[4]);
    auto* new_mean = static_cast<float*>(args.outputs[3]);
    auto* new_var = static_cast<float*>(args.outputs[4]);
    for (int64_t c = 0; c < channels_; ++c) {
      new_mean[c] = (1 - momentum_) * running_mean[c] + momentum_ * mean[c];
      new_var[c] = (1 - momentum_) * running_var[c] + momentum_ * (var[c] * m_ / (m_ - 1));
    }
  }

  int64_t channels_;
  bool relu_;
  int64_t elements_;
  float momentum_;
  float m_;  // elements per channel: N H W
};

// dy, x (N, C, H, W) or (N, C), gamma, mean, var (C) -> dx (like x), dgamma, dbeta (C).
// dx may alias dy: oneDNN's backward batch norm supports it in place.
std::unique_ptr<Kernel> batch_norm_grad_kernel(const Graph& graph, const Node& node) {
  const auto& attrs = std::get<BatchNormAttrs>(node.attrs);
  const Shape& x_shape = input_shape(graph, node, 1);
  const memory::desc x = same_layout_md(graph, node, 1);
  const memory::desc c = plain_md({x_shape[1]});
  const dnnl::batch_normalization_backward::desc desc(dnnl::prop_kind::backward, x, x, attrs.eps,
                                                      kFlags);
  const dnnl::batch_normalization_backward::primitive_desc pd(desc, kernel_attr(), engine(),
                                                              forward_pd(x, attrs.eps));
  auto kernel = std::make_unique<PrimitiveKernel>();
  // oneDNN asks for a shift argument whenever use_shift is set (it is what makes
  // it compute dbeta), but the backward pass never reads beta: gamma's (C)
  // buffer stands in for it.
  kernel->add(pd, {input_arg(DNNL_ARG_DIFF_DST, 0, x), input_arg(DNNL_ARG_SRC, 1, x),
                   input_arg(DNNL_ARG_SCALE, 2, c), input_arg(DNNL_ARG_SHIFT, 2, c),
                   input_arg(DNNL_ARG_MEAN, 3, c), input_arg(DNNL_ARG_VARIANCE, 4, c),
                   output_arg(DNNL_ARG_DIFF_SRC, 0, x), output_arg(DNNL_ARG_DIFF_SCALE, 1, c),
                   output_arg(DNNL_ARG_DIFF_SHIFT, 2, c)});
  return kernel;
}

const dnnl::normalization_flags kGlobalStatsFlags =
    kFlags | dnnl::normalization_flags::use_global_stats;

dnnl::batch_normalization_forward::primitive_desc inference_pd(const memory::desc& x, float eps) {
  const dnnl::batch_normalization_forward::desc desc(dnnl::prop_kind::forward_inference, x, eps,
                                                     kGlobalStatsFlags);
  return {desc, kernel_attr(), engine()};
}

// x, gamma, beta, running_mean, running_var -> y; y may alias x.
std::unique_ptr<Kernel> batch_norm_inference_kernel(const Graph& graph, const Node& node) {
  const auto& attrs = std::get<BatchNormAttrs>(node.attrs);
  const Shape& x_shape = input_shape(graph, node, 0);
  const memory::desc x = same_layout_md(graph, node, 0);
  const memory::desc c = plain_md({x_shape[1]});
  std::unique_ptr<PrimitiveKernel> kernel =
      attrs.relu ? std::make_unique<ReluAfterKernel>(num_elements(x_shape)) : std::make_unique<PrimitiveKernel>();
  kernel->add(inference_pd(x, attrs.eps),
              {input_arg(DNNL_ARG_SRC, 0, x), input_arg(DNNL_ARG_SCALE, 1, c),
               input_arg(DNNL_ARG_SHIFT, 2, c), input_arg(DNNL_ARG_MEAN, 3, c),
               input_arg(DNNL_ARG_VARIANCE, 4, c), output_arg(DNNL_ARG_DST, 0, x)});
  return kernel;
}

// dy, x, gamma, running_mean, running_var -> dx, dgamma, dbeta. With global
// statistics oneDNN's backward pass treats mean and variance as constants.
std::unique_ptr<Kernel> batch_norm_inference_grad_kernel(const Graph& graph, const Node& node) {
  const auto& attrs = std::get<BatchNormAttrs>(node.attrs);
  const Shape& x_shape = input_shape(graph, node, 1);
  const memory::desc x = same_layout_md(graph, node, 1);
  const memory::desc c = plain_md({x_shape[1]});
  const dnnl::batch_normalization_backward::desc desc(dnnl::prop_kind::backward, x, x, attrs.eps,
                                                      kGlobalStatsFlags);
  const dnnl::batch_normalization_backward::primitive_desc pd(desc, kernel_attr(), engine(),
                                                              inference_pd(x, attrs.eps));
  auto kernel = std::make_unique<PrimitiveKernel>();
  // As in batch_norm_grad, gamma's buffer stands in for the unread shift.
  kernel->add(pd, {input_arg(DNNL_ARG_DIFF_DST, 0, x), input_arg(DNNL_ARG_SRC, 1, x),
                   input_arg(DNNL_ARG_SCALE, 2, c), input_arg(DNNL_ARG_SHIFT, 2, c),
                   input_arg(DNNL_ARG_MEAN, 3, c), input_arg(DNNL_ARG_VARIANCE, 4, c),
                   output_arg(DNNL_ARG_DIFF_SRC, 0, x), output_arg(DNNL_ARG_DIFF_SCALE, 1, c),
                   output_arg(DNNL_ARG_DIFF_SHIFT, 2, c)});
  return kernel;
}

// Layer norm works on x (..., D) seen as (R, D), with statistics (R).
struct RowsView {
  int64_t rows = 0;
  int64_t d = 0;
};

RowsView rows_view(const Shape& x) { return {num_elements(x) / x.back(), x.back()}; }

dnnl::layer_normalization_forward::primitive_desc layer_norm_pd(const RowsView& v, float eps) {
  const dnnl::layer_normalization_forward::desc desc(
      dnnl::prop_kind::forward_training, plain_md({v.rows, v.d}), plain_md({v.rows}), eps, kFlags);
  return {desc, kernel_attr(), engine()};
}

// x, gamma, beta -> y, mean, rstd. oneDNN writes the variance into rstd's
// buffer; finish() turns it into rstd = 1 / sqrt(var + eps) in place.
class LayerNormKernel final : public PrimitiveKernel {
 public:
  LayerNormKernel(const Shape& x_shape, const LayerNormAttrs& attrs)
      : view_(rows_view(x_shape)), eps_(attrs.eps) {
    const memory::desc x = plain_md({view_.rows, view_.d});
    const memory::desc d = plain_md({view_.d});
    const memory::desc stats = plain_md({view_.rows});
    add(layer_norm_pd(view_, eps_),
        {input_arg(DNNL_ARG_SRC, 0, x), input_arg(DNNL_ARG_SCALE, 1, d),
         input_arg(DNNL_ARG_SHIFT, 2, d), output_arg(DNNL_ARG_DST, 0, x),
         output_arg(DNNL_ARG_MEAN, 1, stats), output_arg(DNNL_ARG_VARIANCE, 2, stats)});
  }

 private:
  void finish(const KernelArgs& args) override {
    auto* rstd = static_cast<float*>(args.outputs[2]);  // (R), holds the variance
    for (int64_t r = 0; r < view_.rows; ++r) {
      rstd[r] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(rstd[r]) + eps_));
    }
  }

  RowsView view_;
  float eps_;
};

// dy, x, gamma, mean, rstd -> dx, dgamma, dbeta; dx may alias dy. oneDNN takes
// the variance: run() first recovers var = 1 / rstd^2 - eps into the
// workspace, then runs the primitive on it.
class LayerNormGradKernel final : public PrimitiveKernel {
 public:
  LayerNormGradKernel(const Shape& x_shape, const LayerNormAttrs& attrs)
      : view_(rows_view(x_shape)), eps_(attrs.eps) {
    const memory::desc x = plain_md({view_.rows, view_.d});
    const memory::desc d = plain_md({view_.d});
    const memory::desc stats = plain_md({view_.rows});
    var_offset_ = reserve(stats.get_size());
    const dnnl::layer_normalization_backward::desc desc(dnnl::prop_kind::backward, x, x, stats,
                                                        eps_, kFlags);
    const dnnl::layer_normalization_backward::primitive_desc pd(desc, kernel_attr(), engine(),
                                                                layer_norm_pd(view_, eps_));
    // As in batch_norm_grad, gamma's buffer stands in for the unread shift.
    add(pd,
        {input_arg(DNNL_ARG_DIFF_DST, 0, x), input_arg(DNNL_ARG_SRC, 1, x),
         input_arg(DNNL_ARG_SCALE, 2, d), input_arg(DNNL_ARG_SHIFT, 2, d),
         input_arg(DNNL_ARG_MEAN, 3, stats), workspace_arg(DNNL_ARG_VARIANCE, var_offset_, stats),
         output_arg(DNNL_ARG_DIFF_SRC, 0, x), output_arg(DNNL_ARG_DIFF_SCALE, 1, d),
         output_arg(DNNL_ARG_DIFF_SHIFT, 2, d)});
  }

  void run(const KernelArgs& args) override {
    const auto* rstd = static_cast<const float*>(args.inputs[4]);  // (R)
    auto* var = reinterpret_cast<float*>(static_cast<std::byte*>(args.workspace) + var_offset_);
    for (int64_t r = 0; r < view_.rows; ++r) {
      const double s = rstd[r];
      var[r] = static_cast<float>(1.0 / (s * s) - eps_);
    }
    PrimitiveKernel::run(args);
  }

 private:
  RowsView view_;
  float eps_;
  size_t var_offset_ = 0;
};

std::unique_ptr<Kernel> make_norm_kernel(const Graph& graph, const Node& node) {
  if (node.op != OpKind::layer_norm && node.op != OpKind::layer_norm_grad &&
      graph.value(node.outputs[0]).layout != Layout::plain) {
    return make_blocked_batch_norm_kernel(graph, node);
  }
  switch (node.op) {
    case OpKind::batch_norm:
      return std::make_unique<BatchNormKernel>(input_shape(graph, node, 0),
                                               same_layout_md(graph, node, 0),
                                               std::get<BatchNormAttrs>(node.attrs));
    case OpKind::batch_norm_grad:
      return batch_norm_grad_kernel(graph, node);
    case OpKind::batch_norm_inference:
      return batch_norm_inference_kernel(graph, node);
    case OpKind::batch_norm_inference_grad:
      return batch_norm_inference_grad_kernel(graph, node);
    case OpKind::layer_norm:
      return std::make_unique<LayerNormKernel>(input_shape(graph, node, 0),
                                               std::get<LayerNormAttrs>(node.attrs));
    case OpKind::layer_norm_grad:
      return std::make_unique<LayerNormGradKernel>(input_shape(graph, node, 1),
                                                   std::get<LayerNormAttrs>(node.attrs));
    default:
      MEMFIT_CHECK(false);
      return nullptr;
  }
}

}  // namespace

MEMFIT_CPU_KERNEL(batch_norm, make_norm_kernel)
MEMFIT_CPU_KERNEL(batch_norm_grad, make_norm_kernel)
MEMFIT_CPU_KERNEL(batch_norm_inference, make_norm_kernel)
MEMFIT_CPU_KERNEL(batch_norm_inference_grad, make_norm_kernel)
MEMFIT_CPU_KERNEL(layer_norm, make_norm_kernel)
MEMFIT_CPU_KERNEL(layer_norm_grad, make_norm_kernel)

}  // namespace memfit::cpu
