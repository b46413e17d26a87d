// Normalization. batch_norm (training mode) is stateful: its outputs 3 and 4
// are the next running statistics, which the model builder registers as updates
// of its running-statistics inputs. A recomputed clone of the node produces
// them again, but only the original's outputs are registered, so the state is
// updated once per step. batch_norm_inference reads the running statistics
// and updates nothing. layer_norm normalizes over the last dimension.
#include "ops/grad_context.h"
#include "ops/op_util.h"

namespace memfit {
namespace {

using ops::Types;

Status expect_channels(const TensorType& t, int64_t channels, const char* what) {
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(t, 1, what));
  if (t.shape[0] != channels) {
    return Status::error(std::string(what) + " must have " + std::to_string(channels) +
                         " elements, got " + shape_string(t.shape));
  }
  return Status::ok();
}

Result<int64_t> channels_of(const TensorType& x) {
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(x, -1, "x"));
  if (x.shape.size() < 2 || x.shape.size() > 5) {
    return Status::error("x must be (N, C) with 0 to 3 spatial dimensions, got " +
                         shape_string(x.shape));
  }
  if (num_elements(x.shape) / x.shape[1] < 2) {
    return Status::error("batch statistics need at least 2 values per channel, x is " +
                         shape_string(x.shape));
  }
  return x.shape[1];
}

// (x, gamma, beta, running_mean, running_var) -> (y, mean, var, new_running_mean, new_running_var)
Result<Types> infer_batch_norm(const Types& in, const Attrs&) {
  MEMFIT_ASSIGN_OR_RETURN(int64_t c, channels_of(in[0]));
  const char* names[] = {"gamma", "beta", "running_mean", "running_var"};
  for (int i = 1; i < 5; ++i) MEMFIT_RETURN_IF_ERROR(expect_channels(in[i], c, names[i - 1]));
  const TensorType vec = ops::f32({c});
  return Types{in[0], vec, vec, vec, vec};
}

// (dy, x, gamma, mean, var) -> (dx, dgamma, dbeta)
Result<Types> infer_batch_norm_grad(const Types& in, const Attrs&) {
  MEMFIT_ASSIGN_OR_RETURN(int64_t c, channels_of(in[1]));
  if (in[0] != in[1]) return Status::error("dy and x must have the same type");
  const char* names[] = {"gamma", "mean", "var"};
  for (int i = 2; i < 5; ++i) MEMFIT_RETURN_IF_ERROR(expect_channels(in[i], c, names[i - 2]));
  const TensorType vec = ops::f32({c});
  return Types{in[0], vec, vec};
}

// The gradient of y's normalized values: dy, or with the fused ReLU
// relu_grad(dy, y), the node a separate ReLU's rule emits; and the attributes
// of the gradient op, which has no ReLU.
struct NormalizedGrad {
  ValueId dz;
  BatchNormAttrs attrs;
};

Result<NormalizedGrad> normalized_grad(GradContext& ctx) {
  NormalizedGrad g{ctx.dout(0), ctx.attrs<BatchNormAttrs>()};
  if (g.attrs.relu) {
    MEMFIT_ASSIGN_OR_RETURN(g.dz, ctx.emit(OpKind::relu_grad, {ctx.dout(0), ctx.out(0)}));
    g.attrs.relu = false;
  }
  return g;
}

// Only y carries a gradient: the batch statistics feed the backward pass and
// the running statistics, neither of which is differentiated.
Status grad_batch_norm(GradContext& ctx) {
  if (!ctx.dout(0).valid()) return Status::ok();
  MEMFIT_ASSIGN_OR_RETURN(const NormalizedGrad g, normalized_grad(ctx));
  MEMFIT_ASSIGN_OR_RETURN(
      auto grads, ctx.emit_all(OpKind::batch_norm_grad,
                               {g.dz, ctx.in(0), ctx.in(1), ctx.out(1), ctx.out(2)}, g.attrs));
  for (size_t i = 0; i < 3; ++i) ctx.input_grads[i] = grads[i];
  return Status::ok();
}

