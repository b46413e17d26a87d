// Recomputation: one training step with each strategy gives the loss,
// gradients, parameters and batch-norm running statistics of the step
// without it, bit for bit, with poison mode on; the rewritten graphs and their
// plans verify; clones run inside the backward pass, once each; candidates
// never cut a residual block; sqrt and budget shrink a deep ResNet's arena.
#include "passes/recompute.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <ostream>
#include <set>

#include "autodiff/autodiff.h"
#include "ir/phase.h"
#include "memfit/plan.h"
#include "ops/op_table.h"
#include "ops/typed_graph.h"
#include "passes/recompute_strategy.h"
#include "test_util.h"
#include "train/data_source.h"
#include "train/training_program.h"

namespace memfit {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

using testing::StepRun;
using Case = testing::ModelCase;

// One optimizer step of `accumulate` micro-batches on the cpu backend with
// poison mode on; the step graph and its plan are verified first.
StepRun one_step(const ModelOptions& model, int64_t accumulate, Recompute recompute) {
  StepSpec spec = testing::test_spec(model, accumulate);
  spec.recompute = recompute;
  return testing::run_verified_step(spec);
}

class StrategiesGiveTheSameStep : public ::testing::TestWithParam<Case> {};

TEST_P(StrategiesGiveTheSameStep, BitForBit) {
  const Case& c = GetParam();
  const StepRun plain = one_step(c.model, c.accumulate, Recompute::none);
  EXPECT_EQ(plain.recompute.recomputed_nodes, 0u);
  size_t sqrt_arena = 0;
  for (Recompute r : {Recompute::sqrt, Recompute::budget}) {
    const std::string what = c.model.name + " --recompute " + std::string(name_of(r));
    const StepRun run = one_step(c.model, c.accumulate, r);
    testing::expect_identical_steps(plain, run, what);
    // The plan `memfit plan` reports is the arena training allocates.
    PlanRequest request{testing::test_spec(c.model, c.accumulate)};
    request.step.recompute = r;
    auto report = plan_training_step(request);
    ASSERT_TRUE(report.is_ok()) << report.message();
    EXPECT_EQ(report->arena_bytes, run.arena) << what;
    EXPECT_EQ(report->recomputed_nodes, run.recompute.recomputed_nodes) << what;
    EXPECT_GT(run.recompute.candidates, 0u) << what;
    if (r == Recompute::sqrt) {
      EXPECT_GT(run.recompute.recomputed_nodes, 0u) << what;
      const size_t n = run.recompute.candidates;
      const auto k = static_cast<size_t>(std::ceil(std::sqrt(static_cast<double>(n))));
      EXPECT_EQ(run.recompute.checkpoints, n / k) << what;
      sqrt_arena = run.arena;
    } else {
      // The search plans none and sqrt too, and takes the smallest arena.
      EXPECT_LE(run.arena, std::min(plain.arena, sqrt_arena)) << what;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, StrategiesGiveTheSameStep,
    ::testing::Values(Case{{.name = "lenet", .batch = 4}, 1},
                      // dropout: a clone must draw the original's mask; two
                      // micro-batches also run the accumulating step graph.
                      Case{{.name = "mlp", .batch = 4}, 2},
                      // batch norm: a clone must see the same batch statistics
                      // and must not update the running statistics again.
                      Case{{.name = "resnet-cifar", .batch = 2, .image_size = 8, .depth = 11}, 1}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return testing::model_test_name(info.param.model);
    });

// A chain of four tanh nodes, whose gradients read their outputs, and its
// backward pass; %t2 is the checkpoint (no byte budget: the plan is given).
TEST(Recompute, ChainClonesEachSegmentJustBeforeItsFirstBackwardReader) {
  auto parsed = parse_graph(R"(memfit-graph 1
input %w f32[4] parameter
node t1 = tanh(%w) -> %t1 f32[4] activation
node t2 = tanh(%t1) -> %t2 f32[4] activation
node t3 = tanh(%t2) -> %t3 f32[4] activation
node t4 = tanh(%t3) -> %t4 f32[4] activation
node loss = reduce_sum(%t4) {axes=[0] keepdims=false} -> %loss f32[] activation
output %loss
)");
  ASSERT_TRUE(parsed.is_ok()) << parsed.message();
  Graph g = std::move(parsed).value();
  ASSERT_TRUE(append_gradients(g, g.find_value("loss"), {g.find_value("w")}).is_ok());
  EXPECT_EQ(checkpoint_candidates(g).size(), 4u);  // %t1 ... %t4: each cuts the chain
  RecomputeStats stats;
  RecomputeOptions options;
  options.keep = {g.find_value("t2")};
  auto changed = recompute(g, options, &stats);
  ASSERT_TRUE(changed.is_ok()) << changed.message();
  ASSERT_TRUE(verify_graph(g).is_ok()) << verify_graph(g).message();
  const std::string text = print_graph(g);
  // %t3 and %t4 are recomputed from %t2 before the gradient of t4; %t1 from
  // %w only before the gradient of t1, after those of t4, t3 and t2.
  EXPECT_EQ(stats.recomputed_nodes, 3u) << text;
  EXPECT_EQ(stats.dropped_values, 3u) << text;
  auto position = [&](const std::string& node) {
    for (size_t n = 0; n < g.num_nodes(); ++n) {
      if (g.nodes()[n].name == node) return static_cast<int>(n);
    }
    ADD_FAILURE() << "no node " << node << " in\n" << text;
    return -1;
  };
  // The first node that reads `value`.
  auto first_reader = [&](const std::string& value) {
    const ValueId id = g.find_value(value);
    for (size_t n = 0; n < g.num_nodes(); ++n) {
      const auto& in = g.nodes()[n].inputs;
      if (std::find(in.begin(), in.end(), id) != in.end()) return static_cast<int>(n);
    }
    ADD_FAILURE() << "nothing reads " << value << " in\n" << text;
    return -1;
  };
  EXPECT_EQ(g.find_value("t2.recompute").valid(), false) << text;
  const int t3 = position("t3.recompute"), t4 = position("t4.recompute");
  EXPECT_GT(t3, position("loss")) << text;
  EXPECT_EQ(t4, t3 + 1) << text;
  EXPECT_EQ(first_reader("t4.recompute"), t4 + 1) << text;
  const int t1 = position("t1.recompute");
  EXPECT_EQ(first_reader("t1.recompute"), t1 + 1) << text;
  EXPECT_GT(t1, first_reader("t2")) << text;
  // The originals now die in the forward pass: only forward nodes read them.
  for (const char* dropped : {"t1", "t3", "t4"}) {
    const ValueId id = g.find_value(dropped);
    for (const Node& node : g.nodes()) {
      if (std::find(node.inputs.begin(), node.inputs.end(), id) == node.inputs.end()) continue;
      EXPECT_EQ(node_phase(g, node), Phase::forward) << node.name << " reads %" << dropped;
    }
  }
}

// The step graph of resnet-cifar at depth 11, with its state initialized.
struct ResNetStep {
  ModelOptions model{.name = "resnet-cifar", .batch = 2, .image_size = 8, .depth = 11};
  Graph graph;
  StateStore initial;
};

ResNetStep resnet_step() {
  ResNetStep s;
  s.graph = build_step_graph(s.model, 1, testing::sgd(), UpdateMode::apply, nullptr).value();
  auto program = TrainingProgram::create(testing::test_spec(s.model), 2).value();
  program->init_state(s.initial, 7);
  return s;
}

// Runs `graph` (a step graph of `s.model`) once with poison mode on.
StateStore run_graph(const ResNetStep& s, Graph graph, float* loss) {
  const auto backend = make_cpu_backend();
  auto exe = Executable::compile(std::move(graph), *backend, ExecOptions{.share = true, .poison = true});
  EXPECT_TRUE(exe.is_ok()) << exe.message();
  StateStore state = s.initial;
  if (!exe) return state;
  EXPECT_TRUE(verify_plan((*exe)->graph(), (*exe)->sizes(), (*exe)->plan()).is_ok());
  const Model model = build_model(s.model, true).value();
  auto data = synthetic_source(DataKind::images, model, s.model.batch, s.model.batch, 11).value();
  Batch batch = Batch::for_model(model);
  std::vector<int64_t> examples(static_cast<size_t>(s.model.batch));
  std::iota(examples.begin(), examples.end(), 0);
  EXPECT_TRUE(data->fill(false, examples, batch).is_ok());
  auto result = (*exe)->run(state, batch.feeds(), StepContext{3, 0, 0, 1.0f});
  EXPECT_TRUE(result.is_ok()) << result.message();
  if (result) *loss = result->outputs.at("loss")[0];
  return state;
}

TEST(Recompute, KeepingNoActivationReplaysTheForwardPassExactly) {
  const ResNetStep s = resnet_step();
  float plain_loss = 0;
  const StateStore plain = run_graph(s, s.graph, &plain_loss);
  size_t forward_nodes = 0;
  for (const Node& node : s.graph.nodes())
    forward_nodes += node_phase(s.graph, node) == Phase::forward;

  // Nothing kept: every activation the backward pass reads is recomputed from
  // the graph inputs. Every candidate kept: only the insides of blocks are.
  for (bool keep_candidates : {false, true}) {
    Graph g = s.graph;
    RecomputeOptions options;
    if (keep_candidates) options.keep = cut_values(checkpoint_candidates(g));
    RecomputeStats stats;
    auto changed = recompute(g, options, &stats);
    ASSERT_TRUE(changed.is_ok()) << changed.message();
    EXPECT_TRUE(*changed);
    ASSERT_TRUE(verify_graph(g).is_ok()) << verify_graph(g).message();
    EXPECT_GT(stats.recomputed_nodes, 0u);
    EXPECT_LE(stats.recomputed_nodes, forward_nodes);  // each forward node at most once
    EXPECT_EQ(g.num_nodes(), s.graph.num_nodes() + stats.recomputed_nodes);
    float loss = 0;
    const StateStore state = run_graph(s, std::move(g), &loss);
    EXPECT_EQ(testing::as_word(loss), testing::as_word(plain_loss));
    size_t running = 0;
    for (const auto& [name, data] : plain.tensors()) {
      const std::vector<float>& other = state.tensors().at(name);
      EXPECT_TRUE(
          std::equal(data.begin(), data.end(), other.begin(), other.end(),
                     [](float a, float b) { return testing::as_word(a) == testing::as_word(b); }))
          << name;
      // The running statistics moved once, as without recomputation.
      if (name.find("running") == std::string::npos) continue;
      ++running;
      EXPECT_NE(data, s.initial.tensors().at(name)) << name;
    }
    EXPECT_EQ(running, 20u);  // 3 blocks of 3 norms and the final one, mean and variance each
  }
}

TEST(Recompute, ClonesRunInsideTheBackwardPassAndFeedIt) {
  const ResNetStep s = resnet_step();
  Graph g = s.graph;
  ASSERT_TRUE(recompute(g, RecomputeOptions{}).is_ok());
  std::set<std::string> original_nodes;
  for (const Node& node : s.graph.nodes()) original_nodes.insert(node.name);
  size_t first_backward = g.num_nodes();
  for (size_t n = 0; n < g.num_nodes(); ++n) {
    const Node& node = g.nodes()[n];
    const bool clone = ends_with(node.name, ".recompute");
    EXPECT_TRUE(clone || original_nodes.count(node.name)) << node.name;  // none cloned twice
    if (node_phase(g, node) != Phase::forward) first_backward = std::min(first_backward, n);
    if (clone) {
      EXPECT_GT(n, first_backward) << node.name;
      // Clones do not update state: no update names a clone's output.
      for (const StateUpdate& u : g.updates())
        EXPECT_NE(g.value(u.next).producer.index, static_cast<int32_t>(n));
      continue;
    }
    // With nothing kept, a backward or update node reads graph inputs,
    // gradients and clones, never an original forward value, but a batch
    // norm's saved statistics (always_kept).
    if (node_phase(g, node) == Phase::forward) continue;
    for (ValueId in : node.inputs) {
      const Value& v = g.value(in);
      if (!v.producer.valid() || node_phase(g, g.node(v.producer)) != Phase::forward) continue;
      const Node& producer = g.node(v.producer);
      const auto slot = std::find(producer.outputs.begin(), producer.outputs.end(), in);
      if (always_kept(producer, static_cast<size_t>(slot - producer.outputs.begin()))) continue;
      EXPECT_TRUE(ends_with(producer.name, ".recompute")) << node.name << " reads " << v.name;
    }
  }
}

TEST(Recompute, CandidatesNeverCutAResidualBlock) {
  // resnet-cifar at depth 20: 2 blocks per stage. The cuts are the stem conv,
  // each block's output (its add), the pre-activation that feeds a stage's
  // projection shortcut, and the head's chain; nothing else inside a block.
  const Graph g =
      build_step_graph({.name = "resnet-cifar", .batch = 2, .image_size = 8, .depth = 20}, 1,
                       testing::sgd(), UpdateMode::apply, nullptr)
          .value();
  const std::vector<Cut> cuts = checkpoint_candidates(g);
  const std::vector<ValueId> candidates = cut_values(cuts);
  ASSERT_EQ(candidates.size(), cuts.size());  // single values only
  size_t adds = 0;
  for (ValueId v : candidates) {
    const Node& producer = g.node(g.value(v).producer);
    EXPECT_EQ(node_phase(g, producer), Phase::forward);
    adds += producer.op == OpKind::add;
    for (const char* inside : {".conv1", ".conv2", ".conv3", ".bn2", ".bn3", ".shortcut"}) {
      EXPECT_EQ(producer.name.find(inside), std::string::npos) << producer.name;
    }
  }
  EXPECT_EQ(adds, 6u);
  // Increasing forward order.
  for (size_t i = 1; i < candidates.size(); ++i) {
    EXPECT_LT(g.value(candidates[i - 1]).producer, g.value(candidates[i]).producer);
  }
  // sqrt: every ceil(sqrt(n))-th.
  const std::vector<ValueId> kept = sqrt_checkpoints(cuts);
  const auto k = static_cast<size_t>(std::ceil(std::sqrt(static_cast<double>(candidates.size()))));
  ASSERT_EQ(kept.size(), candidates.size() / k);
  for (size_t i = 0; i < kept.size(); ++i) EXPECT_EQ(kept[i], candidates[(i + 1) * k - 1]);
}

TEST(Recompute, GreedyKeepsACandidateWhenItsSegmentPassesTheBudget) {
  const Graph g =
      build_step_graph({.name = "lenet", .batch = 4}, 1, testing::sgd(), UpdateMode::apply, nullptr)
          .value();
  const std::vector<Cut> cuts = checkpoint_candidates(g);
  const std::vector<ValueId> candidates = cut_values(cuts);
  // Budget 0: every candidate ends a segment; a budget over the whole forward
  // pass keeps none, and the one segment holds every forward byte.
  EXPECT_EQ(greedy_checkpoints(g, cuts, 0).checkpoints, candidates);
  const GreedyCheckpoints none = greedy_checkpoints(g, cuts, size_t{1} << 40);
  EXPECT_TRUE(none.checkpoints.empty());
  EXPECT_EQ(none.kept_bytes, 0u);
  size_t forward_bytes = 0;
  for (const Node& node : g.nodes()) {
    if (node_phase(g, node) != Phase::forward) continue;
    for (ValueId out : node.outputs) forward_bytes += g.value(out).bytes();
  }
  EXPECT_EQ(none.largest_segment, forward_bytes);
  // In between, segments never exceed the budget by more than one node's outputs.
  const GreedyCheckpoints some = greedy_checkpoints(g, cuts, forward_bytes / 3);
  EXPECT_GE(some.checkpoints.size(), 1u);
  EXPECT_LT(some.checkpoints.size(), candidates.size());
}

TEST(Recompute, SqrtAndBudgetShrinkTheArenaOfADeepResNet) {
  PlanRequest request;
  request.step.model = {.name = "resnet-cifar", .batch = 4, .image_size = 16, .depth = 56};
  auto plain = plan_training_step(request);
  ASSERT_TRUE(plain.is_ok()) << plain.message();
  request.step.recompute = Recompute::sqrt;
  auto sqrt = plan_training_step(request);
  ASSERT_TRUE(sqrt.is_ok()) << sqrt.message();
  EXPECT_LT(sqrt->arena_bytes, plain->arena_bytes);
  EXPECT_GT(sqrt->recomputed_nodes, 0u);
  EXPECT_EQ(sqrt->num_nodes, plain->num_nodes + sqrt->recomputed_nodes);
  request.step.recompute = Recompute::budget;
  auto budget = plan_training_step(request);
  ASSERT_TRUE(budget.is_ok()) << budget.message();
  EXPECT_LT(budget->arena_bytes, plain->arena_bytes);

  // Under a memory budget, the least recomputation that fits: the plain plan
  // when it fits; a recomputing one when only that fits.
  request.step.budget = plain->arena_bytes;
  auto roomy = plan_training_step(request);
  ASSERT_TRUE(roomy.is_ok()) << roomy.message();
  EXPECT_EQ(roomy->recomputed_nodes, 0u);
  request.step.budget = budget->arena_bytes;
  auto tight = plan_training_step(request);
  ASSERT_TRUE(tight.is_ok()) << tight.message();
  EXPECT_LE(tight->arena_bytes, request.step.budget);
  EXPECT_GT(tight->recomputed_nodes, 0u);
  // Too tight: the error names the smallest arena any strategy reaches, at
  // most the budget strategy's (recompute_levels_test checks it is the least).
  request.step.budget = 1024;
  auto refused = plan_training_step(request);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.message().find("no strategy fits"), std::string::npos)
      << refused.message();
}

TEST(Recompute, RefusesCheckpointsThatAreNotForwardValues) {
  Graph g =
      build_step_graph({.name = "mlp", .batch = 4}, 1, testing::sgd(), UpdateMode::apply, nullptr)
          .value();
  RecomputeOptions options;
  options.keep = {g.find_value("images")};
  auto refused = recompute(g, options);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.message().find("'images' is not an output of a forward node"),
            std::string::npos)
      << refused.message();
}

TEST(Recompute, StrategyNames) {
  for (const std::string& name : names_of<Recompute>()) {
    auto parsed = parse_name<Recompute>(name);
    ASSERT_TRUE(parsed.is_ok());
    EXPECT_EQ(name_of(*parsed), name);
  }
  auto bad = parse_name<Recompute>("log");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("none, sqrt, budget, recursive, optimal or milp"),
            std::string::npos);
}

