// compile_step: StepSpec -> model -> step graph -> techniques -> plan ->
// executable. The one path by which `memfit train`, `memfit plan` and
// `memfit maxbatch` build a step, so that what is planned is what runs.
//
// 1. Check the spec and resolve its techniques (include/memfit/step.h).
// 2. Build the backend (cpu or reference, with the spec's threads).
// 3. Build the step graph: the model, its backward pass of the loss scaled by
//    1/accumulate, the optimizer's nodes; with accumulate > 1, the
//    micro-batch that applies the update (which holds all the other one
//    holds and more); dead nodes removed; verified; gradient sums fused;
//    the backend's blocked layouts with their reorder nodes (assign_layouts).
// 4. Predicted node times, by the spec's cost model.
// 5. Rewrite the step by its techniques under the budget: auto, or the
//    recompute strategy and then the swap policy (src/passes).
// 6. With ranks > 1, sum the gradients over the ranks (insert_all_reduce), or
//    shard them with the optimizer state (shard_step, ZeRO: the graph of the
//    communicator's rank, 0 without one), in the step that applies the
//    update; micro-batches that only accumulate do not communicate.
// 7. Prepare the executable: kernels, sizes, schedule and memory plan, no
//    arena allocated and no budget check (check_step_budget says why a plan
//    does not fit). Training allocates it (Executable::allocate).
// With `accumulate_only` (training with accumulate > 1), the micro-batches
// that only accumulate get a graph of their own, rewritten the same way.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autodiff/autodiff.h"
#include "memfit/step.h"
#include "passes/all_reduce.h"
#include "passes/assign_layouts.h"
#include "passes/auto_policy.h"
#include "passes/policy_context.h"
#include "passes/recompute_strategy.h"
#include "passes/swap_policy.h"
#include "passes/zero_shard.h"
#include "runtime/executor.h"

namespace memfit {

// What compile_step builds besides the graph that applies the update.
struct StepBuild {
  bool accumulate_only = false;  // also the graph of the micro-batches that only accumulate
  // The ranks the step's gradients are summed over (not owned; its size must
  // be the spec's ranks); null: the step is planned, not run, or has one rank.
  Communicator* comm = nullptr;
};

// A step graph after its techniques, with what each did.
struct RewrittenStep {
  Graph graph;
  RecomputeSummary recompute;
  SwapSummary swap;
  AutoSummary automatic;  // --policy auto only
};

struct CompiledStep {
  StepSpec spec;
  Techniques techniques;
  std::unique_ptr<Backend> backend;
  Model model;  // the forward model at the step's batch: its inputs, its init values
  // Every persistent input of the step (parameters, optimizer state,
  // accumulators, running statistics) with its shape, in the order the step
  // graph was built: the order of checkpoints.
  std::vector<std::pair<std::string, Shape>> persistent;
  LayoutSummary layouts;        // what assign_layouts did to the step that applies the update
  RewrittenStep rewritten;      // the summaries of the step that applies the update (graph moved)
  AllReduceSummary all_reduce;  // its buckets (ranks > 1)
  ShardSummary zero;            // what sharding did (ranks > 1, a shard other than none)
  NodeSeconds seconds;          // the cost model's node times
  double forward_seconds = 0;   // the forward nodes' predicted seconds before any rewrite
  std::unique_ptr<Executable> apply;            // prepared: applies the update
  std::unique_ptr<Executable> accumulate_only;  // prepared, when asked and accumulate > 1
};

Result<CompiledStep> compile_step(const StepSpec& spec, const StepBuild& build = {});

// The backend called `name` (cpu or reference), or an error naming both.
Result<std::unique_ptr<Backend>> make_backend(const std::string& name, int threads,
                                              bool fastest_kernels = false);

// One step graph as step 3 builds it, in `mode`; `model_out` (may be null)
// receives the model. `fuse`: the forward ops fused first (fuse_forward_ops).
// The loss is scaled by 1 / (accumulate * ranks).
Result<Graph> build_step_graph(const ModelOptions& model, int64_t accumulate,
                               const OptimizerConfig& optimizer, UpdateMode mode, Model* model_out,
                               bool fuse = false, int64_t ranks = 1);

// The node times of `model`'s predictions for `step`: roofline, or measured
// on `backend` (MeasuredCosts, 3 runs of each distinct node).
NodeSeconds step_cost(const Graph& step, const Backend& backend, CostModel model);

// Plans graphs as Executable::prepare does, with `share` and `band`, for the
// policies; the workspaces come from one kernel per distinct node
// (WorkspaceSizes), shared by every plan of the planner returned.
PlanGraph step_planner(const Backend& backend, bool share, const StateBand& band = {});

// Step 5 alone: `step` rewritten by `techniques` under `context`.
Result<RewrittenStep> rewrite_step_graph(Graph step, const Techniques& techniques,
                                         const TflmsOptions& tflms, const PolicyContext& context);

}  // namespace memfit
