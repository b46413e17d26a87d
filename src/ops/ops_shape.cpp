// Data movement: reshape, reorder, broadcast_to, transpose, concat, slice, split, pad
// and their gradients.
#include <algorithm>

#include "ops/grad_context.h"
#include "ops/op_util.h"

namespace memfit {
namespace {

using ops::Types;

Result<Types> infer_reshape(const Types& in, const Attrs& attrs) {
  const Shape& shape = std::get<ShapeAttrs>(attrs).shape;
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(ops::f32(shape), -1, "shape"));
  if (num_elements(shape) != num_elements(in[0].shape)) {
    return Status::error("cannot reshape " + shape_string(in[0].shape) + " to " + shape_string(shape));
  }
  return Types{TensorType{shape, in[0].dtype}};
}

Result<Types> infer_broadcast_to(const Types& in, const Attrs& attrs) {
  const Shape& shape = std::get<ShapeAttrs>(attrs).shape;
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[0], -1, "x"));
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(ops::f32(shape), -1, "shape"));
  if (!ops::broadcasts_to(in[0].shape, shape)) {
    return Status::error(shape_string(in[0].shape) + " does not broadcast to " + shape_string(shape));
  }
  return Types{ops::f32(shape)};
}

Result<Types> infer_transpose(const Types& in, const Attrs& attrs) {
  const auto& perm = std::get<PermAttrs>(attrs).perm;
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[0], -1, "x"));
  const Shape& x = in[0].shape;
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i] != static_cast<int64_t>(i) || sorted.size() != x.size()) {
      return Status::error("perm must be a permutation of the " + std::to_string(x.size()) + " axes");
    }
  }
  if (perm.size() != x.size()) return Status::error("perm must have one entry per axis");
  Shape y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[static_cast<size_t>(perm[i])];
  return Types{ops::f32(y)};
}

Result<Types> infer_concat(const Types& in, const Attrs& attrs) {
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[0], -1, "every input"));
  MEMFIT_ASSIGN_OR_RETURN(int64_t axis, ops::normalize_axis(std::get<AxisAttrs>(attrs).axis,
                                                            in[0].shape.size()));
  if (axis != std::get<AxisAttrs>(attrs).axis) return Status::error("axis must be non-negative");
  Shape y = in[0].shape;
  for (size_t i = 1; i < in.size(); ++i) {
    MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[i], static_cast<int>(y.size()), "every input"));
    for (size_t d = 0; d < y.size(); ++d) {
      if (static_cast<int64_t>(d) != axis && in[i].shape[d] != y[d]) {
        return Status::error("inputs " + shape_string(in[0].shape) + " and " +
                             shape_string(in[i].shape) + " differ outside the axis");
      }
    }
    y[static_cast<size_t>(axis)] += in[i].shape[static_cast<size_t>(axis)];
  }
  return Types{ops::f32(y)};
}

Status check_slice(const SliceAttrs& a, const Shape& x) {
  if (a.axis < 0 || a.axis >= static_cast<int64_t>(x.size())) {
    return Status::error("axis " + std::to_string(a.axis) + " is out of range for " + shape_string(x));
  }
  if (a.start < 0 || a.end <= a.start || a.end > x[static_cast<size_t>(a.axis)]) {
    return Status::error("slice [" + std::to_string(a.start) + ", " + std::to_string(a.end) +
                         ") is empty or outside " + shape_string(x));
  }
  return Status::ok();
}

Result<Types> infer_slice(const Types& in, const Attrs& attrs) {
  const auto& a = std::get<SliceAttrs>(attrs);
  // i32 too: an unrolled sequence model reads its token ids one step at a time.
  if (in[0].dtype != DType::i32) MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[0], -1, "x"));
  MEMFIT_RETURN_IF_ERROR(check_slice(a, in[0].shape));
  Shape y = in[0].shape;
  y[static_cast<size_t>(a.axis)] = a.end - a.start;
  return Types{TensorType{y, in[0].dtype}};
}

