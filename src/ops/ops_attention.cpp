// Fused scaled-dot-product attention (FlashAttention, Dao et al. 2022, 2023;
// the memory-efficient attention of Meng et al. 2017): attention saves only
// its output and one log-sum-exp per query row, never the (Tq, Tk) scores or
// probabilities; attention_grad recomputes the probabilities from q, k and the
// log-sum-exp. The semantics (masks, dropout) are AttentionAttrs'
// (include/memfit/attrs.h), and equal the composed form matmul, scale,
// causal_mask, softmax, dropout, matmul within float rounding.
#include <algorithm>
#include <cmath>

#include "ops/grad_context.h"
#include "ops/op_util.h"

namespace memfit {
namespace {

using ops::Types;

Status expect_same_dims(const Shape& a, size_t ia, const Shape& b, size_t ib, const char* what) {
  if (a[ia] != b[ib]) return Status::error(std::string(what) + " differ: " + shape_string(a) +
                                           " and " + shape_string(b));
  return Status::ok();
}

// (q (B, H, Tq, D), k (B, H, Tk, D), v (B, H, Tk, Dv), [key_mask i32 (B, Tk)])
// -> (o (B, H, Tq, Dv), lse (B, H, Tq))
Result<Types> infer_attention(const Types& in, const Attrs& attrs) {
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[0], 4, "q (B, H, Tq, D)"));
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[1], 4, "k (B, H, Tk, D)"));
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[2], 4, "v (B, H, Tk, Dv)"));
  const Shape &q = in[0].shape, &k = in[1].shape, &v = in[2].shape;
  MEMFIT_RETURN_IF_ERROR(expect_same_dims(q, 0, k, 0, "the batches of q and k"));
  MEMFIT_RETURN_IF_ERROR(expect_same_dims(q, 1, k, 1, "the heads of q and k"));
  MEMFIT_RETURN_IF_ERROR(expect_same_dims(q, 3, k, 3, "the widths of q and k"));
  MEMFIT_RETURN_IF_ERROR(expect_same_dims(k, 0, v, 0, "the batches of k and v"));
  MEMFIT_RETURN_IF_ERROR(expect_same_dims(k, 1, v, 1, "the heads of k and v"));
  MEMFIT_RETURN_IF_ERROR(expect_same_dims(k, 2, v, 2, "the keys of k and v"));
  if (in.size() == 4) {
    if (in[3].dtype != DType::i32 || in[3].shape != Shape{q[0], k[2]}) {
      return Status::error("key_mask must be i32 " + shape_string(Shape{q[0], k[2]}) + ", got " +
                           std::string(dtype_name(in[3].dtype)) + shape_string(in[3].shape));
    }
  }
  const auto& a = std::get<AttentionAttrs>(attrs);
  if (!std::isfinite(a.scale)) return Status::error("scale must be finite");
  if (!(a.p >= 0.0f && a.p < 1.0f)) {
    return Status::error("dropout p must be in [0, 1), got " + std::to_string(a.p));
  }
  return Types{ops::f32({q[0], q[1], q[2], v[3]}), ops::f32({q[0], q[1], q[2]})};
}

// (q, k, v, o, lse, do, [key_mask]) -> (dq, dk, dv)
Result<Types> infer_attention_grad(const Types& in, const Attrs& attrs) {
  Types forward_inputs = {in[0], in[1], in[2]};
  if (in.size() == 7) forward_inputs.push_back(in[6]);
  MEMFIT_ASSIGN_OR_RETURN(const Types forward, infer_attention(forward_inputs, attrs));
  if (in[3] != forward[0] || in[5] != forward[0]) {
    return Status::error("o and do must be f32 " + shape_string(forward[0].shape) + ", got " +
                         shape_string(in[3].shape) + " and " + shape_string(in[5].shape));
  }
  if (in[4] != forward[1]) {
    return Status::error("lse must be f32 " + shape_string(forward[1].shape) + ", got " +
                         shape_string(in[4].shape));
  }
  return Types{in[0], in[1], in[2]};
}

// q, k and v get their gradients from one attention_grad; the key mask is
// integer, and the log-sum-exp is a saved statistic that no loss may read.
Status grad_attention(GradContext& ctx) {
  if (ctx.dout(1).valid()) {
    return Status::error("attention's log-sum-exp output (1) feeds the loss; only its output 0 "
                         "is differentiable");
  }
  if (!ctx.dout(0).valid()) return Status::ok();
  std::vector<ValueId> inputs = {ctx.in(0),  ctx.in(1),  ctx.in(2),
                                 ctx.out(0), ctx.out(1), ctx.dout(0)};
  if (ctx.node.inputs.size() == 4) inputs.push_back(ctx.in(3));
  MEMFIT_ASSIGN_OR_RETURN(auto grads,
                          ctx.emit_all(OpKind::attention_grad, inputs, ctx.node.attrs));
  for (size_t i = 0; i < 3; ++i) ctx.input_grads[i] = grads[i];
  return Status::ok();
}

// The (query, key) pairs a causal mask leaves unmasked, per (batch, head):
// sum over i of min(Tk, max(0, i + offset + 1)); all Tq Tk without it.
double visible_pairs(int64_t tq, int64_t tk, const AttentionAttrs& a) {
  if (!a.causal) return static_cast<double>(tq) * static_cast<double>(tk);
  double pairs = 0;
  for (int64_t i = 0; i < tq; ++i) {
    pairs += static_cast<double>(std::clamp<int64_t>(i + a.offset + 1, 0, tk));
  }
  return pairs;
}

