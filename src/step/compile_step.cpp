#include "step/compile_step.h"

#include <optional>

#include "backends/cuda/cuda_backend.h"
#include "core/check.h"
#include "memfit/dist.h"
#include "onnx/model_source.h"
#include "ops/typed_graph.h"
#include "runtime/backend_plan.h"
#include "step/graph_dumps.h"
#include "step/workspace_sizes.h"

namespace memfit {

Result<std::unique_ptr<Backend>> make_backend(BackendKind kind, int threads,
                                              bool fastest_kernels) {
  switch (kind) {
    case BackendKind::cpu:
      return make_cpu_backend(threads);
    case BackendKind::reference:
      return make_reference_backend();
    case BackendKind::cuda:
      // One GPU per rank: the ranks on a machine take its GPUs by local rank.
      return make_cuda_backend(rank_gpu(), fastest_kernels);
  }
  MEMFIT_CHECK(false);
  return Status::error("unknown backend");
}

namespace {

ForwardModel forward_of(const Model& model) {
  return ForwardModel{model.graph,  model.inputs, model.params,
                      model.labels, model.logits, model.loss};
}

// `model` with the graph and values the lowering passes left in `forward`.
void adopt(Model& model, ForwardModel forward) {
  model.graph = std::move(forward.graph);
  model.inputs = std::move(forward.inputs);
  model.params = std::move(forward.params);
  model.labels = forward.labels;
  model.logits = forward.logits;
  model.loss = forward.loss;
}

}  // namespace

Result<Graph> build_step_graph(const ModelOptions& options, int64_t accumulate,
                               const OptimizerConfig& optimizer, UpdateMode mode, Model* model_out,
                               bool fuse, int64_t ranks) {
  MEMFIT_ASSIGN_OR_RETURN(Model model, make_model(options, true));
  StepPipelineOptions lowering;
  lowering.fuse_forward = fuse;
  lowering.fuse_gradient_sums = false;
  lowering.blocked_layouts = false;
  lowering.accumulate = accumulate;
  lowering.ranks = ranks;
  lowering.optimizer = optimizer;
  lowering.mode = mode;
  const StepPipeline pipeline = step_pipeline(lowering);
  ForwardModel forward = forward_of(model);
  PassContext context;
  context.model = &forward;
  Graph graph = model.graph;
  MEMFIT_RETURN_IF_ERROR(pipeline.lowering.run(graph, context).status());
  if (model_out) {
    adopt(model, std::move(forward));
    *model_out = std::move(model);
  }
  return graph;
}

Result<Graph> build_forward_graph(const StepSpec& spec, int64_t batch, const Backend& backend,
                                  Model* model_out) {
  ModelOptions options = spec.model;
  options.batch = batch;
  MEMFIT_ASSIGN_OR_RETURN(Model model, make_model(options, false));
  Graph graph = model.graph;
  // Evaluation reports the loss as well as the predictions: it stays.
  if (model.loss.valid()) graph.mark_output(model.loss);
  PassContext context;
  context.backend = &backend;
  MEMFIT_RETURN_IF_ERROR(forward_pipeline(spec.blocked_layouts).run(graph, context).status());
  if (model_out) *model_out = std::move(model);
  return graph;
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
    const bool reordered = !planned.order.empty();
    return PlannedGraph{std::move(planned.graph), std::move(planned.sizes.value_bytes),
                        std::move(planned.plan), reordered};
  };
}

