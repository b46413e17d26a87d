// One model in training, a call per part: a step (the micro-batches of one
// optimizer update), an evaluation, a checkpoint, the trained state. It owns
// the compiled step and evaluation (TrainingProgram), the state in the
// step's arena with its position (StepCounters), and the ranks that train it
// together. `train` drives it over the epochs of a data set (src/train/
// epochs.h); a caller with batches of its own drives it the same way.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "memfit/train.h"
#include "train/checkpoint.h"
#include "train/data_source.h"
#include "train/ranks.h"
#include "train/training_program.h"

namespace memfit {

// Fills `batch` with this rank's rows of micro-batch `k` (from 0) of a step.
using FillMicroBatch = std::function<Status(int64_t k, Batch& batch)>;

class Trainer {
 public:
  // The program of `options` (checked_options) on `ranks`, its evaluation at
  // `eval_batch` (or the largest divisor whose plan fits the budget). With
  // --profile or --trace its steps time their kernels.
  static Result<std::unique_ptr<Trainer>> create(const TrainOptions& options, Ranks ranks,
                                                 int64_t eval_batch);

  // The model's initial state: parameters and model state from their Init
  // with the run's seed, the rest at zero.
  StateStore initial_state() const;
  // Copies `state` (every tensor of state_shapes) into the arena and goes on
  // from `counters`: before the first step.
  Status start(const StateStore& state, const StepCounters& counters);

  // One optimizer step of `accumulate` micro-batches, `fill` giving each its
  // rows, at `lr_scale` times the learning rate. The loss of each micro-batch
  // (the mean over the ranks) in order, up to the first that is not finite,
  // where the step ends (the parameters may hold NaN from there on).
  Result<std::vector<float>> step(const FillMicroBatch& fill, float lr_scale);
  // One micro-batch of a step, `fill` giving its rows (k: its place in the
  // step), at `lr_scale` times the learning rate: every accumulate-th one
  // updates the parameters. Its loss (the mean over the ranks).
  Result<float> micro_step(const FillMicroBatch& fill, float lr_scale);
  // With --check-replicas and several ranks: an error on every rank unless
  // every rank's parameters and optimizer state are rank 0's.
  Status check_replicas();
  // The model on the test set, with rank 0's running statistics: the
  // fraction of its label elements (images, tokens or voxels) whose class
  // the model predicts, and the mean loss of its batches. The ranks take
  // turns at the batches and sum their counts.
  struct Evaluation {
    double accuracy = 0;
    double loss = 0;
  };
  Result<Evaluation> evaluate(const DataSource& data);
  // What holds a NaN or an infinity, on any rank: empty when nothing does;
  // else "tensor 'name'" of this rank's state or "another rank's state".
  // The loss can stay finite while the parameters diverge (a ReLU passes a
  // NaN on as 0).
  Result<std::string> non_finite_state();

  // The state as the last step left it, every rank's shards gathered: every
  // rank calls it at once.
  Result<StateStore> state() const;
  // A checkpoint of the state and the position (`epoch` whole epochs done,
  // and the step counters) in run `run`: every rank takes part, rank 0
  // writes `path`.
  Status save_checkpoint(const std::string& path, int64_t epoch, const RunSettings& run);

  const StepCounters& counters() const { return counters_; }
  TrainingProgram& program() { return *program_; }
  Ranks& ranks() { return ranks_; }

 private:
  Trainer(std::unique_ptr<TrainingProgram> program, Ranks ranks, const TrainOptions& options);

  std::unique_ptr<TrainingProgram> program_;
  Ranks ranks_;
  Batch inputs_;  // one micro-batch of this rank's rows
  StepCounters counters_;
  std::string model_name_;  // what checkpoints are saved for
  int64_t accumulate_ = 1;
  uint64_t seed_ = 0;          // of the initial state
  uint64_t dropout_seed_ = 0;  // of this rank's masks
  bool check_replicas_ = false;
  bool stepped_ = false;  // a step has run since create
};

// The first tensor of `state` by name that holds a NaN or an infinity; empty
// when all are finite.
std::string non_finite_tensor(const StateStore& state);

}  // namespace memfit
