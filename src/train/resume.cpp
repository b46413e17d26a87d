#include "train/resume.h"

#include <string>
#include <utility>

#include "core/text.h"
#include "train/epochs.h"

namespace memfit {
namespace {

// Reads options.resume_path into `state`, `counters` and `epoch`, after
// checking it against the run and the model.
Status read_checkpoint(const TrainOptions& options, const TrainingProgram& program,
                       const RunSettings& run, StateStore& state, StepCounters& counters,
                       int64_t& epoch, const LogFn& log) {
  const std::string& path = options.resume_path;
  MEMFIT_ASSIGN_OR_RETURN(Checkpoint ck, load_checkpoint(path));
  // The run's settings before the tensors: a changed --accumulate changes
  // the tensors too, and is named as the flag it is.
  if (ck.model == options.step.model.name) {
    if (Status same = check_same_run(ck, run); !same.is_ok()) {
      return Status::error("checkpoint " + path + ": " + same.message());
    }
  }
  MEMFIT_RETURN_IF_ERROR(check_matches(ck, options.step.model.name, program.state_shapes()));
  for (NamedTensor& t : ck.tensors) state[t.name] = std::move(t.data);
  counters = StepCounters{ck.micro_step, ck.optimizer_step};
  epoch = ck.epoch;
  log(format("resumed from %s after epoch %lld (step %lld)", path.c_str(),
             static_cast<long long>(ck.epoch), static_cast<long long>(ck.optimizer_step)));
  return Status::ok();
}

}  // namespace

RunSettings run_settings_of(const TrainOptions& options, const DataSource& data) {
  if (options.resume_path.empty() && options.save_path.empty()) return RunSettings{};
  return RunSettings{options.step.model.batch * options.step.ranks,
                     options.step.accumulate,
                     data.train_count(),
                     options.epochs,
                     static_cast<int64_t>(options.schedule),
                     options.seed,
                     data.identity()};
}

Result<int64_t> start_run(Trainer& trainer, const TrainOptions& options, const RunSettings& run,
                          const LogFn& log) {
  StateStore state = trainer.initial_state();
  StepCounters counters;
  int64_t epoch = 0;
  Ranks& ranks = trainer.ranks();
  if (!options.resume_path.empty()) {
    MEMFIT_RETURN_IF_ERROR(ranks.on_lead(
        [&] {
          return read_checkpoint(options, trainer.program(), run, state, counters, epoch, log);
        },
        "rank 0 could not resume from " + options.resume_path));
  }
  MEMFIT_RETURN_IF_ERROR(ranks.share_state(trainer.program(), state, counters, epoch));
  // A NaN in the state would train to garbage with a finite loss (a ReLU
  // passes NaN on as 0).
  if (const std::string bad = non_finite_tensor(state); !bad.empty()) {
    return Status::error("tensor '" + bad + "' holds a NaN or an infinity " +
                         (options.resume_path.empty() ? std::string("in the model's initial state")
                                                      : "in checkpoint " + options.resume_path));
  }
  const int64_t last_epoch = last_epoch_of(options);
  if (epoch >= last_epoch) {
    return Status::error(format(
        "checkpoint %s is after epoch %lld, and the run ends %s epoch %lld: nothing is left to "
        "train",
        options.resume_path.c_str(), static_cast<long long>(epoch),
        last_epoch < options.epochs ? "(--stop-after) at" : "with",
        static_cast<long long>(last_epoch)));
  }
  MEMFIT_RETURN_IF_ERROR(trainer.start(state, counters));
  return epoch;
}

}  // namespace memfit
