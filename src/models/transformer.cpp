// Transformers, built from linear layers, layer norm and the fused attention
// op, which keeps no (T, T) matrix (ModelOptions::attention = naive composes
// attention from matmuls and softmax instead, so that the planner sees every
// attention matrix):
// - gpt: decoder-only, pre-layer-norm, as GPT-2 small (Radford et al. 2019):
//   12 layers, width 768, 12 heads of 64, 1024 learned positions, a
//   50,257-token vocabulary whose embedding is also the output projection;
//   124,439,808 parameters. GELU is the exact one; dropout 0.1.
// - transformer: encoder-decoder, post-layer-norm, as the base model of
//   Vaswani et al. 2017: 6 + 6 layers, width 512, 8 heads, feed-forward 2048,
//   one vocabulary shared by source, target and output projection (the
//   embeddings scaled by sqrt(width)), dropout 0.1; positions are learned
//   embeddings instead of the paper's sinusoids.
// Heads are width / 64 of 64 each; a width below 64 is one head.
#include <cmath>

#include "models/zoo.h"

namespace memfit {
namespace {

constexpr float kDropout = 0.1f;

struct Sizes {
  int64_t n, heads, width;
  AttentionForm attention;
};

// Splits (N*T, W) into heads: (N, heads, T, W/heads).
ValueId split_heads(ModelBuilder& b, ValueId x, const Sizes& s, int64_t t) {
  const int64_t dh = s.width / s.heads;
  return b.transpose(b.reshape(x, {s.n, t, s.heads, dh}), {0, 2, 1, 3});
}

// Scaled dot-product attention of q (N*Tq, W) over k, v (N*Tk, W), with a
// causal mask when asked; returns (N*Tq, W) before the output projection.
ValueId attend(ModelBuilder& b, const Sizes& s, ValueId q, ValueId k, ValueId v, int64_t tq,
               int64_t tk, bool causal) {
  const int64_t dh = s.width / s.heads;
  const ValueId qh = split_heads(b, q, s, tq), kh = split_heads(b, k, s, tk),
                vh = split_heads(b, v, s, tk);
  const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dh)));
  const ValueId heads = b.attention(qh, kh, vh, scale, causal, kDropout, s.attention);
  const ValueId out = b.transpose(heads, {0, 2, 1, 3});  // (N, Tq, heads, dh)
  return b.reshape(out, {s.n * tq, s.width});
}

// Self-attention with one fused q, k, v projection (GPT-2's c_attn).
ValueId self_attention(ModelBuilder& b, const std::string& name, const Sizes& s, ValueId x,
                       int64_t t, bool causal) {
  const ValueId qkv = b.linear(name + ".c_attn", x, 3 * s.width);  // (N*T, 3W)
  const ValueId q = b.slice(qkv, 1, 0, s.width);
  const ValueId k = b.slice(qkv, 1, s.width, 2 * s.width);
  const ValueId v = b.slice(qkv, 1, 2 * s.width, 3 * s.width);
  return b.linear(name + ".c_proj", attend(b, s, q, k, v, t, t, causal), s.width);
}

// Decoder-to-encoder attention: queries from x (N*Tq, W), keys and values
// from the encoder's output (N*Tk, W).
ValueId cross_attention(ModelBuilder& b, const std::string& name, const Sizes& s, ValueId x,
                        ValueId memory, int64_t tq, int64_t tk) {
  const ValueId q = b.linear(name + ".q", x, s.width);
  const ValueId kv = b.linear(name + ".kv", memory, 2 * s.width);
  const ValueId k = b.slice(kv, 1, 0, s.width);
  const ValueId v = b.slice(kv, 1, s.width, 2 * s.width);
  return b.linear(name + ".out", attend(b, s, q, k, v, tq, tk, false), s.width);
}

// Two linear layers around GELU (GPT-2) or ReLU (the original Transformer).
ValueId feed_forward(ModelBuilder& b, const std::string& name, ValueId x, int64_t width, bool relu) {
  const ValueId hidden = b.linear(name + ".c_fc", x, 4 * width);
  return b.linear(name + ".c_proj", relu ? b.relu(hidden) : b.gelu(hidden), width);
}

// Token embeddings (shared table) plus learned positions: (N, T) -> (N*T, W).
ValueId embed(ModelBuilder& b, ValueId table, ValueId positions, ValueId tokens, const Sizes& s,
              int64_t t, float scale) {
  ValueId x = b.op(OpKind::embedding, {tokens, table}, NoAttrs{}, "embedding");  // (N, T, W)
  if (scale != 1.0f) x = b.scale(x, scale);
  x = b.dropout(b.add(x, positions), kDropout);  // positions (T, W) broadcast over N
  return b.reshape(x, {s.n * t, s.width});
}

