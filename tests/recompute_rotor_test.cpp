// optimal's multi-level (rotor) schedules (src/passes/recompute_rotor.h): the
// DP equals a search of every schedule of its family on random chains and is
// never worse than the single-level DP; the memory model of a nested segment
// by hand; a merged chain's schedules mean the same on the full chain; on a
// long chain optimal meets recursive's arena with less recomputation; a
// zoo step under the smallest arena, with nested levels, is bit-identical to
// the plain step (poison mode on). Costs are synthetic or roofline.
#include "passes/recompute_rotor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "autodiff/autodiff.h"
#include "cost/cost_model.h"
#include "memfit/plan.h"
#include "test_util.h"
#include "train/training_program.h"

namespace memfit {
namespace {

std::vector<ChainBlock> random_chain(std::mt19937& rng, size_t n, size_t max_size) {
  std::uniform_int_distribution<size_t> size(0, max_size);
  std::uniform_real_distribution<double> time(0.0, 1.0);
  std::vector<ChainBlock> blocks(n);
  for (ChainBlock& b : blocks) {
    b.output_seconds = time(rng);
    b.seconds = b.output_seconds + time(rng);
    b.through_seconds = b.output_seconds + 0.5 * time(rng);
    b.output = &b == &blocks.back() ? 0 : size(rng);
    b.saved = size(rng);
  }
  return blocks;
}

// Every schedule of the family (3^n modes times n^n level lists) that
// evaluate_levels accepts, as (peak, seconds).
std::vector<std::pair<size_t, double>> all_schedules(const std::vector<ChainBlock>& blocks) {
  const size_t n = blocks.size();
  std::vector<BlockMode> modes(n);
  std::vector<int32_t> levels(n);
  std::vector<std::pair<size_t, double>> found;
  const auto mode_codes = static_cast<size_t>(std::pow(3, n));
  const auto level_codes = static_cast<size_t>(std::pow(n, n));
  for (size_t code = 0; code < mode_codes; ++code) {
    size_t c = code;
    for (size_t b = 0; b < n; ++b, c /= 3) modes[b] = static_cast<BlockMode>(c % 3);
    if (!evaluate_chain(blocks, modes)) continue;
    for (size_t lcode = 0; lcode < level_codes; ++lcode) {
      size_t l = lcode;
      for (size_t b = 0; b < n; ++b, l /= n) levels[b] = static_cast<int32_t>(l % n);
      const auto s = evaluate_levels(blocks, modes, levels);
      if (s) found.emplace_back(s->peak, s->seconds);
    }
  }
  return found;
}

TEST(RotorDp, EqualsASearchOfEverySchedule) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<size_t> length(1, 5);
  size_t feasible = 0, infeasible = 0, nested = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const std::vector<ChainBlock> blocks = random_chain(rng, length(rng), 6);
    const auto schedules = all_schedules(blocks);
    size_t all = 0;
    for (const ChainBlock& b : blocks) all += b.saved + b.output;
    for (size_t memory = 0; memory <= all + 1; ++memory) {
      double expected = INFINITY;
      for (const auto& [peak, seconds] : schedules) {
        if (peak <= memory) expected = std::min(expected, seconds);
      }
      const auto dp = solve_levels(blocks, memory);
      ASSERT_EQ(dp.has_value(), std::isfinite(expected))
          << "trial " << trial << " memory " << memory;
      if (!dp) {
        ++infeasible;
        continue;
      }
      ++feasible;
      EXPECT_NEAR(dp->seconds, expected, 1e-9) << "trial " << trial << " memory " << memory;
      const auto check = evaluate_levels(blocks, dp->modes, dp->levels);
      ASSERT_TRUE(check.has_value());
      EXPECT_LE(check->peak, memory);
      EXPECT_NEAR(check->seconds, dp->seconds, 1e-9);
      nested += std::any_of(dp->levels.begin(), dp->levels.end(), [](int32_t l) { return l > 1; });
    }
  }
  EXPECT_GT(feasible, 100u);
  EXPECT_GT(infeasible, 10u);
  EXPECT_GT(nested, 0u);  // schedules two levels deep were among the best
}

