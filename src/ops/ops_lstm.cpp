// The pointwise part of an LSTM step as one op, and its gradient.
//
// lstm_cell(gates (N, 4H) [, c_prev (N, H)]) -> (h (N, H), c (N, H)), with the
// gates in PyTorch's order i, f, g, o:
//   i = sigmoid(a_i), f = sigmoid(a_f), g = tanh(a_g), o = sigmoid(a_o),
//   c = f c_prev + i g, h = o tanh(c); no c_prev means zeros (the first step).
// The backward pass reads the pre-activation gates, c and c_prev, which the
// step keeps anyway (c_prev is the previous step's c): it recomputes the four
// activations and tanh(c) instead of saving them, so a step saves one
// (N, 4H) and one (N, H) tensor for its cell.
#include "ops/grad_context.h"
#include "ops/op_util.h"

namespace memfit {
namespace {

using ops::Types;

// The hidden size H of gates (N, 4H).
Result<int64_t> hidden_of(const TensorType& gates) {
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(gates, 2, "gates (N, 4H)"));
  if (gates.shape[1] % 4 != 0) {
    return Status::error("gates " + shape_string(gates.shape) +
                         " must have 4H columns (i, f, g, o)");
  }
  return gates.shape[1] / 4;
}

Status expect_state(const TensorType& t, const TensorType& state, const char* what) {
  if (t != state) {
    return Status::error(std::string(what) + " must be f32 " + shape_string(state.shape) +
                         ", got " + type_string(t));
  }
  return Status::ok();
}

// (gates (N, 4H) [, c_prev (N, H)]) -> (h (N, H), c (N, H))
Result<Types> infer_lstm_cell(const Types& in, const Attrs&) {
  MEMFIT_ASSIGN_OR_RETURN(int64_t hidden, hidden_of(in[0]));
  const TensorType state = ops::f32({in[0].shape[0], hidden});
  if (in.size() == 2) MEMFIT_RETURN_IF_ERROR(expect_state(in[1], state, "c_prev"));
  return Types{state, state};
}

// (dh (N, H), dc (N, H), gates (N, 4H), c (N, H) [, c_prev (N, H)])
//   -> (dgates (N, 4H) [, dc_prev (N, H)])
Result<Types> infer_lstm_cell_grad(const Types& in, const Attrs&) {
  MEMFIT_ASSIGN_OR_RETURN(int64_t hidden, hidden_of(in[2]));
  const TensorType state = ops::f32({in[2].shape[0], hidden});
  MEMFIT_RETURN_IF_ERROR(expect_state(in[0], state, "dh"));
  MEMFIT_RETURN_IF_ERROR(expect_state(in[1], state, "dc"));
  MEMFIT_RETURN_IF_ERROR(expect_state(in[3], state, "c"));
  if (in.size() == 5) {
    MEMFIT_RETURN_IF_ERROR(expect_state(in[4], state, "c_prev"));
    return Types{in[2], state};
  }
  return Types{in[2]};
}

// An output without a gradient (the last step's c, read by nothing) gets
// zeros, as split's rule does; an absent c_prev gets no gradient output.
Status grad_lstm_cell(GradContext& ctx) {
  std::vector<ValueId> inputs;
  for (size_t o = 0; o < 2; ++o) {
    ValueId d = ctx.dout(o);
    if (!d.valid()) {
      MEMFIT_ASSIGN_OR_RETURN(d,
                              ctx.emit(OpKind::fill, {}, FillAttrs{0.0f, ctx.shape(ctx.out(o))}));
    }
    inputs.push_back(d);
  }
  inputs.push_back(ctx.in(0));   // gates
  inputs.push_back(ctx.out(1));  // c
  const bool has_c_prev = ctx.node.inputs.size() == 2;
  if (has_c_prev) inputs.push_back(ctx.in(1));
  MEMFIT_ASSIGN_OR_RETURN(auto grads, ctx.emit_all(OpKind::lstm_cell_grad, std::move(inputs)));
  ctx.input_grads[0] = grads[0];
  if (has_c_prev) ctx.input_grads[1] = grads[1];
  return Status::ok();
}

// All tensors moved once; per hidden unit (an element of c), `flops` flops.
Cost cost_per_unit(const Types& in, const Types& out, int64_t units, double flops) {
  Cost cost;
  cost.flops = flops * static_cast<double>(units);
  for (const auto* list : {&in, &out}) {
    for (const TensorType& t : *list) cost.bytes += 4.0 * num_elements(t.shape);
  }
  return cost;
}

// Three sigmoids and two tanh (an exponential and a division each, counted
// as 4 flops) and 5 multiplies and adds.
Cost cost_lstm_cell(const Types& in, const Types& out, const Attrs&) {
  return cost_per_unit(in, out, num_elements(out[0].shape), 25.0);
}

// The same activations again, and about 15 multiplies and adds.
Cost cost_lstm_cell_grad(const Types& in, const Types& out, const Attrs&) {
  return cost_per_unit(in, out, num_elements(in[0].shape), 40.0);
}

std::vector<OpExample> lstm_cell_examples() {
  OpExample with_state = ops::example({ops::f32({3, 8}), ops::f32({3, 2})});
  OpExample first_step = ops::example({ops::f32({2, 12})});
  // Only h, or only c, carries a gradient: the rule fills zeros for the other.
  OpExample h_only = ops::example({ops::f32({2, 12}), ops::f32({2, 3})});
  h_only.of = {0};
  OpExample c_only = ops::example({ops::f32({2, 12}), ops::f32({2, 3})});
  c_only.of = {1};
  return {with_state, first_step, h_only, c_only};
}

// c need not be f c_prev + i g here: the kernels take it as given.
std::vector<OpExample> lstm_cell_grad_examples() {
  const TensorType state = ops::f32({3, 2}), gates = ops::f32({3, 8});
  return {ops::example({state, state, gates, state, state}),
          ops::example({state, state, gates, state})};
}

}  // namespace

OpInfo op_info_lstm_cell() {
  OpInfo info = ops::new_op(OpKind::lstm_cell);
  info.infer = infer_lstm_cell;
  info.grad = grad_lstm_cell;
  info.cost = cost_lstm_cell;
  info.examples = lstm_cell_examples;
  // c over c_prev: each element of c_prev is read once, before c's is written.
  info.inplace = {{1, 1}};
  info.cheap_to_recompute = true;
  return info;
}

OpInfo op_info_lstm_cell_grad() {
  OpInfo info = ops::new_op(OpKind::lstm_cell_grad);
  info.infer = infer_lstm_cell_grad;
  info.cost = cost_lstm_cell_grad;
  info.examples = lstm_cell_grad_examples;
  // Each unit reads its elements of every input before writing its own of
  // the outputs: dgates over gates, dc_prev over dc, dh or c.
  info.inplace = {{2, 0}, {1, 1}, {0, 1}, {3, 1}};
  info.emitted_by = {OpKind::lstm_cell};
  return info;
}

}  // namespace memfit