Result<Sizes> sizes_of(const ModelOptions& o) {
  if (o.vocab < 2) return Status::error(o.name + ": --vocab must be at least 2");
  const int64_t heads = std::max<int64_t>(1, o.width / 64);
  if (o.width > 64 && o.width % 64 != 0) {
    return Status::error(o.name + ": the width (" + std::to_string(o.width) +
                         ") must be a multiple of 64 or below 64");
  }
  return Sizes{o.batch, heads, o.width, o.attention};
}

// Embedding tables start as GPT-2's: normal with standard deviation 0.02,
// here uniform with the same variance.
Init embedding_init() { return Init{Init::Kind::uniform, 0.02f * std::sqrt(3.0f)}; }

}  // namespace

// tokens (N, T) -> (N*T, V) logits over the next token.
Result<Model> build_gpt(const ModelOptions& o, bool training) {
  MEMFIT_ASSIGN_OR_RETURN(const Sizes s, sizes_of(o));
  ModelBuilder b(o.name, training, o.dropout);
  const int64_t t = o.seq_len;
  const ValueId tokens = b.token_input("tokens", {s.n, t});
  const ValueId labels = b.labels(Shape{s.n, t});
  const ValueId wte = b.parameter("wte.weight", {o.vocab, s.width}, embedding_init());
  const ValueId wpe = b.parameter("wpe.weight", {t, s.width}, embedding_init());
  ValueId x = embed(b, wte, wpe, tokens, s, t, 1.0f);
  for (int64_t l = 0; l < o.depth && b.ok(); ++l) {
    const std::string name = "h." + std::to_string(l);
    x = b.add(x, b.dropout(self_attention(b, name + ".attn", s, b.layer_norm(name + ".ln_1", x), t,
                                          true),
                           kDropout));
    x = b.add(x, b.dropout(feed_forward(b, name + ".mlp", b.layer_norm(name + ".ln_2", x), s.width, false),
                           kDropout));
  }
  x = b.layer_norm("ln_f", x);
  b.cross_entropy(b.matmul(x, wte, false, true), labels);  // tied: x wte^T
  return b.finish();
}

// source (N, S), target_in (N, T) -> (N*T, V), with S = T = seq_len.
Result<Model> build_transformer(const ModelOptions& o, bool training) {
  MEMFIT_ASSIGN_OR_RETURN(const Sizes s, sizes_of(o));
  ModelBuilder b(o.name, training, o.dropout);
  const int64_t t = o.seq_len;
  const ValueId source = b.token_input("source", {s.n, t});
  const ValueId target_in = b.token_input("target_in", {s.n, t});
  const ValueId labels = b.labels(Shape{s.n, t});
  const ValueId table = b.parameter("embedding.weight", {o.vocab, s.width}, embedding_init());
  const auto scale = static_cast<float>(std::sqrt(static_cast<double>(s.width)));
  ValueId x = embed(b, table, b.parameter("encoder.positions", {t, s.width}, embedding_init()),
                    source, s, t, scale);
  for (int64_t l = 0; l < o.depth && b.ok(); ++l) {
    const std::string name = "encoder." + std::to_string(l);
    x = b.layer_norm(name + ".ln_1",
                     b.add(x, b.dropout(self_attention(b, name + ".attn", s, x, t, false), kDropout)));
    x = b.layer_norm(name + ".ln_2",
                     b.add(x, b.dropout(feed_forward(b, name + ".ff", x, s.width, true), kDropout)));
  }
  const ValueId memory = x;
  ValueId y = embed(b, table, b.parameter("decoder.positions", {t, s.width}, embedding_init()),
                    target_in, s, t, scale);
  for (int64_t l = 0; l < o.depth && b.ok(); ++l) {
    const std::string name = "decoder." + std::to_string(l);
    y = b.layer_norm(name + ".ln_1",
                     b.add(y, b.dropout(self_attention(b, name + ".attn", s, y, t, true), kDropout)));
    y = b.layer_norm(name + ".ln_2",
                     b.add(y, b.dropout(cross_attention(b, name + ".cross", s, y, memory, t, t),
                                        kDropout)));
    y = b.layer_norm(name + ".ln_3",
                     b.add(y, b.dropout(feed_forward(b, name + ".ff", y, s.width, true), kDropout)));
  }
  b.cross_entropy(b.matmul(y, table, false, true), labels);  // tied output projection
  return b.finish();
}

}  // namespace memfit