TEST(RotorDp, IsNeverWorseThanTheSingleLevelDpAndFitsWhereItCannot) {
  std::mt19937 rng(12);
  std::uniform_int_distribution<size_t> length(2, 24);
  size_t compared = 0, only_nested = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const std::vector<ChainBlock> blocks = random_chain(rng, length(rng), 8);
    size_t all = 0;
    for (const ChainBlock& b : blocks) all += b.saved + b.output;
    for (size_t memory = 0; memory <= all; ++memory) {
      const auto single = solve_chain(blocks, memory);
      const auto multi = solve_levels(blocks, memory);
      if (single) {
        ASSERT_TRUE(multi) << "trial " << trial << " memory " << memory;
        EXPECT_LE(multi->seconds, single->seconds + 1e-9);
        ++compared;
      } else if (multi) {
        ++only_nested;
      }
    }
  }
  EXPECT_GT(compared, 100u);
  EXPECT_GT(only_nested, 10u);
}

TEST(RotorDp, MemoryModelOfANestedSegment) {
  // Four blocks and a tail, all dropped: one segment. saved 2, output 1,
  // seconds 1 (0.25 of it the output), through 0.5.
  std::vector<ChainBlock> blocks(5, ChainBlock{1.0, 0.25, 1, 2, 0.5});
  blocks.back().output = 0;
  using M = BlockMode;
  const std::vector<M> dropped(5, M::dropped);
  // A leaf: everything at once (4 * 3 + 2), each block once.
  const auto whole = evaluate_levels(blocks, dropped, {0, 0, 0, 0, 0});
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->peak, 14u);
  EXPECT_DOUBLE_EQ(whole->seconds, 5.0);
  // c_1 a level-1 checkpoint: blocks 0-1 run through (1.0), the right part
  // 2..4 a leaf holding c_1 (1 + 3 + 3 + 2), then the left part 0..1 a leaf
  // whose c_1 is held (seconds 2 - 0.25).
  const auto split = evaluate_levels(blocks, dropped, {0, 1, 0, 0, 0});
  ASSERT_TRUE(split);
  EXPECT_EQ(split->peak, 9u);
  EXPECT_DOUBLE_EQ(split->seconds, 1.0 + 3.0 + 1.75);
  // And c_0 of level 2 inside the left part: block 0 runs through again
  // (0.5), then block 1 and block 0 are leaves. Peak unchanged (the right
  // part's 9); the left part holds at most 1 + 3.
  const auto deeper = evaluate_levels(blocks, dropped, {2, 1, 0, 0, 0});
  ASSERT_TRUE(deeper);
  EXPECT_EQ(deeper->peak, 9u);
  EXPECT_DOUBLE_EQ(deeper->seconds, 1.0 + 3.0 + 0.5 + 0.75 + 0.75);
  // c_1 and c_3 on one level-1 spine: through 0..3 (2.0), the rightmost leaf
  // (block 4) with c_1 and c_3 held, then the left parts 2..3 and 0..1.
  const auto spine = evaluate_levels(blocks, dropped, {0, 1, 0, 1, 0});
  ASSERT_TRUE(spine);
  EXPECT_EQ(spine->peak, 1u + 6u);
  EXPECT_DOUBLE_EQ(spine->seconds, 2.0 + 1.0 + 1.75 + 1.75);
  // Outside the family: a level skipped, a checkpoint in the rightmost part
  // deeper than its spine, a level on a stored block.
  EXPECT_FALSE(evaluate_levels(blocks, dropped, {0, 2, 0, 0, 0}));
  EXPECT_FALSE(evaluate_levels(blocks, dropped, {0, 1, 0, 2, 0}));
  EXPECT_FALSE(evaluate_levels(blocks, {M::stored, M::dropped, M::dropped, M::dropped, M::dropped},
                               {1, 0, 0, 0, 0}));
}