namespace {

// One graph of the step on its way through the pipeline.
struct StepGraph {
  Graph graph;
  PassContext context;
  StepPipeline pipeline;
};

// The pipeline of `spec`'s step in `mode`, from `model`'s forward graph; its
// graphs go to build.dump_graphs where asked (the micro-batches that only
// accumulate only when their executable is built).
StepGraph start_step_graph(const StepSpec& spec, const Techniques& t, const StepBuild& build,
                           const Backend& backend, ForwardModel* model, UpdateMode mode,
                           const std::string& graph_name) {
  StepPipelineOptions options;
  options.fuse_forward = options.fuse_gradient_sums = spec.fuse;
  options.blocked_layouts = spec.blocked_layouts;
  options.accumulate = spec.accumulate;
  options.ranks = spec.ranks;
  options.optimizer = spec.optimizer;
  options.mode = mode;
  options.automatic = t.automatic;
  options.recompute = t.recompute;
  options.mirror = t.mirror;
  options.swap = t.swap;
  options.tflms = spec.tflms;
  options.zero = spec.shard != Shard::none;
  options.zero_gradients = spec.shard == Shard::gradients;
  options.bucket_bytes = static_cast<size_t>(spec.bucket_mb * 1e6);
  options.rank = build.comm ? build.comm->rank() : 0;
  StepGraph step{.graph = model->graph, .context = {}, .pipeline = step_pipeline(options)};
  step.context.backend = &backend;
  step.context.model = model;
  const bool shown = mode != UpdateMode::accumulate || build.accumulate_only;
  if (!build.dump_graphs.empty() && shown) {
    step.context.after_pass = graph_dumper(build.dump_graphs, graph_name);
  }
  return step;
}

// Runs the lowering passes, showing the model's graph first.
Status lower(StepGraph& step) {
  if (step.context.after_pass) MEMFIT_RETURN_IF_ERROR(step.context.after_pass("model", step.graph));
  MEMFIT_RETURN_IF_ERROR(step.pipeline.lowering.run(step.graph, step.context).status());
  step.context.model = nullptr;  // the memory passes read no model
  return Status::ok();
}

// Runs the memory passes under `policy` and prepares the executable, in the
// order the schedule chose.
Result<std::unique_ptr<Executable>> finish(StepGraph& step, const PolicyContext& policy,
                                           const Backend& backend, ExecOptions exec) {
  step.context.policy = policy;
  MEMFIT_RETURN_IF_ERROR(step.pipeline.memory.run(step.graph, step.context).status());
  exec.schedule = false;
  return Executable::prepare(std::move(step.graph), backend, exec);
}

// The persistent inputs of `graph` (name, bytes), in order; with `shapes`,
// their shapes too.
std::vector<std::pair<std::string, size_t>> persistent_bytes(
    const Graph& graph, std::vector<std::pair<std::string, Shape>>* shapes = nullptr) {
  std::vector<std::pair<std::string, size_t>> states;
  for (const Value& v : graph.values()) {
    if (v.producer.valid() || !is_persistent(v.role)) continue;
    states.emplace_back(v.name, v.bytes());
    if (shapes) shapes->emplace_back(v.name, v.type.shape);
  }
  return states;
}

// compile_step at the spec's budget as given, of a checked spec.
Result<CompiledStep> compile_step_at_budget(const StepSpec& spec, const StepBuild& build) {
  CompiledStep step;
  step.spec = spec;
  MEMFIT_ASSIGN_OR_RETURN(step.techniques, resolve_techniques(spec));
  const Techniques& t = step.techniques;
  MEMFIT_ASSIGN_OR_RETURN(step.backend,
                          make_backend(spec.backend, spec.threads, spec.fastest_kernels));
  const Backend& backend = *step.backend;
  if (build.comm && build.comm->size() != spec.ranks) {
    return Status::error("the step is planned for " + std::to_string(spec.ranks) +
                         " ranks but runs on " + std::to_string(build.comm->size()));
  }
  if (!build.dump_graphs.empty()) MEMFIT_RETURN_IF_ERROR(prepare_dump_dir(build.dump_graphs));
  // Without --link-gbps, the swap policies and the prediction take the
  // device's measured host link (the cuda backend's; none on the host).
  if (step.spec.link_gbps == 0) step.spec.link_gbps = backend.link_gbps();

  // 3. Lowering, of both graphs.
  MEMFIT_ASSIGN_OR_RETURN(step.model, make_model(spec.model, true));
  ForwardModel forward = forward_of(step.model);
  ForwardModel acc_forward;  // the unfused model again, for the accumulating graph
  if (spec.accumulate > 1) acc_forward = forward;
  const UpdateMode mode =
      spec.accumulate == 1 ? UpdateMode::apply : UpdateMode::accumulate_and_apply;
  StepGraph apply = start_step_graph(spec, t, build, backend, &forward, mode, "step");
  MEMFIT_RETURN_IF_ERROR(lower(apply));
  adopt(step.model, std::move(forward));
  auto states = persistent_bytes(apply.graph, &step.persistent);
  // Accumulating, the micro-batches that only accumulate run on the same
  // arena: both steps keep their persistent inputs in one band of it.
  std::optional<StepGraph> acc;
  StateBand band;
  if (spec.accumulate > 1) {
    acc = start_step_graph(spec, t, build, backend, &acc_forward, UpdateMode::accumulate,
                           "accumulate");
    MEMFIT_RETURN_IF_ERROR(lower(*acc));
    const auto acc_states = persistent_bytes(acc->graph);
    states.insert(states.end(), acc_states.begin(), acc_states.end());
    band = make_state_band(states);
  }

  // 4. The choices and the predictions read the same node times: the
  // roofline model's, or (measured: the default of optimal and milp only,
  // since it takes seconds) each distinct node timed on the backend.
  step.seconds = step_cost(apply.graph, backend, t.cost);
  step.forward_seconds = graph_seconds(apply.graph, step.seconds, true);
  const PolicyContext policy{step_planner(backend, t.share, band), spec.budget,
                             step.spec.link_gbps, step.seconds, spec.milp_seconds};

  // 5. The memory passes and 6. the executables.
  const ExecOptions exec{t.share, false, 0, step.spec.link_gbps, band};
  ExecOptions apply_exec = exec;
  if (spec.ranks > 1) {
    apply_exec.comm = build.comm;
    apply_exec.comm_gbps = spec.comm_gbps;
  }
  MEMFIT_ASSIGN_OR_RETURN(step.apply, finish(apply, policy, backend, apply_exec));
  step.passes = std::move(apply.context.summaries);
  if (build.accumulate_only && acc) {
    MEMFIT_ASSIGN_OR_RETURN(step.accumulate_only, finish(*acc, policy, backend, exec));
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
  MEMFIT_RETURN_IF_ERROR(check_step_spec(spec));
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
