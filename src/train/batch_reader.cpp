#include "train/batch_reader.h"

#include <utility>

#include "core/check.h"

namespace memfit {

BatchReader::BatchReader(const DataSource& data, const Batch& shape) : data_(data), filling_(shape) {}

BatchReader::~BatchReader() {
  if (pending_.valid()) pending_.wait();
}

void BatchReader::start(std::span<const int64_t> examples) {
  MEMFIT_CHECK(!pending_.valid());
  examples_.assign(examples.begin(), examples.end());
  pending_ = std::async(std::launch::async, [this] { return data_.fill(false, examples_, filling_); });
}

Status BatchReader::take(Batch& batch) {
  MEMFIT_CHECK(pending_.valid());
  Status status = pending_.get();
  if (status.is_ok()) std::swap(batch, filling_);
  return status;
}

}  // namespace memfit
