// Checkpoint candidates made of several values (cuts), and recomputation on
// the unrolled lstm-lm, whose windows and time steps are separated by such
// cuts only.
#include <gtest/gtest.h>

#include <string>

#include "autodiff/autodiff.h"
#include "memfit/plan.h"
#include "models/zoo.h"
#include "passes/recompute.h"
#include "passes/recompute_strategy.h"

namespace memfit {
namespace {

// %x cuts alone; then two chains side by side (%a, %b), (%a2, %b2), joined by
// %c: after %b and after %b2 two values cross, after %x and %c one.
// `second`: with the second pair; without it, {%a, %b} is the only
// multi-value cut between the single-value cuts %x and %c.
Graph two_chains(bool second) {
  std::string text = R"(memfit-graph 1
input %w f32[4] parameter
node x = tanh(%w) -> %x f32[4] activation
node a = tanh(%x) -> %a f32[4] activation
node b = sigmoid(%x) -> %b f32[4] activation
)";
  if (second) {
    text += R"(node a2 = tanh(%a) -> %a2 f32[4] activation
node b2 = sigmoid(%b) -> %b2 f32[4] activation
node c = mul(%a2, %b2) -> %c f32[4] activation
)";
  } else {
    text += "node c = mul(%a, %b) -> %c f32[4] activation\n";
  }
  text += R"(node loss = reduce_sum(%c) {axes=[0] keepdims=false} -> %loss f32[] activation
output %loss
)";
  Graph g = parse_graph(text).value();
  EXPECT_TRUE(append_gradients(g, g.find_value("loss"), {g.find_value("w")}).is_ok());
  return g;
}

std::vector<std::vector<std::string>> names(const Graph& g, const std::vector<Cut>& cuts) {
  std::vector<std::vector<std::string>> out;
  for (const Cut& cut : cuts) {
    out.emplace_back();
    for (ValueId v : cut.values) out.back().push_back(g.value(v).name);
  }
  return out;
}

TEST(RecomputeCuts, TwoValuesCrossingABoundaryFormOneCandidate) {
  const Graph g = two_chains(true);
  using Names = std::vector<std::vector<std::string>>;
  EXPECT_EQ(names(g, checkpoint_candidates(g)), (Names{{"x"}, {"a", "b"}, {"a2", "b2"}, {"c"}}));
  // A cut of more values than the limit is no candidate.
  EXPECT_EQ(names(g, checkpoint_candidates(g, 1)), (Names{{"x"}, {"c"}}));
  // Keeping a candidate keeps all its values; the rewrite accepts them.
  const std::vector<Cut> cuts = checkpoint_candidates(g);
  Graph rewritten = g;
  RecomputeOptions options;
  options.keep = cuts[1].values;
  ASSERT_TRUE(recompute(rewritten, options).is_ok());
  // sqrt of 4 candidates keeps the 2nd and the 4th: {a, b} and c.
  const std::vector<ValueId> kept = sqrt_checkpoints(cuts);
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_EQ(g.value(kept[0]).name, "a");
  EXPECT_EQ(g.value(kept[1]).name, "b");
  EXPECT_EQ(g.value(kept[2]).name, "c");
}

TEST(RecomputeCuts, ALoneMultiValueCutBetweenSingleOnesIsNoCandidate) {
  // As a residual block whose projection shortcut runs first: single-value
  // cuts already bound the block.
  const Graph g = two_chains(false);
  using Names = std::vector<std::vector<std::string>>;
  EXPECT_EQ(names(g, checkpoint_candidates(g)), (Names{{"x"}, {"c"}}));
}

// The arena of one SGD step of a tiny lstm-lm, less parameters and optimizer
// state: what grows with the sequence.
size_t activation_bytes(int64_t seq_len, Recompute recompute) {
  PlanRequest request;
  request.step.model = {.name = "lstm-lm", .batch = 4, .width = 16, .seq_len = seq_len, .vocab = 512};
  request.step.recompute = recompute;
  auto report = plan_training_step(request);
  EXPECT_TRUE(report.is_ok()) << report.message();
  if (!report.is_ok()) return 0;
  return report->arena_bytes - report->by_role.parameters - report->by_role.optimizer_state;
}

TEST(RecomputeCuts, UnrolledLstmGrowsLinearlySqrtAndLogarithmically) {
  // 4 -> 16 windows: none keeps every step (x4), sqrt about sqrt(4) = 2
  // times more segment bytes, recursive two more levels.
  const int64_t s = 4 * kLstmWindow, l = 16 * kLstmWindow;
  const size_t none_s = activation_bytes(s, Recompute::none);
  const size_t none_l = activation_bytes(l, Recompute::none);
  const size_t sqrt_s = activation_bytes(s, Recompute::sqrt);
  const size_t sqrt_l = activation_bytes(l, Recompute::sqrt);
  const size_t rec_s = activation_bytes(s, Recompute::recursive);
  const size_t rec_l = activation_bytes(l, Recompute::recursive);
  ASSERT_GT(none_s, 0u);
  EXPECT_LT(sqrt_l * 2, none_l);  // well below
  EXPECT_LT(rec_l, sqrt_l);
  const auto ratio = [](size_t a, size_t b) {
    return static_cast<double>(b) / static_cast<double>(a);
  };
  EXPECT_GT(ratio(none_s, none_l), 3.0);
  EXPECT_LT(ratio(none_s, none_l), 4.5);
  // Beside a constant part (gradients of the parameters, a window's decoder
  // logits and their gradient), sqrt adds a few segments' bytes, recursive a
  // few cuts'.
  const size_t none_growth = none_l - none_s, sqrt_growth = sqrt_l - sqrt_s;
  const size_t rec_growth = rec_l > rec_s ? rec_l - rec_s : 0;
  EXPECT_LT(sqrt_growth * 5, none_growth);
  EXPECT_LT(rec_growth * 2, sqrt_growth);
}

}  // namespace
}  // namespace memfit
