// How long the planner takes on a large training graph: a deep MLP (linear +
// relu layers) whose training step has about 30,000 nodes. Prints one table
// row per stage, timed with a steady clock over the best of 3 runs.
//
//   ./build/bench/plan_speed [layers]   (default 3750 layers: 30,009 nodes)
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "autodiff/autodiff.h"
#include "memfit/builder.h"
#include "memory/planner.h"
#include "memory/schedule.h"

using namespace memfit;

namespace {

Graph deep_mlp_step(int64_t layers) {
  ModelBuilder b("deep-mlp", true);
  ValueId x = b.flatten(b.input("images", {8, 1, 8, 8}));
  const ValueId labels = b.labels(8);
  for (int64_t i = 0; i < layers; ++i) x = b.relu(b.linear("fc" + std::to_string(i), x, 64));
  b.cross_entropy(b.linear("head", x, 10), labels);
  Model model = b.finish().value();
  auto grads = append_gradients(model.graph, model.loss, model.params).value();
  OptimizerConfig sgd;
  if (!append_optimizer(model.graph, model.params, grads, sgd, UpdateMode::apply).is_ok()) std::abort();
  return remove_dead_nodes(model.graph);
}

template <class F>
double best_seconds(F&& f) {
  double best = 1e30;
  for (int run = 0; run < 3; ++run) {
    const auto start = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t layers = argc > 1 ? std::atoll(argv[1]) : 3750;
  const Graph graph = deep_mlp_step(layers);
  const PlanSizes sizes = plain_sizes(graph);
  MemoryPlan plan;
  const double plan_s = best_seconds([&] { plan = plan_memory(graph, sizes).value(); });
  std::vector<NodeId> order;
  const double order_s = best_seconds([&] { order = memory_aware_order(graph, sizes.value_bytes); });
  const double verify_s = best_seconds([&] {
    if (!verify_plan(graph, sizes, plan).is_ok()) std::abort();
  });
  std::printf("graph: deep MLP, %lld layers: %zu nodes, %zu values\n", static_cast<long long>(layers),
              graph.num_nodes(), graph.num_values());
  std::printf("| stage | seconds (best of 3) |\n|---|---|\n");
  std::printf("| plan_memory (liveness, in-place, offsets) | %.3f |\n", plan_s);
  std::printf("| memory_aware_order | %.3f |\n", order_s);
  std::printf("| verify_plan | %.3f |\n", verify_s);
  std::printf("arena %zu bytes, lower bound %zu bytes (%s)\n", plan.arena_bytes, plan.lower_bound_bytes,
              plan.algorithm.c_str());
  return 0;
}
