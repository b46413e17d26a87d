// A model trained one micro-batch at a time on a caller's own arrays
// (memfit.Trainer in Python): the settings of `memfit train` without its
// data set. The step is compiled once for the settings' batch; a micro-batch
// of another size (the last of an epoch) gets a step of its own, compiled
// for that size under the same settings and budget and kept; the state
// moves to whichever step runs (copied when the size changes). Evaluation
// and prediction run forward-only executables: the step's own evaluation at
// its batch, one compiled per other size, kept. The learning rate follows the
// options' schedule (warmup, then constant or decay to min_lr) over a length
// the caller gives, which checkpoints record as `memfit train` does.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "memfit/train.h"
#include "train/checkpoint.h"
#include "train/data_source.h"
#include "train/lr_schedule.h"
#include "train/trainer.h"
#include "train/user_batch.h"

namespace memfit {

// What an evaluation of a batch found.
struct BatchEvaluation {
  double loss = 0;                 // the model's loss (the evaluation graph's): a mean
  std::optional<double> accuracy;  // classifiers (integer labels): the fraction of label
                                   // elements whose class has the largest logit
};

// The model's output for a batch: the eval graph's logits.
struct BatchOutput {
  Shape shape;  // (rows, classes), or (rows * positions, classes) for sequences
  std::vector<float> values;
};

// Where a run saved from a BatchTrainer stands, besides its counters: what
// `memfit train --resume` checks of the run (RunSettings) that the trainer
// cannot know by itself.
struct RunPosition {
  int64_t epoch = 0;           // whole epochs done
  int64_t train_examples = 0;  // examples an epoch (0: unknown)
  int64_t epochs = 0;          // the run's epochs (0: unknown)
};

class BatchTrainer {
 public:
  // The step of `options` (its checks, but no data set is opened or asked
  // for), on one process, from the model's initial state with options.seed.
  static Result<std::unique_ptr<BatchTrainer>> create(const TrainOptions& options);

  // The data inputs of the model (labels included) and the batch compiled first.
  const std::vector<InputSpec>& inputs() const { return inputs_; }
  int64_t batch() const { return options_.step.model.batch; }
  int64_t accumulate() const { return options_.step.accumulate; }
  // The learning rate of lr_scale 1 (the optimizer's default where none was set).
  float base_lr() const { return base_lr_; }
  // The options' learning-rate schedule (its floor a fraction of base_lr).
  const LrSchedule& schedule() const { return schedule_; }
  // The schedule's factor of the learning rate at optimizer step `step` (from
  // 0) of a run of `total` optimizer steps (lr_scale); without `total` the
  // decay has not begun: the warmup's factor, then 1.
  float lr_scale(int64_t step, std::optional<int64_t> total) const;
  // `memfit plan --json`'s report of the step at the first batch.
  std::string plan_json() const;

  // One micro-batch of `arrays` (checked: check_arrays), at `lr_scale` times
  // the learning rate; every accumulate-th updates the parameters. Its loss.
  // Errors: no step of the arrays' rows fits the budget.
  Result<float> step(const std::vector<HostArray>& arrays, float lr_scale);
  // The loss and accuracy of a batch (labels required), with the current state.
  Result<BatchEvaluation> evaluate(const std::vector<HostArray>& arrays);
  // The model's output for a batch (labels not read), with the current state.
  Result<BatchOutput> predict(const std::vector<HostArray>& arrays);

  const StepCounters& counters() const { return active_->counters(); }
  // Copies of the model's parameters and model state (batch norm's running
  // statistics) as the last micro-batch left them, in checkpoint order.
  Result<std::vector<TrainedTensor>> trained() const;

  // A checkpoint of the state in `memfit train`'s format, with `position`:
  // `memfit train --resume` continues it with the same settings.
  Status save(const std::string& path, const RunPosition& position);
  // The state and counters of checkpoint `path` (of this model, with its
  // tensors, and of this --accumulate), and where its run stood.
  Result<RunPosition> load(const std::string& path);

 private:
  // A forward-only executable: the evaluation of the step of its batch, or
  // one of its own.
  struct Forward {
    std::unique_ptr<Executable> owned;
    Executable* executable = nullptr;  // owned, or a step's evaluation
    Batch inputs;
  };

  explicit BatchTrainer(const TrainOptions& options);
  // The trainer of micro-batches of `rows`, compiled on first use, holding
  // the state (moved there from the one that held it).
  Result<Trainer*> trainer_of(int64_t rows);
  // The forward pass of the batch of `arrays` (checked; its rows are
  // dimension 0) with the current state: its outputs (the logits, then the
  // loss); `inputs` and `graph` receive the buffers written and the graph run.
  Result<StepResult> forward(const std::vector<HostArray>& arrays, Batch** inputs,
                             const Graph** graph);
  // The forward executable of `rows`, compiled on first use.
  Result<Forward*> forward_of(int64_t rows);

  TrainOptions options_;
  std::vector<InputSpec> inputs_;
  float base_lr_ = 0;
  LrSchedule schedule_;
  std::map<int64_t, std::unique_ptr<Trainer>> trainers_;  // by micro-batch rows
  Trainer* active_ = nullptr;                             // the one holding the state
  std::map<int64_t, Forward> forwards_;                   // by rows
  RunSettings run_;  // what checkpoints record of the run, but the position
};

}  // namespace memfit
