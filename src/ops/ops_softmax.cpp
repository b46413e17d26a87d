// softmax, log_softmax, softmax cross-entropy and their gradients.
#include "ops/grad_context.h"
#include "ops/op_util.h"

namespace memfit {
namespace {

using ops::Types;

Result<Types> infer_softmax(const Types& in, const Attrs& attrs) {
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[0], -1, "x"));
  const int64_t axis = std::get<AxisAttrs>(attrs).axis;
  MEMFIT_ASSIGN_OR_RETURN(int64_t normalized, ops::normalize_axis(axis, in[0].shape.size()));
  if (normalized != axis) return Status::error("axis must be non-negative");
  return Types{in[0]};
}

Result<Types> infer_softmax_grad(const Types& in, const Attrs& attrs) {
  MEMFIT_RETURN_IF_ERROR(ops::same_as_all_inputs(in, attrs).status());
  return infer_softmax({in[1]}, attrs);
}

Status check_labels(const TensorType& logits, const TensorType& labels) {
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(logits, 2, "logits (N, C)"));
  if (labels.dtype != DType::i32 || labels.shape != Shape{logits.shape[0]}) {
    return Status::error("labels must be i32 (" + std::to_string(logits.shape[0]) + "), got " +
                         std::string(dtype_name(labels.dtype)) + shape_string(labels.shape));
  }
  return Status::ok();
}

// (logits (N, C), labels (N)) -> loss ()
Result<Types> infer_xent(const Types& in, const Attrs&) {
  MEMFIT_RETURN_IF_ERROR(check_labels(in[0], in[1]));
  return Types{ops::f32({})};
}

// (dloss (), logits, labels) -> dlogits
Result<Types> infer_xent_grad(const Types& in, const Attrs&) {
  if (in[0] != ops::f32({})) return Status::error("dloss must be an f32 scalar");
  MEMFIT_RETURN_IF_ERROR(check_labels(in[1], in[2]));
  return Types{in[1]};
}

template <OpKind kGradOp>
Status grad_softmax_like(GradContext& ctx) {
  MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[0],
                          ctx.emit(kGradOp, {ctx.dout(0), ctx.out(0)}, ctx.node.attrs));
  return Status::ok();
}

Status grad_xent(GradContext& ctx) {
  MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[0], ctx.emit(OpKind::softmax_cross_entropy_grad,
                                                       {ctx.dout(0), ctx.in(0), ctx.in(1)}));
  return Status::ok();
}

std::vector<OpExample> softmax_examples() {
  return {ops::example({ops::f32({3, 5})}, AxisAttrs{1}),
          ops::example({ops::f32({2, 4, 3})}, AxisAttrs{1})};
}

std::vector<OpExample> softmax_grad_examples() {
  std::vector<OpExample> out;
  for (OpExample ex : softmax_examples()) {
    ex.inputs.push_back(ex.inputs[0]);
    out.push_back(ex);
  }
  return out;
}

OpExample xent_example(bool grad) {
  const TensorType logits = ops::f32({4, 5});
  const TensorType labels{{4}, DType::i32};
  OpExample ex = grad ? ops::example({ops::f32({}), logits, labels})
                      : ops::example({logits, labels});
  ex.init.assign(ex.inputs.size(), InputInit{});
  ex.init.back() = InputInit{InputInit::labels, 5};
  if (!grad) ex.wrt = {0};
  return ex;
}

}  // namespace

OpInfo op_info_softmax() {
  OpInfo info = ops::new_op(OpKind::softmax);
  info.infer = infer_softmax;
  info.grad = grad_softmax_like<OpKind::softmax_grad>;
  info.inplace = {{0, 0}};
  info.examples = softmax_examples;
  return info;
}

OpInfo op_info_softmax_grad() {
  OpInfo info = ops::new_op(OpKind::softmax_grad);
  info.infer = infer_softmax_grad;
  info.inplace = {{0, 0}};
  info.examples = softmax_grad_examples;
  info.emitted_by = {OpKind::softmax};
  return info;
}

OpInfo op_info_log_softmax() {
  OpInfo info = ops::new_op(OpKind::log_softmax);
  info.infer = infer_softmax;
  info.grad = grad_softmax_like<OpKind::log_softmax_grad>;
  info.inplace = {{0, 0}};
  info.examples = softmax_examples;
  return info;
}

OpInfo op_info_log_softmax_grad() {
  OpInfo info = ops::new_op(OpKind::log_softmax_grad);
  info.infer = infer_softmax_grad;
  info.inplace = {{0, 0}};
  info.examples = softmax_grad_examples;
  info.emitted_by = {OpKind::log_softmax};
  return info;
}

OpInfo op_info_softmax_cross_entropy() {
  OpInfo info = ops::new_op(OpKind::softmax_cross_entropy);
  info.infer = infer_xent;
  info.i32_inputs = {1};  // labels
  info.grad = grad_xent;
  info.examples = [] { return std::vector<OpExample>{xent_example(false)}; };
  return info;
}

OpInfo op_info_softmax_cross_entropy_grad() {
  OpInfo info = ops::new_op(OpKind::softmax_cross_entropy_grad);
  info.infer = infer_xent_grad;
  info.i32_inputs = {2};  // labels
  info.examples = [] { return std::vector<OpExample>{xent_example(true)}; };
  info.emitted_by = {OpKind::softmax_cross_entropy};
  return info;
}

}  // namespace memfit
