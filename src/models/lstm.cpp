// LSTM models unrolled over time, one group of nodes per time step, so that
// the planner sees (and may recompute or swap) every step's activations:
// - lstm-lm: the language model of Zaremba et al. 2014 ("medium": 2 layers of
//   650 units, 35 steps, a 10,000-token vocabulary), dropout 0.2 between layers,
//   built time-major (each step's input projection, decoder and loss apart);
// - seq2seq: an encoder-decoder of Luong et al. 2015 (4 layers of 1000 units,
//   a 50,000-token vocabulary on each side), the decoder starting from the
//   encoder's final states, with global "general" attention over the encoder's
//   top-layer states: a = softmax(h_t W_a h_s), h~_t = tanh(W_c [c_t; h_t]).
// Layers compute as PyTorch's nn.LSTM does (gates i, f, g, o; two biases), and
// their parameters carry its names (weight_ih_l0, ...). A step is the input
// projection x w_ih^T + b_ih, one linear that adds h w_hh^T + b_hh into it
// (the gates, (N, 4H)), and one lstm_cell for the rest (src/ops/ops_lstm.cpp).
#include <cmath>

#include "models/zoo.h"

namespace memfit {
namespace {

struct LstmOutput {
  ValueId sequence;  // (N, T, H)
  ValueId h, c;      // (N, H): the last step's states
};

// One LSTM layer over x (N, T, In); h0, c0 (N, H) may be invalid (zeros).
LstmOutput lstm_layer(ModelBuilder& b, const std::string& name, ValueId x, int64_t hidden,
                      ValueId h0, ValueId c0) {
  if (!x.valid()) return {};
  const Shape xs = b.shape(x);
  const int64_t n = xs[0], steps = xs[1], in = xs[2], h4 = 4 * hidden;
  const Init init{Init::Kind::uniform, static_cast<float>(1.0 / std::sqrt(static_cast<double>(hidden)))};
  const ValueId w_ih = b.parameter(name + ".weight_ih", {h4, in}, init);
  const ValueId w_hh = b.parameter(name + ".weight_hh", {h4, hidden}, init);
  const ValueId b_ih = b.parameter(name + ".bias_ih", {h4}, init);
  const ValueId b_hh = b.parameter(name + ".bias_hh", {h4}, init);
  // The input projections of every step at once: (N*T, In) -> (N, T, 4H).
  const ValueId xw = b.reshape(
      b.op(OpKind::linear, {b.reshape(x, {n * steps, in}), w_ih, b_ih}, NoAttrs{}, name + ".ih"),
      {n, steps, h4});
  ValueId h = h0, c = c0;
  std::vector<ValueId> outputs;
  for (int64_t t = 0; t < steps; ++t) {
    const ValueId xw_t = b.reshape(b.slice(xw, 1, t, t + 1), {n, h4});
    // h w_hh^T + b_hh added into xw_t; with no initial state, W_hh h is zero
    // but the bias b_hh still counts.
    const ValueId gates = h.valid()
                              ? b.op(OpKind::linear, {h, w_hh, b_hh, xw_t}, NoAttrs{}, name + ".hh")
                              : b.add(xw_t, b_hh);
    const ModelBuilder::LstmState state = b.lstm_cell(name + ".cell", gates, c);
    h = state.h;
    c = state.c;
    outputs.push_back(b.reshape(h, {n, 1, hidden}));
  }
  const ValueId sequence = steps == 1 ? outputs[0] : b.concat(outputs, 1);
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
  for (int64_t l = 0; l < layers; ++l) {
    if (l > 0) x = b.dropout(x, 0.2f);
    const auto k = static_cast<size_t>(l);
    const LstmOutput layer =
        lstm_layer(b, name + ".l" + std::to_string(l), x, hidden, h0.empty() ? ValueId() : h0[k],
                   c0.empty() ? ValueId() : c0[k]);
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

// tokens (N, T) -> embedding -> LSTM layers -> decoder (N, V) per step.
// Built time-major, one step at a time (embedding, every layer's cell, the
// decoder and the step's cross-entropy), so that between two steps only the
// states (h, c) of each layer and the running loss sum cross: a cut of
// 2 layers + 1 values, which recomputation can checkpoint
// (checkpoint_candidates in src/passes/recompute_strategy.h). The function is
// PyTorch's embedding -> nn.LSTM -> linear -> mean cross-entropy over all
// N x T tokens: the loss is sum_t (mean over N of step t) / T.
Result<Model> build_lstm_lm(const ModelOptions& o, bool training) {
  MEMFIT_RETURN_IF_ERROR(check_sizes(o));
  ModelBuilder b(o.name, training, o.dropout);
  const int64_t n = o.batch, steps = o.seq_len, w = o.width, v = o.vocab, h4 = 4 * w;
  const ValueId tokens = b.token_input("tokens", {n, steps});
  const ValueId labels = b.labels(Shape{n, steps});
  // Parameters in the order (and with the names) of the layer-major model.
  const ValueId table = b.parameter("embedding.weight", {v, w}, Init{Init::Kind::uniform, 1.0f});
  const Init init{Init::Kind::uniform, static_cast<float>(1.0 / std::sqrt(static_cast<double>(w)))};
  struct Layer {
    ValueId w_ih, w_hh, b_ih, b_hh;
    ValueId h, c;  // (N, W): the last step's states; invalid before the first (zeros)
  };
  std::vector<Layer> layers;
  for (int64_t l = 0; l < o.depth; ++l) {
    const std::string name = "lstm.l" + std::to_string(l);
    layers.push_back({b.parameter(name + ".weight_ih", {h4, w}, init),
                      b.parameter(name + ".weight_hh", {h4, w}, init),
                      b.parameter(name + ".bias_ih", {h4}, init),
                      b.parameter(name + ".bias_hh", {h4}, init), ValueId(), ValueId()});
  }
  const ValueId dec_w = b.parameter("decoder.weight", {v, w}, init);
  const ValueId dec_b = b.parameter("decoder.bias", {v}, init);
  ValueId sum;                  // f32 scalar: the cross-entropies of the steps so far
  std::vector<ValueId> logits;  // (N, 1, V) per step; kept only for evaluation graphs
  for (int64_t t = 0; t < steps; ++t) {
    const ValueId ids = b.reshape(b.slice(tokens, 1, t, t + 1), {n});
    ValueId x = b.dropout(b.op(OpKind::embedding, {ids, table}, NoAttrs{}, "embedding"), 0.2f);
    for (size_t l = 0; l < layers.size(); ++l) {
      Layer& layer = layers[l];
      if (l > 0) x = b.dropout(x, 0.2f);
      const std::string name = "lstm.l" + std::to_string(l);
      const ValueId xw =
          b.op(OpKind::linear, {x, layer.w_ih, layer.b_ih}, NoAttrs{}, name + ".ih");  // (N, 4W)
      // h w_hh^T + b_hh added into xw; with no initial state, W_hh h is zero
      // but the bias b_hh still counts.
      const ValueId gates =
          layer.h.valid()
              ? b.op(OpKind::linear, {layer.h, layer.w_hh, layer.b_hh, xw}, NoAttrs{}, name + ".hh")
              : b.add(xw, layer.b_hh);
      const ModelBuilder::LstmState state = b.lstm_cell(name + ".cell", gates, layer.c);
      layer.h = state.h;
      layer.c = state.c;
      x = layer.h;
    }
    const ValueId y =
        b.op(OpKind::linear, {b.dropout(x, 0.2f), dec_w, dec_b}, NoAttrs{}, "decoder");
    if (!training) logits.push_back(b.reshape(y, {n, 1, v}));
    const ValueId step_labels = b.reshape(b.slice(labels, 1, t, t + 1), {n});
    const ValueId loss =
        b.op(OpKind::softmax_cross_entropy, {y, step_labels}, NoAttrs{}, "step_loss");
    sum = t == 0 ? loss : b.add(sum, loss);
    if (training && t + 1 == steps) logits.push_back(y);
  }
  // Evaluation: the logits of every token, (N, T, V) -> (N*T, V) as before;
  // training: the last step's (N, V), which only tells the class count.
  const ValueId all = training || steps == 1 ? logits.back() : b.concat(logits, 1);
  // The step program reads the loss by its name, "loss".
  const ScaleAttrs mean{static_cast<float>(1.0 / static_cast<double>(steps))};
  b.set_loss(training ? all : b.reshape(all, {n * steps, v}),
             b.op(OpKind::scale, {sum}, mean, "loss"));
  return b.finish();
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
  const ValueId weights = b.softmax(b.matmul(dec, keys, false, true), 2);
  const ValueId context = b.matmul(weights, encoder.top);  // (N, T, W)
  ValueId h = b.reshape(b.concat({context, dec}, 2), {n * t, 2 * w});
  h = b.dropout(b.tanh(b.linear("attention.w_c", h, w, false)), 0.2f);
  b.cross_entropy(b.linear("generator", h, o.vocab), labels);
  return b.finish();
}

}  // namespace memfit
