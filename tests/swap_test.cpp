// Swapping: one training step with each swap policy, with and without a link
// limit, gives the loss, gradients, parameters and running statistics of the
// step without swapping, bit for bit, with poison mode on, for every model of
// the zoo at a tiny size; the swapped graphs and their plans verify; the swap
// pass puts its copies where its header says; the host pool holds what was
// swapped; the copy engine honours the link; maxbatch finds a larger batch.
#include "passes/swap.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <ostream>

#include "memfit/plan.h"
#include "ops/op_table.h"
#include "ops/typed_graph.h"
#include "passes/step_time.h"
#include "test_util.h"
#include "train/data_source.h"
#include "passes/swap_policy.h"
#include "train/training_program.h"

namespace memfit {
namespace {

using testing::StepRun;
using Case = testing::ModelCase;

// One optimizer step of `accumulate` micro-batches with swap policy `swap`,
// poison mode on (SGD with momentum from zero velocity: after one step each
// `.momentum` holds exactly the parameter's gradient, so comparing the state
// compares gradients).
StepRun one_step(const ModelOptions& model, int64_t accumulate, Swap swap, double link_gbps) {
  StepSpec spec = testing::test_spec(model, accumulate);
  spec.swap = swap;
  spec.link_gbps = link_gbps;
  return testing::run_verified_step(spec);
}

class SwapGivesTheSameStep : public ::testing::TestWithParam<Case> {};

TEST_P(SwapGivesTheSameStep, BitForBit) {
  const Case& c = GetParam();
  const StepRun plain = one_step(c.model, c.accumulate, Swap::none, 0);
  EXPECT_EQ(plain.host, 0u);
  // budget without a memory budget swaps every candidate; 2 GB/s makes the
  // copies slower than these tiny kernels, so readers really wait on events.
  struct Variant {
    Swap swap;
    double link_gbps;
  };
  for (const Variant v :
       {Variant{Swap::budget, 0}, Variant{Swap::budget, 2}, Variant{Swap::refcount, 2}}) {
    const std::string what = c.model.name + " --swap " + std::string(name_of(v.swap)) +
                             " --link-gbps " + std::to_string(v.link_gbps);
    const StepRun run = one_step(c.model, c.accumulate, v.swap, v.link_gbps);
    testing::expect_identical_steps(plain, run, what);
    if (v.swap == Swap::budget) {
      EXPECT_GT(run.swap.swapped_values, 0u) << what;
      EXPECT_EQ(run.swap.swapped_values, run.swap.candidates) << what;
      EXPECT_GT(run.host, 0u) << what;
    }
    EXPECT_LE(run.host, align_up(run.swap.swapped_bytes) + 64 * run.swap.swapped_values)
        << what;
  }
}

// Every model of the zoo at a tiny size; mlp (dropout) with two micro-batches,
// which also run the accumulating step graph of the first one.
std::vector<Case> zoo_cases() {
  std::vector<Case> cases;
  for (const ModelOptions& model : testing::tiny_zoo()) {
    cases.push_back({model, model.name == "mlp" ? 2 : 1});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Zoo, SwapGivesTheSameStep, ::testing::ValuesIn(zoo_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return testing::model_test_name(info.param.model);
                         });

// A forward chain a -> b -> c -> d and its backward, by hand: %a and %b are read
// again by the backward nodes. Every tensor f32[64,64]: 16 KiB.
constexpr std::string_view kChain = R"(memfit-graph 1
input %x f32[64,64] input
node a = tanh(%x) -> %a f32[64,64] activation
node b = tanh(%a) -> %b f32[64,64] activation
node c = tanh(%b) -> %c f32[64,64] activation
node d = tanh(%c) -> %d f32[64,64] activation
node gd = tanh_grad(%d, %d) -> %gd f32[64,64] gradient
node gc = tanh_grad(%c, %gd) -> %gc f32[64,64] gradient
node gb = tanh_grad(%b, %gc) -> %gb f32[64,64] gradient
node ga = tanh_grad(%a, %gb) -> %ga f32[64,64] gradient
output %ga
)";

std::vector<std::string> node_names(const Graph& graph) {
  std::vector<std::string> names;
  for (const Node& node : graph.nodes()) names.push_back(node.name);
  return names;
}

// Swaps %a of kChain with every node taking `seconds` and a link of `link` bytes/s.
Graph swapped_chain(double seconds, double link, SwapStats* stats = nullptr) {
  Graph graph = parse_graph(kChain).value();
  SwapOptions options;
  options.values = {graph.find_value("a")};
  options.value_bytes = plain_sizes(graph).value_bytes;
  options.node_seconds.assign(graph.num_nodes(), seconds);
  options.link_bytes_per_second = link;
  const Result<bool> changed = swap(graph, options, stats);
  EXPECT_TRUE(changed.is_ok()) << changed.message();
  EXPECT_TRUE(verify_graph(graph).is_ok());
  return graph;
}

TEST(SwapPass, FindsTheForwardValuesReadAgainByTheBackwardPass) {
  const Graph graph = parse_graph(kChain).value();
  const auto candidates = swap_candidates(graph, plain_sizes(graph).value_bytes,
                                          std::vector<double>(graph.num_nodes(), 1.0));
  std::vector<std::string> names;
  for (const SwapCandidate& c : candidates) names.push_back(graph.value(c.value).name);
  // %d is read by gd, the first backward node, right after its producer: still
  // a candidate (idle 0 s); %x is a graph input.
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(candidates[0].last_forward_use, 1);       // b reads %a
  EXPECT_EQ(candidates[0].first_backward_use, 7);     // ga reads %a
  EXPECT_DOUBLE_EQ(candidates[0].idle_seconds, 5.0);  // nodes c, d, gd, gc, gb
  EXPECT_TRUE(candidates[0].covers(4));
}

TEST(SwapPass, CopiesAfterTheLastForwardUseAndWaitsWhenTheCopyIsDone) {
  // 16 KiB over 16 KiB/s: each copy takes 1 s, each node 1 s. The swap-out
  // starts after b and is done after c; the swap-in must start one node before
  // ga, and the live bytes allow it (the peak is in the forward pass).
  SwapStats stats;
  const Graph graph = swapped_chain(1.0, 16384.0, &stats);
  EXPECT_EQ(node_names(graph),
            (std::vector<std::string>{"a", "b", "a.to_host", "c", "a.swap_wait", "d", "gd", "gc",
                                      "a.to_device", "gb", "ga"}));
  EXPECT_EQ(stats.swapped_values, 1u);
  EXPECT_EQ(stats.swapped_bytes, 16384u);
  EXPECT_EQ(stats.prefetched_nodes, 1u);
  const Node& ga = graph.nodes().back();
  EXPECT_EQ(graph.value(ga.inputs[0]).name, "a.to_device");
}

TEST(SwapPass, PrefetchesNoEarlierThanTheBackwardPassNorAboveThePeak) {
  // A link 100 times slower wants the swap-in 100 nodes ahead: it stops where
  // the backward pass starts (gd), and the live bytes never pass the peak.
  const Graph slow = swapped_chain(1.0, 163.84);
  std::vector<std::string> names = node_names(slow);
  const auto in = std::find(names.begin(), names.end(), "a.to_device") - names.begin();
  const auto gd = std::find(names.begin(), names.end(), "gd") - names.begin();
  EXPECT_GE(in, gd - 1);
  PlanOptions options;
  options.inplace = false;
  const Graph fast = swapped_chain(1.0, 1e30);  // no prefetch: just in time
  const MemoryPlan slow_plan = plan_memory(slow, plain_sizes(slow), options).value();
  const MemoryPlan fast_plan = plan_memory(fast, plain_sizes(fast), options).value();
  EXPECT_LE(slow_plan.lower_bound_bytes, fast_plan.lower_bound_bytes);
  EXPECT_TRUE(verify_plan(slow, plain_sizes(slow), slow_plan).is_ok());
}

TEST(SwapPass, WaitsInOrderFreeEachValueBeforeTheNextSwapOut) {
  // %a and %b over a link ten times slower than compute (10 s a copy, 1 s a
  // node): timed, both copies end in the backward pass, so both waits go to
  // its start (gd) and hold %a and %b through it. In order, %a's wait goes
  // before d, where %b's swap-out is issued, and compute waits for the copy.
  auto swapped = [](bool in_order) {
    Graph graph = parse_graph(kChain).value();
    SwapOptions options;
    options.values = {graph.find_value("a"), graph.find_value("b")};
    options.value_bytes = plain_sizes(graph).value_bytes;
    options.node_seconds.assign(graph.num_nodes(), 1.0);
    options.link_bytes_per_second = 1638.4;
    options.waits_in_order = in_order;
    EXPECT_TRUE(swap(graph, options).is_ok());
    EXPECT_TRUE(verify_graph(graph).is_ok());
    return graph;
  };
  auto position = [](const Graph& graph, const std::string& name) {
    const std::vector<std::string> names = node_names(graph);
    return std::find(names.begin(), names.end(), name) - names.begin();
  };
  const Graph timed = swapped(false), in_order = swapped(true);
  EXPECT_GT(position(timed, "a.swap_wait"), position(timed, "d"));
  EXPECT_LT(position(in_order, "a.swap_wait"), position(in_order, "d"));
  EXPECT_GT(position(in_order, "a.swap_wait"), position(in_order, "b.to_host"));
  EXPECT_LT(position(in_order, "b.swap_wait"), position(in_order, "gd"));
  PlanOptions options;
  options.inplace = false;
  const MemoryPlan timed_plan = plan_memory(timed, plain_sizes(timed), options).value();
  const MemoryPlan in_order_plan = plan_memory(in_order, plain_sizes(in_order), options).value();
  EXPECT_LT(in_order_plan.lower_bound_bytes, timed_plan.lower_bound_bytes);
  EXPECT_TRUE(verify_plan(in_order, plain_sizes(in_order), in_order_plan).is_ok());
}

TEST(SwapPass, RefusesAValueThatIsNotACandidate) {
  Graph graph = parse_graph(kChain).value();
  SwapOptions options;
  options.values = {graph.find_value("gd")};
  options.value_bytes = plain_sizes(graph).value_bytes;
  options.node_seconds.assign(graph.num_nodes(), 1.0);
  const Result<bool> changed = swap(graph, options);
  ASSERT_FALSE(changed.is_ok());
  EXPECT_NE(changed.message().find("'gd' cannot be swapped"), std::string::npos)
      << changed.message();
}

// The host pool without sharing holds each swapped value in a slice of its
// own: the sum of their aligned bytes, counted here from the graph.
TEST(SwapPlan, HostPoolWithoutSharingIsTheSumOfTheSwappedValues) {
  const auto backend = make_cpu_backend();
  Graph step = build_step_graph({.name = "resnet-cifar", .batch = 2, .image_size = 8, .depth = 11},
                                1, testing::sgd(), UpdateMode::apply, nullptr)
                   .value();
  for (bool share : {false, true}) {
    const ExecOptions exec{.share = share};
    PolicyContext context;
    context.plan = step_planner(*backend, share);
    SwappedGraph swapped = swap_step_graph(step, Swap::budget, context).value();
    auto prepared = Executable::prepare(swapped.graph, *backend, exec).value();
    const Graph& g = prepared->graph();
    size_t sum = 0, largest = 0, copies = 0;
    for (const Node& node : g.nodes()) {
      if (node.op != OpKind::to_host) continue;
      const size_t bytes = align_up(prepared->sizes().value_bytes[node.outputs[0].idx()]);
      sum += bytes;
      largest = std::max(largest, bytes);
      ++copies;
    }
    EXPECT_EQ(copies, swapped.summary.swapped_values);
    EXPECT_GT(copies, 0u);
    if (share) {
      EXPECT_LE(prepared->plan().host_bytes, sum);
      EXPECT_GE(prepared->plan().host_bytes, largest);
    } else {
      EXPECT_EQ(prepared->plan().host_bytes, sum);
    }
    EXPECT_TRUE(verify_plan(g, prepared->sizes(), prepared->plan()).is_ok());
  }
}

TEST(SwapPlan, BudgetPolicySwapsTheFewestThatFitAndNamesTheSmallestArena) {
  PlanRequest request;
  request.step.model = {.name = "resnet-cifar", .batch = 8, .image_size = 16, .depth = 20};
  request.step.optimizer = testing::sgd();
  const PlanReport plain = plan_training_step(request).value();
  request.step.swap = Swap::budget;
  const PlanReport all = plan_training_step(request).value();
  EXPECT_LT(all.arena_bytes, plain.arena_bytes);
  EXPECT_EQ(all.swapped_values, all.swap_candidates);
  // Halfway between: fits with fewer swapped values than all of them.
  request.step.budget = (plain.arena_bytes + all.arena_bytes) / 2;
  const PlanReport some = plan_training_step(request).value();
  EXPECT_LE(some.arena_bytes, request.step.budget);
  EXPECT_GT(some.swapped_values, 0u);
  EXPECT_LT(some.swapped_values, all.swapped_values);
  request.step.budget = all.arena_bytes / 2;
  const Result<PlanReport> refused = plan_training_step(request);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.message().find("the smallest arena this plan reaches is " +
                                   std::to_string(all.arena_bytes)),
            std::string::npos)
      << refused.message();
}

// A link far slower than compute: timed, every swap-out's copy ends in the
// backward pass, and swapping every candidate saves under a tenth of the
// plain arena. The budget and tflms policies then put the waits in order:
// they fit three quarters of that arena, and the steps so planned give the
// plain step's bits (poison mode on).
TEST(SwapPlan, OverTheBudgetComputeWaitsForTheCopies) {
  const ModelOptions model{.name = "resnet-cifar", .batch = 8, .image_size = 16, .depth = 20};
  PlanRequest request;
  request.step.model = model;
  request.step.optimizer = testing::sgd();
  request.step.link_gbps = 0.01;  // 10 MB/s
  const Result<PlanReport> plain = plan_training_step(request);
  ASSERT_TRUE(plain.is_ok()) << plain.message();
  StepSpec spec = testing::test_spec(model, 1);
  spec.link_gbps = request.step.link_gbps;
  const StepRun plain_step = testing::run_verified_step(spec);
  for (Swap policy : {Swap::budget, Swap::tflms}) {
    const std::string what(name_of(policy));
    request.step.swap = policy;
    request.step.budget = 0;
    const Result<PlanReport> timed = plan_training_step(request);
    ASSERT_TRUE(timed.is_ok()) << what << ": " << timed.message();
    EXPECT_FALSE(timed->swap_waits_in_order) << what;
    EXPECT_GT(timed->arena_bytes, plain->arena_bytes / 10 * 9) << what;
    request.step.budget = timed->arena_bytes / 4 * 3;
    const Result<PlanReport> fitted = plan_training_step(request);
    ASSERT_TRUE(fitted.is_ok()) << what << ": " << fitted.message();
    EXPECT_TRUE(fitted->swap_waits_in_order) << what;
    EXPECT_LE(fitted->arena_bytes, request.step.budget) << what;
    EXPECT_GT(fitted->swapped_values, 0u) << what;
    const std::string text = plan_report_text(request, *fitted);
    EXPECT_NE(text.find("compute waiting for each copy out"), std::string::npos) << text;
    const std::string json = plan_report_json(request, *fitted);
    EXPECT_NE(json.find("\"swap_waits_in_order\": true"), std::string::npos) << json;

    StepSpec swapped = spec;
    swapped.swap = policy;
    swapped.budget = request.step.budget;
    const StepRun step = testing::run_verified_step(swapped);
    EXPECT_TRUE(step.swap.waits_in_order) << what;
    EXPECT_LE(step.arena, request.step.budget) << what;
    testing::expect_identical_steps(plain_step, step, what + " with its waits in order");
  }
}

TEST(SwapRuntime, CopiesTakeAtLeastTheirTimeOnTheLink) {
  const auto backend = make_cpu_backend();
  const Graph graph = swapped_chain(1.0, 16384.0);
  // 0.05 GB/s: a 16 KiB copy takes at least 0.33 ms.
  auto exe = Executable::compile(graph, *backend, ExecOptions{.share = true, .poison = true, .link_gbps = 0.05}).value();
  std::vector<float> x(64 * 64, 0.5f);
  StateStore state;
  const auto result = exe->run(state, Feeds{{"x", x.data()}}, StepContext{});
  ASSERT_TRUE(result.is_ok()) << result.message();
  for (size_t n = 0; n < exe->graph().num_nodes(); ++n) {
    const OpKind op = exe->graph().nodes()[n].op;
    if (op == OpKind::to_host || op == OpKind::to_device) {
      EXPECT_GE(exe->node_seconds()[n], 16384.0 / 0.05e9) << exe->graph().nodes()[n].name;
    }
  }
  EXPECT_TRUE(std::isfinite(result->outputs.at("ga")[0]));
}

TEST(StepTime, CountsCopiesThatComputeDoesNotHide) {
  // Two nodes of 1 s; a 3 s copy after the first, awaited before the second:
  // the compute stream waits 2 s for it.
  Graph graph = parse_graph(R"(memfit-graph 1
input %x f32[4] input
node a = tanh(%x) -> %a f32[4] activation
node out = to_host(%a) -> %h f32[4] activation
node wait = swap_wait(%a, %h) ->
node b = tanh(%a) -> %b f32[4] activation
output %b
)")
                    .value();
  EXPECT_DOUBLE_EQ(predicted_step_seconds(graph, {1.0, 3.0, 0.0, 1.0}), 5.0);
  EXPECT_DOUBLE_EQ(predicted_step_seconds(graph, {1.0, 0.5, 0.0, 1.0}), 2.5);
}

TEST(MaxBatch, SwappingFitsALargerBatch) {
  PlanRequest request;
  request.step.model = {.name = "resnet-cifar", .image_size = 16, .depth = 11};
  request.step.optimizer = testing::sgd();
  request.step.budget = size_t{12} << 20;
  const MaxBatchReport shared = find_max_batch(request).value();
  request.step.swap = Swap::budget;
  const MaxBatchReport swapped = find_max_batch(request).value();
  EXPECT_GT(shared.max_batch, 1);
  EXPECT_GT(swapped.max_batch, shared.max_batch);
  EXPECT_LE(swapped.plan.arena_bytes, request.step.budget);
  EXPECT_GT(swapped.plan.host_bytes, 0u);
  EXPECT_GT(swapped.plan.predicted_step_seconds, 0.0);
  // The next batch does not fit.
  PlanRequest next = request;
  next.step.model.batch = swapped.max_batch + 1;
  EXPECT_FALSE(plan_training_step(next).is_ok());
  const std::string json = max_batch_json(request, swapped);
  EXPECT_NE(json.find("\"max_batch\": " + std::to_string(swapped.max_batch)), std::string::npos);
  EXPECT_NE(json.find("\"predicted_step_seconds\": "), std::string::npos);
  request.step.budget = 1024;
  const Result<MaxBatchReport> none = find_max_batch(request);
  ASSERT_FALSE(none.is_ok());
  EXPECT_NE(none.message().find("even batch 1 does not fit"), std::string::npos);
}

// A step that does not build at batch 1 (a batch norm on a 1 x 1 map sees
// one value per channel) starts the search at the smallest batch that does.
TEST(MaxBatch, StartsAtTheSmallestBatchThatBuilds) {
  PlanRequest request;
  request.step.model = {.name = "resnet-cifar", .batch = 1, .image_size = 4, .depth = 11};
  request.step.optimizer = testing::sgd();
  const auto one = plan_training_step(request);
  ASSERT_FALSE(one.is_ok()) << "batch 1 builds";
  EXPECT_NE(one.message().find("at least 2 values per channel"), std::string::npos)
      << one.message();
  request.step.budget = size_t{12} << 20;
  const auto found = find_max_batch(request);
  ASSERT_TRUE(found) << found.message();
  EXPECT_GE(found->max_batch, 2);
  request.step.budget = 1024;
  const auto none = find_max_batch(request);
  ASSERT_FALSE(none.is_ok());
  EXPECT_NE(none.message().find("even batch 2 (the smallest whose step builds) does not fit"),
            std::string::npos)
      << none.message();
}

}  // namespace
}  // namespace memfit
