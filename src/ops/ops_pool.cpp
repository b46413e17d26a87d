// Pooling: max, average and global average, and their gradients.
#include "ops/grad_context.h"
#include "ops/op_util.h"

namespace memfit {
namespace {

using ops::Types;

Result<Shape> pool_output(const Shape& x, const Pair& kernel, const Pair& stride, const Pair& pad) {
  MEMFIT_RETURN_IF_ERROR(ops::expect_window(stride, pad, {1, 1}));
  for (int i = 0; i < 2; ++i) {
    if (kernel[i] < 1 || kernel[i] > ops::kMaxElements) {
      return Status::error("the kernel must be positive and below 2^48");
    }
    // A window made only of padding would have no maximum and nothing to average.
    if (pad[i] >= kernel[i]) return Status::error("pad must be smaller than the kernel");
  }
  const int64_t oh = ops::window_out(x[2], kernel[0], stride[0], pad[0], 1);
  const int64_t ow = ops::window_out(x[3], kernel[1], stride[1], pad[1], 1);
  if (oh < 1 || ow < 1) return Status::error("the pooling window does not fit " + shape_string(x));
  return Shape{x[0], x[1], oh, ow};
}

Result<Types> infer_pool(const Types& in, const Attrs& attrs) {
  const auto& a = std::get<Pool2dAttrs>(attrs);
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[0], 4, "x (N, C, H, W)"));
  MEMFIT_ASSIGN_OR_RETURN(Shape y, pool_output(in[0].shape, a.kernel, a.stride, a.pad));
  return Types{ops::f32(y)};
}

// max_pool2d_grad(dy, x) -> dx like x.
Result<Types> infer_max_pool_grad(const Types& in, const Attrs& attrs) {
  const auto& a = std::get<Pool2dAttrs>(attrs);
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[0], 4, "dy"));
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[1], 4, "x"));
  MEMFIT_ASSIGN_OR_RETURN(Shape y, pool_output(in[1].shape, a.kernel, a.stride, a.pad));
  if (y != in[0].shape) return Status::error("dy " + shape_string(in[0].shape) + " should be " + shape_string(y));
  return Types{in[1]};
}

// avg_pool2d_grad(dy) -> dx of attrs.shape.
Result<Types> infer_avg_pool_grad(const Types& in, const Attrs& attrs) {
  const auto& a = std::get<Pool2dGradAttrs>(attrs);
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[0], 4, "dy"));
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(ops::f32(a.shape), 4, "shape"));
  MEMFIT_ASSIGN_OR_RETURN(Shape y, pool_output(a.shape, a.kernel, a.stride, a.pad));
  if (y != in[0].shape) return Status::error("dy " + shape_string(in[0].shape) + " should be " + shape_string(y));
  return Types{ops::f32(a.shape)};
}

Result<Types> infer_global_pool(const Types& in, const Attrs&) {
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[0], 4, "x (N, C, H, W)"));
  return Types{ops::f32({in[0].shape[0], in[0].shape[1], 1, 1})};
}

Result<Types> infer_global_pool_grad(const Types& in, const Attrs& attrs) {
  const Shape& shape = std::get<ShapeAttrs>(attrs).shape;
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[0], 4, "dy (N, C, 1, 1)"));
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(ops::f32(shape), 4, "shape"));
  if (in[0].shape != Shape{shape[0], shape[1], 1, 1}) {
    return Status::error("dy " + shape_string(in[0].shape) + " does not match " + shape_string(shape));
  }
  return Types{ops::f32(shape)};
}

Status grad_max_pool(GradContext& ctx) {
  MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[0], ctx.emit(OpKind::max_pool2d_grad,
                                                       {ctx.dout(0), ctx.in(0)}, ctx.node.attrs));
  return Status::ok();
}

Status grad_avg_pool(GradContext& ctx) {
  const auto& a = ctx.attrs<Pool2dAttrs>();
  const Pool2dGradAttrs g{a.kernel, a.stride, a.pad, a.include_pad, ctx.shape(ctx.in(0))};
  MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[0], ctx.emit(OpKind::avg_pool2d_grad, {ctx.dout(0)}, g));
  return Status::ok();
}

