#include "passes/step_pipeline.h"

#include <utility>
#include <vector>

#include "core/check.h"
#include "ops/typed_graph.h"
#include "passes/fuse_gradient_sums.h"
#include "passes/recompute_policy.h"

namespace memfit {

namespace {

// 1. Forward ops fused into their products; the model's values follow the
// renumbering, and the model keeps the fused graph.
class FuseForwardOpsPass final : public Pass {
 public:
  std::string_view name() const override { return "fuse_forward_ops"; }
  Result<bool> run(Graph& graph, PassContext& context) override {
    std::vector<ValueId> map;
    graph = fuse_forward_ops(graph, &context.summaries.fused_forward, &map);
    if (map.empty()) return false;
    if (ForwardModel* model = context.model) {
      const auto remap = [&](ValueId& v) {
        if (v.valid()) v = map[v.idx()];
      };
      for (ValueId& v : model->inputs) remap(v);
      for (ValueId& v : model->params) remap(v);
      remap(model->labels);
      remap(model->logits);
      remap(model->loss);
      model->graph = graph;
    }
    return true;
  }
};

// 2. The backward pass and the optimizer's nodes, of the context's model.
class AutodiffPass final : public Pass {
 public:
  AutodiffPass(int64_t accumulate, int64_t ranks, OptimizerConfig optimizer, UpdateMode mode)
      : loss_scale_(1.0f / static_cast<float>(accumulate * ranks)),
        optimizer_(std::move(optimizer)),
        mode_(mode) {}
  std::string_view name() const override { return "autodiff"; }
  Result<bool> run(Graph& graph, PassContext& context) override {
    MEMFIT_CHECK(context.model != nullptr);
    const ForwardModel& model = *context.model;
    MEMFIT_ASSIGN_OR_RETURN(auto grads,
                            append_gradients(graph, model.loss, model.params, loss_scale_));
    MEMFIT_RETURN_IF_ERROR(append_optimizer(graph, model.params, grads, optimizer_, mode_));
    graph = remove_dead_nodes(graph);
    MEMFIT_RETURN_IF_ERROR(verify_graph(graph));
    return true;
  }

 private:
  float loss_scale_;
  OptimizerConfig optimizer_;
  UpdateMode mode_;
};

// Nodes none of whose outputs reach a graph output or an update removed: the
// forward pipeline's first pass (autodiff does the same for the step).
class DeadNodesPass final : public Pass {
 public:
  std::string_view name() const override { return "dead_nodes"; }
  Result<bool> run(Graph& graph, PassContext&) override {
    const size_t before = graph.num_nodes();
    graph = remove_dead_nodes(graph);
    return graph.num_nodes() != before;
  }
};

// 3.
class FuseGradientSumsPass final : public Pass {
 public:
  std::string_view name() const override { return "fuse_gradient_sums"; }
  Result<bool> run(Graph& graph, PassContext& context) override {
    size_t fused = 0;
    graph = fuse_gradient_sums(graph, &fused);
    context.summaries.fused_sums = fused;
    return fused > 0;
  }
};

// 4.
class AssignLayoutsPass final : public Pass {
 public:
  std::string_view name() const override { return "assign_layouts"; }
  Result<bool> run(Graph& graph, PassContext& context) override {
    MEMFIT_CHECK(context.backend != nullptr);
    LayoutSummary& summary = context.summaries.layouts;
    MEMFIT_ASSIGN_OR_RETURN(graph, assign_layouts(graph, *context.backend, &summary));
    return summary.blocked_values > 0 || summary.weight_values > 0 || summary.reorders > 0;
  }
};

// The names of `graph`'s nodes in order: the memory passes may reorder
// nodes without adding any, and a graph changed when its order did.
std::vector<std::string> node_names(const Graph& graph) {
  std::vector<std::string> names;
  names.reserve(graph.num_nodes());
  for (const Node& node : graph.nodes()) names.push_back(node.name);
  return names;
}

bool changed(const std::vector<std::string>& before, const Graph& after) {
  if (before.size() != after.num_nodes()) return true;
  for (size_t n = 0; n < before.size(); ++n) {
    if (before[n] != after.nodes()[n].name) return true;
  }
  return false;
}

// 5, --policy auto (src/passes/auto_policy.h).
class AutoPass final : public Pass {
 public:
  std::string_view name() const override { return "auto"; }
  Result<bool> run(Graph& graph, PassContext& context) override {
    const auto before = node_names(graph);
    MEMFIT_ASSIGN_OR_RETURN(AutoGraph chosen, auto_step_graph(std::move(graph), context.policy));
    graph = std::move(chosen.graph);
    PassSummaries& s = context.summaries;
    s.recompute = chosen.summary.recompute;
    s.swap = chosen.summary.swap;
    s.automatic = std::move(chosen.summary);
    return changed(before, graph);
  }
};

// 5, the --recompute strategy (src/passes/recompute_policy.h).
class RecomputePass final : public Pass {
 public:
  RecomputePass(Recompute strategy, bool mirror) : strategy_(strategy), mirror_(mirror) {}
  std::string_view name() const override { return "recompute"; }
  Result<bool> run(Graph& graph, PassContext& context) override {
    MEMFIT_ASSIGN_OR_RETURN(
        RecomputedGraph recomputed,
        recompute_step_graph(std::move(graph), strategy_, context.policy, mirror_));
    graph = std::move(recomputed.graph);
    context.summaries.recompute = recomputed.summary;
    return recomputed.summary.recomputed_nodes > 0;
  }

