// The recomputation strategies side by side on one model, under one cost
// model measured once: for each strategy the planned arena and the predicted
// step and recompute seconds, as ratios to the plain step; then optimal at
// the arenas of sqrt and budget (the same or less memory, less time); then
// the same with mirror (RecomputeOptions::mirror) on every strategy; then,
// with a ratio R, optimal and optimal+mirror under a budget of none's arena
// divided by R.
//
//   ./build/bench/recompute_strategies [depth] [batch] [measured|roofline] [R]
//   (default: resnet-cifar depth 1001, batch 64, 32x32 images, measured, R 10)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "passes/recompute_optimal.h"
#include "passes/recompute_policy.h"
#include "train/training_program.h"

using namespace memfit;

int main(int argc, char** argv) {
  const int64_t depth = argc > 1 ? std::atoll(argv[1]) : 1001;
  const int64_t batch = argc > 2 ? std::atoll(argv[2]) : 64;
  const bool measured = argc > 3 ? std::string(argv[3]) != "roofline" : true;
  const double ratio = argc > 4 ? std::atof(argv[4]) : 10;
  const ModelOptions model{.name = "resnet-cifar", .batch = batch, .depth = depth};
  OptimizerConfig sgd;
  auto step = build_step_graph(model, 1, sgd, UpdateMode::apply, nullptr);
  if (!step) {
    std::fprintf(stderr, "%s\n", step.message().c_str());
    return 1;
  }
  const auto backend = make_cpu_backend();
  auto start = std::chrono::steady_clock::now();
  // Measured: each distinct node signature timed once (MeasuredCosts).
  const MeasuredCosts table =
      measured ? MeasuredCosts::measure(*step, *backend, 3) : MeasuredCosts();
  const NodeSeconds cost = measured ? table.as_function() : roofline_cost();
  const double cost_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const ArenaOf arena_of = [&](const Graph& graph) -> Result<size_t> {
    MEMFIT_ASSIGN_OR_RETURN(auto prepared, Executable::prepare(graph, *backend, ExecOptions{}));
    return prepared->plan().arena_bytes;
  };
  const double plain_step = graph_seconds(*step, cost);
  const double plain_forward = graph_seconds(*step, cost, true);
  const size_t plain_arena = arena_of(*step).value();
  std::printf(
      "resnet-cifar depth %lld batch %lld, %s cost model (%.1f s to build it: %zu distinct nodes "
      "timed, %zu left to roofline)\n",
      static_cast<long long>(depth), static_cast<long long>(batch),
      measured ? "measured" : "roofline", cost_seconds, table.measured(), table.fell_back());
  std::printf("%-28s %14s %7s %12s %7s %12s %9s\n", "strategy", "arena bytes", "/none", "step s",
              "/none", "recompute s", "search s");
  auto row = [&](const std::string& name, Recompute r, size_t budget, bool mirror = false) {
    start = std::chrono::steady_clock::now();
    auto result =
        apply_recompute_costed(*step, r, budget, arena_of, RecomputeCost{cost, 30}, mirror);
    const double search =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!result) {
      std::printf("%-28s %s\n", name.c_str(), result.message().c_str());
      return size_t{0};
    }
    const size_t arena = arena_of(result->graph).value();
    const double step_s = graph_seconds(result->graph, cost);
    const double recompute_s = graph_seconds(result->graph, cost, true) - plain_forward;
    std::printf("%-28s %14zu %7.3f %12.4f %7.3f %12.4f %9.1f\n", name.c_str(), arena,
                static_cast<double>(arena) / static_cast<double>(plain_arena), step_s,
                step_s / plain_step, recompute_s, search);
    return arena;
  };
  row("none", Recompute::none, 0);
  const size_t sqrt_arena = row("sqrt", Recompute::sqrt, 0);
  const size_t budget_arena = row("budget", Recompute::budget, 0);
  row("optimal (at sqrt's arena)", Recompute::optimal, sqrt_arena);
  row("optimal (at budget's arena)", Recompute::optimal, budget_arena);
  row("none+mirror", Recompute::none, 0, true);
  const size_t sqrt_mirror = row("sqrt+mirror", Recompute::sqrt, 0, true);
  const size_t budget_mirror = row("budget+mirror", Recompute::budget, 0, true);
  row("optimal+mirror (at sqrt+m)", Recompute::optimal, sqrt_mirror, true);
  row("optimal+mirror (at budget+m)", Recompute::optimal, budget_mirror, true);
  if (ratio > 0) {
    const auto target = static_cast<size_t>(static_cast<double>(plain_arena) / ratio);
    char name[64];
    std::snprintf(name, sizeof name, "optimal (at none / %g)", ratio);
    row(name, Recompute::optimal, target);
    std::snprintf(name, sizeof name, "optimal+mirror (none / %g)", ratio);
    row(name, Recompute::optimal, target, true);
  }
  return 0;
}
