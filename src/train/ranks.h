// The ranks of a training run, as one of them sees them (src/train/ranks.cpp).
// Everything that differs between one process and a data-parallel group is
// here: with one rank each call does nothing or returns what it was given;
// with several it shares rank 0's state, compares the ranks' settings and
// replicas, and sums or joins what each rank found. The rest of training
// calls it the same way whatever the number of ranks.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "memfit/dist.h"
#include "memfit/train.h"
#include "train/data_source.h"
#include "train/training_program.h"

namespace memfit {

// FNV-1a over what every rank must agree on: the step (its graph, arena and
// state), the data and schedule, the optimizer and the run's own flags.
uint64_t settings_hash(const TrainOptions& o, const TrainingProgram& program,
                       const DataSource& data);

class Ranks {
 public:
  // The ranks of `given` (not owned; it must outlive the result), or one
  // rank alone when it is null. On the cuda backend several ranks sum their
  // gradient buckets, which are in GPU memory, with NCCL started over
  // `given` (unless `given` sums GPU memory itself).
  static Result<Ranks> join(Communicator* given, BackendKind backend);

  int rank() const { return comm_->rank(); }
  int64_t size() const { return comm_->size(); }
  // Rank 0, the one that logs and writes files.
  bool lead() const { return rank() == 0; }
  // "local", "threads", "mpi" (Communicator::kind).
  const char* kind() const { return comm_->kind(); }
  // What the step sums its gradients over: null with one rank.
  Communicator* step_comm() { return size() > 1 ? comm_ : nullptr; }
  // `log` on rank 0; nothing on the others.
  std::function<void(const std::string&)> lead_log(
      const std::function<void(const std::string&)>& log) const;

  // Whether any rank says yes.
  Result<bool> any(bool yes);
  // The mean of `value` over the ranks (on every rank).
  Result<float> mean(float value);
  // values[i] summed over the ranks, in place.
  Status sum(double* values, size_t count);

  // This rank's rows of micro-batch `micro_batch` of `order` (the examples of
  // an epoch in the order they are read): a micro-batch is size() * batch
  // examples, rank r's rows r * batch .. (r + 1) * batch.
  std::span<const int64_t> rows(std::span<const int64_t> order, int64_t micro_batch,
                                int64_t batch) const;
  // The seed of this rank's dropout masks: rank 0's is `seed` (as one process
  // with this seed draws); the others differ, or row k of every rank would
  // share a mask.
  uint64_t dropout_seed(uint64_t seed) const;

  // Runs `work` on rank 0 alone; then an error on every rank if it failed:
  // its own on rank 0, `failed_on_lead` on the others.
  Status on_lead(const std::function<Status()>& work, const std::string& failed_on_lead);

  // Ranks started with other flags would send buffers of other sizes to the
  // same collective (a crash) or wait at different ones (a hang): an error on
  // every rank unless every rank's settings_hash is rank 0's.
  Status check_same_settings(const TrainOptions& options, const TrainingProgram& program,
                             const DataSource& data);
  // An error on every rank unless every rank's parameters and optimizer state
  // hash as rank 0's (--check-replicas after optimizer step `step`).
  Status check_replicas(const TrainingProgram& program, int64_t step);
  // Rank 0's state and position, on every rank.
  Status share_state(const TrainingProgram& program, StateStore& state, StepCounters& counters,
                     int64_t& first_epoch);
  // Rank 0's batch-norm running statistics, in every rank's arena.
  Status share_model_state(TrainingProgram& program);

 private:
  Ranks() = default;

  std::unique_ptr<Communicator> owned_;  // the local or NCCL communicator made here
  Communicator* comm_ = nullptr;         // owned_, or the one given
};

}  // namespace memfit
