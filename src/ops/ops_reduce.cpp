// Reductions (sum, mean over a set of axes) and fill.
#include <algorithm>

#include "ops/grad_context.h"
#include "ops/op_util.h"

namespace memfit {
namespace {

using ops::Types;

// The reduced shape with the axes kept as size 1, whatever keepdims says.
Result<Shape> kept_shape(const Shape& x, const ReduceAttrs& a) {
  Shape kept = x;
  int64_t previous = -1;
  for (int64_t axis : a.axes) {
    if (axis <= previous || axis >= static_cast<int64_t>(x.size())) {
      return Status::error("axes must be sorted, distinct and within the rank of " + shape_string(x));
    }
    kept[static_cast<size_t>(axis)] = 1;
    previous = axis;
  }
  return kept;
}

Result<Types> infer_reduce(const Types& in, const Attrs& attrs) {
  const auto& a = std::get<ReduceAttrs>(attrs);
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[0], -1, "x"));
  MEMFIT_ASSIGN_OR_RETURN(Shape kept, kept_shape(in[0].shape, a));
  if (a.keepdims) return Types{ops::f32(kept)};
  Shape y;
  for (size_t i = 0; i < kept.size(); ++i) {
    if (std::find(a.axes.begin(), a.axes.end(), static_cast<int64_t>(i)) == a.axes.end()) {
      y.push_back(kept[i]);
    }
  }
  return Types{ops::f32(y)};
}

// dx = broadcast of dy (axes restored as size 1) to x's shape, divided by the
// number of reduced elements for the mean.
Status grad_reduce(GradContext& ctx, bool mean) {
  const auto& a = ctx.attrs<ReduceAttrs>();
  const Shape x = ctx.shape(ctx.in(0));
  const Shape kept = *kept_shape(x, a);
  ValueId dy = ctx.dout(0);
  if (ctx.shape(dy) != kept) {
    MEMFIT_ASSIGN_OR_RETURN(dy, ctx.emit(OpKind::reshape, {dy}, ShapeAttrs{kept}));
  }
  if (mean) {
    const float count = static_cast<float>(num_elements(x) / num_elements(kept));
    MEMFIT_ASSIGN_OR_RETURN(dy, ctx.emit(OpKind::scale, {dy}, ScaleAttrs{1.0f / count}));
  }
  MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[0], ctx.emit(OpKind::broadcast_to, {dy}, ShapeAttrs{x}));
  return Status::ok();
}

std::vector<OpExample> reduce_examples() {
  return {ops::example({ops::f32({2, 3, 4})}, ReduceAttrs{{1}, false}),
          ops::example({ops::f32({2, 3, 4})}, ReduceAttrs{{0, 2}, true}),
          ops::example({ops::f32({3, 4})}, ReduceAttrs{{0, 1}, false})};
}

// fill takes an optional input, a tensor of its output's type whose values it
// does not read: the output may then be written over it (an accumulator
// cleared in its own bytes).
Result<Types> infer_fill(const Types& in, const Attrs& attrs) {
  const Shape& shape = std::get<FillAttrs>(attrs).shape;
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(ops::f32(shape), -1, "shape"));
  if (!in.empty() && in[0] != ops::f32(shape)) {
    return Status::error("fill's input must be an f32 tensor of the filled shape");
  }
  return Types{ops::f32(shape)};
}

OpInfo reduce(OpKind op, GradFn grad) {
  OpInfo info;
  info.op = op;
  info.infer = infer_reduce;
  info.grad = grad;
  info.examples = reduce_examples;
  return info;
}

}  // namespace

OpInfo op_info_reduce_sum() {
  return reduce(OpKind::reduce_sum, [](GradContext& ctx) { return grad_reduce(ctx, false); });
}
OpInfo op_info_reduce_mean() {
  return reduce(OpKind::reduce_mean, [](GradContext& ctx) { return grad_reduce(ctx, true); });
}

OpInfo op_info_fill() {
  OpInfo info = ops::new_op(OpKind::fill);
  info.infer = infer_fill;
  info.inplace = {{0, 0}};
  info.examples = [] {
    return std::vector<OpExample>{ops::example({}, FillAttrs{1.5f, {2, 3}}),
                                  ops::example({ops::f32({2, 3})}, FillAttrs{-2.0f, {2, 3}})};
  };
  return info;
}

}  // namespace memfit
