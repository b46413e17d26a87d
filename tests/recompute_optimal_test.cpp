// The cost-driven recomputation strategies: optimal's DP equals a brute-force
// search over its schedule family on random chains; on every zoo model at a
// tiny size optimal's predicted recompute time is never worse than sqrt's or
// budget's at their arenas, and its arena fits; training steps with optimal
// and milp are bit-identical to the plain step (poison mode on); an
// unmeetable budget names the smallest arena, which can then be met; milp
// drops what chain strategies cannot on a graph with a long skip. Costs are
// roofline or synthetic: no test depends on timing.
#include "passes/recompute_optimal.h"
#include "passes/recompute_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <numeric>
#include <ostream>
#include <random>
#include <set>

#include "autodiff/autodiff.h"
#include "cost/cost_model.h"
#include "memfit/plan.h"
#include "passes/recompute.h"
#include "passes/recompute_milp.h"
#include "test_util.h"
#include "train/data_source.h"
#include "train/training_program.h"

namespace memfit {
namespace {

// The least seconds over every schedule of the family (3^n mode lists) that
// evaluate_chain accepts within `memory`; infinity when none is.
double brute_force(const std::vector<ChainBlock>& blocks, size_t memory) {
  const size_t n = blocks.size();
  std::vector<BlockMode> modes(n, BlockMode::stored);
  double best = INFINITY;
  for (size_t code = 0, total = static_cast<size_t>(std::pow(3, n)); code < total; ++code) {
    size_t c = code;
    for (size_t b = 0; b < n; ++b, c /= 3) modes[b] = static_cast<BlockMode>(c % 3);
    const auto s = evaluate_chain(blocks, modes);
    if (s && s->peak <= memory) best = std::min(best, s->seconds);
  }
  return best;
}

TEST(ChainDp, EqualsBruteForceOnRandomChains) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<size_t> size(0, 6), length(1, 7);
  std::uniform_real_distribution<double> time(0.0, 1.0);
  size_t feasible = 0, infeasible = 0;
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<ChainBlock> blocks(length(rng));
    size_t all = 0;
    for (ChainBlock& b : blocks) {
      b.output_seconds = time(rng);
      b.seconds = b.output_seconds + time(rng);
      b.output = &b == &blocks.back() ? 0 : size(rng);
      b.saved = size(rng);
      all += b.output + b.saved;
    }
    for (size_t memory = 0; memory <= all + 1; ++memory) {
      const double expected = brute_force(blocks, memory);
      const auto dp = solve_chain(blocks, memory);
      ASSERT_EQ(dp.has_value(), std::isfinite(expected))
          << "trial " << trial << " memory " << memory;
      if (!dp) {
        ++infeasible;
        continue;
      }
      ++feasible;
      EXPECT_NEAR(dp->seconds, expected, 1e-9) << "trial " << trial << " memory " << memory;
      const auto check = evaluate_chain(blocks, dp->modes);
      ASSERT_TRUE(check.has_value());
      EXPECT_LE(check->peak, memory);
    }
  }
  EXPECT_GT(feasible, 100u);
  EXPECT_GT(infeasible, 10u);
}

TEST(ChainDp, MemoryModelOfASegment) {
  // Three blocks and a tail; saved 2 each, outputs 1. Storing all: 3 * 3 + 2.
  std::vector<ChainBlock> blocks(4, ChainBlock{1.0, 0.25, 1, 2});
  blocks.back().output = 0;
  using M = BlockMode;
  EXPECT_EQ(evaluate_chain(blocks, {M::stored, M::stored, M::stored, M::stored})->peak, 11u);
  EXPECT_EQ(evaluate_chain(blocks, {M::stored, M::stored, M::stored, M::stored})->seconds, 0.0);
  // One segment (dropped, dropped, checkpointed), then the stored tail: the
  // segment holds 9 at once; then its output 1 and the tail's 2 are kept.
  const auto s = evaluate_chain(blocks, {M::dropped, M::dropped, M::checkpointed, M::stored});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->peak, 9u);
  EXPECT_DOUBLE_EQ(s->seconds, 3.0 - 0.25);
  // Outside the family: a dropped block before a stored one; a checkpointed tail.
  EXPECT_FALSE(evaluate_chain(blocks, {M::dropped, M::stored, M::stored, M::stored}));
  EXPECT_FALSE(evaluate_chain(blocks, {M::stored, M::stored, M::stored, M::checkpointed}));
  // Every block checkpointed: each recomputed alone, the kept outputs add up.
  const auto each =
      evaluate_chain(blocks, {M::checkpointed, M::checkpointed, M::checkpointed, M::dropped});
  ASSERT_TRUE(each);
  EXPECT_EQ(each->peak, 3u + 2u);
  EXPECT_DOUBLE_EQ(each->seconds, 3 * 0.75 + 1.0);
}

