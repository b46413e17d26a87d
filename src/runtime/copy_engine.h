// The swap stream of the host device (runtime/device.h): one thread that
// runs copies between the arena and the host pool in the order they were
// issued (a copy stream), optionally no faster than a link of a given bandwidth, so that the
// overlap of copies with compute can be studied on a machine without a
// device. Events are tickets: the n-th task issued completes n-th. The
// executor's communication thread is another engine, whose transfers are the
// collectives of data parallelism paced by the network's bandwidth.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "runtime/device.h"

namespace memfit {

class CopyEngine final : public SwapStream {
 public:
  // link_bytes_per_second = 0: copies run at memcpy speed.
  explicit CopyEngine(double link_bytes_per_second);
  ~CopyEngine() override;
  CopyEngine(const CopyEngine&) = delete;
  CopyEngine& operator=(const CopyEngine&) = delete;

  // Issues a copy of `bytes` bytes; `done(start, seconds)` runs on the copy
  // thread when it completes, with the time it started and the seconds it
  // took (link limit included). Returns its event.
  int64_t copy(void* dst, const void* src, size_t bytes, Done done) override;
  // Issues `work`, which moves `bytes` bytes over the link (a collective):
  // it completes no earlier than bytes / bandwidth after it started; then
  // `done` runs as for a copy. `ready`, where given, runs first and is not
  // timed: it waits until the bytes may be read (a GPU's kernels writing them).
  int64_t transfer(size_t bytes, std::function<void()> work, Done done,
                   std::function<void()> ready = nullptr);
  // Issues the filling of `bytes` at `data` with NaN, which moves no bytes
  // over the link; it runs after every task issued before it.
  int64_t poison(void* data, size_t bytes) override;
  // Blocks until the task of `event` (and so every earlier one) has completed;
  // returns the seconds spent waiting.
  double wait(int64_t event) override;
  // Blocks until every task issued so far has completed; never an error.
  Status drain() override;

 private:
  struct Task {
    std::function<void()> work;
    size_t bytes = 0;  // over the link
    Done done;  // copies and transfers
    std::function<void()> ready;  // transfers: before work, untimed
  };
  void loop();

  double link_bytes_per_second_;
  std::mutex mutex_;
  std::condition_variable issued_cv_, completed_cv_;
  std::deque<Task> queue_;
  int64_t issued_ = 0;     // tasks issued so far
  int64_t completed_ = 0;  // tasks completed so far; the event of task k is k
  bool stop_ = false;
  std::thread thread_;  // last: starts after the members it uses exist
};

}  // namespace memfit
