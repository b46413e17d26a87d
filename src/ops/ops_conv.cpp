// conv2d and conv3d, and their two gradient ops each (data and weights, the
// latter with the bias). Both ranks share one set of rules, written over the
// ConvFamily of their attribute struct.
#include "ops/conv_util.h"
#include "ops/grad_context.h"
#include "ops/op_util.h"

namespace memfit {
namespace {

using ops::Types;

// What differs between conv2d and conv3d: the ops, the gradient attributes and
// the names of the dimensions in error messages.
template <class A>
struct ConvFamily;

template <>
struct ConvFamily<Conv2dAttrs> {
  using Grad = Conv2dGradAttrs;
  static constexpr int kRank = 4;
  static constexpr OpKind kForward = OpKind::conv2d;
  static constexpr OpKind kGradInput = OpKind::conv2d_grad_input;
  static constexpr OpKind kGradWeight = OpKind::conv2d_grad_weight;
  static constexpr const char* kX = "(N, C, H, W)";
  static constexpr const char* kW = "(O, C/groups, KH, KW)";
};

template <>
struct ConvFamily<Conv3dAttrs> {
  using Grad = Conv3dGradAttrs;
  static constexpr int kRank = 5;
  static constexpr OpKind kForward = OpKind::conv3d;
  static constexpr OpKind kGradInput = OpKind::conv3d_grad_input;
  static constexpr OpKind kGradWeight = OpKind::conv3d_grad_weight;
  static constexpr const char* kX = "(N, C, D, H, W)";
  static constexpr const char* kW = "(O, C/groups, KD, KH, KW)";
};

Status dy_mismatch(const Shape& dy, const Shape& y) {
  return Status::error("dy " + shape_string(dy) + " should be " + shape_string(y));
}

template <class A>
Result<Types> infer_conv(const Types& in, const Attrs& attrs) {
  using F = ConvFamily<A>;
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[0], F::kRank, (std::string("x ") + F::kX).c_str()));
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[1], F::kRank, (std::string("w ") + F::kW).c_str()));
  if (in.size() == 3) {
    MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[2], 1, "b (O)"));
    if (in[2].shape[0] != in[1].shape[0]) {
      return Status::error("b must have one element per output channel");
    }
  }
  MEMFIT_ASSIGN_OR_RETURN(
      Shape y, ops::conv_output(in[0].shape, in[1].shape, ops::conv_window(std::get<A>(attrs))));
  return Types{ops::f32(y)};
}

// conv*_grad_input(dy, w) -> dx of attrs.shape.
template <class A>
Result<Types> infer_conv_grad_input(const Types& in, const Attrs& attrs) {
  using F = ConvFamily<A>;
  const auto& a = std::get<typename F::Grad>(attrs);
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[0], F::kRank, "dy"));
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[1], F::kRank, "w"));
  MEMFIT_RETURN_IF_ERROR(
      ops::expect_f32(ops::f32(a.shape), F::kRank, (std::string("shape ") + F::kX).c_str()));
  MEMFIT_ASSIGN_OR_RETURN(Shape y, ops::conv_output(a.shape, in[1].shape, ops::conv_window(a)));
  if (y != in[0].shape) return dy_mismatch(in[0].shape, y);
  return Types{ops::f32(a.shape)};
}

// conv*_grad_weight(dy, x) -> dw of attrs.shape [, db].
template <class A>
Result<Types> infer_conv_grad_weight(const Types& in, const Attrs& attrs) {
  using F = ConvFamily<A>;
  const auto& a = std::get<typename F::Grad>(attrs);
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[0], F::kRank, "dy"));
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[1], F::kRank, "x"));
  MEMFIT_RETURN_IF_ERROR(
      ops::expect_f32(ops::f32(a.shape), F::kRank, (std::string("shape ") + F::kW).c_str()));
  MEMFIT_ASSIGN_OR_RETURN(Shape y, ops::conv_output(in[1].shape, a.shape, ops::conv_window(a)));
  if (y != in[0].shape) return dy_mismatch(in[0].shape, y);
  Types out{ops::f32(a.shape)};
  if (a.bias) out.push_back(ops::f32({a.shape[0]}));
  return out;
}

template <class A>
typename ConvFamily<A>::Grad grad_attrs(const A& a, Shape shape, bool bias) {
  return {a.stride, a.pad, a.dilation, a.groups, std::move(shape), bias};
}

template <class A>
Status grad_conv(GradContext& ctx) {
  using F = ConvFamily<A>;
  const A& a = ctx.attrs<A>();
  const ValueId dy = ctx.dout(0);
  MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[0], ctx.emit(F::kGradInput, {dy, ctx.in(1)},
                                                       grad_attrs(a, ctx.shape(ctx.in(0)), false)));
  const bool bias = ctx.node.inputs.size() == 3;
  MEMFIT_ASSIGN_OR_RETURN(auto dw, ctx.emit_all(F::kGradWeight, {dy, ctx.in(0)},
                                                grad_attrs(a, ctx.shape(ctx.in(1)), bias)));
  ctx.input_grads[1] = dw[0];
  if (bias) ctx.input_grads[2] = dw[1];
  return Status::ok();
}

