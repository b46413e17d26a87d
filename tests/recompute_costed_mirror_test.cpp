// The cost-driven strategies with mirror (optimal and milp): the chain's
// checkpoint sets leave the mirrored nodes as mirror alone makes them (so the
// block costs hold in every schedule); on tiny zoo models optimal+mirror and
// milp+mirror fit the target and recompute no more predicted time than
// sqrt+mirror and budget+mirror at their arenas; in a long skip, milp+mirror
// keeps or recomputes the expensive values and mirrors the cheap ones between
// them, reaching an arena below both milp alone and mirror alone; training steps
// with either are bit-identical to the plain step (poison mode on, dropout
// and batch norm). Costs are roofline or unit: no test depends on timing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <random>
#include <string>

#include "autodiff/autodiff.h"
#include "cost/cost_model.h"
#include "memfit/plan.h"
#include "passes/recompute.h"
#include "passes/recompute_milp.h"
#include "passes/recompute_optimal.h"
#include "passes/recompute_policy.h"
#include "test_util.h"
#include "train/training_program.h"

namespace memfit {
namespace {

// lenet mirrors nothing (its relu reads a convolution output that no
// backward node reads), so it is left out.
const ModelOptions kModels[] = {
    {.name = "mlp", .batch = 2},
    {.name = "resnet-cifar", .batch = 2, .image_size = 8, .depth = 20, .width = 4},
    {.name = "resnet18", .batch = 2, .image_size = 32, .classes = 10, .width = 8},
    {.name = "vgg16", .batch = 2, .image_size = 32, .classes = 4, .width = 8},
    {.name = "lstm-lm", .batch = 2, .depth = 2, .width = 16, .seq_len = 6, .vocab = 16},
    {.name = "gpt", .batch = 2, .depth = 2, .width = 16, .seq_len = 8, .vocab = 16},
};

class OptimalMirror : public ::testing::TestWithParam<ModelOptions> {};

// Keeping the chain's values (candidates and non-mirrored block values, in
// any mix of block modes) mirrors exactly the nodes mirror alone mirrors, and
// no mirrored value is ever kept: the premise of the block costs.
TEST_P(OptimalMirror, CheckpointSetsLeaveTheMirroredNodesAlone) {
  const Graph step =
      build_step_graph(GetParam(), 1, testing::sgd(), UpdateMode::apply, nullptr).value();
  RecomputeOptions alone;
  alone.mirror = true;
  const std::vector<bool> mirrored = mirrored_nodes(step, alone).value();
  ASSERT_GT(std::count(mirrored.begin(), mirrored.end(), true), 0);
  const GraphChain chain = graph_chain(step, roofline_cost(), true);
  for (ValueId c : cut_values(chain.candidates))
    EXPECT_FALSE(mirrored[step.value(c).producer.idx()]);
  for (const auto& values : chain.block_values) {
    for (ValueId v : values) EXPECT_FALSE(mirrored[step.value(v).producer.idx()]) << v.idx();
  }
  std::mt19937 rng(3);
  int schedules = 0;
  for (int trial = 0; trial < 64 && schedules < 8; ++trial) {
    std::vector<BlockMode> modes(chain.blocks.size());
    for (BlockMode& m : modes) m = static_cast<BlockMode>(rng() % 3);
    modes.back() = rng() % 2 ? BlockMode::stored : BlockMode::dropped;
    for (size_t b = modes.size() - 1; b-- > 0;) {
      if (modes[b] == BlockMode::dropped && modes[b + 1] == BlockMode::stored)
        modes[b] = BlockMode::checkpointed;
    }
    ASSERT_TRUE(evaluate_chain(chain.blocks, modes).has_value());
    ++schedules;
    RecomputeOptions options = alone;
    options.keep = chain_keep(chain, modes);
    auto with_keep = mirrored_nodes(step, options);
    ASSERT_TRUE(with_keep.is_ok()) << with_keep.message();
    EXPECT_EQ(*with_keep, mirrored) << "trial " << trial;
  }
  EXPECT_EQ(schedules, 8);
}

struct Outcome {
  size_t arena = 0;
  double seconds = 0;  // predicted recompute seconds, mirror's clones included
};

// CBC's time limit in these tests, in all: a tiny model's program is solved
// (or stopped with its best solution) well within it.
constexpr double kMilpSeconds = 1;

TEST_P(OptimalMirror, FitsAndNeverRecomputesMoreThanSqrtOrBudgetAtTheirArenas) {
  const ModelOptions& model = GetParam();
  const Graph step = build_step_graph(model, 1, testing::sgd(), UpdateMode::apply, nullptr).value();
  const auto backend = make_cpu_backend();
  const ArenaOf arena_of = testing::backend_arena_of(*backend);
  const NodeSeconds cost = roofline_cost();
  const double forward = graph_seconds(step, cost, true);
  auto outcome = [&](const RecomputedGraph& r) {
    return Outcome{arena_of(r.graph).value(), graph_seconds(r.graph, cost, true) - forward};
  };
  for (Recompute strategy : {Recompute::optimal, Recompute::milp}) {
    if (strategy == Recompute::milp && !milp_available()) continue;
    int compared = 0;
    bool refused = false;
    for (Recompute other : {Recompute::sqrt, Recompute::budget}) {
      auto theirs = apply_recompute(step, other, 0, arena_of, true);
      ASSERT_TRUE(theirs.is_ok()) << theirs.message();
      const Outcome them = outcome(*theirs);
      auto ours = apply_recompute_costed(step, strategy, them.arena, arena_of,
                                         RecomputeCost{cost, kMilpSeconds}, true);
      const std::string what = model.name + " " + std::string(name_of(strategy)) +
                               "+mirror at the arena of " + std::string(name_of(other)) +
                               "+mirror";
      // milp refuses graphs with too many droppable nodes (mirrored ones
      // are not among them).
      if (strategy == Recompute::milp && !ours.is_ok() &&
          ours.message().find("at most") != std::string::npos) {
        refused = true;
        break;
      }
      ASSERT_TRUE(ours.is_ok()) << ours.message();
      const Outcome us = outcome(*ours);
      // sqrt+mirror's checkpoints are among both strategies' trials: its
      // arena is always met. budget+mirror's search may reach a plan
      // outside them.
      if (other == Recompute::sqrt) {
        EXPECT_LE(us.arena, them.arena) << what;
      }
      if (us.arena <= them.arena) {
        ++compared;
        EXPECT_LE(us.seconds, them.seconds + 1e-12) << what;
      }
    }
    if (!refused) {
      EXPECT_GE(compared, 1) << model.name << " " << name_of(strategy);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, OptimalMirror, ::testing::ValuesIn(kModels),
                         testing::model_param_name);

using testing::StepCase;
using testing::StepRun;

// `accumulate` micro-batches on the cpu backend with poison mode on.
StepRun run_steps(const ModelOptions& model, int64_t accumulate, Recompute recompute, bool mirror,
                  size_t budget) {
  StepSpec spec = testing::test_spec(model, accumulate);
  spec.recompute = recompute;
  spec.mirror = mirror;
  spec.milp_seconds = kMilpSeconds;
  spec.budget = budget;
  auto program = TrainingProgram::create(spec, 2, true);
  EXPECT_TRUE(program.is_ok()) << program.message();
  return program ? testing::run_step(**program, accumulate, false) : StepRun{};
}

class OptimalMirrorSteps : public ::testing::TestWithParam<StepCase> {};

// Under the smallest arena optimal+mirror reaches (so that it recomputes
// whole blocks as well as cheap ops), which the step then fits.
TEST_P(OptimalMirrorSteps, AreBitIdenticalUnderTheSmallestArena) {
  const StepCase& c = GetParam();
  if (c.recompute == Recompute::milp && !milp_available()) GTEST_SKIP() << "built without CBC";
  const std::string what =
      c.model.name + " " + std::string(name_of(c.recompute)) + "+mirror";
  const StepRun plain = run_steps(c.model, c.accumulate, Recompute::none, false, 0);
  PlanRequest request;
  request.step.model = c.model;
  request.step.accumulate = c.accumulate;
  request.step.optimizer = testing::sgd();
  request.step.recompute = c.recompute;
  request.step.mirror = true;
  request.step.milp_seconds = kMilpSeconds;
  request.step.budget = 1;
  auto refused = plan_training_step(request);
  ASSERT_FALSE(refused.is_ok()) << what;
  const size_t smallest = testing::smallest_arena_in(refused.message());
  ASSERT_GT(smallest, 0u) << refused.message();
  const StepRun run = run_steps(c.model, c.accumulate, c.recompute, true, smallest);
  EXPECT_LE(run.arena, smallest) << what;
  EXPECT_LT(run.arena, plain.arena) << what;
  EXPECT_GT(run.recompute.recomputed_nodes, 0u) << what;
  testing::expect_identical_steps(plain, run, what);
}

const ModelOptions kResNet{.name = "resnet-cifar", .batch = 8, .image_size = 16, .depth = 11};
const ModelOptions kGpt{
    .name = "gpt", .batch = 2, .depth = 2, .width = 16, .seq_len = 8, .vocab = 16};

INSTANTIATE_TEST_SUITE_P(
    Models, OptimalMirrorSteps,
    ::testing::Values(
        // batch norm: clones see the same batch statistics and do not update
        // the running statistics again.
        StepCase{kResNet, 1, Recompute::optimal}, StepCase{kResNet, 1, Recompute::milp},
        // dropout (every clone, the segment's and each reader's, draws the
        // original's mask), layer norm, attention; two micro-batches also run
        // the accumulating step graph.
        StepCase{kGpt, 2, Recompute::optimal}, StepCase{kGpt, 2, Recompute::milp}),
    [](const ::testing::TestParamInfo<StepCase>& info) {
      return testing::model_test_name(info.param.model) + "_" +
             std::string(name_of(info.param.recompute));
    });

// A long skip (as U-Net's) over `n` expensive ops (softmax), each followed
// by a cheap one (relu): the first softmax's output is read again by the
// final add, so no value inside the skip cuts the forward graph. Mirror
// recomputes each relu for its backward readers from the softmax output that
// the softmax's own gradient reads anyway.
Graph long_skip(int n) {
  const std::string type = "f32[64,64]";
  std::string text = "memfit-graph 1\ninput %w " + type + " parameter\n";
  std::string previous = "w";
  for (int i = 0; i < n; ++i) {
    const std::string s = "s" + std::to_string(i), r = "r" + std::to_string(i);
    text += "node " + s + " = softmax(%" + previous + ") {axis=1} -> %" + s + " " + type +
            " activation\n";
    text += "node " + r + " = relu(%" + s + ") -> %" + r + " " + type + " activation\n";
    previous = r;
  }
  text += "node y = add(%" + previous + ", %s0) -> %y " + type + " activation\n";
  text += "node z = softmax(%y) {axis=1} -> %z " + type + " activation\n";
  text += "node loss = reduce_sum(%z) {axes=[0,1] keepdims=false} -> %loss f32[] activation\n";
  text += "output %loss\n";
  Graph g = parse_graph(text).value();
  EXPECT_TRUE(append_gradients(g, g.find_value("loss"), {g.find_value("w")}).is_ok());
  return g;
}

TEST(MilpMirror, ReachesASmallerArenaInALongSkipThanMilpOrMirrorAlone) {
  if (!milp_available()) GTEST_SKIP() << "built without CBC";
  const Graph g = long_skip(8);
  const auto backend = make_cpu_backend();
  const ArenaOf arena_of = testing::backend_arena_of(*backend);
  const NodeSeconds unit = [](const Graph&, const Node&) { return 1.0; };
  RecomputeOptions alone;
  alone.mirror = true;
  const std::vector<bool> mirrored = mirrored_nodes(g, alone).value();
  ASSERT_GT(std::count(mirrored.begin(), mirrored.end(), true), 0);
  // A budget of 1 byte: each returns the smallest arena it found.
  auto smallest = [&](Recompute r, bool mirror) {
    auto result =
        apply_recompute_costed(g, r, 1, arena_of, RecomputeCost{unit, kMilpSeconds}, mirror);
    EXPECT_TRUE(result.is_ok()) << result.message();
    return result ? arena_of(result->graph).value() : 0;
  };
  const size_t milp_mirror = smallest(Recompute::milp, true);
  EXPECT_LT(milp_mirror, smallest(Recompute::milp, false));
  EXPECT_LT(milp_mirror, smallest(Recompute::none, true));
  // Its smallest arena, given as the budget, is met.
  auto fitted = apply_milp(g, milp_mirror, arena_of, unit, kMilpSeconds, true);
  ASSERT_TRUE(fitted.is_ok()) << fitted.message();
  EXPECT_LE(arena_of(fitted->graph).value(), milp_mirror);
}

}  // namespace
}  // namespace memfit
