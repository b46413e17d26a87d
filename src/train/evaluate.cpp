// evaluate(): `memfit evaluate`, a checkpoint's model on a set of examples:
// the checks of the options, the program, the examples, the checkpoint's
// state, and one pass over the examples.
#include <string>
#include <utility>

#include "core/text.h"
#include "memfit/train.h"
#include "train/checkpoint.h"
#include "train/progress.h"
#include "train/ranks.h"
#include "train/train_checks.h"
#include "train/train_data.h"
#include "train/trainer.h"

namespace memfit {
namespace {

// The examples to evaluate on, as a source's test set: every example of
// --data FILE or --tokens FILE (its windows, --limit of them), or the
// test set of Fashion-MNIST or of synthetic data.
Result<std::unique_ptr<DataSource>> evaluation_data(const TrainOptions& options,
                                                    const TrainingProgram& program) {
  TrainOptions as_validation = options;
  switch (data_origin(options)) {
    case DataOrigin::arrays:
      as_validation.val_data_path = options.data_path;
      break;
    case DataOrigin::tokens:
      as_validation.val_tokens_path = options.tokens_path;
      break;
    case DataOrigin::synthetic:
    case DataOrigin::fashion_mnist:
      break;
  }
  return open_data(as_validation, program);
}

}  // namespace

Result<EvaluationReport> evaluate(const TrainOptions& given, const LogFn& log) {
  if (given.resume_path.empty()) return Status::error("evaluate needs a checkpoint (--checkpoint)");
  MEMFIT_ASSIGN_OR_RETURN(const TrainOptions options, checked_options(given, 1));
  const DataOrigin origin = data_origin(options);
  const bool files = origin == DataOrigin::arrays || origin == DataOrigin::tokens;
  MEMFIT_ASSIGN_OR_RETURN(const int64_t eval_batch, eval_batch_of(options));
  MEMFIT_ASSIGN_OR_RETURN(Ranks ranks, Ranks::join(nullptr, options.step.backend));
  MEMFIT_ASSIGN_OR_RETURN(auto trainer, Trainer::create(options, std::move(ranks), eval_batch));
  const TrainingProgram& program = trainer->program();
  MEMFIT_ASSIGN_OR_RETURN(const auto data, evaluation_data(options, program));
  MEMFIT_RETURN_IF_ERROR(check_test_set(*data, eval_batch, program.eval_batch(), !files));
  if (data->test_count() == 0) return Status::error(data->description() + " holds no examples");
  MEMFIT_ASSIGN_OR_RETURN(Checkpoint ck, load_checkpoint(options.resume_path));
  MEMFIT_RETURN_IF_ERROR(check_matches(ck, options.step.model.name, program.state_shapes()));
  StateStore state;
  for (NamedTensor& t : ck.tensors) state[t.name] = std::move(t.data);
  MEMFIT_RETURN_IF_ERROR(trainer->start(state, StepCounters{ck.micro_step, ck.optimizer_step}));
  const int64_t batch = program.eval_batch();
  EvaluationReport report;
  report.examples = data->test_count() / batch * batch;
  report.loss_in_nats = program.loss_in_nats();
  log(format("evaluating %s after epoch %lld (step %lld) on %s: %lld examples in batches of %lld",
             options.resume_path.c_str(), static_cast<long long>(ck.epoch),
             static_cast<long long>(ck.optimizer_step), data->description().c_str(),
             static_cast<long long>(report.examples), static_cast<long long>(batch)));
  MEMFIT_ASSIGN_OR_RETURN(const Trainer::Evaluation evaluation, trainer->evaluate(*data));
  report.loss = evaluation.loss;
  report.accuracy = evaluation.accuracy;
  return report;
}

}  // namespace memfit
