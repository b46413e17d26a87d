// The compiled graphs of one training configuration: the step graph(s) and
// the evaluation graph, and the state they share.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autodiff/autodiff.h"
#include "memfit/builder.h"
#include "memfit/train.h"
#include "passes/recompute_optimal.h"
#include "passes/recompute_strategy.h"
#include "runtime/executor.h"
#include "train/auto_step.h"
#include "train/swap_step.h"

namespace memfit {

// One training step graph, as training runs it: the model `model` says, its
// backward pass (of the loss scaled by 1/accumulate), the optimizer's nodes in
// `mode`, dead nodes removed, verified. `model_out` (may be null) receives the
// model, whose init values the step's state starts from.
Result<Graph> build_step_graph(const ModelOptions& model, int64_t accumulate,
                               const OptimizerConfig& optimizer, UpdateMode mode, Model* model_out);

// `step` (a graph of build_step_graph) after the recompute strategy. The
// budget strategy compares its candidate plans by the arena that `backend`
// plans for them with exec's sharing; exec's budget is the memory budget.
// optimal and milp minimize the predicted times of `cost` (its seconds
// empty: roofline); `mirror`: cheap ops are recomputed too
// (RecomputeOptions::mirror).
Result<RecomputedGraph> recompute_step_graph(Graph step, Recompute recompute,
                                             const Backend& backend, const ExecOptions& exec,
                                             const RecomputeCost& cost = {}, bool mirror = false);

// The node times of `model`'s predictions for `step`: roofline, or measured
// on `backend` (MeasuredCosts, 3 runs of each distinct node).
NodeSeconds step_cost(const Graph& step, const Backend& backend, CostModel model);

struct StepCounters {
  int64_t micro_step = 0;      // micro-batches run so far
  int64_t optimizer_step = 0;  // optimizer updates so far
};

// How a step graph is rewritten before it is planned and compiled: the flags
// --recompute, --mirror, --cost, --milp-seconds, --swap and --policy auto.
struct StepTechniques {
  Recompute recompute = Recompute::none;
  bool mirror = false;
  CostModel cost = CostModel::roofline;  // whose node times optimal, milp and auto minimize
  double milp_seconds = 30;
  Swap swap = Swap::none;
  bool auto_policy = false;  // keep, recompute or swap per activation (recompute, swap: none)
  TflmsOptions tflms = {};   // --swap tflms: its knobs
};

// A step graph after its rewrites, with what each did.
struct RewrittenStep {
  Graph graph;
  RecomputeSummary recompute;
  SwapSummary swap;
  AutoSummary automatic;  // --policy auto only
};

// `step` (a graph of build_step_graph) after `techniques`: the recompute
// strategy, then the swap policy (both under exec's budget, sharing and
// link); or, with auto_policy, auto_step_graph (src/train/auto_step.h).
// `seconds` are the node times of the cost-driven choices (empty: roofline).
Result<RewrittenStep> rewrite_step_graph(Graph step, const Backend& backend,
                                         const ExecOptions& exec,
                                         const StepTechniques& techniques,
                                         const NodeSeconds& seconds);

class TrainingProgram {
 public:
  // With accumulate = K > 1, micro-batches add their gradients (of the loss
  // scaled by 1/K) to persistent accumulators, and every K-th one also
  // updates the parameters and clears the accumulators.
  // The evaluation graph is `model` at batch eval_batch. The step graphs are
  // rewritten by `techniques` (rewrite_step_graph) under exec's budget.
  static Result<std::unique_ptr<TrainingProgram>> create(
      const ModelOptions& model, int64_t accumulate, const OptimizerConfig& optimizer,
      int64_t eval_batch, const Backend& backend, const ExecOptions& exec = {},
      const StepTechniques& techniques = {});

  // Parameters and model state from their Init (uniform draws keyed by the
  // seed and the value's name), optimizer state and accumulators at zero.
  void init_state(StateStore& state, uint64_t seed) const;
  // Every persistent value with its shape, in a fixed order (checkpoints).
  const std::vector<std::pair<std::string, Shape>>& state_shapes() const { return state_shapes_; }

  // Runs one micro-batch (every data input of the model, labels included)
  // and returns its loss.
  Result<float> micro_step(StateStore& state, const Feeds& feeds, uint64_t seed, float lr_scale,
                           StepCounters& counters);
  // The predicted class of each row of the logits, for a batch of eval_batch
  // examples (labels, if fed, are not read).
  Result<std::vector<int32_t>> predict(StateStore& state, const Feeds& feeds);

  // The forward model at the training batch and at the evaluation batch
  // (their inputs say what to feed).
  const Model& model() const { return model_; }
  const Model& eval_model() const { return eval_model_; }

  int64_t batch() const { return batch_; }
  int64_t eval_batch() const { return eval_batch_; }
  // The planned arena of the step that updates the parameters, and the most
  // arena bytes any step has touched so far.
  size_t arena_bytes() const { return apply_->plan().arena_bytes; }
  size_t high_water_bytes() const { return high_water_bytes_; }
  // What recomputation did to the step graph that updates the parameters.
  const RecomputeSummary& recompute_summary() const { return recompute_summary_; }
  // What swapping did to the step graph that updates the parameters.
  const SwapSummary& swap_summary() const { return swap_summary_; }
  // Nodes of the step graph run by each backend, e.g. "cpu 14, reference 9".
  std::string backend_summary() const;
  const Graph& step_graph() const { return apply_->graph(); }
  // The executable that updates the parameters (per-node times, backends).
  const Executable& step_executable() const { return *apply_; }

 private:
  int64_t batch_ = 0, accumulate_ = 1, eval_batch_ = 0;
  std::unique_ptr<Executable> apply_;       // updates the parameters
  std::unique_ptr<Executable> accumulate_only_;  // K > 1: only accumulates
  std::unique_ptr<Executable> eval_;
  Model model_, eval_model_;
  std::unordered_map<std::string, Init> init_;
  std::vector<std::pair<std::string, Shape>> state_shapes_;
  RecomputeSummary recompute_summary_;
  SwapSummary swap_summary_;
  size_t high_water_bytes_ = 0;
};

// The backend called `name` (cpu or reference), or null.
std::unique_ptr<Backend> make_backend(const std::string& name, int threads);

}  // namespace memfit
