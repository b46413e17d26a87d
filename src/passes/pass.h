// One interface for every rewrite of a step graph, and the pipeline that runs
// them in order (src/passes/step_pipeline.h lists the step's passes).
//
// A pass is `Result<bool> run(Graph&, PassContext&)`: it rewrites the graph in
// place and says whether it changed it; an error is one a user can cause (a
// model the pass cannot handle, a budget no plan meets) and stops the
// pipeline. What a pass reports (how many ops it fused, what it recomputed or
// swapped) goes into the context's summaries, which the plan report, the
// training log and the tests read. What a pass needs besides the graph (the
// backend, the model's values, the planner, the budget) is in the context too,
// so every pass has the same signature and a pipeline is a list.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "memfit/ir.h"
#include "passes/all_reduce.h"
#include "passes/assign_layouts.h"
#include "passes/auto_policy.h"
#include "passes/fuse_forward_ops.h"
#include "passes/policy_context.h"
#include "passes/recompute_strategy.h"
#include "passes/swap_policy.h"
#include "passes/zero_shard.h"

namespace memfit {

// The forward model the lowering passes start from: forward fusion follows
// its values through the renumbering and keeps the fused graph here;
// autodiff reads the loss and the parameters.
struct ForwardModel {
  Graph graph;  // the forward graph the ids below index
  std::vector<ValueId> inputs;
  std::vector<ValueId> params;
  ValueId labels;
  ValueId logits;
  ValueId loss;
};

// What the passes of one step graph reported.
struct PassSummaries {
  FusedOps fused_forward;     // fuse_forward_ops
  size_t fused_sums = 0;      // fuse_gradient_sums: products that add into their sums
  LayoutSummary layouts;      // assign_layouts
  RecomputeSummary recompute;
  SwapSummary swap;
  AutoSummary automatic;       // --policy auto only
  AllReduceSummary all_reduce;  // its buckets (ranks > 1)
  ShardSummary zero;            // what sharding did (ranks > 1, a shard other than none)
  bool reordered = false;       // schedule: the memory-aware order was kept
};

// Called with each pass's name and the graph after it, for the passes that
// changed it (and once with "input" before the first): `memfit plan
// --dump-graphs` writes them as IR text.
using AfterPass = std::function<Status(std::string_view pass, const Graph& graph)>;

struct PassContext {
  // The backend the step runs on: its layouts and kernels' workspaces.
  // Null only for pipelines whose passes need none (autodiff, fusion).
  const Backend* backend = nullptr;
  // The model whose forward graph the pipeline starts from; null for a
  // pipeline without forward fusion or autodiff.
  ForwardModel* model = nullptr;
  // The planner, the budget, the link and the node times of the memory
  // passes (recompute, swap, auto); the node-times pass fills `seconds`.
  PolicyContext policy;
  PassSummaries summaries;
  AfterPass after_pass;  // empty: nothing is shown
};

class Pass {
 public:
  virtual ~Pass() = default;
  // The name the dumps and the pipeline's listing use: snake_case, as the file.
  virtual std::string_view name() const = 0;
  // Rewrites `graph`; true when it changed it.
  virtual Result<bool> run(Graph& graph, PassContext& context) = 0;
};

// Passes run in the order added. Debug builds (and MEMFIT_VERIFY_PLANS) run
// the graph verifier after every pass that changed the graph.
class PassPipeline {
 public:
  PassPipeline& add(std::unique_ptr<Pass> pass);
  template <typename P, typename... Args>
  PassPipeline& emplace(Args&&... args) {
    return add(std::make_unique<P>(std::forward<Args>(args)...));
  }
  // Runs every pass on `graph`, stopping at the first error; true when one
  // changed it.
  Result<bool> run(Graph& graph, PassContext& context) const;
  // The passes' names, in order.
  std::vector<std::string_view> names() const;
  bool empty() const { return passes_.empty(); }

 private:
  std::vector<std::unique_ptr<Pass>> passes_;
};

}  // namespace memfit
