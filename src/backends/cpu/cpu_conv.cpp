// The convolutions on oneDNN: conv2d, conv3d and their gradients on the direct
// convolution (never Winograd, whose rounding differs from the reference), and
// the transposed convolutions on the direct deconvolution. oneDNN takes 4-D and
// 5-D tensors with the same primitives; only the dimension lists differ.
#include <algorithm>
#include <string_view>
#include <variant>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/dnnl_util.h"
#include "core/check.h"

namespace memfit::cpu {
namespace {

using dnnl::algorithm;
using dnnl::memory;

// The geometry in oneDNN's terms, one entry per spatial dimension. Padding is
// memfit's symmetric pad on both sides, except the right padding of the
// transposed convolutions (see deconv_kernel); oneDNN accepts the floor in the
// output size, as memfit does.
struct ConvGeometry {
  memory::dims strides;
  memory::dims dilates;  // oneDNN counts the gaps between taps: dilation - 1
  memory::dims padding_l;
  memory::dims padding_r;
  int64_t groups = 1;
};

// Every conv attrs struct (Pair or Triple fields) has these fields.
template <class A>
ConvGeometry geometry(const A& attrs) {
  ConvGeometry g;
  for (size_t i = 0; i < attrs.stride.size(); ++i) {
    g.strides.push_back(attrs.stride[i]);
    g.dilates.push_back(attrs.dilation[i] - 1);
    g.padding_l.push_back(attrs.pad[i]);
  }
  g.padding_r = g.padding_l;
  g.groups = attrs.groups;
  return g;
}

// w (O, C/g, K...); grouped, oneDNN reads the same bytes as (g, O/g, C/g, K...).
memory::desc weights_md(const Shape& w, int64_t groups) {
  if (groups == 1) return plain_md(w);
  Shape grouped = {groups, w[0] / groups};
  grouped.insert(grouped.end(), w.begin() + 1, w.end());
  return plain_md(grouped);
}

// The weights value `w` as it is stored: in its blocked layout (oi8, oi16:
// never grouped), or plain as weights_md says.
memory::desc weights_md(const Graph& graph, ValueId w, int64_t groups) {
  const Value& value = graph.value(w);
  if (value.layout == Layout::plain) return weights_md(value.type.shape, groups);
  MEMFIT_CHECK(groups == 1);
  return value_md(graph, w);
}

// The weights descriptor a primitive is created with: the plain one while the
// activations are plain (oneDNN's gemm-based convolution reads it as it is),
// or "any" when they are blocked, so that oneDNN picks the blocked weights
// format its fast kernels need (with plain weights they fall back to its
// reference loops).
memory::desc weights_choice(const memory::desc& plain, bool blocked) {
  if (!blocked) return plain;
  return memory::desc(plain.dims(), memory::data_type::f32, memory::format_tag::any);
}

// Where a primitive reads weights (input `input`, stored as `given`) from:
// the input itself when `chosen` is its format, else a copy in `chosen`'s
// format that a reorder writes into the kernel's workspace first.
ArgBuffer read_weights(PrimitiveKernel& kernel, const memory::desc& chosen,
                       const memory::desc& given, size_t input) {
  if (chosen == given) return input_arg(DNNL_ARG_WEIGHTS, input, given);
  const size_t offset = kernel.reserve(chosen.get_size());
  kernel.add_reorder(input_arg(DNNL_ARG_FROM, input, given), workspace_arg(DNNL_ARG_TO, offset, chosen));
  return workspace_arg(DNNL_ARG_WEIGHTS, offset, chosen);
}

// The forward primitive descriptor; also the hint of the backward ones.
// An empty `b` means no bias.
dnnl::convolution_forward::primitive_desc forward_pd(
    const memory::desc& x, const memory::desc& w, const memory::desc& b, const memory::desc& y,
    const ConvGeometry& g, const dnnl::primitive_attr& attr = kernel_attr()) {
  const dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_training,
                                             algorithm::convolution_direct, x, w, b, y, g.strides,
                                             g.dilates, g.padding_l, g.padding_r);
  return {desc, attr, engine()};
}

// The weight-gradient primitive descriptor of x, dy and the geometry, dw in
// the format given (or "any"); an empty `db` means no bias gradient.
dnnl::convolution_backward_weights::primitive_desc backward_weights_pd(
    const memory::desc& x, const memory::desc& dw, const memory::desc& db, const memory::desc& dy,
    const ConvGeometry& g) {
  const dnnl::convolution_backward_weights::desc desc(algorithm::convolution_direct, x, dw, db, dy,
                                                      g.strides, g.dilates, g.padding_l,
                                                      g.padding_r);
  return {desc, kernel_attr(), engine(), forward_pd(x, dw, db, dy, g)};
}

// x (N, C, S...), w (O, C/g, K...), optional b (O) -> y (N, O, OS...); A is
// Conv2dAttrs or Conv3dAttrs, and S... two or three spatial dimensions. x and
// y in their values' layouts. The fused conv2d_relu applies a ReLU post-op;
// conv2d_add (x, w, r [, b]) starts y as r and adds the convolution into it
// with a sum post-op.
template <class A>
std::unique_ptr<Kernel> conv_kernel(const Graph& graph, const Node& node) {
  const ConvGeometry g = geometry(std::get<A>(node.attrs));
  const memory::desc x = input_md(graph, node, 0);
  const memory::desc w = weights_md(graph, node.inputs[1], g.groups);
  const memory::desc y = output_md(graph, node, 0);
  const bool residual = node.op == OpKind::conv2d_add;
  const size_t bias_input = residual ? 3 : 2;
  const bool bias = node.inputs.size() > bias_input;
  const memory::desc b = bias ? plain_md(input_shape(graph, node, bias_input)) : memory::desc();
  const auto pd = forward_pd(x, weights_choice(w, touches_blocked(graph, node)), b, y, g,
                             post_op_attr(residual, node.op == OpKind::conv2d_relu));
  std::unique_ptr<PrimitiveKernel> kernel =
      residual ? std::make_unique<AddIntoKernel>(graph.value(node.outputs[0]).bytes(), 2)
               : std::make_unique<PrimitiveKernel>();
  std::vector<ArgBuffer> args = {input_arg(DNNL_ARG_SRC, 0, x),
                                 read_weights(*kernel, pd.weights_desc(), w, 1),
                                 output_arg(DNNL_ARG_DST, 0, y)};
  if (bias) args.push_back(input_arg(DNNL_ARG_BIAS, bias_input, b));
  kernel->add(pd, args);
  return kernel;
}

// dy (N, O, OS...), w (O, C/g, K...) -> dx (N, C, S...); A is Conv2dGradAttrs or Conv3dGradAttrs.
template <class A>
std::unique_ptr<Kernel> conv_grad_input_kernel(const Graph& graph, const Node& node) {
  const ConvGeometry g = geometry(std::get<A>(node.attrs));
  const memory::desc dy = input_md(graph, node, 0);
  const memory::desc w = weights_md(graph, node.inputs[1], g.groups);
  const memory::desc dx = output_md(graph, node, 0);
  const memory::desc w_choice = weights_choice(w, touches_blocked(graph, node));
  const dnnl::convolution_backward_data::desc desc(algorithm::convolution_direct, dx, w_choice, dy,
                                                   g.strides, g.dilates, g.padding_l, g.padding_r);
  const dnnl::convolution_backward_data::primitive_desc pd(
      desc, kernel_attr(), engine(), forward_pd(dx, w_choice, memory::desc(), dy, g));
  auto kernel = std::make_unique<PrimitiveKernel>();
  kernel->add(pd, {input_arg(DNNL_ARG_DIFF_DST, 0, dy), read_weights(*kernel, pd.weights_desc(), w, 1),
                   output_arg(DNNL_ARG_DIFF_SRC, 0, dx)});
  return kernel;
}

// The same dims in the channels-last format (nhwc, ndhwc). A tensor of one
// channel has the same bytes in it as plain.
memory::desc channels_last_md(const Shape& shape) {
  using tag = memory::format_tag;
  return memory::desc(to_dims(shape), memory::data_type::f32,
                      shape.size() == 5 ? tag::ndhwc : tag::nhwc);
}

// Whether oneDNN has a direct (non-reference) weight-gradient kernel for
// node (conv2d_grad_weight or conv3d_grad_weight, attrs A) with x and dy in
// the given formats.
template <class A>
bool grad_weight_is_direct(const Graph& graph, const Node& node, const memory::desc& x,
                           const memory::desc& dy) {
  const auto& attrs = std::get<A>(node.attrs);
  const ConvGeometry g = geometry(attrs);
  const memory::desc dw = weights_choice(weights_md(output_shape(graph, node, 0), g.groups), true);
  const memory::desc db = attrs.bias ? plain_md(output_shape(graph, node, 1)) : memory::desc();
  try {
    const auto pd = backward_weights_pd(x, dw, db, dy, g);
    return std::string_view(pd.impl_info_str()).substr(0, 3) != "ref";
  } catch (const dnnl::error&) {
    return false;
  }
}

// A first layer's image of one plain channel is also channels-last; oneDNN
// 2.6's direct kernels take it so beside a channels-last dy (LeNet's conv1:
// 0.4 ms against 1.2 ms on its gemm path and 2.8 ms on memfit's own loops),
// dy reordered into the workspace first.
template <class A>
bool one_channel_grad_weight_via_channels_last(const Graph& graph, const Node& node) {
  const Value& x = graph.value(node.inputs[1]);
  if (x.type.shape[1] != 1 || x.layout != Layout::plain) return false;
  return grad_weight_is_direct<A>(graph, node, channels_last_md(x.type.shape),
                                  channels_last_md(input_shape(graph, node, 0)));
}

// dy (N, O, OS...), x (N, C, S...) -> dw (O, C/g, K...), and db (O) when
// attrs.bias. Weights in a blocked format other than dw's are written into
// the workspace and reordered into dw. A one-channel image goes channels-last (see
// one_channel_grad_weight_via_channels_last).
template <class A>
std::unique_ptr<Kernel> conv_grad_weight_kernel(const Graph& graph, const Node& node) {
  const auto& attrs = std::get<A>(node.attrs);
  const ConvGeometry g = geometry(attrs);
  const bool channels_last = one_channel_grad_weight_via_channels_last<A>(graph, node);
  const memory::desc dy_given = input_md(graph, node, 0);
  const memory::desc dy =
      channels_last ? channels_last_md(input_shape(graph, node, 0)) : dy_given;
  const memory::desc x =
      channels_last ? channels_last_md(input_shape(graph, node, 1)) : input_md(graph, node, 1);
  const memory::desc dw = weights_md(graph, node.outputs[0], g.groups);
  const memory::desc db = attrs.bias ? plain_md(output_shape(graph, node, 1)) : memory::desc();
  const memory::desc dw_choice = weights_choice(dw, channels_last || touches_blocked(graph, node));
  const auto pd = backward_weights_pd(x, dw_choice, db, dy, g);
  auto kernel = std::make_unique<PrimitiveKernel>();
  const memory::desc chosen = pd.diff_weights_desc();
  const bool reordered = chosen != dw;
  const size_t offset = reordered ? kernel->reserve(chosen.get_size()) : 0;
  ArgBuffer dy_arg = input_arg(DNNL_ARG_DIFF_DST, 0, dy);
  if (channels_last) {
    const size_t dy_offset = kernel->reserve(dy.get_size());
    kernel->add_reorder(input_arg(DNNL_ARG_FROM, 0, dy_given), workspace_arg(DNNL_ARG_TO, dy_offset, dy));
    dy_arg = workspace_arg(DNNL_ARG_DIFF_DST, dy_offset, dy);
  }
  std::vector<ArgBuffer> args = {dy_arg, input_arg(DNNL_ARG_SRC, 1, x),
                                 reordered ? workspace_arg(DNNL_ARG_DIFF_WEIGHTS, offset, chosen)
                                           : output_arg(DNNL_ARG_DIFF_WEIGHTS, 0, dw)};
  if (attrs.bias) args.push_back(output_arg(DNNL_ARG_DIFF_BIAS, 1, db));
  kernel->add(pd, args);
  if (reordered) {
    kernel->add_reorder(workspace_arg(DNNL_ARG_FROM, offset, chosen), output_arg(DNNL_ARG_TO, 0, dw));
  }
  return kernel;
}

// x (N, C, S...), w (C, O/g, K...), optional b (O) -> y (N, O, OS...); A is
// ConvTranspose2dAttrs or ConvTranspose3dAttrs. oneDNN's deconvolution weights
// are (O, C, K...), or (g, O/g, C/g, K...) grouped: w's bytes in the
// "io" order, which the iohw-style tags describe.
template <class A>
std::unique_ptr<Kernel> deconv_kernel(const Graph& graph, const Node& node) {
  const A& attrs = std::get<A>(node.attrs);
  ConvGeometry g = geometry(attrs);
  // oneDNN only checks (OS - kernel extent + padding_l + padding_r) / stride + 1
  // = S (rounded toward zero) of padding_r; the output size alone bounds the
  // result. Any padding_r in [pad - output_padding, pad - output_padding + stride)
  // passes, and one of them is non-negative (see deconv_supported).
  for (size_t i = 0; i < g.padding_r.size(); ++i) {
    g.padding_r[i] = std::max<int64_t>(attrs.pad[i] - attrs.output_padding[i], 0);
  }
  const Shape& ws = input_shape(graph, node, 1);
  const bool three_d = ws.size() == 5;
  memory::dims w_dims;
  if (g.groups > 1) w_dims.push_back(g.groups);
  w_dims.push_back(ws[1]);
  w_dims.push_back(ws[0] / g.groups);
  w_dims.insert(w_dims.end(), ws.begin() + 2, ws.end());
  using tag = memory::format_tag;
  const tag w_tag =
      g.groups > 1 ? (three_d ? tag::giodhw : tag::giohw) : (three_d ? tag::iodhw : tag::iohw);
  const memory::desc x = plain_md(input_shape(graph, node, 0));
  const memory::desc w(w_dims, memory::data_type::f32, w_tag);
  const memory::desc y = plain_md(output_shape(graph, node, 0));
  const bool bias = node.inputs.size() == 3;
  const memory::desc b = bias ? plain_md(input_shape(graph, node, 2)) : memory::desc();
  const dnnl::deconvolution_forward::desc desc(dnnl::prop_kind::forward_training,
                                               algorithm::deconvolution_direct, x, w, b, y,
                                               g.strides, g.dilates, g.padding_l, g.padding_r);
  const dnnl::deconvolution_forward::primitive_desc pd(desc, kernel_attr(), engine());
  std::vector<ArgBuffer> args = {input_arg(DNNL_ARG_SRC, 0, x), input_arg(DNNL_ARG_WEIGHTS, 1, w),
                                 output_arg(DNNL_ARG_DST, 0, y)};
  if (bias) args.push_back(input_arg(DNNL_ARG_BIAS, 2, b));
  auto kernel = std::make_unique<PrimitiveKernel>();
  kernel->add(pd, args);
  return kernel;
}

// oneDNN refuses negative padding, so the padding_r of deconv_kernel exists
// when output_padding < pad + stride along every axis.
template <class A>
bool deconv_supported(const Node& node) {
  const A& attrs = std::get<A>(node.attrs);
  for (size_t i = 0; i < attrs.stride.size(); ++i) {
    if (attrs.output_padding[i] >= attrs.pad[i] + attrs.stride[i]) return false;
  }
  return true;
}

// The transposed convolutions oneDNN can express (deconv_supported), f32;
// the reference kernel runs the others.
template <class A>
bool deconv_takes(const Graph& graph, const Node& node) {
  return deconv_supported<A>(node) && has_op_dtypes(graph, node);
}

}  // namespace

