#include "step/compile_step.h"

#include "backends/cuda/cuda_backend.h"
#include "memfit/dist.h"
#include "onnx/model_source.h"
#include "ops/typed_graph.h"
#include "passes/assign_layouts.h"
#include "passes/fuse_forward_ops.h"
#include "passes/fuse_gradient_sums.h"
#include "passes/recompute_policy.h"
#include "runtime/backend_plan.h"
#include "step/workspace_sizes.h"

namespace memfit {

Result<std::unique_ptr<Backend>> make_backend(const std::string& name, int threads,
                                              bool fastest_kernels) {
  if (name == "cpu") return make_cpu_backend(threads);
  if (name == "reference") return make_reference_backend();
  // One GPU per rank: the ranks on a machine take its GPUs by local rank.
  if (name == "cuda") return make_cuda_backend(rank_gpu(), fastest_kernels);
  return Status::error("unknown backend '" + name + "'; use cpu, reference or cuda");
}

namespace {

// `model` with its forward ops fused (fuse_forward_ops), its value ids
// following the renumbering.
Model fused_model(Model model) {
  std::vector<ValueId> map;
  model.graph = fuse_forward_ops(model.graph, nullptr, &map);
  if (map.empty()) return model;
  auto remap = [&](ValueId& v) {
    if (v.valid()) v = map[v.idx()];
  };
  for (ValueId& v : model.inputs) remap(v);
  for (ValueId& v : model.params) remap(v);
  remap(model.labels);
  remap(model.logits);
  remap(model.loss);
  return model;
}

}  // namespace

Result<Graph> build_step_graph(const ModelOptions& options, int64_t accumulate,
                               const OptimizerConfig& optimizer, UpdateMode mode, Model* model_out,
                               bool fuse, int64_t ranks) {
  MEMFIT_ASSIGN_OR_RETURN(Model model, make_model(options, true));
  if (fuse) model = fused_model(std::move(model));
  Graph& g = model.graph;
  MEMFIT_ASSIGN_OR_RETURN(
      auto grads,
      append_gradients(g, model.loss, model.params, 1.0f / static_cast<float>(accumulate * ranks)));
  MEMFIT_RETURN_IF_ERROR(append_optimizer(g, model.params, grads, optimizer, mode));
  Graph pruned = remove_dead_nodes(g);
  MEMFIT_RETURN_IF_ERROR(verify_graph(pruned));
  if (model_out) *model_out = std::move(model);
  return pruned;
}

NodeSeconds step_cost(const Graph& step, const Backend& backend, CostModel model) {
  if (model == CostModel::roofline) return roofline_cost(backend.roofline_machine());
  return MeasuredCosts::measure(step, backend, 3).as_function();
}

PlanGraph step_planner(const Backend& backend, bool share, const StateBand& band) {
  auto workspaces = std::make_shared<WorkspaceSizes>(backend);
  return [&backend, share, band, workspaces](Graph graph) -> Result<PlannedGraph> {
    MEMFIT_ASSIGN_OR_RETURN(std::vector<size_t> workspace_bytes, workspaces->of(graph));
    MEMFIT_ASSIGN_OR_RETURN(
        BackendPlan planned,
        plan_on_backend(std::move(graph), backend, std::move(workspace_bytes), share, 0, band));
    return PlannedGraph{std::move(planned.graph), std::move(planned.sizes.value_bytes),
                        std::move(planned.plan)};
  };
}

Result<RewrittenStep> rewrite_step_graph(Graph step, const Techniques& techniques,
                                         const TflmsOptions& tflms, const PolicyContext& context) {
  RewrittenStep result;
  if (techniques.automatic) {
    MEMFIT_ASSIGN_OR_RETURN(AutoGraph chosen, auto_step_graph(std::move(step), context));
    result.graph = std::move(chosen.graph);
    result.recompute = chosen.summary.recompute;
    result.swap = chosen.summary.swap;
    result.automatic = std::move(chosen.summary);
    return result;
  }
  MEMFIT_ASSIGN_OR_RETURN(
      RecomputedGraph recomputed,
      recompute_step_graph(std::move(step), techniques.recompute, context, techniques.mirror));
  result.recompute = recomputed.summary;
  MEMFIT_ASSIGN_OR_RETURN(SwappedGraph swapped, swap_step_graph(std::move(recomputed.graph),
                                                                techniques.swap, context, tflms));
  result.graph = std::move(swapped.graph);
  result.swap = swapped.summary;
  return result;
}

namespace {

// compile_step at the spec's budget as given.
Result<CompiledStep> compile_step_at_budget(const StepSpec& spec, const StepBuild& build) {
  MEMFIT_RETURN_IF_ERROR(check_step_spec(spec));
  CompiledStep step;
  step.spec = spec;
  MEMFIT_ASSIGN_OR_RETURN(step.techniques, resolve_techniques(spec));
  const Techniques& t = step.techniques;
  MEMFIT_ASSIGN_OR_RETURN(step.backend,
                          make_backend(spec.backend, spec.threads, spec.fastest_kernels));
  // Without --link-gbps, the swap policies and the prediction take the
  // device's measured host link (the cuda backend's; none on the host).
  if (step.spec.link_gbps == 0) step.spec.link_gbps = step.backend->link_gbps();
  const UpdateMode mode =
      spec.accumulate == 1 ? UpdateMode::apply : UpdateMode::accumulate_and_apply;
  // A step graph in `mode`, its gradient sums fused and its layouts assigned.
  const auto laid_out = [&](UpdateMode mode, Model* model,
                            LayoutSummary* layouts) -> Result<Graph> {
    MEMFIT_ASSIGN_OR_RETURN(
        Graph built, build_step_graph(spec.model, spec.accumulate, spec.optimizer, mode, model,
                                      spec.fuse, spec.ranks));
    if (spec.fuse) built = fuse_gradient_sums(built);
    if (spec.blocked_layouts) return assign_layouts(built, *step.backend, layouts);
    return built;
  };
  MEMFIT_ASSIGN_OR_RETURN(Graph graph, laid_out(mode, &step.model, &step.layouts));
  std::vector<std::pair<std::string, size_t>> states;
  for (const Value& v : graph.values()) {
    if (!v.producer.valid() && is_persistent(v.role)) {
      step.persistent.emplace_back(v.name, v.type.shape);
      states.emplace_back(v.name, v.bytes());
    }
  }
  // Accumulating, the micro-batches that only accumulate run on the same
  // arena: both steps keep their persistent inputs in one band of it.
  Graph acc;
  if (spec.accumulate > 1) {
    MEMFIT_ASSIGN_OR_RETURN(acc, laid_out(UpdateMode::accumulate, nullptr, nullptr));
    for (const Value& v : acc.values()) {
      if (!v.producer.valid() && is_persistent(v.role)) states.emplace_back(v.name, v.bytes());
    }
  }
  const StateBand band = spec.accumulate > 1 ? make_state_band(states) : StateBand{};
  // The choices and the predictions read the same node times: the roofline
  // model's, or (measured: the default of optimal and milp only, since it
  // takes seconds) each distinct node timed on the backend.
  step.seconds = step_cost(graph, *step.backend, t.cost);
  step.forward_seconds = graph_seconds(graph, step.seconds, true);
  const PolicyContext context{step_planner(*step.backend, t.share, band), spec.budget,
                              step.spec.link_gbps, step.seconds, spec.milp_seconds};
  MEMFIT_ASSIGN_OR_RETURN(step.rewritten,
                          rewrite_step_graph(std::move(graph), t, spec.tflms, context));
  if (build.comm && build.comm->size() != spec.ranks) {
    return Status::error("the step is planned for " + std::to_string(spec.ranks) +
                         " ranks but runs on " + std::to_string(build.comm->size()));
  }
  ExecOptions exec{t.share, false, 0, step.spec.link_gbps, band};
  ExecOptions apply_exec = exec;
  if (spec.ranks > 1) {
    const auto bucket_bytes = static_cast<size_t>(spec.bucket_mb * 1e6);
    if (spec.shard == Shard::none) {
      MEMFIT_ASSIGN_OR_RETURN(step.rewritten.graph,
                              insert_all_reduce(std::move(step.rewritten.graph), spec.ranks,
                                                bucket_bytes, &step.all_reduce));
    } else {
      const ShardOptions shard{spec.ranks, build.comm ? build.comm->rank() : 0, bucket_bytes,
                               spec.shard == Shard::gradients};
      MEMFIT_ASSIGN_OR_RETURN(step.rewritten.graph,
                              shard_step(std::move(step.rewritten.graph), shard, &step.zero));
      step.all_reduce = step.zero.buckets;
    }
    apply_exec.comm = build.comm;
    apply_exec.comm_gbps = spec.comm_gbps;
  }
  MEMFIT_ASSIGN_OR_RETURN(
      step.apply, Executable::prepare(std::move(step.rewritten.graph), *step.backend, apply_exec));
  if (build.accumulate_only && spec.accumulate > 1) {
    MEMFIT_ASSIGN_OR_RETURN(RewrittenStep rewritten_acc,
                            rewrite_step_graph(std::move(acc), t, spec.tflms, context));
    MEMFIT_ASSIGN_OR_RETURN(
        step.accumulate_only,
        Executable::prepare(std::move(rewritten_acc.graph), *step.backend, exec));
  }
  return step;
}

// Whether the techniques shape the plan to the memory budget.
bool aims_at_budget(const Techniques& t) {
  return t.automatic || t.recompute == Recompute::budget || t.recompute == Recompute::optimal ||
         t.recompute == Recompute::milp || t.swap == Swap::budget;
}

}  // namespace

Result<CompiledStep> compile_step(const StepSpec& spec, const StepBuild& build) {
  MEMFIT_ASSIGN_OR_RETURN(CompiledStep step, compile_step_at_budget(spec, build));
  const auto fits = [&](const CompiledStep& s) {
    return s.apply->plan().arena_bytes <= spec.budget;
  };
  if (spec.budget <= 1 || fits(step) || !aims_at_budget(step.techniques)) return step;
  // A technique aimed at the budget plans from predicted sizes and may miss
  // it where its smallest plan (the one it makes for a budget no plan
  // reaches) fits: the smallest arena that check_step_budget states is a
  // budget that is then met.
  StepSpec smallest = spec;
  smallest.budget = 1;
  auto least = compile_step_at_budget(smallest, build);
  if (!least || !fits(*least)) return step;
  least->spec.budget = spec.budget;
  return least;
}

}  // namespace memfit
