// Ops of sequence models: embedding lookup and its gradient, the causal mask
// of attention scores, and where (select by an i32 condition).
#include "ops/grad_context.h"
#include "ops/op_util.h"

namespace memfit {
namespace {

using ops::Types;

// Error unless `type` is i32 with positive dimensions (any rank, a scalar included).
Status expect_i32(const TensorType& type, const char* what) {
  if (type.dtype != DType::i32) {
    return Status::error(std::string(what) + " must be i32, got " +
                         std::string(dtype_name(type.dtype)));
  }
  return ops::expect_f32(ops::f32(type.shape), -1, what);
}

// The rows gathered for ids of shape `ids` from a table with rows of `dim` elements: (..., D).
Shape gathered_shape(const Shape& ids, int64_t dim) {
  Shape y = ids;
  y.push_back(dim);
  return y;
}

// (ids i32 (...), table (V, D)) -> (..., D)
Result<Types> infer_embedding(const Types& in, const Attrs&) {
  MEMFIT_RETURN_IF_ERROR(expect_i32(in[0], "ids"));
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[1], 2, "table (V, D)"));
  const TensorType y = ops::f32(gathered_shape(in[0].shape, in[1].shape[1]));
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(y, -1, "the output"));
  return Types{y};
}

// (dy (..., D), ids i32 (...)) -> dtable of shape `shape` (V, D)
Result<Types> infer_embedding_grad(const Types& in, const Attrs& attrs) {
  const Shape& table = std::get<ShapeAttrs>(attrs).shape;
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(ops::f32(table), 2, "shape (V, D)"));
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[0], -1, "dy"));
  MEMFIT_RETURN_IF_ERROR(expect_i32(in[1], "ids"));
  if (in[0].shape != gathered_shape(in[1].shape, table[1])) {
    return Status::error("dy " + shape_string(in[0].shape) + " should be " +
                         shape_string(gathered_shape(in[1].shape, table[1])) + " for ids " +
                         shape_string(in[1].shape) + " and a table " + shape_string(table));
  }
  if (in.size() == 3 && in[2] != ops::f32(table)) {
    return Status::error("acc " + shape_string(in[2].shape) + " should be an f32 table " +
                         shape_string(table));
  }
  return Types{ops::f32(table)};
}

// Only the table is differentiated; ids are integers.
Status grad_embedding(GradContext& ctx) {
  MEMFIT_ASSIGN_OR_RETURN(
      ctx.input_grads[1],
      ctx.emit(OpKind::embedding_grad, {ctx.dout(0), ctx.in(0)}, ShapeAttrs{ctx.shape(ctx.in(1))}));
  return Status::ok();
}

// A gather moves the ids and two copies of the gathered rows (read, write).
Cost cost_embedding(const Types& in, const Types& out, const Attrs&) {
  Cost cost;
  cost.bytes = 4.0 * num_elements(in[0].shape) + 8.0 * num_elements(out[0].shape);
  return cost;
}

// One add per dy element, plus zeroing and writing the whole table.
Cost cost_embedding_grad(const Types& in, const Types& out, const Attrs&) {
  Cost cost;
  cost.flops = static_cast<double>(num_elements(in[0].shape));
  cost.bytes = 4.0 * (num_elements(in[0].shape) + num_elements(in[1].shape)) +
               8.0 * num_elements(out[0].shape);
  return cost;
}

std::vector<OpExample> embedding_examples() {
  // Six ids among four rows: some rows repeat, so the gradient check sees sums.
  OpExample ex = ops::example({TensorType{{2, 3}, DType::i32}, ops::f32({4, 5})});
  ex.init = {InputInit{InputInit::labels, 4}, InputInit{}};
  OpExample flat = ops::example({TensorType{{7}, DType::i32}, ops::f32({3, 2})});
  flat.init = {InputInit{InputInit::labels, 3}, InputInit{}};
  return {ex, flat};
}

// The second adds into a given table acc (fuse_gradient_sums's form).
std::vector<OpExample> embedding_grad_examples() {
  OpExample ex =
      ops::example({ops::f32({2, 3, 5}), TensorType{{2, 3}, DType::i32}}, ShapeAttrs{{4, 5}});
  ex.init = {InputInit{}, InputInit{InputInit::labels, 4}};
  OpExample acc = ops::example({ops::f32({2, 3, 5}), TensorType{{2, 3}, DType::i32}, ops::f32({4, 5})},
                               ShapeAttrs{{4, 5}});
  acc.init = {InputInit{}, InputInit{InputInit::labels, 4}, InputInit{}};
  // Ids name only the first 4 of 10 rows: the other rows (the last among
  // them) must be written as zeros, whatever the output's memory held.
  OpExample sparse =
      ops::example({ops::f32({2, 3, 5}), TensorType{{2, 3}, DType::i32}}, ShapeAttrs{{10, 5}});
  sparse.init = {InputInit{}, InputInit{InputInit::labels, 4}};
  return {ex, acc, sparse};
}

