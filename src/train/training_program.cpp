#include "train/training_program.h"

#include <algorithm>
#include <map>

#include "autodiff/autodiff.h"
#include "core/random.h"
#include "ops/typed_graph.h"

namespace memfit {

Result<Graph> build_step_graph(const ModelOptions& options, int64_t accumulate,
                               const OptimizerConfig& optimizer, UpdateMode mode, Model* model_out) {
  MEMFIT_ASSIGN_OR_RETURN(Model model, build_model(options, true));
  Graph& g = model.graph;
  MEMFIT_ASSIGN_OR_RETURN(auto grads, append_gradients(g, model.loss, model.params,
                                                       1.0f / static_cast<float>(accumulate)));
  MEMFIT_RETURN_IF_ERROR(append_optimizer(g, model.params, grads, optimizer, mode));
  Graph pruned = remove_dead_nodes(g);
  MEMFIT_RETURN_IF_ERROR(verify_graph(pruned));
  if (model_out) *model_out = std::move(model);
  return pruned;
}

namespace {

uint64_t name_hash(const std::string& name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

}  // namespace

Result<RecomputedGraph> recompute_step_graph(Graph step, Recompute recompute,
                                             const Backend& backend, const ExecOptions& exec,
                                             const RecomputeCost& cost, bool mirror) {
  const ExecOptions planning{exec.share, false, 0};
  auto arena_of = [&](const Graph& graph) -> Result<size_t> {
    MEMFIT_ASSIGN_OR_RETURN(auto prepared, Executable::prepare(graph, backend, planning));
    return prepared->plan().arena_bytes;
  };
  return apply_recompute_costed(std::move(step), recompute, exec.budget, arena_of, cost, mirror);
}

NodeSeconds step_cost(const Graph& step, const Backend& backend, CostModel model) {
  if (model == CostModel::roofline) return roofline_cost();
  return MeasuredCosts::measure(step, backend, 3).as_function();
}

std::unique_ptr<Backend> make_backend(const std::string& name, int threads) {
  if (name == "cpu") return make_cpu_backend(threads);
  if (name == "reference") return make_reference_backend();
  return nullptr;
}

Result<RewrittenStep> rewrite_step_graph(Graph step, const Backend& backend,
                                         const ExecOptions& exec,
                                         const StepTechniques& techniques,
                                         const NodeSeconds& seconds) {
  RewrittenStep result;
  if (techniques.auto_policy) {
    if (techniques.recompute != Recompute::none || techniques.swap != Swap::none ||
        techniques.mirror) {
      return Status::error(
          "--policy auto chooses recomputation and swapping itself; drop --recompute, --swap "
          "and --mirror");
    }
    MEMFIT_ASSIGN_OR_RETURN(AutoGraph chosen,
                            auto_step_graph(std::move(step), backend, exec, seconds));
    result.graph = std::move(chosen.graph);
    result.recompute = chosen.summary.recompute;
    result.swap = chosen.summary.swap;
    result.automatic = std::move(chosen.summary);
    return result;
  }
  MEMFIT_ASSIGN_OR_RETURN(
      RecomputedGraph recomputed,
      recompute_step_graph(std::move(step), techniques.recompute, backend, exec,
                           RecomputeCost{seconds, techniques.milp_seconds}, techniques.mirror));
  result.recompute = recomputed.summary;
  MEMFIT_ASSIGN_OR_RETURN(
      SwappedGraph swapped,
      swap_step_graph(std::move(recomputed.graph), techniques.swap, backend, exec,
                      techniques.tflms, seconds));
  result.graph = std::move(swapped.graph);
  result.swap = swapped.summary;
  return result;
}

Result<std::unique_ptr<TrainingProgram>> TrainingProgram::create(
    const ModelOptions& model, int64_t accumulate, const OptimizerConfig& optimizer,
    int64_t eval_batch, const Backend& backend, const ExecOptions& exec,
    const StepTechniques& techniques) {
  if (accumulate < 1) return Status::error("--accumulate must be at least 1");
  auto program = std::unique_ptr<TrainingProgram>(new TrainingProgram());
  program->batch_ = model.batch;
  program->accumulate_ = accumulate;
  program->eval_batch_ = eval_batch;
  Model built;
  const UpdateMode apply_mode = accumulate == 1 ? UpdateMode::apply : UpdateMode::accumulate_and_apply;
  MEMFIT_ASSIGN_OR_RETURN(Graph apply, build_step_graph(model, accumulate, optimizer, apply_mode, &built));
  program->init_ = built.init;
  program->model_ = built;
  for (const Value& v : apply.values()) {
    if (!v.producer.valid() && is_persistent(v.role)) program->state_shapes_.emplace_back(v.name, v.type.shape);
  }
  // Measuring node times takes seconds: only the cost-driven choices read them.
  NodeSeconds seconds;
  if (techniques.recompute == Recompute::optimal || techniques.recompute == Recompute::milp ||
      techniques.auto_policy) {
    seconds = step_cost(apply, backend, techniques.cost);
  }
  MEMFIT_ASSIGN_OR_RETURN(RewrittenStep rewritten,
                          rewrite_step_graph(std::move(apply), backend, exec, techniques, seconds));
  program->recompute_summary_ = rewritten.recompute;
  program->swap_summary_ = rewritten.swap;
  MEMFIT_ASSIGN_OR_RETURN(program->apply_,
                          Executable::compile(std::move(rewritten.graph), backend, exec));
  if (accumulate > 1) {
    MEMFIT_ASSIGN_OR_RETURN(Graph acc, build_step_graph(model, accumulate, optimizer,
                                                        UpdateMode::accumulate, &built));
    MEMFIT_ASSIGN_OR_RETURN(RewrittenStep rewritten_acc,
                            rewrite_step_graph(std::move(acc), backend, exec, techniques, seconds));
    MEMFIT_ASSIGN_OR_RETURN(program->accumulate_only_,
                            Executable::compile(std::move(rewritten_acc.graph), backend, exec));
  }
  ModelOptions eval_options = model;
  eval_options.batch = eval_batch;
  MEMFIT_ASSIGN_OR_RETURN(program->eval_model_, build_model(eval_options, false));
  MEMFIT_ASSIGN_OR_RETURN(program->eval_, Executable::compile(remove_dead_nodes(program->eval_model_.graph),
                                                              backend, exec));
  return program;
}

void TrainingProgram::init_state(StateStore& state, uint64_t seed) const {
  for (const auto& [name, shape] : state_shapes_) {
    std::vector<float>& data = state[name];
    data.assign(static_cast<size_t>(num_elements(shape)), 0.0f);
    auto it = init_.find(name);
    if (it == init_.end()) continue;  // optimizer state and accumulators start at zero
    const Init& init = it->second;
    const uint64_t key = name_hash(name);
    for (size_t i = 0; i < data.size(); ++i) {
      switch (init.kind) {
        case Init::Kind::zeros:
          break;
        case Init::Kind::ones:
          data[i] = 1.0f;
          break;
        case Init::Kind::uniform:
          data[i] = (2.0f * random_uniform(seed, 0, key, i) - 1.0f) * init.bound;
          break;
      }
    }
  }
}

Result<float> TrainingProgram::micro_step(StateStore& state, const Feeds& feeds, uint64_t seed,
                                          float lr_scale, StepCounters& counters) {
  const bool apply = (counters.micro_step + 1) % accumulate_ == 0;
  Executable& exe = apply ? *apply_ : *accumulate_only_;
  MEMFIT_ASSIGN_OR_RETURN(StepResult result,
                          exe.run(state, feeds, StepContext{seed, counters.micro_step, counters.optimizer_step, lr_scale}));
  high_water_bytes_ = std::max(high_water_bytes_, result.high_water_bytes);
  ++counters.micro_step;
  if (apply) ++counters.optimizer_step;
  return result.outputs.at("loss")[0];
}

Result<std::vector<int32_t>> TrainingProgram::predict(StateStore& state, const Feeds& feeds) {
  MEMFIT_ASSIGN_OR_RETURN(StepResult result, eval_->run(state, feeds, StepContext{}));
  const ValueId logits_id = eval_->graph().outputs()[0];
  const std::vector<float>& logits = result.outputs.at(eval_->graph().value(logits_id).name);
  const Shape& shape = eval_->graph().value(logits_id).type.shape;
  const auto classes = static_cast<size_t>(shape[1]);
  std::vector<int32_t> predicted(static_cast<size_t>(shape[0]));
  for (size_t n = 0; n < predicted.size(); ++n) {
    const auto row = logits.begin() + static_cast<std::ptrdiff_t>(n * classes);
    predicted[n] = static_cast<int32_t>(std::max_element(row, row + static_cast<std::ptrdiff_t>(classes)) - row);
  }
  return predicted;
}

std::string TrainingProgram::backend_summary() const {
  std::map<std::string, int> counts;
  for (const auto& name : apply_->node_backends()) ++counts[name];
  std::string out;
  for (const auto& [name, count] : counts) {
    out += (out.empty() ? "" : ", ") + name + " " + std::to_string(count);
  }
  return out;
}

}  // namespace memfit
