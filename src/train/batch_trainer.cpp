#include "train/batch_trainer.h"

#include <algorithm>
#include <utility>

#include "train/plan_report.h"
#include "train/run_outputs.h"
#include "train/train_checks.h"

namespace memfit {
namespace {

// The forward graph of `options`' model at `rows`, prepared as the step's
// evaluation is (TrainingProgram::create); `model` receives its model.
Result<std::unique_ptr<Executable>> compile_forward(const TrainOptions& options,
                                                    const CompiledStep& step, int64_t rows,
                                                    Model& model) {
  MEMFIT_ASSIGN_OR_RETURN(Graph graph,
                          build_forward_graph(options.step, rows, *step.backend, &model));
  return Executable::prepare(std::move(graph), *step.backend,
                             ExecOptions{.share = step.techniques.share,
                                         .poison = options.poison,
                                         .budget = options.step.budget,
                                         .link_gbps = options.step.link_gbps});
}

}  // namespace

BatchTrainer::BatchTrainer(const TrainOptions& options) : options_(options) {}

Result<std::unique_ptr<BatchTrainer>> BatchTrainer::create(const TrainOptions& given) {
  // The data is the caller's, not Fashion-MNIST: the model may read anything.
  TrainOptions options = given;
  options.synthetic = true;
  MEMFIT_ASSIGN_OR_RETURN(options, checked_options(options, 1));
  auto trainer = std::unique_ptr<BatchTrainer>(new BatchTrainer(options));
  MEMFIT_ASSIGN_OR_RETURN(Ranks ranks, Ranks::join(nullptr, options.step.backend));
  const int64_t batch = options.step.model.batch;
  MEMFIT_ASSIGN_OR_RETURN(auto first, Trainer::create(options, std::move(ranks), batch));
  MEMFIT_RETURN_IF_ERROR(first->start(first->initial_state(), StepCounters{}));
  trainer->active_ = first.get();
  trainer->inputs_ = input_specs(first->program().model());
  trainer->trainers_.emplace(batch, std::move(first));
  const OptimizerConfig& optimizer = options.step.optimizer;
  trainer->base_lr_ = optimizer.lr > 0 ? optimizer.lr : default_learning_rate(optimizer.kind);
  MEMFIT_ASSIGN_OR_RETURN(trainer->schedule_, lr_schedule_of(options));
  // Checkpoints record the schedule's kind, which `memfit train --resume` checks.
  trainer->run_ = RunSettings{
      batch, options.step.accumulate, 0, 0, static_cast<int64_t>(options.schedule), options.seed,
      ""};
  return trainer;
}

float BatchTrainer::lr_scale(int64_t step, std::optional<int64_t> total) const {
  if (total) return memfit::lr_scale(schedule_, step, *total);
  LrSchedule undecayed = schedule_;
  undecayed.kind = Schedule::constant;
  return memfit::lr_scale(undecayed, step, 0);
}

std::string BatchTrainer::plan_json() const {
  const TrainingProgram& program = trainers_.at(batch())->program();
  return plan_report_json(PlanRequest{options_.step}, plan_report(program.compiled()));
}

Result<Trainer*> BatchTrainer::trainer_of(int64_t rows) {
  auto it = trainers_.find(rows);
  if (it == trainers_.end()) {
    TrainOptions options = options_;
    options.step.model.batch = rows;
    MEMFIT_ASSIGN_OR_RETURN(Ranks ranks, Ranks::join(nullptr, options.step.backend));
    auto made = Trainer::create(options, std::move(ranks), rows);
    if (!made) {
      return Status::error("a step of " + std::to_string(rows) + " rows (the settings' batch is " +
                           std::to_string(batch()) + "): " + made.message());
    }
    it = trainers_.emplace(rows, std::move(made).value()).first;
  }
  Trainer* trainer = it->second.get();
  if (trainer != active_) {
    MEMFIT_ASSIGN_OR_RETURN(const StateStore state, active_->state());
    MEMFIT_RETURN_IF_ERROR(trainer->start(state, active_->counters()));
    active_ = trainer;
  }
  return trainer;
}

Result<float> BatchTrainer::step(const std::vector<HostArray>& arrays, float lr_scale) {
  MEMFIT_ASSIGN_OR_RETURN(Trainer * trainer, trainer_of(arrays.at(0).shape.at(0)));
  return trainer->micro_step([&](int64_t, Batch& batch) { return write_arrays(arrays, batch); },
                             lr_scale);
}

Result<BatchTrainer::Forward*> BatchTrainer::forward_of(int64_t rows) {
  auto it = forwards_.find(rows);
  if (it != forwards_.end()) return &it->second;
  Forward forward;
  const auto step = trainers_.find(rows);
  if (step != trainers_.end() && step->second->program().eval_batch() == rows) {
    TrainingProgram& program = step->second->program();
    forward.executable = &program.eval_executable();
    forward.inputs = Batch::for_model(program.eval_model());
  } else {
    Model model;
    auto prepared = compile_forward(options_, active_->program().compiled(), rows, model);
    if (!prepared) {
      return Status::error("evaluation of " + std::to_string(rows) +
                           " rows: " + prepared.message());
    }
    forward.owned = std::move(prepared).value();
    MEMFIT_RETURN_IF_ERROR(forward.owned->allocate(options_.poison));
    forward.executable = forward.owned.get();
    forward.inputs = Batch::for_model(model);
  }
  return &forwards_.emplace(rows, std::move(forward)).first->second;
}

Result<StepResult> BatchTrainer::forward(const std::vector<HostArray>& arrays, Batch** inputs,
                                         const Graph** graph) {
  MEMFIT_ASSIGN_OR_RETURN(Forward * forward, forward_of(arrays.at(0).shape.at(0)));
  MEMFIT_RETURN_IF_ERROR(write_arrays(arrays, forward->inputs));
  Executable& exe = *forward->executable;
  MEMFIT_RETURN_IF_ERROR(active_->program().copy_state_to(exe));
  *inputs = &forward->inputs;
  *graph = &exe.graph();
  return exe.run(forward->inputs.feeds(), StepContext{});
}

Result<BatchEvaluation> BatchTrainer::evaluate(const std::vector<HostArray>& arrays) {
  Batch* inputs = nullptr;
  const Graph* graph = nullptr;
  MEMFIT_ASSIGN_OR_RETURN(const StepResult result, forward(arrays, &inputs, &graph));
  if (graph->outputs().size() < 2) return Status::error("the model has no loss to evaluate");
  BatchEvaluation out;
  out.loss = result.outputs.at(graph->value(graph->outputs()[1]).name).at(0);
  // Classifiers (integer labels): the label elements whose class has the largest logit.
  const Value& logits = graph->value(graph->outputs()[0]);
  const auto label =
      std::find_if(inputs_.begin(), inputs_.end(), [](const InputSpec& s) { return s.label; });
  if (label == inputs_.end() || label->dtype != DType::i32) return out;
  const std::vector<int32_t>& labels = inputs->find(label->name)->i32;
  const std::vector<float>& values = result.outputs.at(logits.name);
  const auto classes = static_cast<size_t>(logits.type.shape.at(1));
  if (labels.size() * classes != values.size()) {
    return Status::error("the model's output " + shape_string(logits.type.shape) +
                         " does not match its " + std::to_string(labels.size()) + " labels");
  }
  size_t correct = 0;
  for (size_t r = 0; r < labels.size(); ++r) {
    const float* row = values.data() + r * classes;
    correct += std::max_element(row, row + classes) - row == labels[r];
  }
  out.accuracy = static_cast<double>(correct) / static_cast<double>(labels.size());
  return out;
}

Result<BatchOutput> BatchTrainer::predict(const std::vector<HostArray>& arrays) {
  Batch* inputs = nullptr;
  const Graph* graph = nullptr;
  MEMFIT_ASSIGN_OR_RETURN(StepResult result, forward(arrays, &inputs, &graph));
  const Value& logits = graph->value(graph->outputs()[0]);
  return BatchOutput{logits.type.shape, std::move(result.outputs.at(logits.name))};
}

Result<std::vector<TrainedTensor>> BatchTrainer::trained() const {
  MEMFIT_ASSIGN_OR_RETURN(StateStore state, active_->state());
  return trained_tensors(active_->program(), state);
}

Status BatchTrainer::save(const std::string& path, const RunPosition& position) {
  RunSettings run = run_;
  run.train_examples = position.train_examples;
  run.epochs = position.epochs;
  return active_->save_checkpoint(path, position.epoch, run);
}

Result<RunPosition> BatchTrainer::load(const std::string& path) {
  MEMFIT_ASSIGN_OR_RETURN(Checkpoint ck, load_checkpoint(path));
  const TrainingProgram& program = active_->program();
  // --accumulate before the tensors: it changes them too, and is named as the flag it is.
  if (ck.run.accumulate != options_.step.accumulate) {
    return Status::error("checkpoint " + path + " was made with --accumulate " +
                         std::to_string(ck.run.accumulate) + ", this trainer has " +
                         std::to_string(options_.step.accumulate));
  }
  MEMFIT_RETURN_IF_ERROR(check_matches(ck, options_.step.model.name, program.state_shapes()));
  StateStore state;
  for (NamedTensor& t : ck.tensors) state[t.name] = std::move(t.data);
  MEMFIT_RETURN_IF_ERROR(active_->start(state, StepCounters{ck.micro_step, ck.optimizer_step}));
  return RunPosition{ck.epoch, ck.run.train_examples, ck.run.epochs};
}

}  // namespace memfit
