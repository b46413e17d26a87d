// What a run says while it trains: the lines that describe its setup, a line
// of progress every few optimizer steps and a StepRecord after each
// (TrainOptions::on_step), and the measurements at its end.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "memfit/train.h"
#include "train/data_source.h"
#include "train/ranks.h"
#include "train/training_program.h"

namespace memfit {

// Receives the progress lines (rank 0's: Ranks::lead_log).
using LogFn = std::function<void(const std::string&)>;

// The lines that say what a run will do: its data, ranks, step, techniques
// and memory plan. `eval_batch` is the evaluation batch asked for.
void log_run_setup(const TrainOptions& options, const TrainingProgram& program,
                   const DataSource& data, const Ranks& ranks, int64_t eval_batch,
                   const LogFn& log);

// The progress of one epoch, told after each optimizer step: the step's
// StepRecord to on_step (rank 0), and every log_every steps and at the
// epoch's end a line with the mean loss and the throughput since the last.
class EpochProgress {
 public:
  using Clock = std::chrono::steady_clock;

  // Epoch `epoch` (from 0) of a run of `total_steps` optimizer steps, whose
  // steps start at `start`.
  EpochProgress(const TrainOptions& options, const Ranks& ranks, int64_t epoch, int64_t total_steps,
                Clock::time_point start);

  // The loss of a micro-batch (the mean over the ranks).
  void add(float loss);
  // Optimizer step `step` (counted over the run) is done: its StepRecord.
  void step_done(int64_t step);
  // The progress line after step `step` when it is due one; `epoch_end`:
  // the epoch's last step.
  void log_if_due(int64_t step, bool epoch_end, const LogFn& log);

 private:
  const TrainOptions& options_;
  int64_t epoch_ = 0, total_steps_ = 0;
  int64_t examples_per_micro_batch_ = 0;  // every rank's
  bool lead_ = false;
  Clock::time_point window_start_, step_start_;
  double window_loss_ = 0;  // the sum over the window's micro-batches
  int64_t window_batches_ = 0;
  double step_loss_ = 0;  // the sum over this optimizer step's micro-batches
};

// The measurements at a run's end: with several ranks the all-reduce's time
// and how much of it the backward pass hid; with --profile the mean step by
// phase and op kind.
void log_run_end(const TrainOptions& options, const TrainingProgram& program, const Ranks& ranks,
                 const LogFn& log);

}  // namespace memfit