Status grad_global_pool(GradContext& ctx) {
  MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[0], ctx.emit(OpKind::global_avg_pool_grad, {ctx.dout(0)},
                                                       ShapeAttrs{ctx.shape(ctx.in(0))}));
  return Status::ok();
}

std::vector<OpExample> pool_examples() {
  return {ops::example({ops::f32({2, 2, 4, 4})}, Pool2dAttrs{{2, 2}, {2, 2}, {0, 0}, false}),
          ops::example({ops::f32({1, 3, 5, 6})}, Pool2dAttrs{{3, 2}, {2, 1}, {1, 1}, false}),
          ops::example({ops::f32({1, 2, 5, 5})}, Pool2dAttrs{{3, 3}, {2, 2}, {1, 1}, true})};
}

std::vector<OpExample> max_pool_grad_examples() {
  std::vector<OpExample> out;
  for (const OpExample& fwd : pool_examples()) {
    const auto& a = std::get<Pool2dAttrs>(fwd.attrs);
    const Shape y = *pool_output(fwd.inputs[0].shape, a.kernel, a.stride, a.pad);
    out.push_back(ops::example({ops::f32(y), fwd.inputs[0]}, a));
  }
  return out;
}

std::vector<OpExample> avg_pool_grad_examples() {
  std::vector<OpExample> out;
  for (const OpExample& fwd : pool_examples()) {
    const auto& a = std::get<Pool2dAttrs>(fwd.attrs);
    const Shape y = *pool_output(fwd.inputs[0].shape, a.kernel, a.stride, a.pad);
    out.push_back(ops::example(
        {ops::f32(y)}, Pool2dGradAttrs{a.kernel, a.stride, a.pad, a.include_pad, fwd.inputs[0].shape}));
  }
  return out;
}

}  // namespace

void register_pool_ops(OpTableBuilder& table) {
  OpInfo max_pool = ops::new_op(OpKind::max_pool2d, 1, 1);
  max_pool.infer = infer_pool;
  max_pool.grad = grad_max_pool;
  max_pool.examples = [] {
    std::vector<OpExample> out = pool_examples();
    for (OpExample& ex : out) ex.init = {InputInit{InputInit::distinct}};
    return out;
  };
  table.add(max_pool);

  OpInfo max_pool_grad = ops::new_op(OpKind::max_pool2d_grad, 2, 2);
  max_pool_grad.infer = infer_max_pool_grad;
  max_pool_grad.examples = max_pool_grad_examples;
  max_pool_grad.emitted_by = {OpKind::max_pool2d};
  table.add(max_pool_grad);

  OpInfo avg_pool = ops::new_op(OpKind::avg_pool2d, 1, 1);
  avg_pool.infer = infer_pool;
  avg_pool.grad = grad_avg_pool;
  avg_pool.examples = pool_examples;
  table.add(avg_pool);

  OpInfo avg_pool_grad = ops::new_op(OpKind::avg_pool2d_grad, 1, 1);
  avg_pool_grad.infer = infer_avg_pool_grad;
  avg_pool_grad.examples = avg_pool_grad_examples;
  avg_pool_grad.emitted_by = {OpKind::avg_pool2d};
  table.add(avg_pool_grad);

  OpInfo global = ops::new_op(OpKind::global_avg_pool, 1, 1);
  global.infer = infer_global_pool;
  global.grad = grad_global_pool;
  global.examples = [] { return std::vector<OpExample>{ops::example({ops::f32({2, 3, 4, 5})})}; };
  table.add(global);

  OpInfo global_grad = ops::new_op(OpKind::global_avg_pool_grad, 1, 1);
  global_grad.infer = infer_global_pool_grad;
  global_grad.examples = [] {
    return std::vector<OpExample>{ops::example({ops::f32({2, 3, 1, 1})}, ShapeAttrs{{2, 3, 4, 5}})};
  };
  global_grad.emitted_by = {OpKind::global_avg_pool};
  table.add(global_grad);
}

}  // namespace memfit
