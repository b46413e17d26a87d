#include "runtime/copy_engine.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>

namespace memfit {

CopyEngine::CopyEngine(double link_bytes_per_second)
    : link_bytes_per_second_(link_bytes_per_second), thread_([this] { loop(); }) {}

CopyEngine::~CopyEngine() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  issued_cv_.notify_all();
  thread_.join();
}

int64_t CopyEngine::copy(void* dst, const void* src, size_t bytes, Done done) {
  return transfer(bytes, [dst, src, bytes] { std::memcpy(dst, src, bytes); }, std::move(done));
}

int64_t CopyEngine::transfer(size_t bytes, std::function<void()> work, Done done,
                             std::function<void()> ready) {
  std::lock_guard<std::mutex> lock(mutex_);
  queue_.push_back(Task{std::move(work), bytes, std::move(done), std::move(ready)});
  issued_cv_.notify_one();
  return issued_++;
}

int64_t CopyEngine::poison(void* data, size_t bytes) {
  auto task = [data, bytes] {
    std::fill_n(static_cast<float*>(data), bytes / sizeof(float),
                std::numeric_limits<float>::quiet_NaN());
  };
  std::lock_guard<std::mutex> lock(mutex_);
  queue_.push_back(Task{std::move(task), 0, nullptr, nullptr});
  issued_cv_.notify_one();
  return issued_++;
}

double CopyEngine::wait(int64_t event) {
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  completed_cv_.wait(lock, [&] { return completed_ > event; });
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

Status CopyEngine::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  completed_cv_.wait(lock, [&] { return completed_ == issued_; });
  return Status::ok();
}

void CopyEngine::loop() {
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      issued_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopped with nothing left to do
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    if (task.ready) task.ready();
    if (!task.done) {
      task.work();
    } else {
      const auto start = Clock::now();
      task.work();
      // A link of B bytes per second moves these bytes in bytes / B seconds:
      // the copy completes no earlier, however fast memcpy was.
      if (link_bytes_per_second_ > 0) {
        const auto link_time =
            std::chrono::duration<double>(static_cast<double>(task.bytes) / link_bytes_per_second_);
        std::this_thread::sleep_until(start +
                                      std::chrono::duration_cast<Clock::duration>(link_time));
      }
      task.done(start, std::chrono::duration<double>(Clock::now() - start).count());
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++completed_;
    }
    completed_cv_.notify_all();
  }
}

}  // namespace memfit
