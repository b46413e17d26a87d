// matmul (batched, optionally transposed operands) and linear (x w^T + b [+ c]).
#include "ops/grad_context.h"
#include "ops/op_util.h"

namespace memfit {
namespace {

using ops::Types;

struct MatmulDims {
  Shape batch;
  int64_t m = 0, k = 0, n = 0;
};

Result<MatmulDims> matmul_dims(const Types& in, const MatmulAttrs& attrs) {
  const Shape& a = in[0].shape;
  const Shape& b = in[1].shape;
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[0], -1, "a"));
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[1], -1, "b"));
  if (a.size() < 2 || b.size() < 2) return Status::error("a and b must have rank 2 or more");
  MatmulDims dims;
  dims.batch.assign(a.begin(), a.end() - 2);
  const Shape b_batch(b.begin(), b.end() - 2);
  if (b.size() != 2 && b_batch != dims.batch) {
    return Status::error("batch dimensions differ: a " + shape_string(a) + ", b " + shape_string(b));
  }
  if (b.size() == 2 && a.size() > 2 && attrs.trans_a) {
    return Status::error("a shared 2-D b needs trans_a = false");
  }
  const size_t r = a.size();
  dims.m = attrs.trans_a ? a[r - 1] : a[r - 2];
  dims.k = attrs.trans_a ? a[r - 2] : a[r - 1];
  const size_t rb = b.size();
  const int64_t kb = attrs.trans_b ? b[rb - 1] : b[rb - 2];
  dims.n = attrs.trans_b ? b[rb - 2] : b[rb - 1];
  if (kb != dims.k) {
    return Status::error("inner dimensions differ: a " + shape_string(a) + ", b " + shape_string(b));
  }
  return dims;
}

// matmul(a, b[, c]): op(a) op(b), plus c when given (a gradient sum that the
// product adds into: fuse_gradient_sums, src/passes/fuse_gradient_sums.h).
Result<Types> infer_matmul(const Types& in, const Attrs& attrs) {
  MEMFIT_ASSIGN_OR_RETURN(MatmulDims d, matmul_dims(in, std::get<MatmulAttrs>(attrs)));
  Shape out = d.batch;
  out.push_back(d.m);
  out.push_back(d.n);
  if (in.size() == 3 && in[2] != ops::f32(out)) {
    return Status::error("the added c " + shape_string(in[2].shape) + " should be f32 " +
                         shape_string(out) + ", the product's shape");
  }
  return Types{ops::f32(out)};
}

Cost cost_matmul(const Types& in, const Types& out, const Attrs& attrs) {
  auto d = matmul_dims(in, std::get<MatmulAttrs>(attrs));
  Cost cost;
  if (d) cost.flops = 2.0 * num_elements(d->batch) * d->m * d->n * d->k;
  for (const auto& t : in) cost.bytes += 4.0 * num_elements(t.shape);
  cost.bytes += 4.0 * num_elements(out[0].shape);
  return cost;
}

// C = op(A) op(B). The gradients are again products; a 2-D b shared by a batch
// gets the sum of its per-batch gradients.
Status grad_matmul(GradContext& ctx) {
  const auto& attrs = ctx.attrs<MatmulAttrs>();
  const ValueId a = ctx.in(0), b = ctx.in(1), dc = ctx.dout(0);
  const bool ta = attrs.trans_a, tb = attrs.trans_b;
  // dA: stored like A.
  if (!ta) {
    MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[0],
                            ctx.emit(OpKind::matmul, {dc, b}, MatmulAttrs{false, !tb}));
  } else if (!tb) {
    MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[0],
                            ctx.emit(OpKind::matmul, {b, dc}, MatmulAttrs{false, true}));
  } else {
    MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[0],
                            ctx.emit(OpKind::matmul, {b, dc}, MatmulAttrs{true, true}));
  }
  // dB: stored like B.
  ValueId db;
  if (!tb) {
    MEMFIT_ASSIGN_OR_RETURN(db, ctx.emit(OpKind::matmul, {a, dc}, MatmulAttrs{!ta, false}));
  } else if (!ta) {
    MEMFIT_ASSIGN_OR_RETURN(db, ctx.emit(OpKind::matmul, {dc, a}, MatmulAttrs{true, false}));
  } else {
    MEMFIT_ASSIGN_OR_RETURN(db, ctx.emit(OpKind::matmul, {dc, a}, MatmulAttrs{true, true}));
  }
  MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[1], ctx.unbroadcast(db, ctx.shape(b)));
  if (ctx.node.inputs.size() == 3) ctx.input_grads[2] = dc;  // d(c + p)/dc = 1
  return Status::ok();
}

