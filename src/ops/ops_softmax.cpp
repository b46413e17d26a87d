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

void register_softmax_ops(OpTableBuilder& table) {
  OpInfo softmax = ops::new_op(OpKind::softmax);
  softmax.infer = infer_softmax;
  softmax.grad = grad_softmax_like<OpKind::softmax_grad>;
  softmax.inplace = {{0, 0}};
  softmax.examples = softmax_examples;
  table.add(softmax);

  OpInfo softmax_grad = ops::new_op(OpKind::softmax_grad);
  softmax_grad.infer = infer_softmax_grad;
  softmax_grad.inplace = {{0, 0}};
  softmax_grad.examples = softmax_grad_examples;
  softmax_grad.emitted_by = {OpKind::softmax};
  table.add(softmax_grad);

  OpInfo log_softmax = ops::new_op(OpKind::log_softmax);
  log_softmax.infer = infer_softmax;
  log_softmax.grad = grad_softmax_like<OpKind::log_softmax_grad>;
  log_softmax.inplace = {{0, 0}};
  log_softmax.examples = softmax_examples;
  table.add(log_softmax);

  OpInfo log_softmax_grad = ops::new_op(OpKind::log_softmax_grad);
  log_softmax_grad.infer = infer_softmax_grad;
  log_softmax_grad.inplace = {{0, 0}};
  log_softmax_grad.examples = softmax_grad_examples;
  log_softmax_grad.emitted_by = {OpKind::log_softmax};
  table.add(log_softmax_grad);

  OpInfo xent = ops::new_op(OpKind::softmax_cross_entropy);
  xent.infer = infer_xent;
  xent.grad = grad_xent;
  xent.examples = [] { return std::vector<OpExample>{xent_example(false)}; };
  table.add(xent);

  OpInfo xent_grad = ops::new_op(OpKind::softmax_cross_entropy_grad);
  xent_grad.infer = infer_xent_grad;
  xent_grad.examples = [] { return std::vector<OpExample>{xent_example(true)}; };
  xent_grad.emitted_by = {OpKind::softmax_cross_entropy};
  table.add(xent_grad);
}

}  // namespace memfit
