// Hand-checked cases of the ops of sequence models (embedding, layer_norm,
// causal_mask, split, pad, where, batch_norm_inference, lstm_cell): values
// worked out by hand, agreement with existing ops in special cases, and the
// errors their shape inference gives. Each case runs on the reference and the
// CPU backend.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "autodiff/autodiff.h"
#include "memfit/builder.h"
#include "ops/op_util.h"
#include "ops/typed_graph.h"
#include "test_util.h"

namespace memfit {
namespace {

using testing::Words;

Words f32_words(const std::vector<float>& values) {
  Words words;
  for (float v : values) words.push_back(testing::as_word(v));
  return words;
}

Words i32_words(const std::vector<int32_t>& values) {
  Words words;
  for (int32_t v : values) words.push_back(static_cast<uint32_t>(v));
  return words;
}

std::vector<std::unique_ptr<Backend>> backends() {
  std::vector<std::unique_ptr<Backend>> out;
  out.push_back(make_reference_backend());
  out.push_back(make_cpu_backend());
  return out;
}

// Runs one node of `op` on `backend`; returns its outputs.
std::vector<std::vector<float>> run_op(const Backend& backend, OpKind op, const Attrs& attrs,
                                       const std::vector<TensorType>& types,
                                       const std::vector<Words>& data) {
  const Graph graph = testing::single_node_graph(op, ops::example(types, attrs));
  auto exe = Executable::compile(graph, backend, ExecOptions{.poison = true}).value();
  return testing::run_outputs(*exe, data);
}

void expect_near_all(const std::vector<float>& expected, const std::vector<float>& actual,
                     double tolerance, const std::string& what) {
  ASSERT_EQ(expected.size(), actual.size()) << what;
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(expected[i], actual[i], tolerance) << what << "[" << i << "]";
  }
}

TEST(EmbeddingTest, GathersRows) {
  const std::vector<float> table = {0, 1, 10, 11, 20, 21};  // (3, 2)
  for (const auto& backend : backends()) {
    const auto y = run_op(*backend, OpKind::embedding, NoAttrs{},
                          {TensorType{{2, 2}, DType::i32}, TensorType{{3, 2}, DType::f32}},
                          {i32_words({2, 0, 2, 1}), f32_words(table)});
    EXPECT_EQ(y[0], (std::vector<float>{20, 21, 0, 1, 20, 21, 10, 11})) << backend->name();
  }
}

TEST(EmbeddingTest, GradientOfRepeatedIdsSumsTheirRows) {
  // ids (4): row 2 three times, row 0 once, row 1 never.
  const std::vector<float> dy = {1, 2, 30, 40, 500, 600, 7000, 8000};  // (4, 2)
  for (const auto& backend : backends()) {
    const auto dtable = run_op(*backend, OpKind::embedding_grad, ShapeAttrs{{3, 2}},
                               {TensorType{{4, 2}, DType::f32}, TensorType{{4}, DType::i32}},
                               {f32_words(dy), i32_words({2, 0, 2, 2})});
    EXPECT_EQ(dtable[0], (std::vector<float>{30, 40, 0, 0, 7501, 8602})) << backend->name();
  }
}

// The CPU kernel groups the positions by id and sums each group in double, in
// position order: the reference kernel's bits, with many repeated ids.
TEST(EmbeddingTest, CpuGradientIsBitIdenticalToReference) {
  const int64_t count = 300, rows = 40, dim = 17;
  const std::vector<float> dy = testing::random_normal(count * dim, 21);
  std::vector<int32_t> ids;
  for (int64_t n = 0; n < count; ++n) ids.push_back(static_cast<int32_t>((n * 7 + n / 5) % 31));
  const std::vector<TensorType> types = {TensorType{{count, dim}, DType::f32},
                                         TensorType{{count}, DType::i32}};
  const auto want = run_op(*make_reference_backend(), OpKind::embedding_grad,
                           ShapeAttrs{{rows, dim}}, types, {f32_words(dy), i32_words(ids)});
  const auto got = run_op(*make_cpu_backend(), OpKind::embedding_grad, ShapeAttrs{{rows, dim}},
                          types, {f32_words(dy), i32_words(ids)});
  EXPECT_EQ(f32_words(got[0]), f32_words(want[0]));
}

TEST(EmbeddingDeathTest, AnIdOutsideTheTableStopsWithTheId) {
  const auto reference = make_reference_backend();
  EXPECT_DEATH(run_op(*reference, OpKind::embedding, NoAttrs{},
                      {TensorType{{3}, DType::i32}, TensorType{{3, 2}, DType::f32}},
                      {i32_words({0, 3, 1}), f32_words({0, 1, 2, 3, 4, 5})}),
               "id 3 at flat position 1 is outside the table's 3 rows");
  const auto cpu = make_cpu_backend();
  EXPECT_DEATH(run_op(*cpu, OpKind::embedding_grad, ShapeAttrs{{3, 2}},
                      {TensorType{{2, 2}, DType::f32}, TensorType{{2}, DType::i32}},
                      {f32_words({1, 2, 3, 4}), i32_words({1, -1})}),
               "id -1 at flat position 1 is outside the table's 3 rows");
}

TEST(LayerNormTest, MatchesAHandComputedValue) {
  // Row 0: x = (0, 2, 4, 6): mean 3, var 5; with eps 4, rstd = 1 / sqrt(9) = 1/3
  // and xhat = (-1, -1/3, 1/3, 1). Row 1 is constant: var 0, rstd = 1/2, xhat = 0.
  const std::vector<float> x = {0, 2, 4, 6, 1, 1, 1, 1};
  const std::vector<float> gamma = {1, 2, 3, 4};
  const std::vector<float> beta = {0, 1, 0, -1};
  const TensorType d = TensorType{{4}, DType::f32};
  for (const auto& backend : backends()) {
    const auto out = run_op(*backend, OpKind::layer_norm, LayerNormAttrs{4.0f},
                            {TensorType{{2, 4}, DType::f32}, d, d},
                            {f32_words(x), f32_words(gamma), f32_words(beta)});
    const std::string name(backend->name());
    expect_near_all({-1, 1.0f / 3, 1, 3, 0, 1, 0, -1}, out[0], 1e-6, name + " y");
    expect_near_all({3, 1}, out[1], 1e-6, name + " mean");
    expect_near_all({1.0f / 3, 0.5f}, out[2], 1e-6, name + " rstd");
  }
}

TEST(LayerNormTest, RunsOnOneDnnOnTheCpuBackend) {
  OpExample ex = ops::example(
      {TensorType{{2, 3, 8}, DType::f32}, TensorType{{8}, DType::f32}, TensorType{{8}, DType::f32}},
      LayerNormAttrs{});
  const auto cpu = make_cpu_backend();
  auto exe = Executable::compile(testing::single_node_graph(OpKind::layer_norm, ex), *cpu, ExecOptions{.poison = true}).value();
  EXPECT_EQ(exe->node_backends()[0], "cpu");
}

TEST(CausalMaskTest, MasksThePositionsAfterTheDiagonalPlusOffset) {
  const std::vector<float> x(12, 1.0f);  // (1, 3, 4)
  const float m = -1e9f;
  for (const auto& backend : backends()) {
    const auto y = run_op(*backend, OpKind::causal_mask, CausalMaskAttrs{},
                          {TensorType{{1, 3, 4}, DType::f32}}, {f32_words(x)});
    EXPECT_EQ(y[0], (std::vector<float>{1, m, m, m,  //
                                        1, 1, m, m,  //
                                        1, 1, 1, m}))
        << backend->name();
    const auto shifted = run_op(*backend, OpKind::causal_mask, CausalMaskAttrs{0.0f, 1},
                                {TensorType{{3, 4}, DType::f32}}, {f32_words(x)});
    EXPECT_EQ(shifted[0], (std::vector<float>{1, 1, 0, 0,  //
                                              1, 1, 1, 0,  //
                                              1, 1, 1, 1}))
        << backend->name();
  }
}

// x -> split -> concat along the same axis gives x back.
TEST(SplitTest, ConcatOfTheSplitIsTheInput) {
  Graph g;
  const ValueId x = g.add_input("in0", TensorType{{2, 6, 3}, DType::f32}, Role::input);
  const NodeId split = add_node(g, OpKind::split, {x}, SplitAttrs{1, {2, 1, 3}}, "split").value();
  const std::vector<ValueId> pieces = g.node(split).outputs;
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(g.value(pieces[2]).type.shape, (Shape{2, 3, 3}));
  const ValueId y =
      g.node(add_node(g, OpKind::concat, pieces, AxisAttrs{1}, "concat").value()).outputs[0];
  g.mark_output(y);
  const std::vector<float> data = testing::random_normal(36, 7);
  for (const auto& backend : backends()) {
    auto exe = Executable::compile(g, *backend, ExecOptions{.poison = true}).value();
    EXPECT_EQ(testing::run_outputs(*exe, {f32_words(data)})[0], data) << backend->name();
  }
}

TEST(PadTest, PlacesTheInputAfterBeforeAndFillsTheRest) {
  for (const auto& backend : backends()) {
    const auto y = run_op(*backend, OpKind::pad, PadAttrs{{1, 0}, {0, 1}, 9.0f},
                          {TensorType{{2, 2}, DType::f32}}, {f32_words({1, 2, 3, 4})});
    EXPECT_EQ(y[0], (std::vector<float>{9, 9, 9, 1, 2, 9, 3, 4, 9})) << backend->name();
    const auto dx = run_op(*backend, OpKind::pad_grad, PadAttrs{{1, 0}, {0, 1}, 9.0f},
                           {TensorType{{3, 3}, DType::f32}}, {f32_words(y[0])});
    EXPECT_EQ(dx[0], (std::vector<float>{1, 2, 3, 4})) << backend->name();
  }
}

TEST(WhereTest, SelectsWithABroadcastCondition) {
  for (const auto& backend : backends()) {
    const auto y = run_op(
        *backend, OpKind::where, NoAttrs{},
        {TensorType{{3}, DType::i32}, TensorType{{2, 3}, DType::f32},
         TensorType{{2, 3}, DType::f32}},
        {i32_words({1, 0, 5}), f32_words({1, 2, 3, 4, 5, 6}), f32_words({-1, -2, -3, -4, -5, -6})});
    EXPECT_EQ(y[0], (std::vector<float>{1, -2, 3, 4, -5, 6})) << backend->name();
  }
}

// With running statistics equal to the batch's, inference mode gives the
// training-mode output.
TEST(BatchNormInferenceTest, MatchesBatchNormWithTheBatchStatistics) {
  const Shape x_shape = {4, 3, 2, 2};
  const TensorType x{x_shape, DType::f32};
  const TensorType c{{3}, DType::f32};
  const std::vector<float> data = testing::random_normal(48, 11);
  const Words gamma = f32_words({0.5f, 1.0f, 2.0f});
  const Words beta = f32_words({0.1f, -0.2f, 0.3f});
  const Words ones = f32_words({1, 1, 1});
  for (const auto& backend : backends()) {
    const auto train = run_op(*backend, OpKind::batch_norm, BatchNormAttrs{}, {x, c, c, c, c},
                              {f32_words(data), gamma, beta, ones, ones});
    const auto eval =
        run_op(*backend, OpKind::batch_norm_inference, BatchNormAttrs{}, {x, c, c, c, c},
               {f32_words(data), gamma, beta, f32_words(train[1]), f32_words(train[2])});
    expect_near_all(train[0], eval[0], 1e-5, std::string(backend->name()));
  }
}

// Evaluation graphs read the running statistics that training graphs update.
TEST(BatchNormInferenceTest, EvaluationGraphsUseTheTrainedStatistics) {
  for (bool training : {true, false}) {
    ModelBuilder b("bn", training);
    const ValueId x = b.input("images", {4, 3, 2, 2});
    const ValueId y = b.linear("fc", b.flatten(b.batch_norm("bn", x)), 5);
    b.cross_entropy(y, b.labels(4));
    const Model model = b.finish().value();
    const Graph& g = model.graph;
    const auto bn = std::find_if(g.nodes().begin(), g.nodes().end(),
                                 [](const Node& n) { return n.name == "bn"; });
    ASSERT_NE(bn, g.nodes().end());
    EXPECT_EQ(bn->op, training ? OpKind::batch_norm : OpKind::batch_norm_inference);
    EXPECT_EQ(g.value(bn->inputs[3]).name, "bn.running_mean");
    EXPECT_EQ(g.value(bn->inputs[4]).name, "bn.running_var");
    EXPECT_EQ(g.value(bn->inputs[3]).role, Role::state);
    EXPECT_EQ(g.updates().size(), training ? 2u : 0u);
  }
}

// The labels (N) double as token ids here: ids -> embedding -> layer_norm -> logits.
TEST(SequenceBuilderTest, EmbeddingAndLayerNormLayers) {
  ModelBuilder b("tiny_lm", true);
  const ValueId ids = b.labels(6);
  const ValueId h = b.layer_norm("ln", b.embedding("emb", ids, 10, 4));
  ASSERT_TRUE(h.valid());
  EXPECT_EQ(b.shape(h), (Shape{6, 4}));
  b.cross_entropy(b.linear("head", h, 10), ids);
  const Model model = b.finish().value();
  const Graph& g = model.graph;
  EXPECT_EQ(g.value(g.find_value("emb.weight")).type.shape, (Shape{10, 4}));
  EXPECT_EQ(g.value(g.find_value("ln.weight")).type.shape, (Shape{4}));
  EXPECT_EQ(model.init.at("emb.weight").kind, Init::Kind::uniform);
  EXPECT_EQ(model.init.at("emb.weight").bound, 1.0f);
  EXPECT_EQ(model.init.at("ln.weight").kind, Init::Kind::ones);
  EXPECT_EQ(model.init.at("ln.bias").kind, Init::Kind::zeros);
  EXPECT_EQ(g.node(g.value(h).producer).op, OpKind::layer_norm);
}

// Row 0: gates (ln 3, -ln 3, ln 2, 0) give i = 3/4, f = 1/4, g = tanh(ln 2) = 3/5,
// o = 1/2; with c_prev = 2, c = 1/2 + 9/20 = 0.95 and h = tanh(0.95) / 2.
// Row 1: all gates 0 give i = f = o = 1/2 and g = 0; with c_prev = 1, c = 1/2.
TEST(LstmCellTest, MatchesAHandComputedValue) {
  const float ln2 = std::log(2.0f), ln3 = std::log(3.0f);
  const Words gates = f32_words({ln3, -ln3, ln2, 0, 0, 0, 0, 0});  // (2, 4): H = 1
  const TensorType g{{2, 4}, DType::f32}, state{{2, 1}, DType::f32};
  for (const auto& backend : backends()) {
    const std::string name(backend->name());
    const auto out =
        run_op(*backend, OpKind::lstm_cell, NoAttrs{}, {g, state}, {gates, f32_words({2, 1})});
    expect_near_all({0.95f, 0.5f}, out[1], 1e-6, name + " c");
    expect_near_all({0.36989152f, 0.23105858f}, out[0], 1e-6, name + " h");
    // No c_prev: the first step, c = i g.
    const auto first = run_op(*backend, OpKind::lstm_cell, NoAttrs{}, {g}, {gates});
    expect_near_all({0.45f, 0}, first[1], 1e-6, name + " first c");
    expect_near_all({0.2109495f, 0}, first[0], 1e-6, name + " first h");
  }
}

// Saturated gates (|a| up to 100, where e^a overflows a float) give +-1 and 0,
// never NaN.
TEST(LstmCellTest, SaturatedGatesStayFinite) {
  const Words gates = f32_words({100, -100, 100, 100, -100, 100, -100, -100});  // (2, 4)
  const TensorType g{{2, 4}, DType::f32}, state{{2, 1}, DType::f32};
  for (const auto& backend : backends()) {
    const std::string name(backend->name());
    const auto out =
        run_op(*backend, OpKind::lstm_cell, NoAttrs{}, {g, state}, {gates, f32_words({5, 5})});
    // Row 0: i = 1, f = 0, g = 1, o = 1: c = 1, h = tanh(1). Row 1: i = 0, f = 1,
    // g = -1, o = 0: c = 5, h = 0.
    expect_near_all({1, 5}, out[1], 1e-6, name + " c");
    expect_near_all({0.7615942f, 0}, out[0], 1e-6, name + " h");
    const auto grads =
        run_op(*backend, OpKind::lstm_cell_grad, NoAttrs{}, {state, state, g, state, state},
               {f32_words({1, 1}), f32_words({1, 1}), gates, f32_words(out[1]), f32_words({5, 5})});
    for (const auto& values : grads) {
      for (float v : values) EXPECT_TRUE(std::isfinite(v)) << name;
    }
  }
}

// One LSTM step, PyTorch's nn.LSTM cell, built two ways: with linear adding
// into the input projection and one lstm_cell, or from primitives (linear,
// add, slice, sigmoid, tanh, mul) as the zoo built it before. Inputs in0 .. in8:
// x (2, 3), h (2, 3), c (2, 3), w_ih (12, 3), w_hh (12, 3), b_ih (12), b_hh (12),
// r_h, r_c (2, 3); outputs: the loss sum(h' r_h) + sum(c' r_c), then the
// gradients of the inputs before r_h. `first`: no h and c (zeros), as a
// layer's first step without an initial state.
Graph lstm_step_graph(bool fused, bool first) {
  Graph g;
  const int64_t n = 2, hidden = 3, h4 = 4 * hidden;
  const Shape shapes[] = {{n, 3}, {n, hidden}, {n, hidden}, {h4, 3},    {h4, hidden},
                          {h4},   {h4},        {n, hidden}, {n, hidden}};
  std::vector<ValueId> in;
  for (size_t i = 0; i < std::size(shapes); ++i) {
    in.push_back(
        g.add_input("in" + std::to_string(i), TensorType{shapes[i], DType::f32}, Role::input));
  }
  auto outputs = [&](OpKind op, std::vector<ValueId> inputs, Attrs attrs = NoAttrs{}) {
    const std::string name = std::string(op_name(op)) + std::to_string(g.num_nodes());
    return g.node(add_node(g, op, std::move(inputs), std::move(attrs), name).value()).outputs;
  };
  auto first_of = [&](OpKind op, std::vector<ValueId> inputs, Attrs attrs = NoAttrs{}) {
    return outputs(op, std::move(inputs), std::move(attrs))[0];
  };
  const ValueId x = in[0], h = in[1], c = in[2];
  const ValueId xw = first_of(OpKind::linear, {x, in[3], in[5]});
  ValueId h_next, c_next;
  if (fused) {
    const ValueId gates = first ? first_of(OpKind::add, {xw, in[6]})
                                : first_of(OpKind::linear, {h, in[4], in[6], xw});
    const std::vector<ValueId> state =
        outputs(OpKind::lstm_cell, first ? std::vector<ValueId>{gates} : std::vector{gates, c});
    h_next = state[0];
    c_next = state[1];
  } else {
    const ValueId gates =
        first_of(OpKind::add, {xw, first ? in[6] : first_of(OpKind::linear, {h, in[4], in[6]})});
    auto gate = [&](OpKind activation, int64_t k) {
      return first_of(activation, {first_of(OpKind::slice, {gates},
                                            SliceAttrs{1, k * hidden, (k + 1) * hidden, {}})});
    };
    const ValueId i = gate(OpKind::sigmoid, 0), f = gate(OpKind::sigmoid, 1),
                  gg = gate(OpKind::tanh, 2), o = gate(OpKind::sigmoid, 3);
    const ValueId ig = first_of(OpKind::mul, {i, gg});
    c_next = first ? ig : first_of(OpKind::add, {first_of(OpKind::mul, {f, c}), ig});
    h_next = first_of(OpKind::mul, {o, first_of(OpKind::tanh, {c_next})});
  }
  const ReduceAttrs all{{0, 1}, false};
  const ValueId loss = first_of(
      OpKind::add, {first_of(OpKind::reduce_sum, {first_of(OpKind::mul, {h_next, in[7]})}, all),
                    first_of(OpKind::reduce_sum, {first_of(OpKind::mul, {c_next, in[8]})}, all)});
  g.mark_output(loss);
  std::vector<ValueId> wrt = {x, in[3], in[5], in[6]};
  if (!first) wrt.insert(wrt.end(), {h, c, in[4]});
  const std::vector<ValueId> grads = append_gradients(g, loss, wrt).value();
  for (ValueId grad : grads) g.mark_output(grad);
  return g;
}

TEST(LstmCellTest, EqualsTheStepBuiltFromPrimitivesWithItsGradients) {
  std::vector<Words> data;
  for (size_t i = 0; i < 9; ++i) {
    const size_t count = i < 3 || i > 6 ? 6 : (i < 5 ? 36 : 12);
    data.push_back(f32_words(testing::random_normal(count, 40 + i)));
  }
  for (bool first : {false, true}) {
    for (const auto& backend : backends()) {
      const std::string what =
          std::string(backend->name()) + (first ? ", first step" : ", with a state");
      auto fused = Executable::compile(lstm_step_graph(true, first), *backend, ExecOptions{.poison = true}).value();
      auto primitives = Executable::compile(lstm_step_graph(false, first), *backend, ExecOptions{.poison = true}).value();
      const auto got = testing::run_outputs(*fused, data);
      const auto want = testing::run_outputs(*primitives, data);
      ASSERT_EQ(got.size(), first ? 5u : 8u) << what;
      ASSERT_EQ(got.size(), want.size()) << what;
      for (size_t o = 0; o < got.size(); ++o) {
        ASSERT_EQ(got[o].size(), want[o].size()) << what;
        for (size_t k = 0; k < got[o].size(); ++k) {
          EXPECT_NEAR(got[o][k], want[o][k], 2e-5 + 2e-5 * std::abs(want[o][k]))
              << what << ": output " << o << "[" << k << "]";
        }
      }
    }
  }
}

// The new attribute structs print and parse back (text form of graphs).
TEST(SequenceTextTest, GraphsWithTheNewOpsRoundTrip) {
  Graph g;
  const ValueId ids = g.add_input("ids", TensorType{{2, 3}, DType::i32}, Role::input);
  const ValueId table = g.add_input("table", TensorType{{5, 4}, DType::f32}, Role::parameter);
  const ValueId gamma = g.add_input("gamma", TensorType{{4}, DType::f32}, Role::parameter);
  auto first = [&](OpKind op, std::vector<ValueId> in, Attrs attrs, const char* name) {
    return g.node(add_node(g, op, std::move(in), std::move(attrs), name).value()).outputs[0];
  };
  const ValueId e = first(OpKind::embedding, {ids, table}, NoAttrs{}, "emb");
  const ValueId n = first(OpKind::layer_norm, {e, gamma, gamma}, LayerNormAttrs{1e-6f}, "ln");
  const ValueId p = first(OpKind::pad, {n}, PadAttrs{{0, 0, 1}, {0, 0, 0}, -2.5f}, "pad");
  const ValueId m = first(OpKind::causal_mask, {p}, CausalMaskAttrs{-1e9f, 2}, "mask");
  const ValueId cond = g.add_input("cond", TensorType{{2, 3, 1}, DType::i32}, Role::input);
  g.mark_output(first(OpKind::where, {cond, e, e}, NoAttrs{}, "where"));
  const NodeId split = add_node(g, OpKind::split, {m}, SplitAttrs{2, {2, 3}}, "split").value();
  for (ValueId out : g.node(split).outputs) g.mark_output(out);
  const std::string text = print_graph(g);
  EXPECT_NE(text.find("before=[0,0,1] after=[0,0,0] value=-2.5"), std::string::npos) << text;
  auto parsed = parse_graph(text);
  ASSERT_TRUE(parsed.is_ok()) << parsed.message();
  EXPECT_EQ(print_graph(*parsed), text);
  EXPECT_TRUE(verify_graph(*parsed).is_ok());
}

TEST(SequenceShapeTest, ErrorsNameTheProblem) {
  const TensorType x{{2, 4}, DType::f32};
  auto split = infer_types(OpKind::split, {x}, SplitAttrs{1, {1, 2}});
  ASSERT_FALSE(split.is_ok());
  EXPECT_NE(split.message().find("sum to 3, not to 4"), std::string::npos) << split.message();
  auto pad = infer_types(OpKind::pad, {x}, PadAttrs{{0, -1}, {0, 0}, 0.0f});
  ASSERT_FALSE(pad.is_ok());
  EXPECT_NE(pad.message().find("non-negative"), std::string::npos) << pad.message();
  auto where = infer_types(OpKind::where, {TensorType{{3}, DType::i32}, x, x}, NoAttrs{});
  ASSERT_FALSE(where.is_ok());
  EXPECT_NE(where.message().find("does not broadcast"), std::string::npos) << where.message();
  auto embedding = infer_types(OpKind::embedding, {x, x}, NoAttrs{});
  ASSERT_FALSE(embedding.is_ok());
  EXPECT_NE(embedding.message().find("ids must be i32"), std::string::npos) << embedding.message();
  auto mask = infer_types(OpKind::causal_mask, {TensorType{{4}, DType::f32}}, CausalMaskAttrs{});
  ASSERT_FALSE(mask.is_ok());
  auto ln =
      infer_types(OpKind::layer_norm, {x, TensorType{{3}, DType::f32}, TensorType{{4}, DType::f32}},
                  LayerNormAttrs{});
  ASSERT_FALSE(ln.is_ok());
  EXPECT_NE(ln.message().find("gamma must have 4 elements"), std::string::npos) << ln.message();
  auto cell = infer_types(OpKind::lstm_cell, {TensorType{{2, 6}, DType::f32}}, NoAttrs{});
  ASSERT_FALSE(cell.is_ok());
  EXPECT_NE(cell.message().find("must have 4H columns"), std::string::npos) << cell.message();
  cell = infer_types(OpKind::lstm_cell, {TensorType{{2, 8}, DType::f32}, x}, NoAttrs{});
  ASSERT_FALSE(cell.is_ok());
  EXPECT_NE(cell.message().find("c_prev must be f32 [2,2]"), std::string::npos) << cell.message();
  auto linear =
      infer_types(OpKind::linear,
                  {x, TensorType{{3, 4}, DType::f32}, TensorType{{3}, DType::f32}, x}, NoAttrs{});
  ASSERT_FALSE(linear.is_ok());
  EXPECT_NE(linear.message().find("the added c"), std::string::npos) << linear.message();
}

}  // namespace
}  // namespace memfit
