// What the ranks of a data-parallel run must agree on, and rank 0's state
// shared with the others (src/train/ranks.cpp). With one rank each call is a
// collective of one.
#pragma once

#include <cstdint>

#include "memfit/dist.h"
#include "memfit/train.h"
#include "train/data_source.h"
#include "train/training_program.h"

namespace memfit {

// Whether any rank says yes.
Result<bool> any_rank(Communicator& comm, bool yes);

// FNV-1a over what every rank must agree on: the step (its graph, arena and
// state), the data and schedule, the optimizer and the run's own flags.
uint64_t settings_hash(const TrainOptions& o, const TrainingProgram& program,
                       const DataSource& data);

// Ranks started with other flags would send buffers of other sizes to the
// same collective (a crash) or wait at different ones (a hang): an error on
// every rank unless every rank's hash is rank 0's.
Status check_same_settings(Communicator& comm, uint64_t mine);

// An error on every rank unless every rank's parameters and optimizer state
// hash as rank 0's (--check-replicas after optimizer step `step`).
Status check_replicas(const TrainingProgram& program, Communicator& comm, int64_t step);

// Rank 0's batch-norm running statistics, in every rank's arena.
Status share_rank0_model_state(Communicator& comm, TrainingProgram& program);

// Rank 0's state and position, on every rank.
Status share_rank0_state(Communicator& comm, const TrainingProgram& program, StateStore& state,
                         StepCounters& counters, int64_t& first_epoch);

}  // namespace memfit