bool image_grad_weight_reads_blocked_dy(const Graph& graph, const Node& node, Layout blocked) {
  const memory::desc dy = layout_md(input_shape(graph, node, 0), blocked);
  const memory::desc x = plain_md(input_shape(graph, node, 1));
  switch (node.op) {
    case OpKind::conv2d_grad_weight:
      return one_channel_grad_weight_via_channels_last<Conv2dGradAttrs>(graph, node) ||
             grad_weight_is_direct<Conv2dGradAttrs>(graph, node, x, dy);
    case OpKind::conv3d_grad_weight:
      return one_channel_grad_weight_via_channels_last<Conv3dGradAttrs>(graph, node) ||
             grad_weight_is_direct<Conv3dGradAttrs>(graph, node, x, dy);
    default:
      return false;
  }
}

Layout conv_weight_layout(const Graph& graph, const Node& node, Layout x_layout, Layout blocked) {
  if (blocked != Layout::c8 && blocked != Layout::c16) return Layout::plain;
  const Layout candidate = blocked == Layout::c8 ? Layout::oi8 : Layout::oi16;
  // The primitive of `node` (attrs A) with x in x_layout, y or dy in
  // `blocked` (a seed's outputs are) and the weights' format left to oneDNN.
  auto forward = [&]<class A>(const A& attrs) {
    const ConvGeometry g = geometry(attrs);
    const Shape& w = input_shape(graph, node, 1);
    if (g.groups != 1) return Layout::plain;
    const auto pd = forward_pd(layout_md(input_shape(graph, node, 0), x_layout),
                               weights_choice(plain_md(w), true), memory::desc(),
                               layout_md(output_shape(graph, node, 0), blocked), g);
    return pd.weights_desc() == layout_md(w, candidate) ? candidate : Layout::plain;
  };
  auto weight_gradient = [&]<class A>(const A& attrs) {
    const ConvGeometry g = geometry(attrs);
    const Shape& w = output_shape(graph, node, 0);
    if (g.groups != 1) return Layout::plain;
    const memory::desc x = layout_md(input_shape(graph, node, 1), x_layout);
    const memory::desc dy = layout_md(input_shape(graph, node, 0), blocked);
    const memory::desc dw = weights_choice(plain_md(w), true);
    const memory::desc db = attrs.bias ? plain_md(output_shape(graph, node, 1)) : memory::desc();
    const auto pd = backward_weights_pd(x, dw, db, dy, g);
    return pd.diff_weights_desc() == layout_md(w, candidate) ? candidate : Layout::plain;
  };
  try {
    switch (node.op) {
      case OpKind::conv2d:
      case OpKind::conv2d_relu:
      case OpKind::conv2d_add:
        return forward(std::get<Conv2dAttrs>(node.attrs));
      case OpKind::conv3d:
        return forward(std::get<Conv3dAttrs>(node.attrs));
      case OpKind::conv2d_grad_weight:
        return weight_gradient(std::get<Conv2dGradAttrs>(node.attrs));
      case OpKind::conv3d_grad_weight:
        return weight_gradient(std::get<Conv3dGradAttrs>(node.attrs));
      default:
        return Layout::plain;
    }
  } catch (const dnnl::error&) {
    return Layout::plain;
  }
}

