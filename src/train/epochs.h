// The epochs of a run over a data set: which examples each micro-batch
// reads, the learning rate's schedule, and after each epoch the state's
// check, the evaluation, the checkpoint and the question whether to stop.
#pragma once

#include <cstdint>

#include "memfit/train.h"
#include "train/checkpoint.h"
#include "train/data_source.h"
#include "train/fashion_mnist.h"
#include "train/lr_schedule.h"
#include "train/progress.h"
#include "train/trainer.h"

namespace memfit {

struct EpochPlan {
  BatchSampler sampler;         // each epoch's order of the training examples
  int64_t first = 0, last = 0;  // the epochs of this run: [first, last), from 0
  // Micro-batches an epoch: whole optimizer steps (the rest of the
  // examples is left out).
  int64_t micro_batches = 0;
  int64_t total_steps = 0;   // optimizer steps of all --epochs: the schedule's length
  int64_t resume_batch = 0;  // the micro-batch epoch `first` starts at
  LrSchedule schedule;       // the learning rate's factor at each optimizer step
};

// The epoch a run ends after: --stop-after, else --epochs.
int64_t last_epoch_of(const TrainOptions& options);

// The epochs of the run from `first_epoch` and `counters` (where start_run
// left the trainer). Errors: more micro-batches than a run counts, a
// position that is not the start of an optimizer step of that epoch, an
// optimizer step that does not follow from the micro-batch.
Result<EpochPlan> plan_epochs(const TrainOptions& options, const DataSource& data,
                              int64_t first_epoch, const StepCounters& counters);

// Trains the epochs of `plan` on `data`: the losses, the test accuracy after
// each epoch, checkpoints to options.save_path, and a stop where
// options.stop_requested asks. Errors when the loss or the state diverges.
Result<TrainReport> run_epochs(Trainer& trainer, const DataSource& data, const EpochPlan& plan,
                               const TrainOptions& options, const RunSettings& run,
                               const LogFn& log);

}  // namespace memfit
