// The checks of a run's options, made once before anything is built: every
// flag alone and together, the model against Fashion-MNIST, the ranks
// against the step, and the evaluation batch that --limit leaves.
#pragma once

#include <cstdint>

#include "memfit/train.h"

namespace memfit {

// `given` with its step set for `ranks` ranks (step.ranks 1 means the
// run's), or an error a user can fix: a step set for other ranks, a bad flag
// or combination, a path the run could not write, a model that does not read
// Fashion-MNIST without --synthetic.
Result<TrainOptions> checked_options(const TrainOptions& given, int64_t ranks);

// The evaluation batch: the training batch on synthetic data and data
// files; for
// Fashion-MNIST up to 1000 test images at a time (the test set, limited, must
// be a multiple).
Result<int64_t> eval_batch_of(const TrainOptions& options);

// Where a run's examples come from.
enum class DataOrigin { fashion_mnist, synthetic, arrays, tokens };
// --tokens; --synthetic; --data naming a file (or a path ending in .npz or
// .npy); else Fashion-MNIST's directory.
DataOrigin data_origin(const TrainOptions& options);

}  // namespace memfit