// 2 flops per multiply-add, over every output element and its receptive field
// (w (O, C/groups, K...): all dimensions but the first).
Cost conv_cost(const Shape& y, const Shape& w, const Types& in, const Types& out) {
  Cost cost;
  cost.flops = 2.0 * num_elements(y) * (num_elements(w) / w[0]);
  for (const auto& t : in) cost.bytes += 4.0 * num_elements(t.shape);
  for (const auto& t : out) cost.bytes += 4.0 * num_elements(t.shape);
  return cost;
}

std::vector<OpExample> conv2d_examples() {
  return {
      ops::example({ops::f32({2, 3, 5, 5}), ops::f32({4, 3, 3, 3}), ops::f32({4})},
                   Conv2dAttrs{{1, 1}, {1, 1}, {1, 1}, 1}),
      ops::example({ops::f32({1, 4, 7, 6}), ops::f32({6, 2, 3, 2})},
                   Conv2dAttrs{{2, 1}, {1, 0}, {1, 2}, 2}),
      ops::example({ops::f32({2, 2, 6, 6}), ops::f32({2, 2, 1, 1}), ops::f32({2})},
                   Conv2dAttrs{{2, 2}, {0, 0}, {1, 1}, 1}),
      // A one-channel image, strided and padded: the cpu backend's
      // conv2d_grad_weight reads it channels-last (cpu_conv.cpp).
      ops::example({ops::f32({2, 1, 7, 6}), ops::f32({3, 1, 3, 2}), ops::f32({3})},
                   Conv2dAttrs{{2, 1}, {1, 1}, {1, 1}, 1}),
  };
}

std::vector<OpExample> conv3d_examples() {
  return {
      ops::example({ops::f32({2, 2, 4, 3, 3}), ops::f32({3, 2, 2, 3, 2}), ops::f32({3})},
                   Conv3dAttrs{{1, 1, 1}, {1, 1, 0}, {1, 1, 1}, 1}),
      ops::example({ops::f32({1, 4, 5, 4, 4}), ops::f32({4, 2, 3, 2, 2})},
                   Conv3dAttrs{{2, 1, 2}, {1, 0, 1}, {1, 2, 1}, 2}),
      ops::example({ops::f32({1, 2, 4, 4, 3}), ops::f32({2, 2, 1, 1, 1}), ops::f32({2})},
                   Conv3dAttrs{{2, 2, 1}, {0, 0, 0}, {1, 1, 1}, 1}),
  };
}

template <class A>
std::vector<OpExample> conv_examples() {
  if constexpr (std::is_same_v<A, Conv2dAttrs>) {
    return conv2d_examples();
  } else {
    return conv3d_examples();
  }
}

// The gradient ops' examples mirror the forward ones.
template <class A>
std::vector<OpExample> conv_grad_examples(bool weight) {
  std::vector<OpExample> out;
  for (const OpExample& fwd : conv_examples<A>()) {
    const auto& a = std::get<A>(fwd.attrs);
    const Shape& x = fwd.inputs[0].shape;
    const Shape& w = fwd.inputs[1].shape;
    const Shape y = *ops::conv_output(x, w, ops::conv_window(a));
    if (weight) {
      out.push_back(
          ops::example({ops::f32(y), ops::f32(x)}, grad_attrs(a, w, fwd.inputs.size() == 3)));
    } else {
      out.push_back(ops::example({ops::f32(y), ops::f32(w)}, grad_attrs(a, x, false)));
    }
  }
  return out;
}

// The rows of the family of A.
template <class A>
OpInfo conv_info() {
  OpInfo info = ops::new_op(ConvFamily<A>::kForward);
  info.infer = infer_conv<A>;
  info.grad = grad_conv<A>;
  info.cost = [](const Types& in, const Types& out, const Attrs&) {
    return conv_cost(out[0].shape, in[1].shape, in, out);
  };
  info.examples = conv_examples<A>;
  return info;
}

template <class A>
OpInfo conv_grad_input_info() {
  OpInfo info = ops::new_op(ConvFamily<A>::kGradInput);
  info.infer = infer_conv_grad_input<A>;
  info.cost = [](const Types& in, const Types& out, const Attrs&) {
    return conv_cost(in[0].shape, in[1].shape, in, out);
  };
  info.examples = [] { return conv_grad_examples<A>(false); };
  info.emitted_by = {ConvFamily<A>::kForward};
  return info;
}

template <class A>
OpInfo conv_grad_weight_info() {
  OpInfo info = ops::new_op(ConvFamily<A>::kGradWeight);
  info.infer = infer_conv_grad_weight<A>;
  info.cost = [](const Types& in, const Types& out, const Attrs&) {
    return conv_cost(in[0].shape, out[0].shape, in, out);
  };
  info.examples = [] { return conv_grad_examples<A>(true); };
  info.emitted_by = {ConvFamily<A>::kForward};
  return info;
}

}  // namespace

OpInfo op_info_conv2d() { return conv_info<Conv2dAttrs>(); }
OpInfo op_info_conv2d_grad_input() { return conv_grad_input_info<Conv2dAttrs>(); }
OpInfo op_info_conv2d_grad_weight() { return conv_grad_weight_info<Conv2dAttrs>(); }
OpInfo op_info_conv3d() { return conv_info<Conv3dAttrs>(); }
OpInfo op_info_conv3d_grad_input() { return conv_grad_input_info<Conv3dAttrs>(); }
OpInfo op_info_conv3d_grad_weight() { return conv_grad_weight_info<Conv3dAttrs>(); }

}  // namespace memfit
