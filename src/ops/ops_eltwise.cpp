// Elementwise ops: activations and their gradients, add, sub, mul (NumPy
// broadcasting), scale and dropout.
#include "ops/grad_context.h"
#include "ops/op_util.h"

namespace memfit {
namespace {

using ops::Types;

Result<Types> infer_broadcast(const Types& in, const Attrs&) {
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[0], -1, "a"));
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[1], -1, "b"));
  MEMFIT_ASSIGN_OR_RETURN(Shape shape, ops::broadcast_shapes(in[0].shape, in[1].shape));
  return Types{ops::f32(shape)};
}

Result<Types> infer_dropout(const Types& in, const Attrs& attrs) {
  const float p = std::get<DropoutAttrs>(attrs).p;
  if (!(p >= 0.0f && p < 1.0f)) return Status::error("p must be in [0, 1), got " + std::to_string(p));
  return ops::same_as_input(in, attrs);
}

// The gradient of an activation: grad_op(dy, y) or grad_op(dy, x).
template <OpKind kGradOp, bool kUsesOutput>
Status grad_activation(GradContext& ctx) {
  MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[0],
                          ctx.emit(kGradOp, {ctx.dout(0), kUsesOutput ? ctx.out(0) : ctx.in(0)}));
  return Status::ok();
}

Status grad_add_sub(GradContext& ctx, bool subtract) {
  const ValueId dy = ctx.dout(0);
  MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[0], ctx.unbroadcast(dy, ctx.shape(ctx.in(0))));
  ValueId db = dy;
  if (subtract) {
    MEMFIT_ASSIGN_OR_RETURN(db, ctx.emit(OpKind::scale, {dy}, ScaleAttrs{-1.0f}));
  }
  MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[1], ctx.unbroadcast(db, ctx.shape(ctx.in(1))));
  return Status::ok();
}

Status grad_mul(GradContext& ctx) {
  const ValueId dy = ctx.dout(0);
  for (size_t i = 0; i < 2; ++i) {
    MEMFIT_ASSIGN_OR_RETURN(ValueId product, ctx.emit(OpKind::mul, {dy, ctx.in(1 - i)}));
    MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[i], ctx.unbroadcast(product, ctx.shape(ctx.in(i))));
  }
  return Status::ok();
}

Status grad_scale(GradContext& ctx) {
  MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[0], ctx.emit(OpKind::scale, {ctx.dout(0)}, ctx.node.attrs));
  return Status::ok();
}

// y = x * mask / (1 - p) is linear in x: its gradient applies the same mask,
// which the same key at the same step draws again.
Status grad_dropout(GradContext& ctx) {
  MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[0], ctx.emit(OpKind::dropout, {ctx.dout(0)}, ctx.node.attrs));
  return Status::ok();
}

// Each family has an (N, C, H, W) example too, with channels that do not
// fill a block, for the cpu backend's blocked layouts.
std::vector<OpExample> unary_examples() {
  return {ops::example({ops::f32({3, 4})}), ops::example({ops::f32({2, 3, 2, 2})})};
}
std::vector<OpExample> binary_same_examples() {
  return {ops::example({ops::f32({3, 4}), ops::f32({3, 4})}),
          ops::example({ops::f32({2, 3, 2, 2}), ops::f32({2, 3, 2, 2})})};
}
// The second input of a *_grad(dy, y) example is an output of the activation;
// any finite values exercise the kernel equally.
std::vector<OpExample> broadcast_examples() {
  return {ops::example({ops::f32({2, 3, 4}), ops::f32({2, 3, 4})}),
          ops::example({ops::f32({2, 3, 2, 2}), ops::f32({2, 3, 2, 2})}),
          ops::example({ops::f32({2, 3, 4}), ops::f32({4})}),
          ops::example({ops::f32({2, 1, 4}), ops::f32({3, 1})})};
}
std::vector<OpExample> relu_examples() {
  std::vector<OpExample> examples = unary_examples();
  for (OpExample& ex : examples) ex.init = {InputInit{InputInit::distinct}};
  return examples;
}
std::vector<OpExample> sigmoid_grad_examples() {
  std::vector<OpExample> examples = binary_same_examples();
  for (OpExample& ex : examples) ex.init = {InputInit{}, InputInit{InputInit::positive}};
  return examples;
}

OpInfo unary(OpKind op, GradFn grad, bool inplace) {
  OpInfo info;
  info.op = op;
  info.infer = ops::same_as_input;
  info.grad = grad;
  if (inplace) info.inplace = {{0, 0}};
  info.cheap_to_recompute = true;
  info.examples = unary_examples;
  return info;
}

OpInfo unary_grad(OpKind op, OpKind emitted_by) {
  OpInfo info;
  info.op = op;
  info.infer = ops::same_as_all_inputs;
  info.inplace = {{0, 0}};
  info.examples = op == OpKind::sigmoid_grad ? sigmoid_grad_examples : binary_same_examples;
  info.emitted_by = {emitted_by};
  return info;
}

OpInfo binary(OpKind op, GradFn grad) {
  OpInfo info;
  info.op = op;
  info.infer = infer_broadcast;
  info.grad = grad;
  info.cheap_to_recompute = true;
  // (1 -> 0) is allowed only when b has the output's shape; the planner checks shapes.
  info.inplace = {{0, 0}, {1, 0}};
  info.examples = broadcast_examples;
  return info;
}

}  // namespace

OpInfo op_info_relu() {
  OpInfo info = unary(OpKind::relu, grad_activation<OpKind::relu_grad, true>, true);
  info.examples = relu_examples;
  return info;
}
OpInfo op_info_relu_grad() { return unary_grad(OpKind::relu_grad, OpKind::relu); }
OpInfo op_info_gelu() {
  return unary(OpKind::gelu, grad_activation<OpKind::gelu_grad, false>, false);
}
OpInfo op_info_gelu_grad() { return unary_grad(OpKind::gelu_grad, OpKind::gelu); }
OpInfo op_info_tanh() {
  return unary(OpKind::tanh, grad_activation<OpKind::tanh_grad, true>, true);
}
OpInfo op_info_tanh_grad() { return unary_grad(OpKind::tanh_grad, OpKind::tanh); }
OpInfo op_info_sigmoid() {
  return unary(OpKind::sigmoid, grad_activation<OpKind::sigmoid_grad, true>, true);
}
OpInfo op_info_sigmoid_grad() { return unary_grad(OpKind::sigmoid_grad, OpKind::sigmoid); }
OpInfo op_info_add() {
  return binary(OpKind::add, [](GradContext& ctx) { return grad_add_sub(ctx, false); });
}
OpInfo op_info_sub() {
  return binary(OpKind::sub, [](GradContext& ctx) { return grad_add_sub(ctx, true); });
}
OpInfo op_info_mul() { return binary(OpKind::mul, grad_mul); }

OpInfo op_info_scale() {
  OpInfo info = unary(OpKind::scale, grad_scale, true);
  info.examples = [] {
    return std::vector<OpExample>{ops::example({ops::f32({3, 4})}, ScaleAttrs{-2.5f})};
  };
  return info;
}

OpInfo op_info_dropout() {
  OpInfo info = unary(OpKind::dropout, grad_dropout, true);
  info.infer = infer_dropout;
  info.examples = [] {
    return std::vector<OpExample>{ops::example({ops::f32({4, 16})}, DropoutAttrs{0.3f, 7}),
                                  ops::example({ops::f32({3, 5})}, DropoutAttrs{0.0f, 0x100000001ull})};
  };
  return info;
}

}  // namespace memfit