struct Outcome {
  size_t arena = 0;
  double seconds = 0;  // predicted recompute seconds
};

Outcome outcome(const Graph& original, const RecomputedGraph& result, const ArenaOf& arena_of,
                const NodeSeconds& cost) {
  return Outcome{arena_of(result.graph).value(),
                 graph_seconds(result.graph, cost, true) - graph_seconds(original, cost, true)};
}

class OptimalOnTheZoo : public ::testing::TestWithParam<ModelOptions> {};

TEST_P(OptimalOnTheZoo, NeverWorseThanSqrtOrBudgetAtTheirArenas) {
  const ModelOptions& model = GetParam();
  const Graph step = build_step_graph(model, 1, testing::sgd(), UpdateMode::apply, nullptr).value();
  const auto backend = make_cpu_backend();
  const ArenaOf arena_of = testing::backend_arena_of(*backend);
  const NodeSeconds cost = roofline_cost();
  for (Recompute other : {Recompute::sqrt, Recompute::budget}) {
    auto theirs = apply_recompute(step, other, 0, arena_of);
    ASSERT_TRUE(theirs.is_ok()) << theirs.message();
    const Outcome them = outcome(step, *theirs, arena_of, cost);
    auto ours = apply_optimal(step, them.arena, arena_of, cost);
    ASSERT_TRUE(ours.is_ok()) << ours.message();
    const Outcome us = outcome(step, *ours, arena_of, cost);
    const std::string what = model.name + " at the arena of " + std::string(name_of(other));
    EXPECT_LE(us.arena, them.arena) << what;
    EXPECT_LE(us.seconds, them.seconds + 1e-12) << what;
    // Checkpoints count candidates kept, not values: never more than there are.
    EXPECT_LE(ours->summary.checkpoints, ours->summary.candidates) << what;
  }
  // Within the plain arena optimal stores whole blocks, whose values are not
  // candidates: still no more checkpoints than candidates.
  const size_t plain = arena_of(step).value();
  auto roomy = apply_optimal(step, plain, arena_of, cost);
  ASSERT_TRUE(roomy.is_ok()) << roomy.message();
  EXPECT_LE(roomy->summary.checkpoints, roomy->summary.candidates) << model.name;
}

INSTANTIATE_TEST_SUITE_P(
    Models, OptimalOnTheZoo,
    ::testing::Values(
        ModelOptions{.name = "lenet", .batch = 2}, ModelOptions{.name = "mlp", .batch = 2},
        ModelOptions{.name = "resnet18", .batch = 2, .image_size = 32, .classes = 10, .width = 8},
        ModelOptions{.name = "resnet-cifar", .batch = 2, .image_size = 8, .depth = 20, .width = 4},
        ModelOptions{.name = "vgg16", .batch = 2, .image_size = 32, .classes = 4, .width = 8},
        ModelOptions{
            .name = "lstm-lm", .batch = 2, .depth = 2, .width = 16, .seq_len = 6, .vocab = 16},
        ModelOptions{
            .name = "seq2seq", .batch = 2, .depth = 1, .width = 16, .seq_len = 4, .vocab = 16},
        ModelOptions{.name = "gpt", .batch = 2, .depth = 2, .width = 16, .seq_len = 8, .vocab = 16},
        ModelOptions{
            .name = "transformer", .batch = 2, .depth = 1, .width = 16, .seq_len = 4, .vocab = 16},
        ModelOptions{.name = "unet3d", .batch = 1, .classes = 3, .width = 4, .volume = 16}),
    testing::model_param_name);

using testing::StepCase;
using testing::StepRun;

// CBC's time limit in these tests: a small graph's program is solved (or
// stopped with its best solution) well within it.
constexpr double kMilpSeconds = 0.5;

