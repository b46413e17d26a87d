#include "train/train_data.h"

#include <algorithm>
#include <string>

#include "core/text.h"
#include "onnx/model_source.h"
#include "train/fashion_mnist.h"

namespace memfit {
namespace {

ImageDataset take_first(ImageDataset data, int64_t limit) {
  if (limit <= 0 || limit >= data.count) return data;
  data.count = limit;
  data.images.resize(static_cast<size_t>(limit * data.image_elements()));
  data.labels.resize(static_cast<size_t>(limit));
  return data;
}

}  // namespace

Result<std::unique_ptr<DataSource>> open_data(const TrainOptions& options,
                                              const TrainingProgram& program) {
  if (options.synthetic) {
    const int64_t per_step =
        options.step.model.batch * options.step.ranks * options.step.accumulate;
    const int64_t train_count =
        options.limit > 0 ? options.limit : std::max<int64_t>(1024, per_step);
    const int64_t eval_batch = program.eval_batch();
    const int64_t test_count = std::max<int64_t>(1, 256 / eval_batch) * eval_batch;
    MEMFIT_ASSIGN_OR_RETURN(const DataKind kind,
                            model_data_kind(options.step.model, program.model()));
    return synthetic_source(kind, program.model(), train_count, test_count, options.seed);
  }
  const std::string dir = options.data_dir.empty() ? kDefaultFashionMnistDir : options.data_dir;
  MEMFIT_ASSIGN_OR_RETURN(ImageDataset train_set, load_fashion_mnist(dir, true));
  MEMFIT_ASSIGN_OR_RETURN(ImageDataset test_set, load_fashion_mnist(dir, false));
  return fashion_mnist_source(take_first(std::move(train_set), options.limit),
                              take_first(std::move(test_set), options.limit));
}

Status check_holds_a_step(const TrainOptions& options, const DataSource& data) {
  const StepSpec& step = options.step;
  if (step.model.batch * step.ranks * step.accumulate <= data.train_count()) return Status::ok();
  return Status::error(std::string("--batch times --accumulate") +
                       (step.ranks > 1 ? " times the ranks" : "") + " exceeds the " +
                       std::to_string(data.train_count()) + " training examples");
}

Status check_test_set(const DataSource& data, int64_t eval_batch, int64_t program_batch) {
  const int64_t tests = data.test_count();
  if (tests == 0) {
    return Status::error("the test set (" + data.description() +
                         ") holds no examples: memfit evaluates on it after every epoch");
  }
  if (tests % program_batch == 0) return Status::ok();
  // The limit that evaluation covers: the whole test set as one batch when
  // it is smaller than the batch asked for, else whole batches of it (of
  // which the batch the budget allows is a divisor).
  const int64_t covered = tests < eval_batch ? tests : tests / eval_batch * eval_batch;
  return Status::error(format(
      "the test set (%s) holds %lld examples, but evaluation reads whole batches of %lld and "
      "would leave %lld out; give --limit %lld",
      data.description().c_str(), static_cast<long long>(tests),
      static_cast<long long>(program_batch), static_cast<long long>(tests % program_batch),
      static_cast<long long>(covered)));
}

}  // namespace memfit
