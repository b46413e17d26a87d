// conv2d and its gradients on oneDNN's direct convolution (never Winograd,
// whose rounding differs from the reference).
#include <variant>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/dnnl_util.h"
#include "core/check.h"

namespace memfit::cpu {
namespace {

using dnnl::algorithm;
using dnnl::memory;

// The geometry in oneDNN's terms. Padding is symmetric: the right padding is
// the left one, and oneDNN accepts the floor in the output size, as memfit does.
struct ConvGeometry {
  memory::dims strides;
  memory::dims dilates;  // oneDNN counts the gaps between taps: dilation - 1
  memory::dims padding;
  int64_t groups = 1;
};

// Conv2dAttrs and Conv2dGradAttrs share these fields.
template <class A>
ConvGeometry geometry(const A& attrs) {
  return {{attrs.stride[0], attrs.stride[1]},
          {attrs.dilation[0] - 1, attrs.dilation[1] - 1},
          {attrs.pad[0], attrs.pad[1]},
          attrs.groups};
}

// w (O, C/g, KH, KW); grouped, oneDNN reads the same bytes as (g, O/g, C/g, KH, KW).
memory::desc weights_md(const Shape& w, int64_t groups) {
  if (groups == 1) return plain_md(w);
  return plain_md({groups, w[0] / groups, w[1], w[2], w[3]});
}

// The forward primitive descriptor; also the hint of the backward ones.
// An empty `b` means no bias.
dnnl::convolution_forward::primitive_desc forward_pd(const memory::desc& x, const memory::desc& w,
                                                     const memory::desc& b, const memory::desc& y,
                                                     const ConvGeometry& g) {
  const dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_training,
                                             algorithm::convolution_direct, x, w, b, y, g.strides,
                                             g.dilates, g.padding, g.padding);
  return {desc, kernel_attr(), engine()};
}

// x (N, C, H, W), w (O, C/g, KH, KW), optional b (O) -> y (N, O, OH, OW).
std::unique_ptr<Kernel> conv2d_kernel(const Graph& graph, const Node& node) {
  const ConvGeometry g = geometry(std::get<Conv2dAttrs>(node.attrs));
  const memory::desc x = plain_md(input_shape(graph, node, 0));
  const memory::desc w = weights_md(input_shape(graph, node, 1), g.groups);
  const memory::desc y = plain_md(output_shape(graph, node, 0));
  const bool bias = node.inputs.size() == 3;
  const memory::desc b = bias ? plain_md(input_shape(graph, node, 2)) : memory::desc();
  std::vector<ArgBuffer> args = {input_arg(DNNL_ARG_SRC, 0, x), input_arg(DNNL_ARG_WEIGHTS, 1, w),
                                 output_arg(DNNL_ARG_DST, 0, y)};
  if (bias) args.push_back(input_arg(DNNL_ARG_BIAS, 2, b));
  auto kernel = std::make_unique<PrimitiveKernel>();
  kernel->add(forward_pd(x, w, b, y, g), args);
  return kernel;
}

// dy (N, O, OH, OW), w (O, C/g, KH, KW) -> dx (N, C, H, W).
std::unique_ptr<Kernel> conv2d_grad_input_kernel(const Graph& graph, const Node& node) {
  const ConvGeometry g = geometry(std::get<Conv2dGradAttrs>(node.attrs));
  const memory::desc dy = plain_md(input_shape(graph, node, 0));
  const memory::desc w = weights_md(input_shape(graph, node, 1), g.groups);
  const memory::desc dx = plain_md(output_shape(graph, node, 0));
  const dnnl::convolution_backward_data::desc desc(algorithm::convolution_direct, dx, w, dy,
                                                   g.strides, g.dilates, g.padding, g.padding);
  const dnnl::convolution_backward_data::primitive_desc pd(
      desc, kernel_attr(), engine(), forward_pd(dx, w, memory::desc(), dy, g));
  auto kernel = std::make_unique<PrimitiveKernel>();
  kernel->add(pd, {input_arg(DNNL_ARG_DIFF_DST, 0, dy), input_arg(DNNL_ARG_WEIGHTS, 1, w),
                   output_arg(DNNL_ARG_DIFF_SRC, 0, dx)});
  return kernel;
}

// dy (N, O, OH, OW), x (N, C, H, W) -> dw (O, C/g, KH, KW), and db (O) when attrs.bias.
std::unique_ptr<Kernel> conv2d_grad_weight_kernel(const Graph& graph, const Node& node) {
  const auto& attrs = std::get<Conv2dGradAttrs>(node.attrs);
  const ConvGeometry g = geometry(attrs);
  const memory::desc dy = plain_md(input_shape(graph, node, 0));
  const memory::desc x = plain_md(input_shape(graph, node, 1));
  const memory::desc dw = weights_md(output_shape(graph, node, 0), g.groups);
  const memory::desc db = attrs.bias ? plain_md(output_shape(graph, node, 1)) : memory::desc();
  const dnnl::convolution_backward_weights::desc desc(algorithm::convolution_direct, x, dw, db, dy,
                                                      g.strides, g.dilates, g.padding, g.padding);
  const dnnl::convolution_backward_weights::primitive_desc pd(desc, kernel_attr(), engine(),
                                                              forward_pd(x, dw, db, dy, g));
  std::vector<ArgBuffer> args = {input_arg(DNNL_ARG_DIFF_DST, 0, dy), input_arg(DNNL_ARG_SRC, 1, x),
                                 output_arg(DNNL_ARG_DIFF_WEIGHTS, 0, dw)};
  if (attrs.bias) args.push_back(output_arg(DNNL_ARG_DIFF_BIAS, 1, db));
  auto kernel = std::make_unique<PrimitiveKernel>();
  kernel->add(pd, args);
  return kernel;
}

}  // namespace

std::unique_ptr<Kernel> make_conv_kernel(const Graph& graph, const Node& node) {
  switch (node.op) {
    case OpKind::conv2d:
      return conv2d_kernel(graph, node);
    case OpKind::conv2d_grad_input:
      return conv2d_grad_input_kernel(graph, node);
    case OpKind::conv2d_grad_weight:
      return conv2d_grad_weight_kernel(graph, node);
    default:
      MEMFIT_CHECK(false);
      return nullptr;
  }
}

}  // namespace memfit::cpu
