// A reader thread for the training loop: it fills the next micro-batch from
// the data source while the current step runs, so that reading and
// converting examples (a memory-mapped file's pages included) stays off the
// step's critical path.
#pragma once

#include <future>
#include <span>
#include <vector>

#include "train/data_source.h"

namespace memfit {

class BatchReader {
 public:
  // Fills batches shaped as `shape` from the training set of `data` (not owned).
  BatchReader(const DataSource& data, const Batch& shape);
  ~BatchReader();  // waits for the fill in flight
  BatchReader(const BatchReader&) = delete;
  BatchReader& operator=(const BatchReader&) = delete;

  // Starts filling `examples` (copied) on the reader thread; the previous
  // fill must have been taken.
  void start(std::span<const int64_t> examples);
  // Waits for the fill started last and swaps its batch with `batch` (no copy).
  Status take(Batch& batch);
  bool busy() const { return pending_.valid(); }

 private:
  const DataSource& data_;
  Batch filling_;
  std::vector<int64_t> examples_;
  std::future<Status> pending_;
};

}  // namespace memfit