// A recomputed batch norm normalizes with the statistics its original saved
// (recompute_form): on both backends its y has the original's bits, at shapes
// small and as large as resnet-cifar's (where oneDNN takes its vectorized paths).
TEST(Recompute, BatchNormCloneGivesTheOriginalsBits) {
  for (const Shape& x : {Shape{2, 3, 4, 5}, Shape{3, 7}, Shape{8, 16, 8, 8}, Shape{16, 64, 16, 16},
                         Shape{4, 256, 8, 8}, Shape{2, 8, 4, 4, 4}}) {
    Graph g;
    const TensorType c{{x[1]}, DType::f32};
    std::vector<ValueId> in = {g.add_input("in0", TensorType{x, DType::f32}, Role::input)};
    for (int i = 1; i < 5; ++i) in.push_back(g.add_input("in" + std::to_string(i), c, Role::input));
    const NodeId bn = add_node(g, OpKind::batch_norm, in, BatchNormAttrs{}, "bn").value();
    const Node form = recompute_form(g.node(bn));
    EXPECT_EQ(form.op, OpKind::batch_norm_inference);
    const NodeId clone = add_node(g, form.op, form.inputs, form.attrs, "bn.recompute").value();
    g.mark_output(g.node(bn).outputs[0]);
    g.mark_output(g.node(clone).outputs[0]);
    std::vector<testing::Words> data;
    for (size_t i = 0; i < in.size(); ++i) {
      std::vector<float> v = testing::random_normal(g.value(in[i]).elements(), 40 + i);
      for (float& f : v) f = i == 4 ? std::abs(f) + 0.5f : 3 * f + (i == 0 ? 1.5f : 0);
      testing::Words w;
      for (float f : v) w.push_back(testing::as_word(f));
      data.push_back(std::move(w));
    }
    for (const auto& backend : {make_reference_backend(), make_cpu_backend(2)}) {
      auto exe = Executable::compile(g, *backend, ExecOptions{.poison = true});
      ASSERT_TRUE(exe.is_ok()) << exe.message();
      const auto out = testing::run_outputs(**exe, data);
      ASSERT_EQ(out[0].size(), out[1].size());
      size_t differ = 0;
      for (size_t i = 0; i < out[0].size(); ++i) {
        differ += testing::as_word(out[0][i]) != testing::as_word(out[1][i]);
      }
      EXPECT_EQ(differ, 0u) << backend->name() << " " << shape_string(x);
    }
  }
}

