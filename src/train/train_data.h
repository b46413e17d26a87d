// The data a run trains and evaluates on, and what it must hold for the run.
#pragma once

#include <cstdint>
#include <memory>

#include "memfit/train.h"
#include "train/data_source.h"
#include "train/training_program.h"

namespace memfit {

// The user's array or token files, Fashion-MNIST (options.data_path, its
// first options.limit examples), or a
// synthetic data set shaped for the program's model.
Result<std::unique_ptr<DataSource>> open_data(const TrainOptions& options,
                                              const TrainingProgram& program);

// An error unless the training set holds the examples of one optimizer
// step: --batch times --accumulate times the ranks.
Status check_holds_a_step(const TrainOptions& options, const DataSource& data);

// Evaluation reads whole batches of the test set: an error when it is empty
// or would leave examples out. `eval_batch` is the batch asked for
// (eval_batch_of), `program_batch` the one the budget allowed (a divisor of it).
// With `whole` false (the user's data files) an empty test set means no
// evaluation, and evaluation reads the whole batches of it, leaving the rest out.
Status check_test_set(const DataSource& data, int64_t eval_batch, int64_t program_batch,
                      bool whole);

}  // namespace memfit
