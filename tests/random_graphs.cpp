#include "random_graphs.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "ops/typed_graph.h"

namespace memfit::testing {
namespace {

// Small sizes repeat, so that weights can be shared and skip connections find
// partners of the same shape; large ones spread the sizes over three orders.
constexpr int64_t kFeatures[] = {1, 2, 3, 4, 4, 8, 8, 16, 24, 64, 100, 257};
constexpr int64_t kBatches[] = {1, 2, 3, 4, 8, 16};
constexpr size_t kMinNodes = 5;
constexpr size_t kMaxNodes = 60;
// The most nodes one forward step or one update adds.
constexpr size_t kMostPerStep = 6;

class Generator {
 public:
  explicit Generator(uint64_t seed) : rng_(seed) {}
  Graph build();

 private:
  // A parameter, and what its gradient is made of.
  struct Learned {
    ValueId w;
    ValueId x;     // the layer's input; invalid for a vector (bias, batch-norm scale)
    ValueId y;     // the layer's output: the gradient flowing back has its shape
    bool x_first;  // dw = x^T dy (matmul weights (I, O)), else dy^T x (linear weights (O, I))
    bool updated = false;
  };

  uint64_t below(uint64_t n) { return rng_() % n; }
  bool chance(uint64_t percent) { return below(100) < percent; }
  template <class T, size_t N>
  T pick(const T (&items)[N]) {
    return items[below(N)];
  }
  template <class T>
  T pick(const std::vector<T>& items) {
    return items[below(items.size())];
  }

  ValueId input(const char* base, Shape shape, Role role, DType dtype = DType::f32);
  std::vector<ValueId> node(OpKind op, std::vector<ValueId> inputs, Attrs attrs,
                            Role role = Role::activation);
  ValueId activation(OpKind op, std::vector<ValueId> inputs, Attrs attrs);
  const Shape& shape(ValueId v) const { return g_.value(v).type.shape; }
  // A forward value: often the latest (chains), else any (fan-out); of rank 2 when `matrix`.
  ValueId operand(bool matrix = false);
  // A forward value of v's shape, v itself included: a skip connection from anywhere before.
  ValueId like(ValueId v);

  void forward();
  void unary();
  void binary();
  void layer();
  void reshape();
  void reduce();
  void batch_norm();
  void loss();
  void update_now();
  // Appends the gradient and optimizer update of a parameter; returns its next value, if any.
  ValueId update(Learned& learned);
  ValueId gradient(const Learned& learned);