TEST(RotorDp, AMergedChainsScheduleMeansTheSameOnTheFullChain) {
  std::mt19937 rng(13);
  int checked = 0;
  for (int trial = 0; trial < 30; ++trial) {
    const std::vector<ChainBlock> blocks = random_chain(rng, 40, 8);
    const CoarseChain coarse = coarsen_chain(blocks, 7);
    ASSERT_EQ(coarse.blocks.size(), 7u);
    ASSERT_EQ(coarse.last.back(), blocks.size() - 1);
    size_t all = 0;
    for (const ChainBlock& b : coarse.blocks) all += b.saved + b.output;
    for (size_t memory = all / 8; memory <= all; memory += all / 8 + 1) {
      const auto schedule = solve_levels(coarse.blocks, memory);
      if (!schedule) continue;
      const LevelSchedule full = expand_schedule(coarse, *schedule);
      const auto check = evaluate_levels(blocks, full.modes, full.levels);
      ASSERT_TRUE(check) << "trial " << trial << " memory " << memory;
      EXPECT_EQ(check->peak, schedule->peak);
      EXPECT_NEAR(check->seconds, schedule->seconds, 1e-9);
      ++checked;
    }
  }
  EXPECT_GT(checked, 50);
}

TEST(RotorOptimal, MeetsRecursivesArenaOnALongChainWithLessRecomputation) {
  const Graph g = testing::tanh_chain(48, 4096);
  const auto backend = make_reference_backend();
  const ArenaOf arena_of = testing::backend_arena_of(*backend);
  const NodeSeconds unit = [](const Graph&, const Node&) { return 1.0; };
  const double forward = graph_seconds(g, unit, true);
  auto recursive = apply_recompute(g, Recompute::recursive, 0, arena_of);
  ASSERT_TRUE(recursive.is_ok()) << recursive.message();
  const size_t target = arena_of(recursive->graph).value();
  auto sqrt = apply_recompute(g, Recompute::sqrt, 0, arena_of);
  ASSERT_TRUE(sqrt.is_ok());
  ASSERT_LT(target, arena_of(sqrt->graph).value());
  auto optimal = apply_optimal(g, target, arena_of, unit);
  ASSERT_TRUE(optimal.is_ok()) << optimal.message();
  EXPECT_LE(arena_of(optimal->graph).value(), target);
  EXPECT_GT(optimal->summary.levels, 0u);
  EXPECT_LT(graph_seconds(optimal->graph, unit, true) - forward,
            graph_seconds(recursive->graph, unit, true) - forward);
}

// A tiny ResNet (batch norm) under the smallest arena optimal reaches: a
// nested schedule, bit-identical to the plain step with poison mode on.
TEST(RotorOptimal, NestedStepIsBitIdenticalUnderTheSmallestArena) {
  const ModelOptions model{
      .name = "resnet-cifar", .batch = 4, .image_size = 8, .depth = 29, .width = 2};
  const testing::StepRun plain = testing::run_verified_step(testing::test_spec(model));
  PlanRequest request;
  request.step.model = model;
  request.step.recompute = Recompute::optimal;
  request.step.cost = CostModel::roofline;
  request.step.budget = 1;
  auto refused = plan_training_step(request);
  ASSERT_FALSE(refused.is_ok());
  const size_t smallest = testing::smallest_arena_in(refused.message());
  ASSERT_GT(smallest, 0u) << refused.message();
  StepSpec spec = testing::test_spec(model);
  spec.recompute = Recompute::optimal;
  spec.cost = CostModel::roofline;
  spec.budget = smallest;
  const testing::StepRun nested = testing::run_verified_step(spec);
  EXPECT_LE(nested.arena, smallest);
  EXPECT_GT(nested.recompute.levels, 0u);
  testing::expect_identical_steps(plain, nested, "resnet-cifar optimal, nested");
}

}  // namespace
}  // namespace memfit
