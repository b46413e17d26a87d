// train(): `memfit train` as a sequence of its parts, each in a file of its
// own: the checks of the options, the ranks, the trainer (the compiled step
// and its state), the data, the start (or resume), the epochs, the lines at
// the end and the files the run leaves.
#include "memfit/train.h"

#include "train/epochs.h"
#include "train/progress.h"
#include "train/ranks.h"
#include "train/resume.h"
#include "train/run_outputs.h"
#include "train/train_checks.h"
#include "train/train_data.h"
#include "train/trainer.h"

namespace memfit {

Result<TrainReport> train(const TrainOptions& given, const LogFn& log_line) {
  MEMFIT_ASSIGN_OR_RETURN(Ranks ranks, Ranks::join(given.comm, given.step.backend));
  const LogFn log = ranks.lead_log(log_line);
  MEMFIT_ASSIGN_OR_RETURN(const TrainOptions options, checked_options(given, ranks.size()));
  MEMFIT_ASSIGN_OR_RETURN(const int64_t eval_batch, eval_batch_of(options));
  MEMFIT_ASSIGN_OR_RETURN(auto trainer, Trainer::create(options, std::move(ranks), eval_batch));
  const TrainingProgram& program = trainer->program();
  MEMFIT_ASSIGN_OR_RETURN(const auto data, open_data(options, program));
  MEMFIT_RETURN_IF_ERROR(check_holds_a_step(options, *data));
  MEMFIT_RETURN_IF_ERROR(trainer->ranks().check_same_settings(options, program, *data));
  const DataOrigin origin = data_origin(options);
  const bool whole = origin == DataOrigin::fashion_mnist || origin == DataOrigin::synthetic;
  MEMFIT_RETURN_IF_ERROR(check_test_set(*data, eval_batch, program.eval_batch(), whole));
  log_run_setup(options, program, *data, trainer->ranks(), eval_batch, log);
  const RunSettings run = run_settings_of(options, *data);
  MEMFIT_ASSIGN_OR_RETURN(const int64_t first_epoch, start_run(*trainer, options, run, log));
  MEMFIT_ASSIGN_OR_RETURN(const EpochPlan plan,
                          plan_epochs(options, *data, first_epoch, trainer->counters()));
  MEMFIT_ASSIGN_OR_RETURN(TrainReport report, run_epochs(*trainer, *data, plan, options, run, log));
  log_run_end(options, program, trainer->ranks(), log);
  MEMFIT_RETURN_IF_ERROR(write_run_outputs(options, *trainer, log, report));
  return report;
}

}  // namespace memfit