// In a step graph, every clone of a batch norm is a batch_norm_inference that
// reads its original's saved mean and var, and updates no running statistics.
TEST(Recompute, BatchNormClonesReadTheSavedStatistics) {
  Graph g = build_step_graph({.name = "resnet-cifar", .batch = 2, .image_size = 8, .depth = 20}, 1,
                             testing::sgd(), UpdateMode::apply, nullptr)
                .value();
  RecomputeOptions options;
  options.keep = sqrt_checkpoints(checkpoint_candidates(g));
  RecomputeStats stats;
  ASSERT_TRUE(recompute(g, options, &stats).value());
  size_t clones = 0;
  for (const Node& node : g.nodes()) {
    if (node.name.find(".recompute") == std::string::npos) continue;
    EXPECT_NE(node.op, OpKind::batch_norm) << node.name;
    if (node.op != OpKind::batch_norm_inference) continue;
    ++clones;
    ASSERT_EQ(node.outputs.size(), 1u);
    const Node& original = g.node(g.value(node.inputs[3]).producer);
    EXPECT_EQ(original.op, OpKind::batch_norm) << node.name;
    EXPECT_EQ(node.inputs[3], original.outputs[1]);
    EXPECT_EQ(node.inputs[4], original.outputs[2]);
    EXPECT_EQ(node.inputs[1], original.inputs[1]);  // gamma
  }
  EXPECT_GT(clones, 0u);
  EXPECT_TRUE(verify_graph(g).is_ok());
}

}  // namespace
}  // namespace memfit
