// conv_transpose2d and conv_transpose3d (PyTorch's ConvTranspose2d/3d).
//
// A transposed convolution is the data gradient of the convolution c that maps
// its output space back to its input space: c has the same stride, pad,
// dilation and groups, and reads w (C, O/groups, K...) as its own weights
// (C outputs, O/groups inputs per group). So y = c^T(x) + b, and the gradients
// are convolutions: dx = c(dy), dw = c's weight gradient at input dy and output
// gradient x, db = the sum of dy over N and space.
#include "ops/conv_util.h"
#include "ops/grad_context.h"
#include "ops/op_util.h"

namespace memfit {
namespace {

using ops::Types;

// The convolution ops of the same rank, and the names of the dimensions.
template <class A>
struct TransposeFamily;

template <>
struct TransposeFamily<ConvTranspose2dAttrs> {
  using Conv = Conv2dAttrs;
  using ConvGrad = Conv2dGradAttrs;
  static constexpr int kRank = 4;
  static constexpr OpKind kConv = OpKind::conv2d;
  static constexpr OpKind kConvGradWeight = OpKind::conv2d_grad_weight;
  static constexpr const char* kX = "x (N, C, H, W)";
  static constexpr const char* kW = "w (C, O/groups, KH, KW)";
};

template <>
struct TransposeFamily<ConvTranspose3dAttrs> {
  using Conv = Conv3dAttrs;
  using ConvGrad = Conv3dGradAttrs;
  static constexpr int kRank = 5;
  static constexpr OpKind kConv = OpKind::conv3d;
  static constexpr OpKind kConvGradWeight = OpKind::conv3d_grad_weight;
  static constexpr const char* kX = "x (N, C, D, H, W)";
  static constexpr const char* kW = "w (C, O/groups, KD, KH, KW)";
};

template <class A>
Result<Types> infer_conv_transpose(const Types& in, const Attrs& attrs) {
  using F = TransposeFamily<A>;
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[0], F::kRank, F::kX));
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[1], F::kRank, F::kW));
  MEMFIT_ASSIGN_OR_RETURN(
      Shape y,
      ops::conv_transpose_output(in[0].shape, in[1].shape, ops::conv_window(std::get<A>(attrs))));
  if (in.size() == 3) {
    MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[2], 1, "b (O)"));
    if (in[2].shape[0] != y[1]) {
      return Status::error("b must have one element per output channel (" + std::to_string(y[1]) +
                           ")");
    }
  }
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(ops::f32(y), F::kRank, "y"));
  return Types{ops::f32(y)};
}

template <class A>
Status grad_conv_transpose(GradContext& ctx) {
  using F = TransposeFamily<A>;
  const A& a = ctx.attrs<A>();
  const ValueId dy = ctx.dout(0);
  const Shape x = ctx.shape(ctx.in(0));
  // c(dy) (N, C, S'...): S' exceeds x's S by output_padding / stride where
  // output_padding >= stride (possible when the dilation is larger). Those
  // positions of c(dy) read only outputs that no input element reaches.
  MEMFIT_ASSIGN_OR_RETURN(
      ValueId dx,
      ctx.emit(F::kConv, {dy, ctx.in(1)}, typename F::Conv{a.stride, a.pad, a.dilation, a.groups}));
  const Shape full = ctx.shape(dx);
  ValueId x_full = ctx.in(0);  // x with zeros appended to S' along each axis
  for (size_t axis = 2; axis < x.size(); ++axis) {
    if (full[axis] == x[axis]) continue;
    const auto ax = static_cast<int64_t>(axis);
    MEMFIT_ASSIGN_OR_RETURN(dx, ctx.emit(OpKind::slice, {dx}, SliceAttrs{ax, 0, x[axis], {}}));
    Shape padded = ctx.shape(x_full);
    padded[axis] = full[axis];
    MEMFIT_ASSIGN_OR_RETURN(
        x_full, ctx.emit(OpKind::slice_grad, {x_full}, SliceAttrs{ax, 0, x[axis], padded}));
  }
  ctx.input_grads[0] = dx;
  const typename F::ConvGrad grad{a.stride, a.pad, a.dilation, a.groups, ctx.shape(ctx.in(1)),
                                  false};
  MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[1], ctx.emit(F::kConvGradWeight, {x_full, dy}, grad));
  if (ctx.node.inputs.size() == 3) {
    ReduceAttrs over{{0}, false};  // every axis but the channels
    for (int64_t axis = 2; axis < F::kRank; ++axis) over.axes.push_back(axis);
    MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[2], ctx.emit(OpKind::reduce_sum, {dy}, over));
  }
  return Status::ok();
}

// 2 flops per multiply-add: every input element meets O/groups K... weights.
Cost conv_transpose_cost(const Types& in, const Types& out, const Attrs&) {
  Cost cost;
  cost.flops = 2.0 * num_elements(in[0].shape) * (num_elements(in[1].shape) / in[1].shape[0]);
  for (const auto& t : in) cost.bytes += 4.0 * num_elements(t.shape);
  for (const auto& t : out) cost.bytes += 4.0 * num_elements(t.shape);
  return cost;
}

// Each family has an example with groups and one with output_padding >= stride.
std::vector<OpExample> conv_transpose2d_examples() {
  return {
      ops::example({ops::f32({2, 3, 3, 4}), ops::f32({3, 2, 3, 3}), ops::f32({2})},
                   ConvTranspose2dAttrs{{2, 2}, {1, 1}, {1, 1}, {1, 1}, 1}),
      ops::example({ops::f32({1, 4, 3, 3}), ops::f32({4, 3, 2, 3})},
                   ConvTranspose2dAttrs{{2, 1}, {0, 1}, {1, 0}, {1, 2}, 2}),
      ops::example({ops::f32({1, 2, 4, 3}), ops::f32({2, 2, 2, 2}), ops::f32({2})},
                   ConvTranspose2dAttrs{{1, 2}, {1, 0}, {1, 1}, {2, 2}, 1}),
  };
}

std::vector<OpExample> conv_transpose3d_examples() {
  return {
      ops::example({ops::f32({1, 2, 2, 3, 2}), ops::f32({2, 3, 2, 2, 3}), ops::f32({3})},
                   ConvTranspose3dAttrs{{2, 2, 1}, {0, 1, 1}, {1, 0, 0}, {1, 1, 1}, 1}),
      ops::example({ops::f32({1, 4, 2, 2, 3}), ops::f32({4, 1, 2, 2, 2}), ops::f32({2})},
                   ConvTranspose3dAttrs{{1, 2, 1}, {0, 0, 1}, {1, 1, 0}, {2, 1, 1}, 2}),
  };
}

}  // namespace

OpInfo op_info_conv_transpose2d() {
  OpInfo info = ops::new_op(OpKind::conv_transpose2d);
  info.infer = infer_conv_transpose<ConvTranspose2dAttrs>;
  info.grad = grad_conv_transpose<ConvTranspose2dAttrs>;
  info.cost = conv_transpose_cost;
  info.examples = conv_transpose2d_examples;
  return info;
}

OpInfo op_info_conv_transpose3d() {
  OpInfo info = ops::new_op(OpKind::conv_transpose3d);
  info.infer = infer_conv_transpose<ConvTranspose3dAttrs>;
  info.grad = grad_conv_transpose<ConvTranspose3dAttrs>;
  info.cost = conv_transpose_cost;
  info.examples = conv_transpose3d_examples;
  return info;
}

}  // namespace memfit
