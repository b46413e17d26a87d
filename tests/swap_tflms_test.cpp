// TFLMS swapping (--swap tflms): one training step with its main settings
// gives the step without swapping bit for bit, poison mode on, for every zoo
// model at a tiny size; on small hand-made graphs, n_tensors limits the count,
// lb and ub bound each swap-in's distance to its consumer, chain_rule triggers
// at the gradient of the op lb hops downstream, fuse shares swap-ins, and a
// branch swap inside the forward pass plans, verifies and computes the same.
#include "passes/swap_tflms.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <ostream>

#include "memfit/plan.h"
#include "memory/planner.h"
#include "ops/typed_graph.h"
#include "test_util.h"
#include "passes/swap_policy.h"
#include "train/training_program.h"

namespace memfit {
namespace {

using testing::StepRun;

// One optimizer step on the cpu backend, poison mode on, after verifying the
// step graph and its plan.
StepRun one_step(const ModelOptions& model, Swap swap, const TflmsOptions& tflms) {
  StepSpec spec = testing::test_spec(model);
  spec.swap = swap;
  spec.tflms = tflms;
  return testing::run_verified_step(spec);
}


class TflmsGivesTheSameStep : public ::testing::TestWithParam<ModelOptions> {};

TEST_P(TflmsGivesTheSameStep, BitForBit) {
  const ModelOptions& model = GetParam();
  const StepRun plain = one_step(model, Swap::none, {});
  struct Variant {
    std::string name;
    TflmsOptions options;
  };
  TflmsOptions fused, branches, direct;
  fused.fuse = true;
  branches.branches = true;
  direct.trigger = TflmsTrigger::direct_order;
  direct.lb = 3;
  for (const Variant& v : {Variant{"defaults (not fused)", {}}, Variant{"fused", fused},
                           Variant{"branches", branches}, Variant{"direct_order lb 3", direct}}) {
    const std::string what = model.name + " tflms " + v.name;
    const StepRun run = one_step(model, Swap::tflms, v.options);
    testing::expect_identical_steps(plain, run, what);
    EXPECT_GT(run.swap.swapped_values, 0u) << what;
    EXPECT_GE(run.swap.swap_ins, run.swap.swapped_values) << what;
    if (v.options.branches && (model.name == "unet3d" || model.name.starts_with("resnet"))) {
      EXPECT_GT(run.swap.branch_swaps, 0u) << what;  // skip connections, residual inputs
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, TflmsGivesTheSameStep, ::testing::ValuesIn(testing::tiny_zoo()),
                         testing::model_param_name);

// A chain a -> b -> c -> d and its backward, named as autodiff names them;
// two extra backward nodes put ga three nodes after b's gradient. Positions:
// a 0, b 1, c 2, d 3, then S = 4 (d.grad), c.grad 5, b.grad 6, gb2 7, gb3 8,
// a.grad 9. %a, %b, %c are candidates; %d is read first by S (no trigger
// fits). Every tensor f32[64,64]: 16 KiB.
constexpr std::string_view kChain = R"(memfit-graph 1
input %x f32[64,64] input
node a = tanh(%x) -> %a f32[64,64] activation
node b = tanh(%a) -> %b f32[64,64] activation
node c = tanh(%b) -> %c f32[64,64] activation
node d = tanh(%c) -> %d f32[64,64] activation
node d.grad.tanh_grad = tanh_grad(%d, %d) -> %gd f32[64,64] gradient
node c.grad.tanh_grad = tanh_grad(%c, %gd) -> %gc f32[64,64] gradient
node b.grad.tanh_grad = tanh_grad(%b, %gc) -> %gb f32[64,64] gradient
node gb2 = add(%gb, %gb) -> %gb2 f32[64,64] gradient
node gb3 = add(%gb2, %gb2) -> %gb3 f32[64,64] gradient
node a.grad.tanh_grad = tanh_grad(%a, %gb3) -> %ga f32[64,64] gradient
output %ga
)";

struct Placed {
  std::vector<std::string> values;    // swapped, in producer order
  std::vector<std::string> triggers;  // per swap-in, its trigger's name
  std::vector<int> distances;         // per swap-in, by value: its distance to its reader
  TflmsChoice choice;
  Graph graph;  // rewritten
};

bool is_copy(const Node& node) {
  return node.op == OpKind::to_host || node.op == OpKind::swap_wait || node.op == OpKind::to_device;
}

Placed place(std::string_view text, const TflmsOptions& options) {
  Placed placed;
  placed.graph = parse_graph(text).value();
  const Graph original = placed.graph;
  const std::vector<size_t> bytes = plain_sizes(original).value_bytes;
  placed.choice = tflms_placements(original, bytes, options);
  SwapOptions swap_options;
  swap_options.value_bytes = bytes;
  swap_options.node_seconds.assign(original.num_nodes(), 1.0);
  swap_options.link_bytes_per_second = 16384.0;  // one node per copy
  for (const TflmsSwap& s : placed.choice.swaps) {
    placed.values.push_back(original.value(s.placement.value).name);
    for (int32_t t : s.triggers) placed.triggers.push_back(original.nodes()[t].name);
    swap_options.placements.push_back(s.placement);
  }
  const Result<bool> changed = swap(placed.graph, swap_options);
  EXPECT_TRUE(changed.is_ok()) << changed.message();
  EXPECT_TRUE(verify_graph(placed.graph).is_ok());
  // Distance: the nodes of the input graph after the to_device, up to and
  // including its (first) reader; listed by value in producer order.
  const auto& nodes = placed.graph.nodes();
  std::map<std::string, std::vector<int>> by_value;
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (nodes[n].op != OpKind::to_device) continue;
    int distance = 0;
    for (size_t m = n + 1; m < nodes.size(); ++m) {
      if (!is_copy(nodes[m])) ++distance;
      const auto& in = nodes[m].inputs;
      if (std::find(in.begin(), in.end(), nodes[n].outputs[0]) != in.end()) break;
    }
    const ValueId h = nodes[n].inputs[0];
    const Node& out = placed.graph.node(placed.graph.value(h).producer);
    by_value[placed.graph.value(out.inputs[0]).name].push_back(distance);
  }
  for (const std::string& v : placed.values) {
    for (int d : by_value[v]) placed.distances.push_back(d);
  }
  return placed;
}

using Names = std::vector<std::string>;

TEST(TflmsPlacement, DirectOrderTriggersExactlyLbBeforeTheConsumer) {
  TflmsOptions options;
  options.trigger = TflmsTrigger::direct_order;
  const Placed one = place(kChain, options);
  EXPECT_EQ(one.values, (Names{"a", "b", "c"}));
  EXPECT_EQ(one.distances, (std::vector<int>{1, 1, 1}));
  EXPECT_EQ(one.choice.candidates, 4u);
  EXPECT_EQ(one.choice.skipped, 1u);  // %d: its reader is S
  options.lb = 2;
  const Placed two = place(kChain, options);
  // %c's reader (5) minus 2 is before S: no valid trigger.
  EXPECT_EQ(two.values, (Names{"a", "b"}));
  EXPECT_EQ(two.distances, (std::vector<int>{2, 2}));
  options.lb = 3;
  options.ub = 3;
  const Placed three = place(kChain, options);
  EXPECT_EQ(three.values, (Names{"a"}));
  EXPECT_EQ(three.triggers, (Names{"b.grad.tanh_grad"}));
  EXPECT_EQ(three.distances, (std::vector<int>{3}));
}

TEST(TflmsPlacement, ChainRuleTriggersAtTheGradientOfTheOpLbHopsDownstream) {
  TflmsOptions options;  // chain_rule, lb 1
  const Placed one = place(kChain, options);
  // %a: b is one hop down, its gradient 3 nodes before a.grad; %b: c; %c: d.
  EXPECT_EQ(one.values, (Names{"a", "b", "c"}));
  EXPECT_EQ(one.triggers, (Names{"b.grad.tanh_grad", "c.grad.tanh_grad", "d.grad.tanh_grad"}));
  EXPECT_EQ(one.distances, (std::vector<int>{3, 1, 1}));
  EXPECT_EQ(one.choice.fallbacks, 0u);
  options.lb = 2;
  const Placed two = place(kChain, options);
  // %a: c is two hops down; %b: d; %c: no forward op two hops down, and
  // direct order finds no trigger either (5 - 2 is before S).
  EXPECT_EQ(two.values, (Names{"a", "b"}));
  EXPECT_EQ(two.triggers, (Names{"c.grad.tanh_grad", "d.grad.tanh_grad"}));
  EXPECT_EQ(two.distances, (std::vector<int>{4, 2}));
  // ub 2 rules out b.grad for %a (distance 3): direct order, one fallback.
  options.lb = 1;
  options.ub = 2;
  const Placed bounded = place(kChain, options);
  EXPECT_EQ(bounded.triggers, (Names{"gb3", "c.grad.tanh_grad", "d.grad.tanh_grad"}));
  EXPECT_EQ(bounded.distances, (std::vector<int>{1, 1, 1}));
  EXPECT_EQ(bounded.choice.fallbacks, 1u);
}

TEST(TflmsPlacement, NTensorsSwapsOnlyTheFirstInProducerOrder) {
  TflmsOptions options;
  const Names first = {"a", "b"};
  for (int64_t n : {0, 1, 2}) {
    options.n_tensors = n;
    const Placed placed = place(kChain, options);
    EXPECT_EQ(placed.values, Names(first.begin(), first.begin() + n));
  }
}

// %a is read by two backward nodes four apart; b.grad peaks in between.
constexpr std::string_view kTwoReaders = R"(memfit-graph 1
input %x f32[64,64] input
node a = tanh(%x) -> %a f32[64,64] activation
node b = tanh(%a) -> %b f32[64,64] activation
node c = tanh(%b) -> %c f32[64,64] activation
node c.grad.tanh_grad = tanh_grad(%c, %c) -> %gc f32[64,64] gradient
node u = mul(%a, %gc) -> %u f32[64,64] gradient
node b.grad.tanh_grad = tanh_grad(%b, %u) -> %gb f32[64,64] gradient
node v = add(%gb, %u) -> %v f32[64,64] gradient
node w = tanh(%v) -> %w f32[64,64] gradient
node a.grad.tanh_grad = tanh_grad(%a, %w) -> %ga f32[64,64] gradient
output %ga
)";

TEST(TflmsPlacement, FuseSharesOneSwapInAndNotFusingNeedsNoMoreMemory) {
  TflmsOptions options;
  options.trigger = TflmsTrigger::direct_order;
  const Placed apart = place(kTwoReaders, options);
  options.fuse = true;
  const Placed fused = place(kTwoReaders, options);
  auto count = [](const Graph& g, OpKind op) {
    return std::count_if(g.nodes().begin(), g.nodes().end(),
                         [&](const Node& n) { return n.op == op; });
  };
  // %a: two swap-ins apart, one fused; %b one either way.
  EXPECT_EQ(count(apart.graph, OpKind::to_device), 3);
  EXPECT_EQ(count(fused.graph, OpKind::to_device), 2);
  PlanOptions plan_options;
  plan_options.inplace = false;
  const MemoryPlan apart_plan =
      plan_memory(apart.graph, plain_sizes(apart.graph), plan_options).value();
  const MemoryPlan fused_plan =
      plan_memory(fused.graph, plain_sizes(fused.graph), plan_options).value();
  EXPECT_TRUE(verify_plan(apart.graph, plain_sizes(apart.graph), apart_plan).is_ok());
  EXPECT_TRUE(verify_plan(fused.graph, plain_sizes(fused.graph), fused_plan).is_ok());
  // Fused, %a's copy stays through b.grad, v and w.
  EXPECT_LT(apart_plan.lower_bound_bytes, fused_plan.lower_bound_bytes);
  EXPECT_LE(apart_plan.arena_bytes, fused_plan.arena_bytes);
  // ub 2: a.grad (8) is 5 after the first reader's trigger (3): its own swap-in.
  options.ub = 2;
  const Placed near = place(kTwoReaders, options);
  EXPECT_EQ(count(near.graph, OpKind::to_device), 3);
}

// A skip connection inside the forward pass: s reads %a three nodes after b.
constexpr std::string_view kSkip = R"(memfit-graph 1
input %x f32[64,64] input
node a = tanh(%x) -> %a f32[64,64] activation
node b = tanh(%a) -> %b f32[64,64] activation
node c = tanh(%b) -> %c f32[64,64] activation
node d = tanh(%c) -> %d f32[64,64] activation
node s = add(%a, %d) -> %s f32[64,64] activation
node s.grad.tanh_grad = tanh_grad(%s, %s) -> %g f32[64,64] gradient
output %g
)";