namespace {

std::unique_ptr<Kernel> make_conv_kernel(const Graph& graph, const Node& node) {
  switch (node.op) {
    case OpKind::conv2d:
    case OpKind::conv2d_relu:
    case OpKind::conv2d_add:
      return conv_kernel<Conv2dAttrs>(graph, node);
    case OpKind::conv2d_grad_input:
      return conv_grad_input_kernel<Conv2dGradAttrs>(graph, node);
    case OpKind::conv2d_grad_weight:
      return conv_grad_weight_kernel<Conv2dGradAttrs>(graph, node);
    case OpKind::conv3d:
      return conv_kernel<Conv3dAttrs>(graph, node);
    case OpKind::conv3d_grad_input:
      return conv_grad_input_kernel<Conv3dGradAttrs>(graph, node);
    case OpKind::conv3d_grad_weight:
      return conv_grad_weight_kernel<Conv3dGradAttrs>(graph, node);
    case OpKind::conv_transpose2d:
      return deconv_kernel<ConvTranspose2dAttrs>(graph, node);
    case OpKind::conv_transpose3d:
      return deconv_kernel<ConvTranspose3dAttrs>(graph, node);
    default:
      MEMFIT_CHECK(false);
      return nullptr;
  }
}

}  // namespace

MEMFIT_CPU_KERNEL(conv2d, make_conv_kernel)
MEMFIT_CPU_KERNEL(conv2d_relu, make_conv_kernel)
MEMFIT_CPU_KERNEL(conv2d_add, make_conv_kernel)
MEMFIT_CPU_KERNEL(conv2d_grad_input, make_conv_kernel)
MEMFIT_CPU_KERNEL(conv2d_grad_weight, make_conv_kernel)
MEMFIT_CPU_KERNEL(conv3d, make_conv_kernel)
MEMFIT_CPU_KERNEL(conv3d_grad_input, make_conv_kernel)
MEMFIT_CPU_KERNEL(conv3d_grad_weight, make_conv_kernel)
MEMFIT_CPU_KERNEL(conv_transpose2d, make_conv_kernel, deconv_takes<ConvTranspose2dAttrs>)
MEMFIT_CPU_KERNEL(conv_transpose3d, make_conv_kernel, deconv_takes<ConvTranspose3dAttrs>)

}  // namespace memfit::cpu
