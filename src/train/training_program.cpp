#include "train/training_program.h"

#include <algorithm>
#include <map>

#include "core/check.h"
#include "core/hash.h"
#include "core/host_memory.h"
#include "core/random.h"
#include "onnx/model_source.h"
#include "ops/bucket_shapes.h"
#include "ops/typed_graph.h"
#include "step/step_budget.h"

namespace memfit {

Result<std::unique_ptr<TrainingProgram>> TrainingProgram::create(const StepSpec& spec,
                                                                 int64_t eval_batch, bool poison,
                                                                 Communicator* comm) {
  auto program = std::unique_ptr<TrainingProgram>(new TrainingProgram());
  MEMFIT_ASSIGN_OR_RETURN(program->step_,
                          compile_step(spec, StepBuild{.accumulate_only = true, .comm = comm}));
  MEMFIT_RETURN_IF_ERROR(check_step_budget(program->step_));
  CompiledStep& step = program->step_;
  program->batch_ = spec.model.batch;
  program->accumulate_ = spec.accumulate;
  program->eval_batch_ = eval_batch;
  program->init_ = step.model.init;
  program->comm_ = comm;
  program->state_shapes_ = step.persistent;
  // Evaluation fits the same budget: at eval_batch, or else at the largest
  // divisor of it whose plan fits (so the test set stays whole batches).
  const ExecOptions exec{.share = step.techniques.share, .poison = poison, .budget = spec.budget,
                         .link_gbps = spec.link_gbps};
  Status eval_status = Status::ok();
  for (int64_t batch = eval_batch; batch >= 1; --batch) {
    if (eval_batch % batch != 0) continue;
    MEMFIT_ASSIGN_OR_RETURN(Graph eval_graph,
                            build_forward_graph(spec, batch, *step.backend, &program->eval_model_));
    auto prepared = Executable::prepare(std::move(eval_graph), *step.backend, exec);
    if (prepared.is_ok()) {
      program->eval_ = std::move(prepared).value();
      program->eval_batch_ = batch;
      break;
    }
    eval_status = Status::error("evaluation at batch " + std::to_string(batch) + ": " +
                                prepared.message());
    if (spec.budget == 0) break;  // not a question of the budget: no smaller batch helps
  }
  if (program->eval_ == nullptr) return eval_status;
  // Everything the run allocates, against what the machine has, before any of it.
  const size_t accumulate_arena = step.accumulate_only ? step.accumulate_only->plan().arena_bytes : 0;
  const size_t needed = std::max(step.apply->plan().arena_bytes, accumulate_arena) +
                        step.apply->plan().host_bytes +
                        (step.accumulate_only ? step.accumulate_only->plan().host_bytes : 0) +
                        program->eval_->plan().arena_bytes + program->eval_->plan().host_bytes;
  MEMFIT_RETURN_IF_ERROR(check_fits_memory(
      needed, available_memory_bytes(),
      "training (the step's arena and host pool, and evaluation's)"));
  // The micro-batches that only accumulate run on the arena of the step that
  // applies the update, their persistent inputs in the same band of it.
  MEMFIT_RETURN_IF_ERROR(step.apply->allocate(poison, accumulate_arena));
  if (step.accumulate_only) {
    MEMFIT_RETURN_IF_ERROR(step.accumulate_only->allocate_on_arena_of(*step.apply, poison));
  }
  MEMFIT_RETURN_IF_ERROR(program->eval_->allocate(poison));
  return program;
}

void TrainingProgram::init_state(StateStore& state, uint64_t seed) const {
  for (const auto& [name, shape] : state_shapes_) {
    std::vector<float>& data = state[name];
    data.assign(static_cast<size_t>(num_elements(shape)), 0.0f);
    auto it = init_.find(name);
    if (it == init_.end()) continue;  // optimizer state and accumulators start at zero
    const Init& init = it->second;
    const uint64_t key = fnv1a(name);
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
        case Init::Kind::values:
          data[i] = (*init.values)[i];
          break;
      }
    }
  }
}

bool TrainingProgram::is_model_state(const std::string& name) const {
  const Graph& g = step_.apply->graph();
  const ValueId v = g.find_value(name);
  return v.valid() && g.value(v).role == Role::state;
}

namespace {

// The bucket of sharded state `sharded`, from the per-parameter states of
// `state` (plain), each packed in its parameter's layout at its offsets.
Result<std::vector<float>> pack_bucket(const ShardedState& sharded, const StateStore& state) {
  const BucketAttrs& a = sharded.bucket;
  std::vector<float> bucket(static_cast<size_t>(a.size), 0.0f);
  const std::vector<Shape> shapes = bucket_shapes(a);
  for (size_t i = 0; i < sharded.parameters.size(); ++i) {
    const Shape& shape = shapes[i];
    const std::string name = sharded.parameters[i] + sharded.suffix;
    const std::vector<float>* plain = state.find(name);
    if (!plain || plain->size() != static_cast<size_t>(num_elements(shape))) {
      return Status::error("state '" + name + "' is missing or has the wrong size");
    }
    pack_layout(plain->data(), shape, sharded.layouts[i], bucket.data() + a.offsets[i]);
  }
  return bucket;
}

// The per-parameter states of a whole bucket into `state`, plain.
void unpack_bucket(const ShardedState& sharded, const std::vector<float>& bucket, StateStore& state) {
  const BucketAttrs& a = sharded.bucket;
  const std::vector<Shape> shapes = bucket_shapes(a);
  for (size_t i = 0; i < sharded.parameters.size(); ++i) {
    const Shape& shape = shapes[i];
    std::vector<float>& plain = state[sharded.parameters[i] + sharded.suffix];
    plain.resize(static_cast<size_t>(num_elements(shape)));
    unpack_layout(bucket.data() + a.offsets[i], shape, sharded.layouts[i], plain.data());
  }
}

}  // namespace

