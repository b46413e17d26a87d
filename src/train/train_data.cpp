#include "train/train_data.h"

#include <algorithm>
#include <string>

#include "core/text.h"
#include "onnx/model_source.h"
#include "train/fashion_mnist.h"
#include "train/train_checks.h"

namespace memfit {
namespace {

ImageDataset take_first(ImageDataset data, int64_t limit) {
  if (limit <= 0 || limit >= data.count) return data;
  data.count = limit;
  data.images.resize(static_cast<size_t>(limit * data.image_elements()));
  data.labels.resize(static_cast<size_t>(limit));
  return data;
}

// The first `limit` training and test examples of a source (0: all).
class FirstExamples final : public DataSource {
 public:
  FirstExamples(std::unique_ptr<DataSource> all, int64_t limit) : all_(std::move(all)), limit_(limit) {}
  std::string description() const override {
    return all_->description() + ", the first " + std::to_string(limit_) + " examples";
  }
  std::string identity() const override {
    return all_->identity() + ", first " + std::to_string(limit_);
  }
  int64_t train_count() const override { return std::min(limit_, all_->train_count()); }
  int64_t test_count() const override { return std::min(limit_, all_->test_count()); }
  Status fill(bool test, std::span<const int64_t> examples, Batch& batch) const override {
    return all_->fill(test, examples, batch);
  }

 private:
  std::unique_ptr<DataSource> all_;
  int64_t limit_;
};

}  // namespace

Result<std::unique_ptr<DataSource>> open_data(const TrainOptions& options,
                                              const TrainingProgram& program) {
  switch (data_origin(options)) {
    case DataOrigin::tokens:
      return token_file_source(program.model(), options.tokens_path, options.val_tokens_path,
                               static_cast<int>(options.token_bytes), options.limit, options.seed);
    case DataOrigin::arrays: {
      MEMFIT_ASSIGN_OR_RETURN(
          auto arrays, array_file_source(program.model(), options.data_path, options.val_data_path));
      if (options.limit <= 0) return arrays;
      return std::unique_ptr<DataSource>(new FirstExamples(std::move(arrays), options.limit));
    }
    case DataOrigin::synthetic:
    case DataOrigin::fashion_mnist:
      break;
  }
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
  const std::string dir = options.data_path.empty() ? kDefaultFashionMnistDir : options.data_path;
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

Status check_test_set(const DataSource& data, int64_t eval_batch, int64_t program_batch,
                      bool whole) {
  const int64_t tests = data.test_count();
  if (!whole) {
    // Data files: no validation file, no evaluation; else whole batches of it.
    if (tests == 0 || tests >= program_batch) return Status::ok();
    return Status::error(format(
        "the validation set (%s) holds %lld examples, fewer than one evaluation batch of %lld: "
        "give more validation examples or a smaller --batch",
        data.description().c_str(), static_cast<long long>(tests),
        static_cast<long long>(program_batch)));
  }
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