  std::mt19937_64 rng_;
  Graph g_;
  int64_t batch_ = 1;
  ValueId labels_;
  std::vector<ValueId> activations_;  // the f32 values the forward part reads
  std::vector<Learned> learned_;
  int inputs_ = 0;
  uint64_t dropout_keys_ = 0;
};

ValueId Generator::input(const char* base, Shape shape, Role role, DType dtype) {
  return g_.add_input(base + std::to_string(inputs_++), {std::move(shape), dtype}, role);
}

std::vector<ValueId> Generator::node(OpKind op, std::vector<ValueId> inputs, Attrs attrs,
                                     Role role) {
  const Result<NodeId> id =
      add_node(g_, op, std::move(inputs), std::move(attrs), std::string(op_name(op)), role);
  // The generator builds only valid nodes: a refusal is a bug of the generator.
  if (!id) {
    std::fprintf(stderr, "random_graph: %s\n", id.message().c_str());
    std::abort();
  }
  return g_.node(*id).outputs;
}

ValueId Generator::activation(OpKind op, std::vector<ValueId> inputs, Attrs attrs) {
  const ValueId y = node(op, std::move(inputs), std::move(attrs))[0];
  activations_.push_back(y);
  return y;
}

ValueId Generator::operand(bool matrix) {
  std::vector<ValueId> pool;
  for (ValueId v : activations_) {
    if (!matrix || shape(v).size() == 2) pool.push_back(v);
  }
  // The graph's data input is a matrix, so the pool is never empty.
  return chance(50) ? pool.back() : pick(pool);
}

ValueId Generator::like(ValueId v) {
  std::vector<ValueId> pool;
  for (ValueId u : activations_) {
    if (shape(u) == shape(v)) pool.push_back(u);
  }
  return pool.empty() ? v : pick(pool);
}

void Generator::unary() {
  const ValueId x = operand();
  const size_t rank = shape(x).size();
  switch (below(7)) {
    case 0:
      activation(OpKind::relu, {x}, NoAttrs{});
      break;
    case 1:
      activation(OpKind::tanh, {x}, NoAttrs{});
      break;
    case 2:
      activation(OpKind::sigmoid, {x}, NoAttrs{});
      break;
    case 3:
      activation(OpKind::gelu, {x}, NoAttrs{});  // no in-place pair
      break;
    case 4:
      activation(OpKind::scale, {x}, ScaleAttrs{0.5f});
      break;
    case 5:
      activation(OpKind::dropout, {x}, DropoutAttrs{0.25f, dropout_keys_++});
      break;
    default:
      if (rank == 0) {
        activation(OpKind::relu, {x}, NoAttrs{});
      } else {
        activation(OpKind::softmax, {x}, AxisAttrs{static_cast<int64_t>(rank) - 1});
      }
  }
}

// a op b, where b is a value of a's shape or, sometimes, a row vector that
// broadcasts: a bias parameter or a reduction of a. Half the time the
// operands swap, so a broadcast operand sits at either in-place position.
void Generator::binary() {
  const OpKind ops[] = {OpKind::add, OpKind::sub, OpKind::mul};
  const OpKind op = pick(ops);
  const ValueId a = operand();
  ValueId b = like(a);
  ValueId bias;
  if (shape(a).size() == 2 && chance(35)) {
    const int64_t cols = shape(a)[1];
    if (chance(50)) {
      bias = input("b", {cols}, Role::parameter);
      b = bias;
    } else {
      b = node(OpKind::reduce_sum, {like(a)}, ReduceAttrs{{0}, true})[0];  // (1, cols)
    }
  }
  const ValueId y =
      chance(50) ? activation(op, {a, b}, NoAttrs{}) : activation(op, {b, a}, NoAttrs{});
  if (bias.valid()) learned_.push_back({bias, ValueId(), y, false});
}

// A linear layer x w^T (+ b) or a product x w; a linear layer sometimes
// shares the weight of an earlier one, which may have been updated already.
void Generator::layer() {
  const ValueId x = operand(true);
  const int64_t in = shape(x)[1];
  const int64_t out = pick(kFeatures);
  if (chance(40)) {
    const ValueId w = input("w", {in, out}, Role::parameter);
    learned_.push_back({w, x, activation(OpKind::matmul, {x, w}, MatmulAttrs{}), true});
    return;
  }
  std::vector<ValueId> shared;
  for (const Learned& l : learned_) {
    if (l.x.valid() && !l.x_first && shape(l.w)[1] == in) shared.push_back(l.w);
  }
  if (!shared.empty() && chance(50)) {
    activation(OpKind::linear, {x, pick(shared)}, NoAttrs{});
    return;
  }
  const ValueId w = input("w", {out, in}, Role::parameter);
  std::vector<ValueId> inputs = {x, w};
  const bool biased = chance(50);
  if (biased) inputs.push_back(input("b", {out}, Role::parameter));
  const ValueId y = activation(OpKind::linear, inputs, NoAttrs{});
  learned_.push_back({w, x, y, false});
  if (biased) learned_.push_back({inputs[2], ValueId(), y, false});
}

void Generator::reshape() {
  const ValueId x = operand();
  const Shape& s = shape(x);
  const int64_t elements = num_elements(s);
  Shape to = {elements};
  if (s.size() == 2 && chance(50)) {
    to = {s[1], s[0]};
  } else if (s.size() == 1) {
    to = elements % batch_ == 0 && chance(50) ? Shape{batch_, elements / batch_}
         : chance(50)                         ? Shape{1, elements}
                                              : Shape{elements, 1};
  }
  activation(OpKind::reshape, {x}, ShapeAttrs{to});
}

void Generator::reduce() {
  const ValueId x = operand();
  switch (shape(x).size()) {
    case 0:
      unary();
      break;
    case 1:
      activation(OpKind::reduce_sum, {x}, ReduceAttrs{{0}, false});
      break;
    default:
      if (chance(50)) {
        activation(OpKind::reduce_sum, {x}, ReduceAttrs{{0}, false});
      } else {
        activation(OpKind::reduce_sum, {x}, ReduceAttrs{{1}, true});
      }
  }
}

// Batch norm has five outputs: the batch statistics are often never read, and
// the running statistics are usually, not always, the state's updates.
void Generator::batch_norm() {
  const ValueId x = operand(true);
  if (shape(x)[0] < 2) return unary();
  const int64_t c = shape(x)[1];
  const ValueId gamma = input("gamma", {c}, Role::parameter);
  const ValueId beta = input("beta", {c}, Role::parameter);
  const ValueId mean = input("mean", {c}, Role::state);
  const ValueId var = input("var", {c}, Role::state);
  const std::vector<ValueId> out =
      node(OpKind::batch_norm, {x, gamma, beta, mean, var}, BatchNormAttrs{});
  activations_.push_back(out[0]);
  if (chance(30)) activations_.push_back(out[1]);
  if (chance(80)) {
    g_.add_update(mean, out[3]);
    g_.add_update(var, out[4]);
  }
  learned_.push_back({gamma, ValueId(), out[0], false});
  learned_.push_back({beta, ValueId(), out[0], false});
}

void Generator::loss() {
  std::vector<ValueId> logits;
  for (ValueId v : activations_) {
    if (shape(v).size() == 2 && shape(v)[0] == batch_) logits.push_back(v);
  }
  if (logits.empty()) return unary();
  const ValueId loss = node(OpKind::softmax_cross_entropy, {pick(logits), labels_}, NoAttrs{})[0];
  g_.mark_output(loss);
  if (chance(30)) activations_.push_back(loss);
}

// An update in the middle of the step. The parameter (so it may not be
// overwritten in place) or its next value is sometimes read after it.
void Generator::update_now() {
  std::vector<Learned*> pending;
  for (Learned& l : learned_) {
    if (!l.updated) pending.push_back(&l);
  }
  if (pending.empty()) return unary();
  Learned& learned = *pick(pending);
  const ValueId next = update(learned);
  const ValueId read = next.valid() && chance(40) ? next : learned.w;
  if (chance(60)) activation(OpKind::scale, {read}, ScaleAttrs{2.0f});
}

void Generator::forward() {
  const uint64_t r = below(100);
  if (r < 28) {
    unary();
  } else if (r < 48) {
    binary();
  } else if (r < 62) {
    layer();
  } else if (r < 69) {
    reshape();
  } else if (r < 75) {
    reduce();
  } else if (r < 80) {
    batch_norm();
  } else if (r < 84) {
    loss();
  } else if (r < 87) {
    activation(OpKind::fill, {}, FillAttrs{1.0f, shape(operand())});
  } else if (r < 91) {
    g_.mark_output(operand());
  } else {
    update_now();
  }
}

ValueId Generator::gradient(const Learned& learned) {
  const ValueId dy = like(learned.y);
  if (!learned.x.valid()) {
    return node(OpKind::reduce_sum, {dy}, ReduceAttrs{{0}, false}, Role::gradient)[0];
  }
  const std::vector<ValueId> inputs =
      learned.x_first ? std::vector<ValueId>{learned.x, dy} : std::vector<ValueId>{dy, learned.x};
  return node(OpKind::matmul, inputs, MatmulAttrs{true, false}, Role::gradient)[0];
}

ValueId Generator::update(Learned& learned) {
  learned.updated = true;
  const ValueId w = learned.w;
  ValueId dw = gradient(learned);
  const Shape s = shape(w);
  switch (below(10)) {
    case 0:
    case 1:
    case 2:
    case 3:
      break;
    case 4:
    case 5: {
      const ValueId v = input("velocity", s, Role::optimizer_state);
      const std::vector<ValueId> out =
          node(OpKind::sgd_update, {w, dw, v}, SgdAttrs{0.1f, 0.9f, 0.0f}, Role::parameter);
      g_.value(out[1]).role = Role::optimizer_state;
      g_.add_update(w, out[0]);
      g_.add_update(v, out[1]);
      return out[0];
    }
    case 6:
    case 7: {
      const ValueId m = input("adam_m", s, Role::optimizer_state);
      const ValueId v = input("adam_v", s, Role::optimizer_state);
      const std::vector<ValueId> out =
          node(OpKind::adamw_update, {w, dw, m, v}, AdamWAttrs{}, Role::parameter);
      g_.value(out[1]).role = Role::optimizer_state;
      g_.value(out[2]).role = Role::optimizer_state;
      g_.add_update(w, out[0]);
      g_.add_update(m, out[1]);
      g_.add_update(v, out[2]);
      return out[0];
    }
    case 8: {
      // Accumulation only: the parameter is not updated in this step.
      const ValueId acc = input("grad_acc", s, Role::optimizer_state);
      g_.add_update(acc, node(OpKind::add, {acc, dw}, NoAttrs{}, Role::optimizer_state)[0]);
      return ValueId();
    }
    default: {
      // The last micro-batch: apply the sum and reset the accumulator.
      const ValueId acc = input("grad_acc", s, Role::optimizer_state);
      dw = node(OpKind::add, {acc, dw}, NoAttrs{}, Role::gradient)[0];
      g_.add_update(acc, node(OpKind::fill, {}, FillAttrs{0.0f, s}, Role::optimizer_state)[0]);
    }
  }
  const ValueId next = node(OpKind::sgd_update, {w, dw}, SgdAttrs{}, Role::parameter)[0];
  g_.add_update(w, next);
  return next;
}

Graph Generator::build() {
  batch_ = pick(kBatches);
  activations_.push_back(input("x", {batch_, pick(kFeatures)}, Role::input));
  labels_ = input("labels", {batch_}, Role::label, DType::i32);
  if (chance(10)) input("unused", {pick(kBatches), pick(kFeatures)}, Role::input);
  if (chance(5)) input("unused_w", {pick(kFeatures), pick(kFeatures)}, Role::parameter);
  if (chance(20)) activations_.push_back(input("x", {batch_, pick(kFeatures)}, Role::input));

  const size_t target = kMinNodes + below(kMaxNodes - kMinNodes + 1);
  const size_t forward_nodes = std::max<size_t>(2, target * (40 + below(40)) / 100);
  while (g_.num_nodes() < forward_nodes) forward();
  // The backward part: gradients and updates, in a random order, as many as fit.
  std::vector<size_t> order(learned_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng_);
  for (size_t i : order) {
    if (g_.num_nodes() + kMostPerStep > kMaxNodes) break;
    if (!learned_[i].updated && chance(85)) update(learned_[i]);
  }
  while (g_.num_nodes() < kMinNodes) forward();
  if (g_.outputs().empty() || chance(30)) g_.mark_output(operand());
  // Inputs and parameters may be outputs too; an output may be listed twice.
  if (chance(5)) g_.mark_output(activations_.front());
  if (!learned_.empty() && chance(5)) g_.mark_output(pick(learned_).w);
  if (chance(5)) g_.mark_output(g_.outputs().front());
  return std::move(g_);
}

}  // namespace

Graph random_graph(uint64_t seed) { return Generator(seed).build(); }

PlanSizes random_sizes(const Graph& graph, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::map<std::string, size_t> padding;  // by type
  PlanSizes sizes;
  for (const Value& v : graph.values()) {
    const std::string type = std::string(dtype_name(v.type.dtype)) + shape_string(v.type.shape);
    const auto [it, fresh] = padding.try_emplace(type, 0);
    if (fresh && rng() % 4 == 0) it->second = 4 * (rng() % 48);
    sizes.value_bytes.push_back(v.bytes() + it->second);
  }
  for (size_t n = 0; n < graph.num_nodes(); ++n) {
    sizes.workspace_bytes.push_back(rng() % 4 == 0 ? rng() % 5000 : 0);
  }
  return sizes;
}

}  // namespace memfit::testing