Status TrainingProgram::load_state(const StateStore& given) {
  // Sharded, this rank keeps its block of each bucket of optimizer state.
  StateStore sharded_copy;
  const bool sharded = !step_.passes.zero.states.empty();
  if (sharded) {
    sharded_copy = given;
    for (const ShardedState& s : step_.passes.zero.states) {
      MEMFIT_ASSIGN_OR_RETURN(std::vector<float> bucket, pack_bucket(s, given));
      const auto block = static_cast<size_t>(s.bucket.block());
      const auto first = bucket.begin() + static_cast<std::ptrdiff_t>(block * static_cast<size_t>(s.bucket.rank));
      sharded_copy[s.name].assign(first, first + static_cast<std::ptrdiff_t>(block));
    }
  }
  const StateStore& state = sharded ? sharded_copy : given;
  MEMFIT_RETURN_IF_ERROR(step_.apply->load_state(state));
  if (step_.accumulate_only) MEMFIT_RETURN_IF_ERROR(step_.accumulate_only->load_state(state));
  holder_ = step_.apply.get();
  return Status::ok();
}

Status TrainingProgram::store_state(StateStore& state) const {
  MEMFIT_CHECK(holder_ != nullptr);
  // The other executable first: the holder's values are the newer ones.
  for (const Executable* exe : {step_.apply.get(), step_.accumulate_only.get()}) {
    if (exe != nullptr && exe != holder_) MEMFIT_RETURN_IF_ERROR(exe->store_state(state));
  }
  MEMFIT_RETURN_IF_ERROR(holder_->store_state(state));
  // Sharded: every rank's blocks, summed into whole buckets (the other
  // ranks' blocks are zeros here), then per parameter.
  for (const ShardedState& s : step_.passes.zero.states) {
    MEMFIT_CHECK(comm_ != nullptr);
    std::vector<float> bucket(static_cast<size_t>(s.bucket.size), 0.0f);
    const std::vector<float>& mine = state[s.name];
    std::copy(mine.begin(), mine.end(),
              bucket.begin() + static_cast<std::ptrdiff_t>(s.bucket.block() * s.bucket.rank));
    MEMFIT_RETURN_IF_ERROR(comm_->all_reduce_sum(bucket.data(), bucket.size()));
    unpack_bucket(s, bucket, state);
  }
  return Status::ok();
}

Result<float> TrainingProgram::micro_step(const Feeds& feeds, uint64_t seed, float lr_scale,
                                          StepCounters& counters) {
  if (holder_ == nullptr) return Status::error("the training state was never loaded (load_state)");
  const bool apply = (counters.micro_step + 1) % accumulate_ == 0;
  Executable& exe = apply ? *step_.apply : *step_.accumulate_only;
  if (&exe != holder_) {
    MEMFIT_RETURN_IF_ERROR(exe.copy_state_from(*holder_));
    holder_ = &exe;
  }
  MEMFIT_ASSIGN_OR_RETURN(StepResult result,
                          exe.run(feeds, StepContext{seed, counters.micro_step, counters.optimizer_step, lr_scale}));
  high_water_bytes_ = std::max(high_water_bytes_, result.high_water_bytes);
  ++counters.micro_step;
  if (apply) ++counters.optimizer_step;
  return result.outputs.at("loss")[0];
}

Result<TrainingProgram::Evaluated> TrainingProgram::evaluate(const Feeds& feeds) {
  if (holder_ == nullptr) return Status::error("the training state was never loaded (load_state)");
  MEMFIT_RETURN_IF_ERROR(eval_->copy_state_from(*holder_));
  MEMFIT_ASSIGN_OR_RETURN(StepResult result, eval_->run(feeds, StepContext{}));
  const Graph& graph = eval_->graph();
  const ValueId logits_id = graph.outputs().at(0);
  const std::vector<float>& logits = result.outputs.at(graph.value(logits_id).name);
  const Shape& shape = graph.value(logits_id).type.shape;
  const auto classes = static_cast<size_t>(shape[1]);
  Evaluated out;
  out.predicted.resize(static_cast<size_t>(shape[0]));
  for (size_t n = 0; n < out.predicted.size(); ++n) {
    const auto row = logits.begin() + static_cast<std::ptrdiff_t>(n * classes);
    out.predicted[n] = static_cast<int32_t>(std::max_element(row, row + static_cast<std::ptrdiff_t>(classes)) - row);
  }
  out.loss = result.outputs.at(graph.value(graph.outputs().at(1)).name).at(0);
  return out;
}

bool TrainingProgram::loss_in_nats() const {
  const Graph& graph = eval_->graph();
  const NodeId producer = graph.value(graph.outputs().at(1)).producer;
  return producer.valid() && graph.node(producer).op == OpKind::softmax_cross_entropy;
}

Status TrainingProgram::copy_state_to(Executable& exe) const {
  if (holder_ == nullptr) return Status::error("the training state was never loaded (load_state)");
  return exe.copy_state_from(*holder_);
}

void TrainingProgram::reset_step_times() {
  step_.apply->reset_times();
  if (step_.accumulate_only) step_.accumulate_only->reset_times();
}

std::string TrainingProgram::backend_summary() const {
  std::map<std::string, int> counts;
  counts["reference"] = 0;  // always said, 0 included: the oracle's kernels are slow
  for (const auto& name : step_.apply->node_backends()) ++counts[name];
  std::string out;
  for (const auto& [name, count] : counts) {
    out += (out.empty() ? "" : ", ") + name + " " + std::to_string(count);
  }
  return out;
}

}  // namespace memfit