// One optimizer step on the cpu backend with poison mode on, under `budget`.
StepRun one_step(const ModelOptions& model, int64_t accumulate, Recompute recompute,
                 size_t budget = 0) {
  StepSpec spec = testing::test_spec(model, accumulate);
  spec.recompute = recompute;
  spec.milp_seconds = kMilpSeconds;
  spec.budget = budget;
  auto program = TrainingProgram::create(spec, 2, true);
  EXPECT_TRUE(program.is_ok()) << program.message();
  return program ? testing::run_step(**program, accumulate, false) : StepRun{};
}

class StepsAreBitIdentical : public ::testing::TestWithParam<StepCase> {};

TEST_P(StepsAreBitIdentical, UnderTheSmallestArena) {
  const StepCase& c = GetParam();
  if (c.recompute == Recompute::milp && !milp_available()) GTEST_SKIP() << "built without CBC";
  const std::string what = c.model.name + " " + std::string(name_of(c.recompute));
  const StepRun plain = one_step(c.model, c.accumulate, Recompute::none);
  // Under the smallest arena the strategy reaches, so that it recomputes.
  PlanRequest request;
  request.step.model = c.model;
  request.step.accumulate = c.accumulate;
  request.step.optimizer = testing::sgd();
  request.step.recompute = c.recompute;
  request.step.milp_seconds = kMilpSeconds;
  request.step.budget = 1;
  auto refused = plan_training_step(request);
  ASSERT_FALSE(refused.is_ok()) << what;
  const size_t smallest = testing::smallest_arena_in(refused.message());
  ASSERT_GT(smallest, 0u) << refused.message();
  const StepRun run = one_step(c.model, c.accumulate, c.recompute, smallest);
  EXPECT_GT(run.recompute.recomputed_nodes, 0u) << what;
  testing::expect_identical_steps(plain, run, what);
}

// Sizes at which recomputation makes the arena smaller (at smaller ones the
// plain step is already the smallest, and the strategies keep it). Batch
// norm: a clone sees the same batch and does not update the running
// statistics again; accumulate 2 also runs the accumulating step graph.
const ModelOptions kResNet{.name = "resnet-cifar", .batch = 8, .image_size = 16, .depth = 11};

INSTANTIATE_TEST_SUITE_P(Strategies, StepsAreBitIdentical,
                         ::testing::Values(StepCase{kResNet, 1, Recompute::optimal},
                                           StepCase{kResNet, 2, Recompute::optimal},
                                           StepCase{kResNet, 1, Recompute::milp}),
                         [](const ::testing::TestParamInfo<StepCase>& info) {
                           return std::string(name_of(info.param.recompute)) +
                                  "_accumulate_" + std::to_string(info.param.accumulate);
                         });

TEST(Optimal, AnUnmeetableBudgetNamesTheSmallestArenaWhichFits) {
  PlanRequest request;
  // At batch 4 (not 2) recomputation lowers the arena of this tiny ResNet.
  request.step.model = {.name = "resnet-cifar", .batch = 4, .image_size = 16, .depth = 20};
  request.step.recompute = Recompute::optimal;
  request.step.budget = 1024;
  auto refused = plan_training_step(request);
  ASSERT_FALSE(refused.is_ok());
  const std::string& message = refused.message();
  request.step.budget = testing::smallest_arena_in(message);
  ASSERT_GT(request.step.budget, 0u) << message;
  auto met = plan_training_step(request);
  ASSERT_TRUE(met.is_ok()) << met.message() << "\nafter: " << message;
  EXPECT_LE(met->arena_bytes, request.step.budget);
  EXPECT_GT(met->recomputed_nodes, 0u);
  EXPECT_GT(met->predicted_recompute_seconds, 0.0);
  EXPECT_GT(met->predicted_step_seconds, met->predicted_recompute_seconds);
}

// A chain of tanh nodes bridged by a long skip (as U-Net's): %a is read
// again by the final add, so no value inside the skip cuts the forward graph
// and chain strategies can drop none of %b .. %g.
constexpr const char* kLongSkip = R"(memfit-graph 1
input %w f32[4096] parameter
node a = tanh(%w) -> %a f32[4096] activation
node b = tanh(%a) -> %b f32[4096] activation
node c = tanh(%b) -> %c f32[4096] activation
node d = tanh(%c) -> %d f32[4096] activation
node e = tanh(%d) -> %e f32[4096] activation
node f = tanh(%e) -> %f f32[4096] activation
node g = tanh(%f) -> %g f32[4096] activation
node y = add(%g, %a) -> %y f32[4096] activation
node z = tanh(%y) -> %z f32[4096] activation
node loss = reduce_sum(%z) {axes=[0] keepdims=false} -> %loss f32[] activation
output %loss
)";