Result<Types> infer_slice_grad(const Types& in, const Attrs& attrs) {
  const auto& a = std::get<SliceAttrs>(attrs);
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[0], -1, "dy"));
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(ops::f32(a.shape), -1, "shape"));
  MEMFIT_RETURN_IF_ERROR(check_slice(a, a.shape));
  Shape y = a.shape;
  y[static_cast<size_t>(a.axis)] = a.end - a.start;
  if (y != in[0].shape) return Status::error("dy " + shape_string(in[0].shape) + " should be " + shape_string(y));
  if (in.size() == 2) MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[1], -1, "acc"));
  if (in.size() == 2 && in[1].shape != a.shape) {
    return Status::error("acc " + shape_string(in[1].shape) + " should be " + shape_string(a.shape));
  }
  return Types{ops::f32(a.shape)};
}

// x -> y0, y1, ...: pieces of sizes[i] elements along axis, in order.
Result<Types> infer_split(const Types& in, const Attrs& attrs) {
  const auto& a = std::get<SplitAttrs>(attrs);
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[0], -1, "x"));
  const Shape& x = in[0].shape;
  if (a.axis < 0 || a.axis >= static_cast<int64_t>(x.size())) {
    return Status::error("axis " + std::to_string(a.axis) + " is out of range for " +
                         shape_string(x));
  }
  const auto axis = static_cast<size_t>(a.axis);
  if (a.sizes.empty()) return Status::error("sizes must list at least one piece");
  int64_t total = 0;
  Types out;
  for (int64_t size : a.sizes) {
    if (size <= 0 || size > x[axis] - total) {
      return Status::error("sizes " + shape_string(a.sizes) + " must be positive and sum to " +
                           std::to_string(x[axis]) + ", the extent of axis " +
                           std::to_string(a.axis) + " of " + shape_string(x));
    }
    total += size;
    Shape y = x;
    y[axis] = size;
    out.push_back(ops::f32(y));
  }
  if (total != x[axis]) {
    return Status::error("sizes " + shape_string(a.sizes) + " sum to " + std::to_string(total) +
                         ", not to " + std::to_string(x[axis]) + ", the extent of axis " +
                         std::to_string(a.axis) + " of " + shape_string(x));
  }
  return out;
}

Status check_pad(const PadAttrs& a, size_t rank) {
  if (a.before.size() != rank || a.after.size() != rank) {
    return Status::error("before " + shape_string(a.before) + " and after " +
                         shape_string(a.after) + " need one entry per dimension (" +
                         std::to_string(rank) + ")");
  }
  for (size_t d = 0; d < rank; ++d) {
    if (a.before[d] < 0 || a.after[d] < 0 || a.before[d] > ops::kMaxElements ||
        a.after[d] > ops::kMaxElements) {
      return Status::error("before " + shape_string(a.before) + " and after " +
                           shape_string(a.after) + " must be non-negative and below 2^48");
    }
  }
  return Status::ok();
}

Result<Types> infer_pad(const Types& in, const Attrs& attrs) {
  const auto& a = std::get<PadAttrs>(attrs);
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[0], -1, "x"));
  MEMFIT_RETURN_IF_ERROR(check_pad(a, in[0].shape.size()));
  Shape y = in[0].shape;
  for (size_t d = 0; d < y.size(); ++d) y[d] += a.before[d] + a.after[d];
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(ops::f32(y), -1, "the padded output"));
  return Types{ops::f32(y)};
}

// dy (x + before + after) -> dx (x): the padding cropped off.
Result<Types> infer_pad_grad(const Types& in, const Attrs& attrs) {
  const auto& a = std::get<PadAttrs>(attrs);
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[0], -1, "dy"));
  MEMFIT_RETURN_IF_ERROR(check_pad(a, in[0].shape.size()));
  Shape x = in[0].shape;
  for (size_t d = 0; d < x.size(); ++d) {
    x[d] -= a.before[d] + a.after[d];
    if (x[d] <= 0) {
      return Status::error("dy " + shape_string(in[0].shape) + " is no larger than the padding " +
                           shape_string(a.before) + " + " + shape_string(a.after));
    }
  }
  return Types{ops::f32(x)};
}

