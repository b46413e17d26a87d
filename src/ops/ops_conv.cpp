// conv2d and its two gradient ops (data and weights, the latter with the bias).
#include "ops/grad_context.h"
#include "ops/op_util.h"

namespace memfit {
namespace {

using ops::Types;

// The output shape of conv2d for input shape x and weight shape w.
Result<Shape> conv_output(const Shape& x, const Shape& w, const Pair& stride, const Pair& pad,
                          const Pair& dilation, int64_t groups) {
  if (groups < 1 || groups > x[1] || x[1] % groups != 0 || w[0] % groups != 0) {
    return Status::error("groups (" + std::to_string(groups) +
                         ") must divide the input and output channels");
  }
  if (w[1] * groups != x[1]) {
    return Status::error("w " + shape_string(w) + " does not match " + std::to_string(x[1]) +
                         " input channels in " + std::to_string(groups) + " groups");
  }
  MEMFIT_RETURN_IF_ERROR(ops::expect_window(stride, pad, dilation));
  for (int i = 0; i < 2; ++i) {
    if (w[2 + static_cast<size_t>(i)] - 1 > ops::kMaxElements / dilation[i]) {
      return Status::error("the dilated kernel is larger than 2^48");
    }
  }
  const int64_t oh = ops::window_out(x[2], w[2], stride[0], pad[0], dilation[0]);
  const int64_t ow = ops::window_out(x[3], w[3], stride[1], pad[1], dilation[1]);
  if (oh < 1 || ow < 1) {
    return Status::error("the kernel " + shape_string(w) + " does not fit the input " +
                         shape_string(x));
  }
  return Shape{x[0], w[0], oh, ow};
}

Result<Types> infer_conv(const Types& in, const Attrs& attrs) {
  const auto& a = std::get<Conv2dAttrs>(attrs);
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[0], 4, "x (N, C, H, W)"));
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[1], 4, "w (O, C/groups, KH, KW)"));
  if (in.size() == 3) {
    MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[2], 1, "b (O)"));
    if (in[2].shape[0] != in[1].shape[0]) return Status::error("b must have one element per output channel");
  }
  MEMFIT_ASSIGN_OR_RETURN(Shape y, conv_output(in[0].shape, in[1].shape, a.stride, a.pad,
                                               a.dilation, a.groups));
  return Types{ops::f32(y)};
}

// conv2d_grad_input(dy, w) -> dx of attrs.shape.
Result<Types> infer_conv_grad_input(const Types& in, const Attrs& attrs) {
  const auto& a = std::get<Conv2dGradAttrs>(attrs);
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[0], 4, "dy"));
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[1], 4, "w"));
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(ops::f32(a.shape), 4, "shape (N, C, H, W)"));
  MEMFIT_ASSIGN_OR_RETURN(Shape y, conv_output(a.shape, in[1].shape, a.stride, a.pad, a.dilation,
                                               a.groups));
  if (y != in[0].shape) return Status::error("dy " + shape_string(in[0].shape) + " should be " + shape_string(y));
  return Types{ops::f32(a.shape)};
}

// conv2d_grad_weight(dy, x) -> dw of attrs.shape [, db].
Result<Types> infer_conv_grad_weight(const Types& in, const Attrs& attrs) {
  const auto& a = std::get<Conv2dGradAttrs>(attrs);
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[0], 4, "dy"));
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[1], 4, "x"));
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(ops::f32(a.shape), 4, "shape (O, C/groups, KH, KW)"));
  MEMFIT_ASSIGN_OR_RETURN(Shape y, conv_output(in[1].shape, a.shape, a.stride, a.pad, a.dilation,
                                               a.groups));
  if (y != in[0].shape) return Status::error("dy " + shape_string(in[0].shape) + " should be " + shape_string(y));
  Types out{ops::f32(a.shape)};
  if (a.bias) out.push_back(ops::f32({a.shape[0]}));
  return out;
}

Conv2dGradAttrs grad_attrs(const Conv2dAttrs& a, Shape shape, bool bias) {
  return Conv2dGradAttrs{a.stride, a.pad, a.dilation, a.groups, std::move(shape), bias};
}

