// Fused ops, made by the fuse_forward_ops pass (src/passes/fuse_forward_ops.h)
// out of a product and what follows it; oneDNN applies the follower as a
// post-op while the product is in registers:
//   conv2d_relu(x, w [, b]) = relu(conv2d(x, w [, b]))
//   conv2d_add(x, w, r [, b]) = conv2d(x, w [, b]) + r
//   linear_relu(x, w [, b]) = relu(linear(x, w [, b]))
// Shapes, attributes and gradients are those of the unfused pair: a ReLU's
// gradient reads its output, so relu_grad(dy, y) then the product's gradient
// ops, the same nodes (and bits) the unfused pair's rules emit.
#include "ops/grad_context.h"
#include "ops/op_table.h"
#include "ops/op_util.h"

namespace memfit {
namespace {

using ops::Types;

// The product's inputs: all but conv2d_add's residual r (its third input,
// so that its in-place pair has one index whether a bias follows or not).
template <class T>
std::vector<T> product_inputs(OpKind op, const std::vector<T>& in) {
  if (op != OpKind::conv2d_add) return in;
  std::vector<T> product = {in[0], in[1]};
  if (in.size() == 4) product.push_back(in[3]);
  return product;
}

OpKind product_of(OpKind op) { return op == OpKind::linear_relu ? OpKind::linear : OpKind::conv2d; }

template <OpKind kOp>
Result<Types> infer_fused(const Types& in, const Attrs& attrs) {
  const Types product = product_inputs(kOp, in);
  MEMFIT_ASSIGN_OR_RETURN(Types out, infer_types(product_of(kOp), product, attrs));
  if (kOp == OpKind::conv2d_add) {
    MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[2], -1, "r"));
    if (in[2].shape != out[0].shape) {
      return Status::error("r " + shape_string(in[2].shape) + " should be the convolution's " +
                           shape_string(out[0].shape));
    }
  }
  return out;
}

// The gradient of the convolution (x, w, and its bias, input `bias_input`
// when given) given dz.
Status conv_grads(GradContext& ctx, ValueId dz, size_t bias_input) {
  const bool bias = bias_input < ctx.node.inputs.size();
  const auto& a = ctx.attrs<Conv2dAttrs>();
  const Conv2dGradAttrs input_attrs{a.stride, a.pad, a.dilation, a.groups, ctx.shape(ctx.in(0)), false};
  MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[0],
                          ctx.emit(OpKind::conv2d_grad_input, {dz, ctx.in(1)}, input_attrs));
  const Conv2dGradAttrs weight_attrs{a.stride, a.pad, a.dilation, a.groups, ctx.shape(ctx.in(1)), bias};
  MEMFIT_ASSIGN_OR_RETURN(auto dw, ctx.emit_all(OpKind::conv2d_grad_weight, {dz, ctx.in(0)}, weight_attrs));
  ctx.input_grads[1] = dw[0];
  if (bias) ctx.input_grads[bias_input] = dw[1];
  return Status::ok();
}

Status grad_conv2d_relu(GradContext& ctx) {
  MEMFIT_ASSIGN_OR_RETURN(ValueId dz, ctx.emit(OpKind::relu_grad, {ctx.dout(0), ctx.out(0)}));
  return conv_grads(ctx, dz, 2);
}

Status grad_conv2d_add(GradContext& ctx) {
  const ValueId dy = ctx.dout(0);
  ctx.input_grads[2] = dy;  // d(z + r)/dr = 1
  return conv_grads(ctx, dy, 3);
}

Status grad_linear_relu(GradContext& ctx) {
  MEMFIT_ASSIGN_OR_RETURN(ValueId dz, ctx.emit(OpKind::relu_grad, {ctx.dout(0), ctx.out(0)}));
  MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[0], ctx.emit(OpKind::matmul, {dz, ctx.in(1)}, MatmulAttrs{}));
  MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[1],
                          ctx.emit(OpKind::matmul, {dz, ctx.in(0)}, MatmulAttrs{true, false}));
  if (ctx.node.inputs.size() == 3) {
    MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[2],
                            ctx.emit(OpKind::reduce_sum, {dz}, ReduceAttrs{{0}, false}));
  }
  return Status::ok();
}

// The product's cost, and one more pass over the output (and the residual).
template <OpKind kOp>
Cost cost_fused(const Types& in, const Types& out, const Attrs& attrs) {
  Cost cost = op_info(product_of(kOp)).cost(product_inputs(kOp, in), out, attrs);
  cost.flops += static_cast<double>(num_elements(out[0].shape));
  if (kOp == OpKind::conv2d_add) cost.bytes += 4.0 * num_elements(in[2].shape);
  return cost;
}

}  // namespace

OpInfo op_info_conv2d_relu() {
  OpInfo info = ops::new_op(OpKind::conv2d_relu);
  info.infer = infer_fused<OpKind::conv2d_relu>;
  info.grad = grad_conv2d_relu;
  info.cost = cost_fused<OpKind::conv2d_relu>;
  info.examples = [] {
    return std::vector<OpExample>{
        ops::example({ops::f32({2, 3, 5, 5}), ops::f32({4, 3, 3, 3}), ops::f32({4})},
                     Conv2dAttrs{{1, 1}, {1, 1}, {1, 1}, 1}),
        ops::example({ops::f32({1, 4, 7, 6}), ops::f32({6, 2, 3, 2})},
                     Conv2dAttrs{{2, 1}, {1, 0}, {1, 1}, 2})};
  };
  return info;
}

OpInfo op_info_conv2d_add() {
  OpInfo info = ops::new_op(OpKind::conv2d_add);
  info.infer = infer_fused<OpKind::conv2d_add>;
  info.grad = grad_conv2d_add;
  info.cost = cost_fused<OpKind::conv2d_add>;
  info.examples = [] {
    return std::vector<OpExample>{
        ops::example({ops::f32({2, 3, 5, 5}), ops::f32({4, 3, 3, 3}), ops::f32({2, 4, 5, 5}),
                      ops::f32({4})},
                     Conv2dAttrs{{1, 1}, {1, 1}, {1, 1}, 1}),
        ops::example({ops::f32({1, 4, 7, 6}), ops::f32({6, 2, 3, 2}), ops::f32({1, 6, 4, 5})},
                     Conv2dAttrs{{2, 1}, {1, 0}, {1, 1}, 2})};
  };
  info.inplace = {{2, 0}};  // r: each element read once, before its output is written
  return info;
}

OpInfo op_info_linear_relu() {
  OpInfo info = ops::new_op(OpKind::linear_relu);
  info.infer = infer_fused<OpKind::linear_relu>;
  info.grad = grad_linear_relu;
  info.cost = cost_fused<OpKind::linear_relu>;
  info.examples = [] {
    return std::vector<OpExample>{ops::example({ops::f32({3, 4}), ops::f32({5, 4}), ops::f32({5})}),
                                  ops::example({ops::f32({2, 6}), ops::f32({3, 6})})};
  };
  return info;
}

}  // namespace memfit
