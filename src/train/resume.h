// Where a run starts: the model's initial state, or a checkpoint's state and
// position (--resume); and what a checkpoint records of the run.
#pragma once

#include <cstdint>

#include "memfit/train.h"
#include "train/checkpoint.h"
#include "train/data_source.h"
#include "train/progress.h"
#include "train/trainer.h"

namespace memfit {

// The settings of this run a checkpoint's position depends on, where a
// checkpoint is read or written (--resume, --save); else empty, for reading
// the data's identity reads the whole training set. The batch is the
// examples of one micro-batch over all ranks.
RunSettings run_settings_of(const TrainOptions& options, const DataSource& data);

// Loads the run's starting state into `trainer` and returns the epoch it
// starts in: the initial state at step 0, or, with --resume, the checkpoint
// rank 0 reads, once it is found to be of this model and of `run`. Every
// rank starts from rank 0's state and position. Errors: a checkpoint that
// cannot be read or is of another model or run, a state that holds a NaN
// or an infinity, a checkpoint at or past the run's last epoch.
Result<int64_t> start_run(Trainer& trainer, const TrainOptions& options, const RunSettings& run,
                          const LogFn& log);

}  // namespace memfit