 private:
  Recompute strategy_;
  bool mirror_;
};

// 6, the --swap policy (src/passes/swap_policy.h).
class SwapPass final : public Pass {
 public:
  SwapPass(Swap policy, TflmsOptions tflms) : policy_(policy), tflms_(tflms) {}
  std::string_view name() const override { return "swap"; }
  Result<bool> run(Graph& graph, PassContext& context) override {
    const auto before = node_names(graph);
    MEMFIT_ASSIGN_OR_RETURN(SwappedGraph swapped,
                            swap_step_graph(std::move(graph), policy_, context.policy, tflms_));
    graph = std::move(swapped.graph);
    context.summaries.swap = swapped.summary;
    return changed(before, graph);
  }

 private:
  Swap policy_;
  TflmsOptions tflms_;
};

// 7, without sharding (src/passes/all_reduce.h).
class AllReducePass final : public Pass {
 public:
  AllReducePass(int64_t ranks, size_t bucket_bytes) : ranks_(ranks), bucket_bytes_(bucket_bytes) {}
  std::string_view name() const override { return "all_reduce"; }
  Result<bool> run(Graph& graph, PassContext& context) override {
    AllReduceSummary& summary = context.summaries.all_reduce;
    MEMFIT_ASSIGN_OR_RETURN(graph,
                            insert_all_reduce(std::move(graph), ranks_, bucket_bytes_, &summary));
    return summary.buckets > 0;
  }

 private:
  int64_t ranks_;
  size_t bucket_bytes_;
};

// 7, ZeRO (src/passes/zero_shard.h). Its buckets are the step's all-reduce
// buckets in the reports.
class ZeroShardPass final : public Pass {
 public:
  explicit ZeroShardPass(const ShardOptions& options) : options_(options) {}
  std::string_view name() const override { return "zero_shard"; }
  Result<bool> run(Graph& graph, PassContext& context) override {
    PassSummaries& s = context.summaries;
    MEMFIT_ASSIGN_OR_RETURN(graph, shard_step(std::move(graph), options_, &s.zero));
    s.all_reduce = s.zero.buckets;
    return s.zero.buckets.buckets > 0;
  }

 private:
  ShardOptions options_;
};

// 8. The order the planner of the context keeps (plan_on_backend: the
// graph's, or the memory-aware one where its arena is smaller).
class SchedulePass final : public Pass {
 public:
  std::string_view name() const override { return "schedule"; }
  Result<bool> run(Graph& graph, PassContext& context) override {
    MEMFIT_ASSIGN_OR_RETURN(PlannedGraph planned, context.policy.plan(std::move(graph)));
    graph = std::move(planned.graph);
    context.summaries.reordered = planned.reordered;
    return planned.reordered;
  }
};

}  // namespace

StepPipeline step_pipeline(const StepPipelineOptions& o) {
  StepPipeline pipeline;
  PassPipeline& lowering = pipeline.lowering;
  if (o.fuse_forward) lowering.emplace<FuseForwardOpsPass>();
  lowering.emplace<AutodiffPass>(o.accumulate, o.ranks, o.optimizer, o.mode);
  if (o.fuse_gradient_sums) lowering.emplace<FuseGradientSumsPass>();
  if (o.blocked_layouts) lowering.emplace<AssignLayoutsPass>();

  PassPipeline& memory = pipeline.memory;
  if (o.automatic) {
    memory.emplace<AutoPass>();
  } else {
    memory.emplace<RecomputePass>(o.recompute, o.mirror);
    memory.emplace<SwapPass>(o.swap, o.tflms);
  }
  // Micro-batches that only accumulate do not communicate.
  if (o.ranks > 1 && o.mode != UpdateMode::accumulate) {
    if (!o.zero) {
      memory.emplace<AllReducePass>(o.ranks, o.bucket_bytes);
    } else {
      memory.emplace<ZeroShardPass>(
          ShardOptions{o.ranks, o.rank, o.bucket_bytes, o.zero_gradients});
    }
  }
  if (o.schedule) memory.emplace<SchedulePass>();
  return pipeline;
}

PassPipeline forward_pipeline(bool blocked_layouts) {
  PassPipeline pipeline;
  pipeline.emplace<DeadNodesPass>();
  if (blocked_layouts) pipeline.emplace<AssignLayoutsPass>();
  return pipeline;
}

}  // namespace memfit