Cost cost_batch_norm(const Types& in, const Types& out, const Attrs&) {
  Cost cost;
  cost.flops = 8.0 * num_elements(in[0].shape);
  for (const auto& t : in) cost.bytes += 4.0 * num_elements(t.shape);
  for (const auto& t : out) cost.bytes += 4.0 * num_elements(t.shape);
  return cost;
}

// Training mode reads x twice more than the others: for the mean and for the
// variance, before normalizing.
Cost cost_batch_norm_training(const Types& in, const Types& out, const Attrs& attrs) {
  Cost cost = cost_batch_norm(in, out, attrs);
  cost.bytes += 2 * 4.0 * num_elements(in[0].shape);
  return cost;
}

// The last example with the fused ReLU.
std::vector<OpExample> batch_norm_examples() {
  std::vector<OpExample> out;
  for (const Shape& x : {Shape{3, 2, 3, 2}, Shape{5, 3}, Shape{2, 2, 2, 3, 2}, Shape{4, 3, 1, 2}}) {
    const int64_t c = x[1];
    OpExample ex = ops::example(
        {ops::f32(x), ops::f32({c}), ops::f32({c}), ops::f32({c}), ops::f32({c})},
        BatchNormAttrs{1e-5f, 0.1f, x.size() == 4 && x[0] == 4});
    ex.init = {InputInit{}, InputInit{}, InputInit{}, InputInit{}, InputInit{InputInit::positive}};
    ex.wrt = {0, 1, 2};
    ex.of = {0};
    out.push_back(ex);
  }
  return out;
}

std::vector<OpExample> batch_norm_grad_examples() {
  std::vector<OpExample> out;
  for (const Shape& x : {Shape{3, 2, 3, 2}, Shape{5, 3}, Shape{2, 2, 2, 3, 2}}) {
    const int64_t c = x[1];
    OpExample ex = ops::example(
        {ops::f32(x), ops::f32(x), ops::f32({c}), ops::f32({c}), ops::f32({c})},
        BatchNormAttrs{1e-5f, 0.1f});
    ex.init = {InputInit{}, InputInit{}, InputInit{}, InputInit{}, InputInit{InputInit::positive}};
    out.push_back(ex);
  }
  return out;
}

// (x, gamma, beta, running_mean, running_var) -> y
Result<Types> infer_batch_norm_inference(const Types& in, const Attrs&) {
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[0], -1, "x"));
  if (in[0].shape.size() < 2 || in[0].shape.size() > 5) {
    return Status::error("x must be (N, C) with 0 to 3 spatial dimensions, got " +
                         shape_string(in[0].shape));
  }
  const int64_t c = in[0].shape[1];
  const char* names[] = {"gamma", "beta", "running_mean", "running_var"};
  for (int i = 1; i < 5; ++i) MEMFIT_RETURN_IF_ERROR(expect_channels(in[i], c, names[i - 1]));
  return Types{in[0]};
}

// (dy, x, gamma, running_mean, running_var) -> (dx, dgamma, dbeta)
Result<Types> infer_batch_norm_inference_grad(const Types& in, const Attrs& attrs) {
  MEMFIT_RETURN_IF_ERROR(
      infer_batch_norm_inference({in[1], in[2], in[2], in[3], in[4]}, attrs).status());
  if (in[0] != in[1]) return Status::error("dy and x must have the same type");
  return Types{in[0], in[2], in[2]};
}

// The statistics are constants here, so every input but them is differentiated.
Status grad_batch_norm_inference(GradContext& ctx) {
  MEMFIT_ASSIGN_OR_RETURN(const NormalizedGrad g, normalized_grad(ctx));
  MEMFIT_ASSIGN_OR_RETURN(
      auto grads,
      ctx.emit_all(OpKind::batch_norm_inference_grad,
                   {g.dz, ctx.in(0), ctx.in(1), ctx.in(3), ctx.in(4)}, g.attrs));
  for (size_t i = 0; i < 3; ++i) ctx.input_grads[i] = grads[i];
  return Status::ok();
}