TEST(TflmsPlacement, BranchSwapInsideTheForwardPassPlansAndComputesTheSame) {
  TflmsOptions options;
  options.branches = true;
  const Placed placed = place(kSkip, options);
  ASSERT_EQ(placed.values, (Names{"a"}));
  EXPECT_TRUE(placed.choice.swaps[0].branch);
  EXPECT_EQ(placed.triggers, (Names{"d"}));
  const auto& nodes = placed.graph.nodes();
  std::vector<std::string> names;
  for (const Node& n : nodes) {
    if (!is_copy(n) || n.op != OpKind::swap_wait) names.push_back(n.name);
  }
  EXPECT_EQ(names,
            (Names{"a", "b", "a.to_host", "c", "d", "a.to_device", "s", "s.grad.tanh_grad"}));
  const auto backend = make_cpu_backend();
  std::vector<float> x(64 * 64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 97) / 50.0f - 1.0f;
  auto run = [&](const Graph& graph) {
    auto exe = Executable::compile(graph, *backend, ExecOptions{.share = true, .poison = true}).value();
    EXPECT_TRUE(verify_plan(exe->graph(), exe->sizes(), exe->plan()).is_ok());
    StateStore state;
    auto result = exe->run(state, Feeds{{"x", x.data()}}, StepContext{});
    EXPECT_TRUE(result.is_ok()) << result.message();
    return result ? result->outputs.at("g") : std::vector<float>{};
  };
  const std::vector<float> plain = run(parse_graph(kSkip).value());
  const std::vector<float> swapped = run(placed.graph);
  ASSERT_EQ(plain.size(), swapped.size());
  EXPECT_EQ(std::memcmp(plain.data(), swapped.data(), plain.size() * sizeof(float)), 0);
  // A threshold of 3: b and s are 3 apart, not more.
  options.branch_threshold = 3;
  EXPECT_TRUE(place(kSkip, options).values.empty());
}

TEST(TflmsPlan, KnobsNeedTflmsAndSensibleBounds) {
  PlanRequest request;
  request.step.model = {.name = "resnet-cifar", .batch = 2, .image_size = 8, .depth = 11};
  request.step.tflms.lb = 2;
  request.step.swap = Swap::budget;
  Result<PlanReport> refused = plan_training_step(request);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.message().find("apply only to --swap tflms"), std::string::npos);
  request.step.swap = Swap::tflms;
  request.step.tflms.ub = 1;
  refused = plan_training_step(request);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.message().find("--swap-ub (1) must be at least --swap-lb (2)"),
            std::string::npos);
  request.step.tflms = {};
  const PlanReport all = plan_training_step(request).value();
  request.step.tflms.n_tensors = 3;
  const PlanReport three = plan_training_step(request).value();
  EXPECT_GT(all.swapped_values, 3u);
  EXPECT_EQ(three.swapped_values, 3u);
  EXPECT_LT(three.host_bytes, all.host_bytes);
}

}  // namespace
}  // namespace memfit
