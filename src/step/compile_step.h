// compile_step: StepSpec -> model -> step graph -> pass pipeline -> plan ->
// executable. The one path by which `memfit train`, `memfit plan` and
// `memfit maxbatch` build a step, so that what is planned is what runs.
//
// 1. Check the spec and resolve its techniques (include/memfit/step.h).
// 2. Build the backend (cpu, reference or cuda, with the spec's threads).
// 3. Build the model and run the lowering passes of the step pipeline
//    (src/passes/step_pipeline.h: forward fusion, autodiff with the loss
//    scaled by 1/(accumulate x ranks) and the optimizer's nodes, gradient-sum
//    fusion, layouts) on the step that applies the update and, with
//    accumulate > 1, on the micro-batches that only accumulate (whose graph
//    the other one holds and more).
// 4. Predicted node times, by the spec's cost model; the state band of the
//    persistent values both graphs keep in one arena.
// 5. Run the memory passes of the pipeline under the budget (auto, or the
//    recompute strategy and the swap policy; with ranks > 1, the all-reduce
//    or ZeRO's sharding in the step that applies the update; the schedule).
// 6. Prepare the executable: kernels, sizes and memory plan, no arena
//    allocated and no budget check (check_step_budget says why a plan does
//    not fit). Training allocates it (Executable::allocate).
// With `accumulate_only` (training with accumulate > 1), the micro-batches
// that only accumulate get an executable of their own, from the same passes.
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
#include "passes/step_pipeline.h"
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
  // Where to write the IR text of each graph after each pass that changed it
  // (src/step/graph_dumps.h); empty: nowhere.
  std::string dump_graphs = {};
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
  PassSummaries passes;         // what the passes did to the step that applies the update
  NodeSeconds seconds;          // the cost model's node times
  double forward_seconds = 0;   // the forward nodes' predicted seconds before any rewrite
  std::unique_ptr<Executable> apply;            // prepared: applies the update
  std::unique_ptr<Executable> accumulate_only;  // prepared, when asked and accumulate > 1
};

Result<CompiledStep> compile_step(const StepSpec& spec, const StepBuild& build = {});

// The backend of `kind`; cuda without a GPU, or in a build without CUDA, is
// an error that says so.
Result<std::unique_ptr<Backend>> make_backend(BackendKind kind, int threads,
                                              bool fastest_kernels = false);

// One step graph as step 3 builds it, in `mode`, without layouts;
// `model_out` (may be null) receives the model. `fuse`: the forward ops fused
// first (fuse_forward_ops), not the gradient sums. The loss is scaled by
// 1 / (accumulate * ranks).
Result<Graph> build_step_graph(const ModelOptions& model, int64_t accumulate,
                               const OptimizerConfig& optimizer, UpdateMode mode, Model* model_out,
                               bool fuse = false, int64_t ranks = 1);

// The forward graph of `spec`'s model at `batch`, for evaluation and
// prediction (no loss gradient; batch norm with its running statistics),
// with two outputs, the logits and the loss, after the forward pipeline on `backend` (src/passes/step_pipeline.h);
// `model_out` (may be null) receives the model.
Result<Graph> build_forward_graph(const StepSpec& spec, int64_t batch, const Backend& backend,
                                  Model* model_out);

// The node times of `model`'s predictions for `step`: roofline, or measured
// on `backend` (MeasuredCosts, 3 runs of each distinct node).
NodeSeconds step_cost(const Graph& step, const Backend& backend, CostModel model);

// Plans graphs as Executable::prepare does, with `share` and `band`, for the
// policies; the workspaces come from one kernel per distinct node
// (WorkspaceSizes), shared by every plan of the planner returned.
PlanGraph step_planner(const Backend& backend, bool share, const StateBand& band = {});

}  // namespace memfit