double bytes_of(const Types& types) {
  double bytes = 0;
  for (const TensorType& t : types) bytes += 4.0 * static_cast<double>(num_elements(t.shape));
  return bytes;
}

// `flops_per_pair` for each visible (query, key) pair of every (batch,
// head); every tensor moved once: the scores never leave the tiles.
Cost pairs_cost(const Types& in, const Types& out, const Attrs& attrs, double flops_per_pair) {
  const Shape& q = in[0].shape;
  const double pairs = static_cast<double>(q[0] * q[1]) *
                       visible_pairs(q[2], in[1].shape[2], std::get<AttentionAttrs>(attrs));
  return Cost{pairs * flops_per_pair, bytes_of(in) + bytes_of(out)};
}

// Two products per pair (q k, p v) and a softmax's few flops.
Cost cost_attention(const Types& in, const Types& out, const Attrs& attrs) {
  const double d = static_cast<double>(in[0].shape[3]), dv = static_cast<double>(in[2].shape[3]);
  return pairs_cost(in, out, attrs, 2.0 * (d + dv) + 5.0);
}

// The backward recomputes the scores (q k) and computes dp (do v), dv, dq
// and dk: five products per pair.
Cost cost_attention_grad(const Types& in, const Types& out, const Attrs& attrs) {
  const double d = static_cast<double>(in[0].shape[3]), dv = static_cast<double>(in[2].shape[3]);
  return pairs_cost(in, out, attrs, 2.0 * (3.0 * d + 2.0 * dv) + 8.0);
}

// q (B, H, Tq, D), k (B, H, Tk, D), v (B, H, Tk, Dv).
Types qkv(int64_t b, int64_t h, int64_t tq, int64_t tk, int64_t d, int64_t dv) {
  return {ops::f32({b, h, tq, d}), ops::f32({b, h, tk, d}), ops::f32({b, h, tk, dv})};
}

// Plain, causal (Tq = Tk, and a decoder's Tq < Tk with an offset), a key
// mask that masks one batch entry's every key, dropout, and one query per
// row (seq2seq's decoder step).
std::vector<OpExample> attention_examples() {
  std::vector<OpExample> out;
  auto add = [&](Types in, AttentionAttrs a) {
    OpExample ex = ops::example(std::move(in), a);
    ex.of = {0};
    if (ex.inputs.size() == 4) ex.init = {{}, {}, {}, InputInit{InputInit::labels, 2}};
    out.push_back(std::move(ex));
  };
  add(qkv(2, 2, 5, 7, 4, 3), AttentionAttrs{0.5f, false, 0, 0.0f, 1});
  add(qkv(1, 3, 6, 6, 4, 4), AttentionAttrs{0.5f, true, 0, 0.0f, 2});
  add(qkv(2, 1, 3, 5, 2, 2), AttentionAttrs{0.7f, true, 2, 0.0f, 3});
  Types masked = qkv(3, 2, 4, 6, 3, 3);
  masked.push_back(TensorType{{3, 6}, DType::i32});
  add(masked, AttentionAttrs{0.5f, false, 0, 0.0f, 4});
  add(qkv(2, 2, 6, 6, 4, 4), AttentionAttrs{0.5f, true, 0, 0.3f, 5});
  add(qkv(4, 1, 1, 9, 5, 5), AttentionAttrs{0.4f, false, 0, 0.2f, 6});
  return out;
}

std::vector<OpExample> attention_grad_examples() {
  std::vector<OpExample> out;
  auto add = [&](int64_t b, int64_t h, int64_t tq, int64_t tk, int64_t d, int64_t dv,
                 AttentionAttrs a, bool key_mask) {
    Types in = qkv(b, h, tq, tk, d, dv);
    in.push_back(ops::f32({b, h, tq, dv}));  // o
    in.push_back(ops::f32({b, h, tq}));      // lse
    in.push_back(ops::f32({b, h, tq, dv}));  // do
    if (key_mask) in.push_back(TensorType{{b, tk}, DType::i32});
    OpExample ex = ops::example(std::move(in), a);
    if (key_mask) ex.init = {{}, {}, {}, {}, {}, {}, InputInit{InputInit::labels, 2}};
    out.push_back(std::move(ex));
  };
  add(2, 2, 5, 7, 4, 3, AttentionAttrs{0.5f, false, 0, 0.0f, 1}, false);
  add(1, 3, 6, 6, 4, 4, AttentionAttrs{0.5f, true, 0, 0.3f, 2}, false);
  add(3, 2, 4, 6, 3, 3, AttentionAttrs{0.5f, true, 1, 0.0f, 3}, true);
  return out;
}

}  // namespace

OpInfo op_info_attention() {
  OpInfo info = ops::new_op(OpKind::attention);
  info.infer = infer_attention;
  info.i32_inputs = {3};  // key_mask
  info.grad = grad_attention;
  info.cost = cost_attention;
  info.examples = attention_examples;
  return info;
}

OpInfo op_info_attention_grad() {
  OpInfo info = ops::new_op(OpKind::attention_grad);
  info.infer = infer_attention_grad;
  info.i32_inputs = {6};  // key_mask
  info.cost = cost_attention_grad;
  info.examples = attention_grad_examples;
  info.emitted_by = {OpKind::attention};
  return info;
}

}  // namespace memfit
