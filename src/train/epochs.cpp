#include "train/epochs.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/text.h"
#include "train/batch_reader.h"
#include "train/lr_schedule.h"

namespace memfit {
namespace {

using Clock = std::chrono::steady_clock;

// The end of the message of a diverged run: that it wrote no checkpoint,
// and what it may try.
std::string diverged_advice(const TrainOptions& options) {
  return std::string(options.save_path.empty() ? "" : " (no checkpoint written for this epoch)") +
         "; try a smaller " +
         (options.step.optimizer.weight_decay > 0 ? "--lr or --weight-decay" : "--lr");
}

// The micro-batches an epoch ran, the seconds they took, and whether a stop
// request ended it early.
struct EpochSteps {
  int64_t micro_batches = 0;
  double seconds = 0;
  bool stopped = false;
};

// The optimizer steps of epoch `epoch`; each micro-batch's loss appended to `losses`.
Result<EpochSteps> run_steps(Trainer& trainer, const DataSource& data, const EpochPlan& plan,
                             const TrainOptions& options, int64_t epoch, std::vector<float>& losses,
                             const LogFn& log) {
  const std::vector<int64_t> order = plan.sampler.permutation(epoch);
  const int64_t batch = options.step.model.batch, accumulate = options.step.accumulate;
  const int64_t begin = epoch == plan.first ? plan.resume_batch : 0;
  const auto start = Clock::now();
  EpochProgress progress(options, trainer.ranks(), epoch, plan.total_steps, start);
  bool stop = false;
  // The reader thread fills micro-batch m + 1 while micro-batch m runs.
  BatchReader reader(data, Batch::for_model(trainer.program().model()));
  if (begin < plan.micro_batches) reader.start(trainer.ranks().rows(order, begin, batch));
  int64_t b = begin;  // the step's first micro-batch
  for (; b < plan.micro_batches && !stop; b += accumulate) {
    const auto fill = [&](int64_t k, Batch& inputs) {
      Status read = reader.take(inputs);
      if (b + k + 1 < plan.micro_batches && read.is_ok()) {
        reader.start(trainer.ranks().rows(order, b + k + 1, batch));
      }
      return read;
    };
    const float scale = lr_scale(plan.schedule, trainer.counters().optimizer_step, plan.total_steps);
    MEMFIT_ASSIGN_OR_RETURN(const std::vector<float> step_losses, trainer.step(fill, scale));
    for (size_t k = 0; k < step_losses.size(); ++k) {
      const float loss = step_losses[k];
      if (!std::isfinite(loss)) {
        return Status::error(
            format("the loss is %s at epoch %lld, micro-batch %lld (optimizer step %lld): training "
                   "diverged and stopped%s",
                   std::isnan(loss) ? "nan" : "infinite", static_cast<long long>(epoch + 1),
                   static_cast<long long>(b + static_cast<int64_t>(k) + 1),
                   static_cast<long long>(trainer.counters().optimizer_step),
                   diverged_advice(options).c_str()));
      }
      losses.push_back(loss);
      progress.add(loss);
    }
    const int64_t step = trainer.counters().optimizer_step;
    progress.step_done(step);
    MEMFIT_RETURN_IF_ERROR(trainer.check_replicas());
    const bool epoch_end = b + accumulate == plan.micro_batches;
    progress.log_if_due(step, epoch_end, log);
    if (!epoch_end && options.stop_requested) {
      MEMFIT_ASSIGN_OR_RETURN(stop, trainer.ranks().any(options.stop_requested()));
    }
  }
  return EpochSteps{b - begin, std::chrono::duration<double>(Clock::now() - start).count(), stop};
}

// The state is checked once an epoch, before it is saved: the loss can stay
// finite while the parameters diverge.
Status check_state(Trainer& trainer, const TrainOptions& options, int64_t epoch) {
  MEMFIT_ASSIGN_OR_RETURN(const std::string bad, trainer.non_finite_state());
  if (bad.empty()) return Status::ok();
  return Status::error(format(
      "%s holds a NaN or an infinity after epoch %lld (optimizer step %lld) though the "
      "loss stayed finite: training diverged and stopped%s",
      bad.c_str(), static_cast<long long>(epoch + 1),
      static_cast<long long>(trainer.counters().optimizer_step), diverged_advice(options).c_str()));
}

// The end of a whole epoch: its evaluation and checkpoint. Without a test
// set (a data file given without its validation file) there is no evaluation.
Status end_epoch(Trainer& trainer, const DataSource& data, const TrainOptions& options,
                 const RunSettings& run, int64_t epoch, TrainReport& report, const LogFn& log) {
  if (data.test_count() > 0) {
    MEMFIT_ASSIGN_OR_RETURN(const Trainer::Evaluation evaluation, trainer.evaluate(data));
    report.test_accuracy.push_back(evaluation.accuracy);
    report.test_loss.push_back(evaluation.loss);
    log(format("epoch %lld done: test accuracy %.2f%% (%lld test examples), validation loss %.4f%s",
               static_cast<long long>(epoch + 1), 100.0 * evaluation.accuracy,
               static_cast<long long>(data.test_count()), evaluation.loss,
               trainer.program().loss_in_nats() ? " nats" : ""));
  } else {
    log(format("epoch %lld done (no validation data)", static_cast<long long>(epoch + 1)));
  }
  if (options.save_path.empty()) return Status::ok();
  MEMFIT_RETURN_IF_ERROR(trainer.save_checkpoint(options.save_path, epoch + 1, run));
  log("saved " + options.save_path);
  return Status::ok();
}

}  // namespace

int64_t last_epoch_of(const TrainOptions& options) {
  return options.stop_after > 0 ? std::min(options.stop_after, options.epochs) : options.epochs;
}

Result<EpochPlan> plan_epochs(const TrainOptions& options, const DataSource& data,
                              int64_t first_epoch, const StepCounters& counters) {
  const int64_t accumulate = options.step.accumulate;
  const std::string& path = options.resume_path;
  MEMFIT_ASSIGN_OR_RETURN(
      BatchSampler sampler,
      BatchSampler::create(data.train_count(), options.step.model.batch * options.step.ranks,
                           options.seed));
  // Micro-batches left over after the last full optimizer step of an epoch are skipped.
  const int64_t micro_batches = sampler.batches_per_epoch() / accumulate * accumulate;
  if (micro_batches > 0 && options.epochs > std::numeric_limits<int64_t>::max() / micro_batches) {
    return Status::error(
        format("--epochs %lld of %lld micro-batches each is more micro-batches "
               "than a run counts (2^63 - 1); give fewer epochs",
               static_cast<long long>(options.epochs), static_cast<long long>(micro_batches)));
  }
  // A checkpoint written by a stop request inside an epoch continues at its next micro-batch.
  const int64_t resume_batch = counters.micro_step - first_epoch * micro_batches;
  if (resume_batch < 0 || resume_batch >= micro_batches || resume_batch % accumulate != 0) {
    return Status::error(
        format("checkpoint %s: its step counter (micro-batch %lld) is not a step of "
               "epoch %lld of this run",
               path.c_str(), static_cast<long long>(counters.micro_step),
               static_cast<long long>(first_epoch + 1)));
  }
  // Every accumulate-th micro-batch ends an optimizer step (AdamW's bias
  // correction and the schedule read the count).
  if (counters.optimizer_step != counters.micro_step / accumulate) {
    return Status::error(
        format("checkpoint %s: its optimizer step %lld disagrees with its micro-batch %lld, which "
               "ends optimizer step %lld with --accumulate %lld",
               path.c_str(), static_cast<long long>(counters.optimizer_step),
               static_cast<long long>(counters.micro_step),
               static_cast<long long>(counters.micro_step / accumulate),
               static_cast<long long>(accumulate)));
  }
  MEMFIT_ASSIGN_OR_RETURN(const LrSchedule schedule, lr_schedule_of(options));
  return EpochPlan{std::move(sampler),
                   first_epoch,
                   last_epoch_of(options),
                   micro_batches,
                   options.epochs * micro_batches / accumulate,
                   resume_batch,
                   schedule};
}

Result<TrainReport> run_epochs(Trainer& trainer, const DataSource& data, const EpochPlan& plan,
                               const TrainOptions& options, const RunSettings& run,
                               const LogFn& log) {
  TrainReport report;
  double seconds = 0;
  int64_t examples = 0;
  for (int64_t epoch = plan.first; epoch < plan.last; ++epoch) {
    MEMFIT_ASSIGN_OR_RETURN(const EpochSteps steps,
                            run_steps(trainer, data, plan, options, epoch, report.losses, log));
    seconds += steps.seconds;
    examples += steps.micro_batches * options.step.model.batch * options.step.ranks;
    MEMFIT_RETURN_IF_ERROR(check_state(trainer, options, epoch));
    if (steps.stopped) {
      report.stopped = true;
      log(format("stopped at epoch %lld, optimizer step %lld, as asked",
                 static_cast<long long>(epoch + 1),
                 static_cast<long long>(trainer.counters().optimizer_step)));
      if (!options.save_path.empty()) {
        MEMFIT_RETURN_IF_ERROR(trainer.save_checkpoint(options.save_path, epoch, run));
        log("saved " + options.save_path + " (--resume continues from the next step)");
      }
      break;
    }
    MEMFIT_RETURN_IF_ERROR(end_epoch(trainer, data, options, run, epoch, report, log));
    bool asked = false;
    if (epoch + 1 < plan.last && options.stop_requested) {
      MEMFIT_ASSIGN_OR_RETURN(asked, trainer.ranks().any(options.stop_requested()));
    }
    if (asked) {
      report.stopped = true;
      log(format("stopped after epoch %lld, as asked", static_cast<long long>(epoch + 1)));
      break;
    }
  }
  report.examples_per_second = seconds > 0 ? static_cast<double>(examples) / seconds : 0;
  report.arena_bytes = trainer.program().arena_bytes();
  report.ranks = trainer.ranks().size();
  report.high_water_bytes = trainer.program().high_water_bytes();
  report.optimizer_steps = trainer.counters().optimizer_step;
  return report;
}

}  // namespace memfit
