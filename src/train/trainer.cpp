#include "train/trainer.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace memfit {

Result<std::unique_ptr<Trainer>> Trainer::create(const TrainOptions& options, Ranks ranks,
                                                 int64_t eval_batch) {
  MEMFIT_ASSIGN_OR_RETURN(auto program, TrainingProgram::create(options.step, eval_batch,
                                                                options.poison, ranks.step_comm()));
  if (options.profile || !options.trace_path.empty()) {
    MEMFIT_RETURN_IF_ERROR(program->time_step_kernels());
  }
  return std::unique_ptr<Trainer>(new Trainer(std::move(program), std::move(ranks), options));
}

Trainer::Trainer(std::unique_ptr<TrainingProgram> program, Ranks ranks, const TrainOptions& options)
    : program_(std::move(program)),
      ranks_(std::move(ranks)),
      inputs_(Batch::for_model(program_->model())),
      model_name_(options.step.model.name),
      accumulate_(options.step.accumulate),
      seed_(options.seed),
      dropout_seed_(ranks_.dropout_seed(options.seed)),
      check_replicas_(options.check_replicas) {}

StateStore Trainer::initial_state() const {
  StateStore state;
  program_->init_state(state, seed_);
  return state;
}

Status Trainer::start(const StateStore& state, const StepCounters& counters) {
  MEMFIT_RETURN_IF_ERROR(program_->load_state(state));
  counters_ = counters;
  return Status::ok();
}

Result<std::vector<float>> Trainer::step(const FillMicroBatch& fill, float lr_scale) {
  std::vector<float> losses;
  for (int64_t k = 0; k < accumulate_; ++k) {
    MEMFIT_ASSIGN_OR_RETURN(const float loss, micro_step(fill, lr_scale));
    losses.push_back(loss);
    if (!std::isfinite(loss)) return losses;
  }
  // The first step pays for first touches of the arena: the profile leaves it out.
  if (!stepped_) {
    program_->reset_step_times();
    stepped_ = true;
  }
  return losses;
}

Result<float> Trainer::micro_step(const FillMicroBatch& fill, float lr_scale) {
  MEMFIT_RETURN_IF_ERROR(fill(counters_.micro_step % accumulate_, inputs_));
  MEMFIT_ASSIGN_OR_RETURN(const float mine, program_->micro_step(inputs_.feeds(), dropout_seed_,
                                                                 lr_scale, counters_));
  return ranks_.mean(mine);  // over every rank's rows
}

Status Trainer::check_replicas() {
  if (!check_replicas_) return Status::ok();
  return ranks_.check_replicas(*program_, counters_.optimizer_step);
}

Result<Trainer::Evaluation> Trainer::evaluate(const DataSource& data) {
  MEMFIT_RETURN_IF_ERROR(ranks_.share_model_state(*program_));
  const int64_t batch = program_->eval_batch();
  const int64_t batches = data.test_count() / batch;
  Batch inputs = Batch::for_model(program_->eval_model());
  std::vector<int64_t> examples(static_cast<size_t>(batch));
  // Counts summed over the ranks: correct labels, labels, the batches' losses, batches.
  double counts[4] = {0, 0, 0, 0};
  for (int64_t b = ranks_.rank(); b < batches; b += ranks_.size()) {
    for (int64_t i = 0; i < batch; ++i) examples[static_cast<size_t>(i)] = b * batch + i;
    MEMFIT_RETURN_IF_ERROR(data.fill(true, examples, inputs));
    MEMFIT_ASSIGN_OR_RETURN(const auto evaluated, program_->evaluate(inputs.feeds()));
    const std::vector<int32_t> labels = inputs.label_classes();
    if (evaluated.predicted.size() != labels.size()) {
      return Status::error("the model predicts " + std::to_string(evaluated.predicted.size()) +
                           " classes per batch for " + std::to_string(labels.size()) + " labels");
    }
    for (size_t i = 0; i < labels.size(); ++i) counts[0] += evaluated.predicted[i] == labels[i];
    counts[1] += static_cast<double>(labels.size());
    counts[2] += evaluated.loss;
    counts[3] += 1;
  }
  MEMFIT_RETURN_IF_ERROR(ranks_.sum(counts, 4));
  return Evaluation{counts[0] / counts[1], counts[2] / counts[3]};
}

Result<std::string> Trainer::non_finite_state() {
  MEMFIT_ASSIGN_OR_RETURN(const StateStore state, this->state());
  const std::string bad = non_finite_tensor(state);
  MEMFIT_ASSIGN_OR_RETURN(const bool any, ranks_.any(!bad.empty()));
  if (!any) return std::string();
  return bad.empty() ? std::string("another rank's state") : "tensor '" + bad + "'";
}

Result<StateStore> Trainer::state() const {
  StateStore state;
  MEMFIT_RETURN_IF_ERROR(program_->store_state(state));
  return state;
}

Status Trainer::save_checkpoint(const std::string& path, int64_t epoch, const RunSettings& run) {
  MEMFIT_ASSIGN_OR_RETURN(StateStore state, this->state());
  if (!ranks_.lead()) return Status::ok();
  Checkpoint ck;
  ck.model = model_name_;
  ck.epoch = epoch;
  ck.micro_step = counters_.micro_step;
  ck.optimizer_step = counters_.optimizer_step;
  ck.run = run;
  for (const auto& [name, shape] : program_->state_shapes()) {
    ck.tensors.push_back({name, shape, std::move(state[name])});
  }
  return memfit::save_checkpoint(path, ck);
}

std::string non_finite_tensor(const StateStore& state) {
  std::string first;
  for (const auto& [name, data] : state.tensors()) {
    if (!first.empty() && name >= first) continue;
    if (!std::all_of(data.begin(), data.end(), [](float v) { return std::isfinite(v); }))
      first = name;
  }
  return first;
}

}  // namespace memfit