Status grad_split(GradContext& ctx) {
  const int64_t axis = ctx.attrs<SplitAttrs>().axis;
  std::vector<ValueId> pieces;
  for (size_t i = 0; i < ctx.node.outputs.size(); ++i) {
    ValueId piece = ctx.dout(i);
    if (!piece.valid()) {
      MEMFIT_ASSIGN_OR_RETURN(piece,
                              ctx.emit(OpKind::fill, {}, FillAttrs{0.0f, ctx.shape(ctx.out(i))}));
    }
    pieces.push_back(piece);
  }
  MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[0], ctx.emit(OpKind::concat, pieces, AxisAttrs{axis}));
  return Status::ok();
}

Status grad_pad(GradContext& ctx) {
  MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[0],
                          ctx.emit(OpKind::pad_grad, {ctx.dout(0)}, ctx.node.attrs));
  return Status::ok();
}

// reorder: y = x, stored in y's layout (Value::layout), which may differ
// from x's; the layout pass (src/passes/assign_layouts.h) inserts it.
Status grad_reorder(GradContext& ctx) {
  MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[0], ctx.emit(OpKind::reorder, {ctx.dout(0)}, NoAttrs{}));
  return Status::ok();
}

Status grad_reshape(GradContext& ctx) {
  MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[0], ctx.emit(OpKind::reshape, {ctx.dout(0)},
                                                       ShapeAttrs{ctx.shape(ctx.in(0))}));
  return Status::ok();
}

Status grad_broadcast_to(GradContext& ctx) {
  MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[0], ctx.unbroadcast(ctx.dout(0), ctx.shape(ctx.in(0))));
  return Status::ok();
}

Status grad_transpose(GradContext& ctx) {
  const auto& perm = ctx.attrs<PermAttrs>().perm;
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[0],
                          ctx.emit(OpKind::transpose, {ctx.dout(0)}, PermAttrs{inverse}));
  return Status::ok();
}

Status grad_concat(GradContext& ctx) {
  const int64_t axis = ctx.attrs<AxisAttrs>().axis;
  int64_t start = 0;
  for (size_t i = 0; i < ctx.node.inputs.size(); ++i) {
    const int64_t size = ctx.shape(ctx.in(i))[static_cast<size_t>(axis)];
    const SliceAttrs a{axis, start, start + size, {}};
    MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[i], ctx.emit(OpKind::slice, {ctx.dout(0)}, a));
    start += size;
  }
  return Status::ok();
}

Status grad_slice(GradContext& ctx) {
  SliceAttrs a = ctx.attrs<SliceAttrs>();
  a.shape = ctx.shape(ctx.in(0));
  MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[0], ctx.emit(OpKind::slice_grad, {ctx.dout(0)}, a));
  return Status::ok();
}

}  // namespace

OpInfo op_info_reshape() {
  OpInfo info = ops::new_op(OpKind::reshape);
  info.infer = infer_reshape;
  info.grad = grad_reshape;
  info.inplace = {{0, 0}};
  info.cheap_to_recompute = true;
  info.examples = [] {
    return std::vector<OpExample>{ops::example({ops::f32({2, 3, 4})}, ShapeAttrs{{6, 4}})};
  };
  return info;
}

OpInfo op_info_reorder() {
  OpInfo info = ops::new_op(OpKind::reorder);
  info.infer = ops::same_as_input;
  info.grad = grad_reorder;
  info.cheap_to_recompute = true;
  info.examples = [] {
    return std::vector<OpExample>{ops::example({ops::f32({2, 3, 2, 2})}, NoAttrs{})};
  };
  return info;
}

