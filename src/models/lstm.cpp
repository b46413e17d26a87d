// LSTM models unrolled over time, one group of nodes per time step, so that
// the planner sees (and may recompute or swap) every step's activations:
// - lstm-lm: the language model of Zaremba et al. 2014 ("medium": 2 layers of
//   650 units, 35 steps, a 10,000-token vocabulary), dropout 0.2 between layers,
//   built in windows of kLstmWindow steps (see build_lstm_lm);
// - seq2seq: an encoder-decoder of Luong et al. 2015 (4 layers of 1000 units,
//   a 50,000-token vocabulary on each side), the decoder starting from the
//   encoder's final states, with global "general" attention over the encoder's
//   top-layer states: a = softmax(h_t W_a h_s), h~_t = tanh(W_c [c_t; h_t]);
//   one fused attention op per decoder step (ModelOptions::attention = naive:
//   one softmax over the (N, T, S) scores of all steps).
// Layers compute as PyTorch's nn.LSTM does (gates i, f, g, o; two biases), and
// their parameters carry its names (weight_ih_l0, ...). A step is the input
// projection x w_ih^T + b_ih, one linear that adds h w_hh^T + b_hh into it
// (the gates, (N, 4H)), and one lstm_cell for the rest (src/ops/ops_lstm.cpp).
#include <algorithm>
#include <cmath>

#include "models/zoo.h"