std::vector<OpExample> matmul_examples() {
  std::vector<OpExample> out;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const Shape a = ta ? Shape{2, 4, 3} : Shape{2, 3, 4};
      const Shape b = tb ? Shape{2, 5, 4} : Shape{2, 4, 5};
      out.push_back(ops::example({ops::f32(a), ops::f32(b)}, MatmulAttrs{ta, tb}));
    }
  }
  out.push_back(ops::example({ops::f32({3, 4}), ops::f32({4, 2})}, MatmulAttrs{}));
  out.push_back(ops::example({ops::f32({2, 3, 4}), ops::f32({5, 4})}, MatmulAttrs{false, true}));
  // Two batch dimensions, as attention's (batch, heads, T, head_dim) operands have.
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const Shape a = ta ? Shape{2, 3, 5, 4} : Shape{2, 3, 4, 5};
      const Shape b = tb ? Shape{2, 3, 6, 5} : Shape{2, 3, 5, 6};
      out.push_back(ops::example({ops::f32(a), ops::f32(b)}, MatmulAttrs{ta, tb}));
    }
  }
  for (bool tb : {false, true}) {
    const Shape b = tb ? Shape{6, 5} : Shape{5, 6};
    out.push_back(ops::example({ops::f32({2, 3, 4, 5}), ops::f32(b)}, MatmulAttrs{false, tb}));
  }
  // Adding into c, as a weight gradient's sum does (dy^T x + c).
  out.push_back(ops::example({ops::f32({6, 4}), ops::f32({6, 3}), ops::f32({4, 3})},
                             MatmulAttrs{true, false}));
  out.push_back(ops::example({ops::f32({2, 3, 4}), ops::f32({2, 4, 5}), ops::f32({2, 3, 5})},
                             MatmulAttrs{}));
  return out;
}

// linear(x, w[, b[, c]]): x w^T + b, plus c when given (an LSTM step's
// recurrent product added into its input projection, src/models/lstm.cpp).
Result<Types> infer_linear(const Types& in, const Attrs&) {
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[0], 2, "x (N, I)"));
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[1], 2, "w (O, I)"));
  const int64_t out = in[1].shape[0];
  if (in[0].shape[1] != in[1].shape[1]) {
    return Status::error("x " + shape_string(in[0].shape) + " and w " + shape_string(in[1].shape) +
                         " disagree on the input features");
  }
  if (in.size() >= 3) {
    MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[2], 1, "b (O)"));
    if (in[2].shape[0] != out) return Status::error("b must have " + std::to_string(out) + " elements");
  }
  const TensorType y = ops::f32({in[0].shape[0], out});
  if (in.size() == 4 && in[3] != y) {
    return Status::error("the added c " + shape_string(in[3].shape) + " should be f32 " +
                         shape_string(y.shape) + ", the output's shape");
  }
  return Types{y};
}

Cost cost_linear(const Types& in, const Types& out, const Attrs&) {
  Cost cost;
  cost.flops = 2.0 * in[0].shape[0] * in[1].shape[0] * in[1].shape[1];
  if (in.size() == 4) cost.flops += static_cast<double>(num_elements(out[0].shape));
  for (const auto& t : in) cost.bytes += 4.0 * num_elements(t.shape);
  cost.bytes += 4.0 * num_elements(out[0].shape);
  return cost;
}

Status grad_linear(GradContext& ctx) {
  const ValueId dy = ctx.dout(0);  // (N, O)
  MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[0], ctx.emit(OpKind::matmul, {dy, ctx.in(1)}, MatmulAttrs{}));
  MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[1],
                          ctx.emit(OpKind::matmul, {dy, ctx.in(0)}, MatmulAttrs{true, false}));
  if (ctx.node.inputs.size() >= 3) {
    MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[2],
                            ctx.emit(OpKind::reduce_sum, {dy}, ReduceAttrs{{0}, false}));
  }
  if (ctx.node.inputs.size() == 4) ctx.input_grads[3] = dy;  // d(c + p)/dc = 1
  return Status::ok();
}

}  // namespace

OpInfo op_info_matmul() {
  OpInfo info = ops::new_op(OpKind::matmul);
  info.infer = infer_matmul;
  info.grad = grad_matmul;
  info.cost = cost_matmul;
  info.examples = matmul_examples;
  info.inplace = {{2, 0}};  // each element of c is read once, before its output is written
  return info;
}

OpInfo op_info_linear() {
  OpInfo info = ops::new_op(OpKind::linear);
  info.infer = infer_linear;
  info.grad = grad_linear;
  info.cost = cost_linear;
  info.examples = [] {
    return std::vector<OpExample>{
        ops::example({ops::f32({4, 3}), ops::f32({5, 3}), ops::f32({5})}),
        ops::example({ops::f32({2, 6}), ops::f32({3, 6})}),
        // Adding into c, as an LSTM step's gates (h w_hh^T + b_hh + x w_ih^T + b_ih).
        ops::example({ops::f32({4, 3}), ops::f32({5, 3}), ops::f32({5}), ops::f32({4, 5})})};
  };
  info.inplace = {{3, 0}};  // each element of c is read once, before its output is written
  return info;
}

}  // namespace memfit