OpInfo op_info_broadcast_to() {
  OpInfo info = ops::new_op(OpKind::broadcast_to);
  info.infer = infer_broadcast_to;
  info.grad = grad_broadcast_to;
  info.examples = [] {
    return std::vector<OpExample>{ops::example({ops::f32({3, 1})}, ShapeAttrs{{2, 3, 4}})};
  };
  return info;
}

OpInfo op_info_transpose() {
  OpInfo info = ops::new_op(OpKind::transpose);
  info.infer = infer_transpose;
  info.grad = grad_transpose;
  info.cheap_to_recompute = true;
  info.examples = [] {
    return std::vector<OpExample>{ops::example({ops::f32({2, 3, 4})}, PermAttrs{{2, 0, 1}}),
                                  ops::example({ops::f32({3, 5})}, PermAttrs{{1, 0}})};
  };
  return info;
}

OpInfo op_info_concat() {
  OpInfo info = ops::new_op(OpKind::concat);
  info.infer = infer_concat;
  info.grad = grad_concat;
  info.examples = [] {
    return std::vector<OpExample>{
        ops::example({ops::f32({2, 3, 4}), ops::f32({2, 1, 4}), ops::f32({2, 2, 4})}, AxisAttrs{1}),
        ops::example({ops::f32({1, 3}), ops::f32({2, 3})}, AxisAttrs{0})};
  };
  return info;
}

OpInfo op_info_slice() {
  OpInfo info = ops::new_op(OpKind::slice);
  info.infer = infer_slice;
  info.grad = grad_slice;
  info.examples = [] {
    return std::vector<OpExample>{ops::example({ops::f32({2, 5, 3})}, SliceAttrs{1, 1, 4, {}}),
                                  ops::example({ops::f32({4, 3})}, SliceAttrs{0, 0, 1, {}})};
  };
  return info;
}

OpInfo op_info_slice_grad() {
  OpInfo info = ops::new_op(OpKind::slice_grad);
  info.infer = infer_slice_grad;
  info.examples = [] {
    return std::vector<OpExample>{
        ops::example({ops::f32({2, 3, 3})}, SliceAttrs{1, 1, 4, {2, 5, 3}}),
        ops::example({ops::f32({2, 2, 3}), ops::f32({2, 5, 3})}, SliceAttrs{1, 3, 5, {2, 5, 3}})};
  };
  info.emitted_by = {OpKind::slice};
  info.inplace = {{1, 0}};  // acc: each element read once, before its output is written
  return info;
}

OpInfo op_info_split() {
  OpInfo info = ops::new_op(OpKind::split);
  info.infer = infer_split;
  info.grad = grad_split;
  info.examples = [] {
    OpExample first_only = ops::example({ops::f32({4, 3})}, SplitAttrs{0, {1, 3}});
    first_only.of = {1};  // output 0 gets no gradient: the rule fills zeros for it
    return std::vector<OpExample>{ops::example({ops::f32({2, 5, 3})}, SplitAttrs{1, {1, 3, 1}}),
                                  first_only, ops::example({ops::f32({2, 4})}, SplitAttrs{1, {4}})};
  };
  return info;
}

OpInfo op_info_pad() {
  OpInfo info = ops::new_op(OpKind::pad);
  info.infer = infer_pad;
  info.grad = grad_pad;
  info.examples = [] {
    return std::vector<OpExample>{
        ops::example({ops::f32({2, 3, 2})}, PadAttrs{{0, 1, 2}, {1, 0, 1}, 0.0f}),
        ops::example({ops::f32({3, 4})}, PadAttrs{{0, 0}, {0, 2}, -1.5f})};
  };
  return info;
}

OpInfo op_info_pad_grad() {
  OpInfo info = ops::new_op(OpKind::pad_grad);
  info.infer = infer_pad_grad;
  info.examples = [] {
    return std::vector<OpExample>{
        ops::example({ops::f32({3, 4, 5})}, PadAttrs{{0, 1, 2}, {1, 0, 1}, 0.0f})};
  };
  info.emitted_by = {OpKind::pad};
  return info;
}

}  // namespace memfit