namespace memfit {
namespace {

struct LstmParams {
  ValueId w_ih, w_hh, b_ih, b_hh;
};

LstmParams lstm_params(ModelBuilder& b, const std::string& name, int64_t in, int64_t hidden) {
  const int64_t h4 = 4 * hidden;
  const Init init{Init::Kind::uniform, static_cast<float>(1.0 / std::sqrt(static_cast<double>(hidden)))};
  return {b.parameter(name + ".weight_ih", {h4, in}, init),
          b.parameter(name + ".weight_hh", {h4, hidden}, init),
          b.parameter(name + ".bias_ih", {h4}, init), b.parameter(name + ".bias_hh", {h4}, init)};
}

struct LstmOutput {
  ValueId sequence;  // (N, T, H)
  ValueId h, c;      // (N, H): the last step's states
};

// How a layer gathers its outputs into the sequence (N, T, H).
enum class Gather {
  at_end,   // one concat of the T steps after the last
  running,  // a concat after every step: (N, t, H) -> (N, t + 1, H), so that
            // between two steps one value holds the outputs so far (a cut of
            // few values for recomputation), at O(T^2) bytes copied
};

// One LSTM layer over x (N, T, In); h0, c0 (N, H) may be invalid (zeros).
LstmOutput lstm_layer(ModelBuilder& b, const std::string& name, const LstmParams& p, ValueId x,
                      ValueId h0, ValueId c0, Gather gather) {
  if (!x.valid()) return {};
  const Shape xs = b.shape(x);
  const int64_t n = xs[0], steps = xs[1], in = xs[2], hidden = b.shape(p.w_hh)[1], h4 = 4 * hidden;
  // The input projections of every step at once: (N*T, In) -> (N, T, 4H).
  const ValueId xw = b.reshape(
      b.op(OpKind::linear, {b.reshape(x, {n * steps, in}), p.w_ih, p.b_ih}, NoAttrs{}, name + ".ih"),
      {n, steps, h4});
  ValueId h = h0, c = c0, sequence;
  std::vector<ValueId> outputs;
  for (int64_t t = 0; t < steps && b.ok(); ++t) {
    const ValueId xw_t = b.reshape(b.slice(xw, 1, t, t + 1), {n, h4});
    // h w_hh^T + b_hh added into xw_t; with no initial state, W_hh h is zero
    // but the bias b_hh still counts.
    const ValueId gates = h.valid()
                              ? b.op(OpKind::linear, {h, p.w_hh, p.b_hh, xw_t}, NoAttrs{}, name + ".hh")
                              : b.add(xw_t, p.b_hh);
    const ModelBuilder::LstmState state = b.lstm_cell(name + ".cell", gates, c);
    h = state.h;
    c = state.c;
    const ValueId step = b.reshape(h, {n, 1, hidden});
    if (gather == Gather::running) {
      sequence = t == 0 ? step : b.concat({sequence, step}, 1);
    } else {
      outputs.push_back(step);
    }
  }
  if (!b.ok()) return {};
  if (gather == Gather::at_end) sequence = steps == 1 ? outputs[0] : b.concat(outputs, 1);
  return {sequence, h, c};
}

struct LstmStack {
  ValueId top;                   // (N, T, H)
  std::vector<ValueId> h, c;     // final states, one per layer
};

// `layers` LSTM layers with dropout between them, starting from the given
// states (empty: zeros).
LstmStack lstm_stack(ModelBuilder& b, const std::string& name, ValueId x, int64_t layers,
                     int64_t hidden, const std::vector<ValueId>& h0, const std::vector<ValueId>& c0) {
  LstmStack out;
  for (int64_t l = 0; l < layers && b.ok(); ++l) {
    if (l > 0) x = b.dropout(x, 0.2f);
    if (!x.valid()) break;  // the dropout reached the size limit
    const auto k = static_cast<size_t>(l);
    const std::string layer_name = name + ".l" + std::to_string(l);
    const LstmParams params = lstm_params(b, layer_name, b.shape(x)[2], hidden);
    const LstmOutput layer =
        lstm_layer(b, layer_name, params, x, h0.empty() ? ValueId() : h0[k],
                   c0.empty() ? ValueId() : c0[k], Gather::at_end);
    x = layer.sequence;
    out.h.push_back(layer.h);
    out.c.push_back(layer.c);
  }
  out.top = x;
  return out;
}

Status check_sizes(const ModelOptions& o) {
  if (o.vocab < 2) return Status::error(o.name + ": --vocab must be at least 2");
  return Status::ok();
}

}  // namespace

// tokens (N, T) -> embedding -> LSTM layers -> decoder -> mean cross-entropy
// over all N x T tokens: PyTorch's embedding -> nn.LSTM -> linear ->
// cross-entropy. Built in windows of kLstmWindow steps (the last one
// shorter), each window layer by layer as PyTorch runs it: the window's
// embedding and each layer's input projection in one node, the recurrence a
// step at a time, then one decoder and one cross-entropy over the window's
// N x K tokens. Between two windows only the states (h, c) of each layer and
// the running loss sum cross; within a layer, a step's h, c, the outputs so
// far (Gather::running) and the window's projection. Both are cuts of few
// values that recomputation can checkpoint (checkpoint_candidates in
// src/passes/recompute_strategy.h), so memory can grow with the sequence as
// sqrt(T) or log(T). The loss is (sum over windows of K x the window's
// mean) / T.
Result<Model> build_lstm_lm(const ModelOptions& o, bool training) {
  MEMFIT_RETURN_IF_ERROR(check_sizes(o));
  ModelBuilder b(o.name, training, o.dropout);
  const int64_t n = o.batch, steps = o.seq_len, w = o.width, v = o.vocab;
  const ValueId tokens = b.token_input("tokens", {n, steps});
  const ValueId labels = b.labels(Shape{n, steps});
  // Parameters in the order (and with the names) of the PyTorch model.
  const ValueId table = b.parameter("embedding.weight", {v, w}, Init{Init::Kind::uniform, 1.0f});
  const Init init{Init::Kind::uniform, static_cast<float>(1.0 / std::sqrt(static_cast<double>(w)))};
  std::vector<LstmParams> params;
  for (int64_t l = 0; l < o.depth && b.ok(); ++l)
    params.push_back(lstm_params(b, "lstm.l" + std::to_string(l), w, w));
  const ValueId dec_w = b.parameter("decoder.weight", {v, w}, init);
  const ValueId dec_b = b.parameter("decoder.bias", {v}, init);
  std::vector<ValueId> h(params.size()), c(params.size());  // invalid before the first step (zeros)
  ValueId sum;                  // f32 scalar: the windows' losses so far, each times its K
  std::vector<ValueId> logits;  // (N, K, V) per window; kept only for evaluation graphs
  for (int64_t first = 0; first < steps && b.ok(); first += kLstmWindow) {
    const int64_t k = std::min(kLstmWindow, steps - first), end = first + k;
    const ValueId window_tokens = b.slice(tokens, 1, first, end);  // (N, K)
    ValueId x = b.dropout(
        b.reshape(b.op(OpKind::embedding, {b.reshape(window_tokens, {n * k}), table}, NoAttrs{},
                       "embedding"),
                  {n, k, w}),
        0.2f);
    for (size_t l = 0; l < params.size(); ++l) {
      if (l > 0) x = b.dropout(x, 0.2f);
      const LstmOutput layer = lstm_layer(b, "lstm.l" + std::to_string(l), params[l], x, h[l], c[l],
                                          Gather::running);
      x = layer.sequence;
      h[l] = layer.h;
      c[l] = layer.c;
    }
    const ValueId y = b.op(OpKind::linear, {b.reshape(b.dropout(x, 0.2f), {n * k, w}), dec_w, dec_b},
                           NoAttrs{}, "decoder");  // (N*K, V)
    if (!training) logits.push_back(b.reshape(y, {n, k, v}));
    const ValueId window_labels = b.reshape(b.slice(labels, 1, first, end), {n * k});
    if (k == steps) {  // one window: its mean is the loss
      sum = b.op(OpKind::softmax_cross_entropy, {y, window_labels}, NoAttrs{}, "loss");
    } else {
      const ValueId loss =
          b.op(OpKind::softmax_cross_entropy, {y, window_labels}, NoAttrs{}, "window_loss");
      const ValueId weighted =
          b.op(OpKind::scale, {loss}, ScaleAttrs{static_cast<float>(k)}, "window_loss_weighted");
      sum = first == 0 ? weighted : b.add(sum, weighted);
    }
    if (training && end == steps) logits.push_back(y);
  }
  if (!b.ok()) return b.finish();
  // Evaluation: the logits of every token, (N, T, V) -> (N*T, V); training:
  // the last window's (N*K, V), which only tells the class count.
  const ValueId all = training || logits.size() == 1 ? logits.back() : b.concat(logits, 1);
  // The step program reads the loss by its name, "loss".
  const ValueId loss =
      steps <= kLstmWindow
          ? sum
          : b.op(OpKind::scale, {sum}, ScaleAttrs{static_cast<float>(1.0 / static_cast<double>(steps))},
                 "loss");
  b.set_loss(training ? all : b.reshape(all, {n * steps, v}), loss);
  return b.finish();
}

// Luong attention one decoder step at a time, as a decoder that feeds each
// step's attention into the next computes it: for each step t, one fused
// attention of the query dec_t (N, 1, 1, W) over keys (N, 1, S, W) and the
// encoder's states (N, 1, S, W), unscaled and without dropout. Each step's
// backward gives a gradient of the keys and of the encoder's states;
// autodiff sums them as they come (Meng et al.'s rewrite), so one running sum
// of each is live, not one per step. -> (N, T, W)
ValueId attention_per_step(ModelBuilder& b, ValueId dec, ValueId keys, ValueId states) {
  if (!dec.valid() || !keys.valid() || !states.valid()) return ValueId();
  const Shape& shape = b.shape(dec);
  const int64_t n = shape[0], steps = shape[1], w = shape[2], s = b.shape(keys)[1];
  const ValueId k = b.reshape(keys, {n, 1, s, w});
  const ValueId v = b.reshape(states, {n, 1, s, w});
  std::vector<ValueId> contexts;
  for (int64_t t = 0; t < steps && b.ok(); ++t) {
    const ValueId q = b.reshape(b.slice(dec, 1, t, t + 1), {n, 1, 1, w});
    const ValueId context =
        b.op(OpKind::attention, {q, k, v}, AttentionAttrs{1.0f, false, 0, 0.0f, 0}, "attention");
    contexts.push_back(b.reshape(context, {n, 1, w}));
  }
  if (!b.ok()) return ValueId();
  return steps == 1 ? contexts[0] : b.concat(contexts, 1);
}

// source (N, S), target_in (N, T) -> (N*T, V), with S = T = seq_len.
Result<Model> build_seq2seq(const ModelOptions& o, bool training) {
  MEMFIT_RETURN_IF_ERROR(check_sizes(o));
  ModelBuilder b(o.name, training, o.dropout);
  const int64_t n = o.batch, t = o.seq_len, w = o.width;
  const ValueId source = b.token_input("source", {n, t});
  const ValueId target_in = b.token_input("target_in", {n, t});
  const ValueId labels = b.labels(Shape{n, t});
  const ValueId src = b.dropout(b.embedding("encoder.embedding", source, o.vocab, w), 0.2f);
  const LstmStack encoder = lstm_stack(b, "encoder.lstm", src, o.depth, w, {}, {});
  const ValueId tgt = b.dropout(b.embedding("decoder.embedding", target_in, o.vocab, w), 0.2f);
  const ValueId dec =
      lstm_stack(b, "decoder.lstm", tgt, o.depth, w, encoder.h, encoder.c).top;  // (N, T, W)
  // Attention: scores (N, T, S) = dec (N, T, W) x (enc W_a^T)^T.
  const ValueId keys =
      b.reshape(b.linear("attention.w_a", b.reshape(encoder.top, {n * t, w}), w, false), {n, t, w});
  const ValueId context = o.attention == AttentionForm::fused
                              ? attention_per_step(b, dec, keys, encoder.top)
                              : b.matmul(b.softmax(b.matmul(dec, keys, false, true), 2),
                                         encoder.top);  // (N, T, W)
  ValueId h = b.reshape(b.concat({context, dec}, 2), {n * t, 2 * w});
  h = b.dropout(b.tanh(b.linear("attention.w_c", h, w, false)), 0.2f);
  b.cross_entropy(b.linear("generator", h, o.vocab), labels);
  return b.finish();
}

}  // namespace memfit