// Forward: (x, gamma, beta, running_mean, running_var); gradient: (dy, x,
// gamma, running_mean, running_var). A batch of one works: nothing is averaged.
// The forward op's last example has the fused ReLU.
std::vector<OpExample> batch_norm_inference_examples(bool grad) {
  std::vector<OpExample> out;
  for (const Shape& x : {Shape{3, 2, 3, 2}, Shape{1, 3}, Shape{4, 3, 2, 2}}) {
    if (grad && x[0] == 4) continue;
    const TensorType c = ops::f32({x[1]});
    OpExample ex = grad ? ops::example({ops::f32(x), ops::f32(x), c, c, c})
                        : ops::example({ops::f32(x), c, c, c, c});
    ex.attrs = BatchNormAttrs{1e-5f, 0.1f, x[0] == 4};
    ex.init = {InputInit{}, InputInit{}, InputInit{}, InputInit{}, InputInit{InputInit::positive}};
    if (!grad) ex.wrt = {0, 1, 2};
    out.push_back(ex);
  }
  return out;
}

Result<int64_t> normalized_size(const TensorType& x) {
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(x, -1, "x"));
  if (x.shape.empty()) return Status::error("x must be (..., D), got a scalar");
  return x.shape.back();
}

// (x (..., D), gamma (D), beta (D)) -> (y (..., D), mean (...), rstd (...))
Result<Types> infer_layer_norm(const Types& in, const Attrs& attrs) {
  MEMFIT_ASSIGN_OR_RETURN(int64_t d, normalized_size(in[0]));
  MEMFIT_RETURN_IF_ERROR(expect_channels(in[1], d, "gamma"));
  MEMFIT_RETURN_IF_ERROR(expect_channels(in[2], d, "beta"));
  if (!(std::get<LayerNormAttrs>(attrs).eps > 0.0f)) return Status::error("eps must be positive");
  const TensorType stats = ops::f32(Shape(in[0].shape.begin(), in[0].shape.end() - 1));
  return Types{in[0], stats, stats};
}

// (dy (..., D), x (..., D), gamma (D), mean (...), rstd (...)) -> (dx, dgamma (D), dbeta (D))
Result<Types> infer_layer_norm_grad(const Types& in, const Attrs& attrs) {
  MEMFIT_ASSIGN_OR_RETURN(Types fwd, infer_layer_norm({in[1], in[2], in[2]}, attrs));
  if (in[0] != in[1]) return Status::error("dy and x must have the same type");
  if (in[3] != fwd[1] || in[4] != fwd[1]) {
    return Status::error("mean and rstd must be " + shape_string(fwd[1].shape) + ", got " +
                         shape_string(in[3].shape) + " and " + shape_string(in[4].shape));
  }
  return Types{in[0], in[2], in[2]};
}

// Like batch_norm, only y carries a gradient; the saved mean and rstd feed the
// backward pass.
Status grad_layer_norm(GradContext& ctx) {
  if (!ctx.dout(0).valid()) return Status::ok();
  MEMFIT_ASSIGN_OR_RETURN(
      auto grads,
      ctx.emit_all(OpKind::layer_norm_grad,
                   {ctx.dout(0), ctx.in(0), ctx.in(1), ctx.out(1), ctx.out(2)}, ctx.node.attrs));
  for (size_t i = 0; i < 3; ++i) ctx.input_grads[i] = grads[i];
  return Status::ok();
}

std::vector<OpExample> layer_norm_examples() {
  std::vector<OpExample> out;
  for (const Shape& x : {Shape{2, 3, 4}, Shape{3, 5}, Shape{6}}) {
    const TensorType d = ops::f32({x.back()});
    OpExample ex = ops::example({ops::f32(x), d, d}, LayerNormAttrs{1e-5f});
    ex.of = {0};
    out.push_back(ex);
  }
  return out;
}