Result<Types> infer_causal_mask(const Types& in, const Attrs&) {
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[0], -1, "x"));
  if (in[0].shape.size() < 2) {
    return Status::error("x must be (..., Tq, Tk), got " + shape_string(in[0].shape));
  }
  return Types{in[0]};
}

// The mask is constant, so dx is dy with the masked positions set to 0.
Status grad_causal_mask(GradContext& ctx) {
  CausalMaskAttrs attrs = ctx.attrs<CausalMaskAttrs>();
  attrs.value = 0.0f;
  MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[0], ctx.emit(OpKind::causal_mask, {ctx.dout(0)}, attrs));
  return Status::ok();
}

// The masked value is small in the examples: a loss near -1e9 would leave the
// finite differences of the gradient check below float's resolution.
std::vector<OpExample> causal_mask_examples() {
  return {ops::example({ops::f32({2, 3, 4, 4})}, CausalMaskAttrs{-2.5f, 0}),
          ops::example({ops::f32({3, 5})}, CausalMaskAttrs{1.5f, 1}),
          ops::example({ops::f32({2, 4, 3})}, CausalMaskAttrs{-1.0f, -1})};
}

// (cond i32, broadcast to a's shape; a; b like a) -> y like a
Result<Types> infer_where(const Types& in, const Attrs&) {
  MEMFIT_RETURN_IF_ERROR(expect_i32(in[0], "cond"));
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[1], -1, "a"));
  if (in[2] != in[1]) {
    return Status::error("a and b must have the same type, got " + shape_string(in[1].shape) +
                         " and " + std::string(dtype_name(in[2].dtype)) +
                         shape_string(in[2].shape));
  }
  if (!ops::broadcasts_to(in[0].shape, in[1].shape)) {
    return Status::error("cond " + shape_string(in[0].shape) + " does not broadcast to a " +
                         shape_string(in[1].shape));
  }
  return Types{in[1]};
}

// da = where(cond, dy, 0), db = where(cond, 0, dy); cond gets no gradient.
Status grad_where(GradContext& ctx) {
  MEMFIT_ASSIGN_OR_RETURN(ValueId zeros,
                          ctx.emit(OpKind::fill, {}, FillAttrs{0.0f, ctx.shape(ctx.dout(0))}));
  MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[1],
                          ctx.emit(OpKind::where, {ctx.in(0), ctx.dout(0), zeros}));
  MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[2],
                          ctx.emit(OpKind::where, {ctx.in(0), zeros, ctx.dout(0)}));
  return Status::ok();
}

std::vector<OpExample> where_examples() {
  std::vector<OpExample> out;
  const TensorType x = ops::f32({2, 3, 4});
  for (const Shape& cond : {Shape{2, 3, 4}, Shape{2, 1, 4}, Shape{4}}) {
    OpExample ex = ops::example({TensorType{cond, DType::i32}, x, x});
    ex.init = {InputInit{InputInit::labels, 2}, InputInit{}, InputInit{}};
    out.push_back(ex);
  }
  return out;
}

}  // namespace

OpInfo op_info_embedding() {
  OpInfo info = ops::new_op(OpKind::embedding);
  info.infer = infer_embedding;
  info.i32_inputs = {0};  // ids
  info.grad = grad_embedding;
  info.cost = cost_embedding;
  info.examples = embedding_examples;
  return info;
}

OpInfo op_info_embedding_grad() {
  OpInfo info = ops::new_op(OpKind::embedding_grad);
  info.infer = infer_embedding_grad;
  info.i32_inputs = {1};  // ids
  info.cost = cost_embedding_grad;
  info.examples = embedding_grad_examples;
  info.emitted_by = {OpKind::embedding};
  info.inplace = {{2, 0}};  // acc: each element read once, before its output is written
  return info;
}

OpInfo op_info_causal_mask() {
  OpInfo info = ops::new_op(OpKind::causal_mask);
  info.infer = infer_causal_mask;
  info.grad = grad_causal_mask;
  info.inplace = {{0, 0}};
  info.examples = causal_mask_examples;
  return info;
}

OpInfo op_info_where() {
  OpInfo info = ops::new_op(OpKind::where);
  info.infer = infer_where;
  info.i32_inputs = {0};  // cond
  info.grad = grad_where;
  info.inplace = {{1, 0}, {2, 0}};
  info.examples = where_examples;
  return info;
}

}  // namespace memfit
