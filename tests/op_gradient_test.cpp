// Every op of the table: its gradient rule against central finite differences
// on the reference backend. Ops without a rule must name the differentiable op
// whose rule emits them (that op's check covers them) or be optimizer updates.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "autodiff/autodiff.h"
#include "ops/typed_graph.h"
#include "test_util.h"

namespace memfit {
namespace {

using testing::Words;

class OpGradientTest : public ::testing::TestWithParam<OpKind> {};

// loss = sum over checked outputs o of sum(o * r_o), r_o fixed random weights.
struct GradientGraph {
  Graph graph;
  std::vector<int> wrt;
  std::vector<TensorType> weights;  // the types of the r_o, fed after the op's inputs
};

GradientGraph build_gradient_graph(OpKind op, const OpExample& ex) {
  GradientGraph gg;
  Graph& g = gg.graph;
  std::vector<ValueId> inputs;
  for (size_t i = 0; i < ex.inputs.size(); ++i) {
    inputs.push_back(g.add_input("in" + std::to_string(i), ex.inputs[i], Role::input));
  }
  const NodeId node = add_node(g, op, inputs, ex.attrs, "node").value();
  const std::vector<ValueId> outs = g.node(node).outputs;
  std::vector<int> of = ex.of;
  if (of.empty()) {
    for (size_t i = 0; i < outs.size(); ++i) of.push_back(static_cast<int>(i));
  }
  ValueId loss;
  for (int o : of) {
    const TensorType t = g.value(outs[static_cast<size_t>(o)]).type;  // a copy: add_input may reallocate
    const ValueId r = g.add_input("in" + std::to_string(ex.inputs.size() + gg.weights.size()), t, Role::input);
    gg.weights.push_back(t);
    const ValueId prod =
        g.node(add_node(g, OpKind::mul, {outs[static_cast<size_t>(o)], r}, NoAttrs{}, "weighted")
                   .value())
            .outputs[0];
    ReduceAttrs all;
    for (size_t a = 0; a < t.shape.size(); ++a) all.axes.push_back(static_cast<int64_t>(a));
    const ValueId sum =
        g.node(add_node(g, OpKind::reduce_sum, {prod}, all, "sum").value()).outputs[0];
    loss =
        loss.valid()
            ? g.node(add_node(g, OpKind::add, {loss, sum}, NoAttrs{}, "total").value()).outputs[0]
            : sum;
  }
  gg.wrt = ex.wrt;
  if (gg.wrt.empty()) {
    for (size_t i = 0; i < ex.inputs.size(); ++i) {
      if (ex.inputs[i].dtype == DType::f32) gg.wrt.push_back(static_cast<int>(i));
    }
  }
  std::vector<ValueId> wrt_values;
  for (int i : gg.wrt) wrt_values.push_back(inputs[static_cast<size_t>(i)]);
  g.mark_output(loss);
  const auto grads = append_gradients(g, loss, wrt_values).value();
  for (ValueId grad : grads) g.mark_output(grad);
  return gg;
}

TEST_P(OpGradientTest, MatchesFiniteDifferences) {
  const OpKind op = GetParam();
  const OpInfo& info = op_info(op);
  if (!info.grad) {
    const bool optimizer = op == OpKind::sgd_update || op == OpKind::adamw_update;
    // fill reads no value of its optional input: its output is a constant.
    const bool constant = op_arity(op).max == 0 || op == OpKind::fill;
    // Copies and the collectives are inserted after autodiff (src/passes/swap.cpp,
    // src/passes/all_reduce.cpp, src/passes/zero_shard.cpp): no gradient is asked of them.
    const bool inserted = info.copy || std::holds_alternative<BucketAttrs>(default_attrs(op));
    EXPECT_TRUE(optimizer || constant || inserted || !info.emitted_by.empty())
        << op_name(op) << " has no gradient rule and names no op whose check covers it";
    for (OpKind by : info.emitted_by) EXPECT_TRUE(op_info(by).grad != nullptr);
    return;
  }
  const auto reference = make_reference_backend();
  const auto examples = info.examples();
  ASSERT_FALSE(examples.empty());
  for (size_t e = 0; e < examples.size(); ++e) {
    SCOPED_TRACE("example " + std::to_string(e));
    GradientGraph gg = build_gradient_graph(op, examples[e]);
    OpExample all = examples[e];
    all.inputs.insert(all.inputs.end(), gg.weights.begin(), gg.weights.end());
    std::vector<Words> data = testing::example_inputs(all, 1234 + e);
    auto exe = Executable::compile(gg.graph, *reference, ExecOptions{.poison = true}).value();
    const StepContext step{42, 3, 5};
    const auto outputs = testing::run_outputs(*exe, data, step);
    const double eps = 1e-2;
    for (size_t w = 0; w < gg.wrt.size(); ++w) {
      const auto input = static_cast<size_t>(gg.wrt[w]);
      const std::vector<float>& analytic = outputs[1 + w];
      ASSERT_EQ(analytic.size(), data[input].size());
      for (size_t k = 0; k < data[input].size(); ++k) {
        const uint32_t saved = data[input][k];
        const float x = testing::as_float(saved);
        data[input][k] = testing::as_word(static_cast<float>(x + eps));
        const double plus = testing::run_outputs(*exe, data, step)[0][0];
        data[input][k] = testing::as_word(static_cast<float>(x - eps));
        const double minus = testing::run_outputs(*exe, data, step)[0][0];
        data[input][k] = saved;
        const double numeric = (plus - minus) / (2 * eps);
        EXPECT_NEAR(analytic[k], numeric, 5e-3 + 5e-3 * std::abs(numeric))
            << op_name(op) << ": d loss / d input " << input << "[" << k << "]";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryOp, OpGradientTest, ::testing::ValuesIn(testing::all_ops()),
                         testing::op_test_name);

}  // namespace
}  // namespace memfit