std::vector<OpExample> layer_norm_grad_examples() {
  std::vector<OpExample> out;
  for (const Shape& x : {Shape{2, 3, 4}, Shape{3, 5}}) {
    const TensorType stats = ops::f32(Shape(x.begin(), x.end() - 1));
    OpExample ex = ops::example({ops::f32(x), ops::f32(x), ops::f32({x.back()}), stats, stats},
                                LayerNormAttrs{1e-5f});
    ex.init = {InputInit{}, InputInit{}, InputInit{}, InputInit{}, InputInit{InputInit::positive}};
    out.push_back(ex);
  }
  return out;
}

// Batch norm's recompute form: a batch_norm_inference of the original's x,
// gamma and beta with the original's saved batch statistics as its
// statistics, and y as its only output. It skips the passes over x that
// compute the statistics (the largest part of batch norm's time), gives y's
// bits (both backends normalize with the float statistics either way), and
// moves no running statistics.
Node recompute_batch_norm(const Node& original) {
  // (x, gamma, beta, running_mean, running_var) -> (y, mean, var, ...) becomes
  // (x, gamma, beta, mean, var) -> y.
  Node node = original;
  node.op = OpKind::batch_norm_inference;
  node.inputs = {original.inputs[0], original.inputs[1], original.inputs[2], original.outputs[1],
                 original.outputs[2]};
  node.outputs = {original.outputs[0]};
  return node;
}

}  // namespace

OpInfo op_info_batch_norm() {
  OpInfo info = ops::new_op(OpKind::batch_norm);
  info.stateful = true;
  info.infer = infer_batch_norm;
  info.grad = grad_batch_norm;
  info.cost = cost_batch_norm_training;
  info.examples = batch_norm_examples;
  info.cheap_to_recompute = true;
  info.kept_outputs = {1, 2};  // mean, var
  // The new running statistics over the old ones: each element is read before
  // it is written, so the state stays in its bytes from one step to the next.
  info.inplace = {{3, 3}, {4, 4}};
  info.recompute_form_of = recompute_batch_norm;
  return info;
}

OpInfo op_info_batch_norm_grad() {
  OpInfo info = ops::new_op(OpKind::batch_norm_grad);
  info.infer = infer_batch_norm_grad;
  info.inplace = {{0, 0}};
  info.cost = cost_batch_norm;
  info.examples = batch_norm_grad_examples;
  info.emitted_by = {OpKind::batch_norm};
  return info;
}

OpInfo op_info_batch_norm_inference() {
  OpInfo info = ops::new_op(OpKind::batch_norm_inference);
  info.infer = infer_batch_norm_inference;
  info.grad = grad_batch_norm_inference;
  info.inplace = {{0, 0}};
  info.cost = cost_batch_norm;
  info.examples = [] { return batch_norm_inference_examples(false); };
  info.cheap_to_recompute = true;
  return info;
}

OpInfo op_info_batch_norm_inference_grad() {
  OpInfo info = ops::new_op(OpKind::batch_norm_inference_grad);
  info.infer = infer_batch_norm_inference_grad;
  info.inplace = {{0, 0}};
  info.cost = cost_batch_norm;
  info.examples = [] { return batch_norm_inference_examples(true); };
  info.emitted_by = {OpKind::batch_norm_inference};
  return info;
}

OpInfo op_info_layer_norm() {
  OpInfo info = ops::new_op(OpKind::layer_norm);
  info.infer = infer_layer_norm;
  info.grad = grad_layer_norm;
  info.cost = cost_batch_norm;
  info.examples = layer_norm_examples;
  return info;
}

OpInfo op_info_layer_norm_grad() {
  OpInfo info = ops::new_op(OpKind::layer_norm_grad);
  info.infer = infer_layer_norm_grad;
  info.inplace = {{0, 0}};
  info.cost = cost_batch_norm;
  info.examples = layer_norm_grad_examples;
  info.emitted_by = {OpKind::layer_norm};
  return info;
}

}  // namespace memfit