Status grad_conv(GradContext& ctx) {
  const auto& a = ctx.attrs<Conv2dAttrs>();
  const ValueId dy = ctx.dout(0);
  MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[0],
                          ctx.emit(OpKind::conv2d_grad_input, {dy, ctx.in(1)},
                                   grad_attrs(a, ctx.shape(ctx.in(0)), false)));
  const bool bias = ctx.node.inputs.size() == 3;
  MEMFIT_ASSIGN_OR_RETURN(auto dw, ctx.emit_all(OpKind::conv2d_grad_weight, {dy, ctx.in(0)},
                                                grad_attrs(a, ctx.shape(ctx.in(1)), bias)));
  ctx.input_grads[1] = dw[0];
  if (bias) ctx.input_grads[2] = dw[1];
  return Status::ok();
}

// 2 flops per multiply-add, over every output element and its receptive field.
Cost conv_cost(const Shape& y, const Shape& w, const Types& in, const Types& out) {
  Cost cost;
  cost.flops = 2.0 * num_elements(y) * w[1] * w[2] * w[3];
  for (const auto& t : in) cost.bytes += 4.0 * num_elements(t.shape);
  for (const auto& t : out) cost.bytes += 4.0 * num_elements(t.shape);
  return cost;
}

std::vector<OpExample> conv_examples() {
  return {
      ops::example({ops::f32({2, 3, 5, 5}), ops::f32({4, 3, 3, 3}), ops::f32({4})},
                   Conv2dAttrs{{1, 1}, {1, 1}, {1, 1}, 1}),
      ops::example({ops::f32({1, 4, 7, 6}), ops::f32({6, 2, 3, 2})},
                   Conv2dAttrs{{2, 1}, {1, 0}, {1, 2}, 2}),
      ops::example({ops::f32({2, 2, 6, 6}), ops::f32({2, 2, 1, 1}), ops::f32({2})},
                   Conv2dAttrs{{2, 2}, {0, 0}, {1, 1}, 1}),
  };
}

// The gradient ops' examples mirror the forward ones.
std::vector<OpExample> conv_grad_examples(bool weight) {
  std::vector<OpExample> out;
  for (const OpExample& fwd : conv_examples()) {
    const auto& a = std::get<Conv2dAttrs>(fwd.attrs);
    const Shape& x = fwd.inputs[0].shape;
    const Shape& w = fwd.inputs[1].shape;
    const Shape y = *conv_output(x, w, a.stride, a.pad, a.dilation, a.groups);
    if (weight) {
      out.push_back(ops::example({ops::f32(y), ops::f32(x)},
                                 grad_attrs(a, w, fwd.inputs.size() == 3)));
    } else {
      out.push_back(ops::example({ops::f32(y), ops::f32(w)}, grad_attrs(a, x, false)));
    }
  }
  return out;
}

}  // namespace

void register_conv_ops(OpTableBuilder& table) {
  OpInfo conv;
  conv.op = OpKind::conv2d;
  conv.min_inputs = 2;
  conv.max_inputs = 3;
  conv.infer = infer_conv;
  conv.grad = grad_conv;
  conv.cost = [](const Types& in, const Types& out, const Attrs&) {
    return conv_cost(out[0].shape, in[1].shape, in, out);
  };
  conv.examples = conv_examples;
  table.add(conv);

  OpInfo grad_input;
  grad_input.op = OpKind::conv2d_grad_input;
  grad_input.min_inputs = grad_input.max_inputs = 2;
  grad_input.infer = infer_conv_grad_input;
  grad_input.cost = [](const Types& in, const Types& out, const Attrs&) {
    return conv_cost(in[0].shape, in[1].shape, in, out);
  };
  grad_input.examples = [] { return conv_grad_examples(false); };
  grad_input.emitted_by = {OpKind::conv2d};
  table.add(grad_input);

  OpInfo grad_weight;
  grad_weight.op = OpKind::conv2d_grad_weight;
  grad_weight.min_inputs = grad_weight.max_inputs = 2;
  grad_weight.infer = infer_conv_grad_weight;
  grad_weight.cost = [](const Types& in, const Types& out, const Attrs&) {
    return conv_cost(in[0].shape, out[0].shape, in, out);
  };
  grad_weight.examples = [] { return conv_grad_examples(true); };
  grad_weight.emitted_by = {OpKind::conv2d};
  table.add(grad_weight);
}

}  // namespace memfit
