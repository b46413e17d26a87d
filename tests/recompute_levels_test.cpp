// Nested recomputation (the recursive strategy), mirror and the budget error:
// clones per level, the growth of the planned arena of a long chain with the
// number of layers (O(n) without recomputation, O(sqrt n) with sqrt, O(log n)
// with recursive), the mirror rule, and the error that names the smallest
// budget any strategy meets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

#include "autodiff/autodiff.h"
#include "ir/phase.h"
#include "memfit/plan.h"
#include "ops/op_table.h"
#include "ops/typed_graph.h"
#include "passes/recompute.h"
#include "passes/recompute_strategy.h"
#include "test_util.h"
#include "train/training_program.h"

namespace memfit {
namespace {

// The arena the reference backend plans for `graph` after `strategy`.
size_t chain_arena(const Graph& graph, Recompute strategy, RecomputeSummary* summary = nullptr) {
  const auto backend = make_reference_backend();
  const ArenaOf unused = [](const Graph&) -> Result<size_t> { return size_t{0}; };
  auto recomputed = apply_recompute(graph, strategy, 0, unused);
  EXPECT_TRUE(recomputed.is_ok()) << recomputed.message();
  EXPECT_TRUE(verify_graph(recomputed->graph).is_ok());
  if (summary) *summary = recomputed->summary;
  auto prepared = Executable::prepare(std::move(recomputed->graph), *backend);
  EXPECT_TRUE(prepared.is_ok()) << prepared.message();
  return (*prepared)->plan().arena_bytes;
}

TEST(RecomputeLevels, NestedCheckpointsCloneANodeOncePerLevel) {
  // 7 layers: t4 kept (level 0); t2 and t6 at level 1; every other layer is
  // inside a leaf. Recomputing t5..t7 needs t6, made from t4; t1 from w, t3
  // from t2, made from w.
  Graph g = testing::tanh_chain(7, 4);
  RecomputeOptions options;
  options.keep = {g.find_value("t4")};
  options.levels = {{g.find_value("t2"), g.find_value("t6")}};
  RecomputeStats stats;
  auto changed = recompute(g, options, &stats);
  ASSERT_TRUE(changed.is_ok()) << changed.message();
  ASSERT_TRUE(verify_graph(g).is_ok()) << verify_graph(g).message();
  const std::string text = print_graph(g);
  auto clones_of = [&](const std::string& node) {
    int count = 0;
    for (const Node& n : g.nodes()) count += n.name.rfind(node + ".recompute", 0) == 0;
    return count;
  };
  // t5 is made twice: on the way to t6 (the input of a level-1 clone, while
  // the backward pass is in t6's leaf) and again when the backward pass
  // enters t5's leaf. Likewise t1, on the way to t2 and in its own leaf.
  EXPECT_EQ(clones_of("t5"), 2) << text;
  EXPECT_EQ(clones_of("t6"), 1) << text;
  EXPECT_EQ(clones_of("t7"), 1) << text;
  EXPECT_EQ(clones_of("t1"), 2) << text;
  EXPECT_EQ(clones_of("t2"), 1) << text;
  EXPECT_EQ(clones_of("t3"), 1) << text;
  EXPECT_EQ(clones_of("t4"), 0) << text;
  EXPECT_EQ(stats.most_clones, 2u);
  EXPECT_EQ(stats.recomputed_nodes, 8u);
  // No non-forward node reads an original forward value but the kept t4.
  for (const Node& node : g.nodes()) {
    if (node_phase(g, node) == Phase::forward) continue;
    for (ValueId in : node.inputs) {
      const Value& v = g.value(in);
      if (!v.producer.valid() || node_phase(g, g.node(v.producer)) != Phase::forward) continue;
      EXPECT_TRUE(v.name == "t4" || v.name.find(".recompute") != std::string::npos)
          << node.name << " reads " << v.name;
    }
  }
}

TEST(RecomputeLevels, RecursiveCheckpointsFormABalancedTree) {
  std::vector<Cut> candidates;
  for (int i = 0; i < 7; ++i) candidates.push_back({NodeId(i), {ValueId(i)}});
  const NestedCheckpoints nested = recursive_checkpoints(candidates);
  EXPECT_EQ(nested.keep, std::vector<ValueId>{ValueId(3)});
  ASSERT_EQ(nested.levels.size(), 2u);
  EXPECT_EQ(nested.levels[0], (std::vector<ValueId>{ValueId(1), ValueId(5)}));
  EXPECT_EQ(nested.levels[1],
            (std::vector<ValueId>{ValueId(0), ValueId(2), ValueId(4), ValueId(6)}));
  EXPECT_TRUE(recursive_checkpoints({}).keep.empty());
}

// Planned arena of the chain against its length: each layer's output is 64
// KiB, so the activations dominate. Doubling n doubles none's growth, adds
// about sqrt(2) times more for sqrt, and adds at most a few layers' bytes
// for recursive (one more level: one more checkpoint).
TEST(RecomputeLevels, ArenaGrowsLinearlyAsSqrtAndAsLogOfTheChain) {
  constexpr int kWidth = 16384;
  constexpr size_t kLayer = kWidth * sizeof(float);
  std::vector<int> lengths = {32, 64, 128, 256};
  std::vector<size_t> none, sqrt, recursive;
  for (int n : lengths) {
    const Graph g = testing::tanh_chain(n, kWidth);
    none.push_back(chain_arena(g, Recompute::none));
    sqrt.push_back(chain_arena(g, Recompute::sqrt));
    RecomputeSummary summary;
    recursive.push_back(chain_arena(g, Recompute::recursive, &summary));
    EXPECT_EQ(summary.checkpoints, static_cast<size_t>(n));
    EXPECT_EQ(summary.levels, static_cast<size_t>(std::ceil(std::log2(n + 1))) - 1) << n;
  }
  for (size_t i = 0; i + 1 < lengths.size(); ++i) {
    const auto n = static_cast<double>(lengths[i]);
    SCOPED_TRACE("n = " + std::to_string(lengths[i]));
    // none: one layer's output per layer.
    EXPECT_NEAR(static_cast<double>(none[i + 1] - none[i]) / kLayer, n, 2.0);
    // sqrt: grows with sqrt(n) layers (2 sqrt(n) live at most: checkpoints
    // and one segment), far less than n.
    const double sqrt_growth = static_cast<double>(sqrt[i + 1]) - static_cast<double>(sqrt[i]);
    EXPECT_GT(sqrt_growth, 0.2 * std::sqrt(n) * kLayer);
    EXPECT_LT(sqrt_growth, 2.0 * std::sqrt(2 * n) * kLayer);
    // recursive: doubling adds one level, a bounded number of layers.
    const double log_growth =
        static_cast<double>(recursive[i + 1]) - static_cast<double>(recursive[i]);
    EXPECT_LE(log_growth, 3.0 * kLayer);
    EXPECT_LT(recursive[i + 1], sqrt[i + 1]);
  }
  // In all: 8 times the layers, about 8 times none's, sqrt(8) times sqrt's.
  EXPECT_LT(recursive.back(), 20 * kLayer);
  EXPECT_GT(none.back(), 250 * kLayer);
}

// A recurrent chain driven by an input at every step, as an unrolled RNN's
// per-step input projection: t_i = tanh(p_i + t_{i-1}), p_i = tanh(x). The
// p_i depend on the graph input alone, so a recomputation walk reaches each
// one long before the chain that reads it; cloned in the walk's order, a
// whole segment's p_i would be live at once and recursive would grow
// linearly. Cloned in forward order, each p_i lives one step.
// With `layers` > 1, layer l reads layer l - 1 at the same step, as stacked
// RNN layers built step by step: u_i = tanh(t_i + u_{i-1}).
Graph driven_chain(int n, int width, int layers = 1) {
  const std::string type = "f32[" + std::to_string(width) + "]";
  std::string text =
      "memfit-graph 1\ninput %w " + type + " parameter\ninput %x " + type + " input\n";
  std::vector<std::string> previous(static_cast<size_t>(layers), "w");
  for (int i = 1; i <= n; ++i) {
    const std::string k = std::to_string(i);
    text += "node p" + k + " = tanh(%x) -> %p" + k + " " + type + " activation\n";
    std::string below = "p" + k;
    for (size_t l = 0; l < previous.size(); ++l) {
      const std::string lk = "l" + std::to_string(l) + "_" + k;
      text += "node a" + lk + " = add(%" + below + ", %" + previous[l] + ") -> %a" + lk + " " +
              type + " activation\n";
      text += "node t" + lk + " = tanh(%a" + lk + ") -> %t" + lk + " " + type + " activation\n";
      previous[l] = below = "t" + lk;
    }
  }
  text += "node loss = reduce_sum(%" + previous.back() +
          ") {axes=[0] keepdims=false} -> %loss f32[] activation\noutput %loss\n";
  Graph g = parse_graph(text).value();
  EXPECT_TRUE(append_gradients(g, g.find_value("loss"), {g.find_value("w")}).is_ok());
  return g;
}

TEST(RecomputeLevels, RecursiveStaysLogarithmicWithPerStepInputs) {
  constexpr int kWidth = 16384;
  constexpr size_t kLayer = kWidth * sizeof(float);
  const size_t short_chain = chain_arena(driven_chain(64, kWidth), Recompute::recursive);
  const size_t long_chain = chain_arena(driven_chain(256, kWidth), Recompute::recursive);
  const size_t sqrt_long = chain_arena(driven_chain(256, kWidth), Recompute::sqrt);
  // Two more levels: a bounded number of layers, not the 192 more steps.
  EXPECT_LE(static_cast<double>(long_chain) - static_cast<double>(short_chain), 8.0 * kLayer);
  EXPECT_LT(long_chain, sqrt_long);
}

// Two stacked layers: the backward pass of a step first recomputes the lower
// layer's chain alone (the upper layer's state at the step is a checkpoint),
// and the next step's recomputes the upper one, which reads the lower one's
// values. Kept from the first walk, a segment's worth of them would be live
// at once; recomputed again beside their readers, the growth stays log n.
TEST(RecomputeLevels, RecursiveStaysLogarithmicWithStackedLayers) {
  constexpr int kWidth = 16384;
  constexpr size_t kLayer = kWidth * sizeof(float);
  const size_t short_chain = chain_arena(driven_chain(64, kWidth, 2), Recompute::recursive);
  const size_t long_chain = chain_arena(driven_chain(256, kWidth, 2), Recompute::recursive);
  const size_t sqrt_long = chain_arena(driven_chain(256, kWidth, 2), Recompute::sqrt);
  EXPECT_LE(static_cast<double>(long_chain) - static_cast<double>(short_chain), 8.0 * kLayer);
  EXPECT_LT(long_chain, sqrt_long);
}

TEST(RecomputeLevels, MirrorAloneClonesOnlyCheapOpsWithOneForwardReader) {
  const Graph step =
      build_step_graph({.name = "resnet-cifar", .batch = 2, .image_size = 8, .depth = 11}, 1,
                       OptimizerConfig{}, UpdateMode::apply, nullptr)
          .value();
  Graph g = step;
  RecomputeOptions options;
  options.mirror = true;
  options.keep_others = true;
  RecomputeStats stats;
  ASSERT_TRUE(recompute(g, options, &stats).is_ok());
  ASSERT_TRUE(verify_graph(g).is_ok());
  EXPECT_GT(stats.recomputed_nodes, 0u);
  std::vector<int> forward_readers(step.num_values(), 0);
  for (const Node& node : step.nodes()) {
    if (node_phase(step, node) != Phase::forward) continue;
    for (ValueId in : node.inputs) ++forward_readers[in.idx()];
  }
  size_t clones = 0;
  for (const Node& node : g.nodes()) {
    const auto at = node.name.find(".recompute");
    if (at == std::string::npos) continue;
    ++clones;
    EXPECT_TRUE(op_info(node.op).cheap_to_recompute) << node.name;
    // The original's outputs are read by at most one forward node.
    const Node& original = step.node([&] {
      for (size_t n = 0; n < step.num_nodes(); ++n)
        if (step.nodes()[n].name == node.name.substr(0, at)) return NodeId(static_cast<int32_t>(n));
      ADD_FAILURE() << node.name;
      return NodeId(0);
    }());
    int readers = 0;
    for (ValueId out : original.outputs) readers += forward_readers[out.idx()];
    EXPECT_LE(readers, 1) << node.name;
  }
  EXPECT_EQ(clones, stats.recomputed_nodes);
  // Cheap ops are cloned once per backward reader: conv2d never.
  EXPECT_GT(stats.most_clones, 1u);

  // A chain of cheap ops: each reader recomputes at most 4 of them, so every
  // fifth layer stays stored.
  Graph chain = testing::tanh_chain(64, 16);
  RecomputeStats chain_stats;
  ASSERT_TRUE(recompute(chain, options, &chain_stats).is_ok());
  ASSERT_TRUE(verify_graph(chain).is_ok());
  EXPECT_EQ(chain_stats.dropped_values, 64u - 64u / 5);
  EXPECT_LE(chain_stats.recomputed_nodes, 4u * 64u);
  EXPECT_GT(chain_stats.recomputed_nodes, 64u);
}

// With a budget no strategy meets, the error names the smallest arena any
// strategy reaches, with and without mirror, at most the smallest of their
// own arenas, and the flags that reach it; that budget is then met.
TEST(RecomputeLevels, BudgetErrorNamesTheSmallestArenaOfAnyStrategy) {
  PlanRequest request;
  // Activations outweigh the parameters, gradients and momentum, so that the
  // strategies differ.
  request.step.model = {.name = "resnet-cifar", .batch = 4, .image_size = 16, .depth = 20};
  size_t smallest = SIZE_MAX, largest = 0;
  // The strategies the error's search plans: milp is left out (it may take
  // its whole time limit) and optimal does not combine with mirror.
  for (const std::string name : {"none", "sqrt", "budget", "recursive", "optimal"}) {
    for (bool mirror : {false, true}) {
      if (mirror && name == "optimal") continue;
      request.step.recompute = parse_name<Recompute>(name).value();
      request.step.mirror = mirror;
      auto report = plan_training_step(request);
      ASSERT_TRUE(report.is_ok()) << report.message();
      largest = std::max(largest, report->arena_bytes);
      smallest = std::min(smallest, report->arena_bytes);
    }
  }
  // A budget no strategy meets: the error names the smallest arena the
  // search reaches (each strategy aiming at the budget, so optimal may go
  // below its own arena without one) and the flags that reach it.
  request.step.recompute = Recompute::none;
  request.step.mirror = false;
  request.step.budget = smallest / 4;
  auto refused = plan_training_step(request);
  ASSERT_FALSE(refused.is_ok());
  const std::string refusal = refused.message();
  const size_t fits = refusal.find("no strategy fits: the smallest arena any reaches is ");
  ASSERT_NE(fits, std::string::npos) << refusal;
  const std::string with = ", with ", at_least = "; give a --budget of at least ";
  const size_t flags_at = refusal.find(with, fits);
  const size_t least_at = refusal.find(at_least, fits);
  ASSERT_NE(flags_at, std::string::npos) << refusal;
  ASSERT_NE(least_at, std::string::npos) << refusal;
  const std::string best_flags =
      refusal.substr(flags_at + with.size(), least_at - flags_at - with.size());
  // "--recompute NAME[ --mirror][ --swap NAME]", or "--policy auto".
  std::istringstream words(best_flags);
  std::string word, recompute_name, swap_name;
  bool best_mirror = false, best_auto = false;
  while (words >> word) {
    if (word == "--recompute") words >> recompute_name;
    if (word == "--mirror") best_mirror = true;
    if (word == "--swap") words >> swap_name;
    if (word == "--policy") best_auto = words >> word && word == "auto";
  }
  ASSERT_TRUE(best_auto || !recompute_name.empty()) << refusal;
  const size_t best = std::stoull(refusal.substr(least_at + at_least.size()));
  EXPECT_LE(best, smallest);
  // That budget is met: the error of a strategy that misses it names one that
  // fits, and the strategy the refusal named does.
  request.step.budget = best;
  auto named = plan_training_step(request);
  if (!named.is_ok()) {
    EXPECT_NE(named.message().find(" fits in "), std::string::npos) << named.message();
  }
  if (best_auto) {
    request.step.policy = Policy::automatic;
    request.step.recompute.reset();
  } else {
    request.step.recompute = parse_name<Recompute>(recompute_name).value();
    request.step.mirror = best_mirror;
    if (!swap_name.empty()) request.step.swap = parse_name<Swap>(swap_name).value();
  }
  auto met = plan_training_step(request);
  ASSERT_TRUE(met.is_ok()) << best_flags << ": " << met.message();
  EXPECT_LE(met->arena_bytes, best);
  EXPECT_GT(largest, smallest);
}

}  // namespace
}  // namespace memfit
