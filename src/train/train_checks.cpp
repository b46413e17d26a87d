#include "train/train_checks.h"

#include <algorithm>
#include <string>

#include "core/output_path.h"
#include "onnx/model_source.h"
#include "train/lr_schedule.h"

namespace memfit {
namespace {

Status check_options(const TrainOptions& o) {
  MEMFIT_RETURN_IF_ERROR(check_step_spec(o.step));
  if (o.epochs < 1) return Status::error("--epochs must be at least 1");
  if (o.log_every < 1) return Status::error("the progress interval must be at least 1");
  if (o.stop_after < 0) return Status::error("--stop-after must not be negative");
  if (o.stop_after > o.epochs) {
    return Status::error("--stop-after " + std::to_string(o.stop_after) +
                         " is past the run's end (--epochs " + std::to_string(o.epochs) + ")");
  }
  MEMFIT_RETURN_IF_ERROR(lr_schedule_of(o).status());
  // Examples per optimizer step, which a data set (at most 2^32 - 1 examples) must hold.
  int64_t per_step = 0;
  if (__builtin_mul_overflow(o.step.model.batch, o.step.accumulate, &per_step) ||
      __builtin_mul_overflow(per_step, o.step.ranks, &per_step) || per_step > INT64_C(0xFFFFFFFF)) {
    return Status::error(std::string("--batch times --accumulate") +
                         (o.step.ranks > 1 ? " times the ranks" : "") +
                         " is more than any data set's 2^32 - 1 examples");
  }
  // Where the run will write, checked before it trains.
  if (!o.save_path.empty()) MEMFIT_RETURN_IF_ERROR(check_output_path(o.save_path, "--save"));
  if (!o.trace_path.empty()) MEMFIT_RETURN_IF_ERROR(check_output_path(o.trace_path, "--trace"));
  if (!o.save_onnx_path.empty()) {
    if (o.step.model.onnx.empty()) return Status::error("--save-onnx needs a model from --onnx");
    MEMFIT_RETURN_IF_ERROR(check_output_path(o.save_onnx_path, "--save-onnx"));
  }
  return Status::ok();
}

// Without --synthetic, training reads Fashion-MNIST: the model must take
// (1, 28, 28) images and have 10 classes.
Status check_fits_fashion_mnist(const ModelOptions& options) {
  ModelOptions one = options;
  one.batch = 1;
  MEMFIT_ASSIGN_OR_RETURN(Model model, make_model(one, false));
  const Value& input = model.graph.value(model.inputs.at(0));
  const int64_t classes = model.graph.value(model.logits).type.shape.at(1);
  if (input.name == "images" && input.type.shape == Shape{1, 1, 28, 28} && classes == 10) {
    return Status::ok();
  }
  return Status::error("model " + options.name + " reads " + input.name + " " +
                       shape_string(input.type.shape) + " (batch 1) into " +
                       std::to_string(classes) +
                       " classes, but Fashion-MNIST is 1x28x28 images in 10 classes; add "
                       "--synthetic to train it on synthetic data");
}

}  // namespace

Result<TrainOptions> checked_options(const TrainOptions& given, int64_t ranks) {
  TrainOptions options = given;
  if (options.step.ranks == 1) options.step.ranks = ranks;
  if (options.step.ranks != ranks) {
    return Status::error("the step is set for " + std::to_string(options.step.ranks) +
                         " ranks, but the run has " + std::to_string(ranks));
  }
  MEMFIT_RETURN_IF_ERROR(check_options(options));
  if (!options.synthetic) MEMFIT_RETURN_IF_ERROR(check_fits_fashion_mnist(options.step.model));
  return options;
}

Result<int64_t> eval_batch_of(const TrainOptions& options) {
  if (options.synthetic) return options.step.model.batch;
  const int64_t test_count = options.limit > 0 ? std::min<int64_t>(options.limit, 10000) : 10000;
  const int64_t eval_batch = std::min<int64_t>(test_count, 1000);
  if (test_count % eval_batch != 0) {
    return Status::error(
        "--limit must leave a test set that is a multiple of 1000 or at most 1000");
  }
  return eval_batch;
}

}  // namespace memfit