TEST(Milp, DropsInsideALongSkipWhereChainStrategiesCannot) {
  if (!milp_available()) GTEST_SKIP() << "built without CBC";
  Graph g = parse_graph(kLongSkip).value();
  ASSERT_TRUE(append_gradients(g, g.find_value("loss"), {g.find_value("w")}).is_ok());
  const auto backend = make_cpu_backend();
  const ArenaOf arena_of = testing::backend_arena_of(*backend);
  const NodeSeconds unit = [](const Graph&, const Node&) { return 1.0; };
  // A budget of 1 byte: every strategy returns the smallest arena it found.
  size_t chain_best = SIZE_MAX;
  for (Recompute r : {Recompute::none, Recompute::sqrt, Recompute::budget, Recompute::optimal}) {
    auto result = apply_recompute_costed(g, r, 1, arena_of, {unit, 10});
    ASSERT_TRUE(result.is_ok()) << result.message();
    chain_best = std::min(chain_best, arena_of(result->graph).value());
  }
  auto milp = apply_milp(g, 1, arena_of, unit, 10);
  ASSERT_TRUE(milp.is_ok()) << milp.message();
  const Outcome m = outcome(g, *milp, arena_of, unit);
  EXPECT_LT(m.arena, chain_best);
  EXPECT_GT(m.seconds, 0.0);
  // At the chain strategies' best arena milp fits too, recomputing no more
  // than it must to fit there.
  auto roomy = apply_milp(g, chain_best, arena_of, unit, 10);
  ASSERT_TRUE(roomy.is_ok()) << roomy.message();
  EXPECT_LE(outcome(g, *roomy, arena_of, unit).arena, chain_best);
}

TEST(Milp, RefusesLargeGraphsNamingTheLimit) {
  if (!milp_available()) GTEST_SKIP() << "built without CBC";
  const Graph step =
      build_step_graph(
          {.name = "resnet-cifar", .batch = 1, .image_size = 8, .depth = 56, .width = 2}, 1,
          testing::sgd(), UpdateMode::apply, nullptr)
          .value();
  const auto backend = make_cpu_backend();
  auto refused = apply_milp(step, 0, testing::backend_arena_of(*backend), roofline_cost(), 1);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.message().find("at most " + std::to_string(kMilpMaxNodes)), std::string::npos)
      << refused.message();
  EXPECT_NE(refused.message().find("--recompute optimal"), std::string::npos);
}

TEST(CostModel, RooflineAndSignatures) {
  const Graph step =
      build_step_graph({.name = "lenet", .batch = 2}, 1, testing::sgd(), UpdateMode::apply, nullptr)
          .value();
  const MachineSpec spec;
  for (const Node& node : step.nodes()) {
    const double s = roofline_seconds(step, node, spec);
    EXPECT_GE(s, spec.launch_seconds) << node.name;
  }
  // A clone has its original's signature, so a measurement serves both.
  std::map<std::string, const Node*> by_name;
  for (const Node& node : step.nodes()) by_name[node.name] = &node;
  Graph g = step;
  ASSERT_TRUE(recompute(g, RecomputeOptions{}).is_ok());
  size_t clones = 0;
  for (const Node& node : g.nodes()) {
    const size_t at = node.name.find(".recompute");
    if (at == std::string::npos) continue;
    ++clones;
    const Node* original = by_name.at(node.name.substr(0, at));
    EXPECT_EQ(node_signature(g, node), node_signature(step, *original)) << node.name;
  }
  EXPECT_GT(clones, 0u);
}

TEST(CostModel, MeasuresEachDistinctNodeOnce) {
  const Graph step =
      build_step_graph({.name = "mlp", .batch = 2}, 1, testing::sgd(), UpdateMode::apply, nullptr)
          .value();
  const auto backend = make_cpu_backend(1);
  const MeasuredCosts costs = MeasuredCosts::measure(step, *backend, 1);
  std::set<std::string> signatures;
  for (const Node& node : step.nodes()) signatures.insert(node_signature(step, node));
  EXPECT_EQ(costs.measured(), signatures.size());
  EXPECT_EQ(costs.fell_back(), 0u);
  for (const Node& node : step.nodes()) EXPECT_GE(costs.seconds(step, node), 0.0) << node.name;
}

}  // namespace
}  // namespace memfit
