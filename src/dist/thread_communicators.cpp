// N ranks as N threads of one process. Every collective is a meeting: each
// rank posts what it brings, and the last to arrive does the whole
// collective for everyone, under the lock, while the others wait. So every
// sum is computed once per element, in rank order, and every rank receives
// the same bits.
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>

#include "core/check.h"
#include "memfit/dist.h"

namespace memfit {
namespace {

enum class Op { sum_float, sum_double, max_double, broadcast, barrier };

const char* op_name(Op op) {
  switch (op) {
    case Op::sum_float:
      return "all_reduce_sum(float)";
    case Op::sum_double:
      return "all_reduce_sum(double)";
    case Op::max_double:
      return "all_reduce_max";
    case Op::broadcast:
      return "broadcast";
    case Op::barrier:
      return "barrier";
  }
  return "?";
}

// What one rank brings to a collective.
struct Post {
  Op op = Op::barrier;
  void* data = nullptr;
  size_t count = 0;  // elements, or bytes for a broadcast
  int root = 0;
};

// data[r][i] = the rank-order sum of data[0..N-1][i] for every rank r. Each
// element is read from every rank before it is written, so working in place
// needs no scratch.
template <class T>
void sum_in_rank_order(const std::vector<Post>& posts) {
  for (size_t i = 0; i < posts[0].count; ++i) {
    T sum = static_cast<T*>(posts[0].data)[i];
    for (size_t r = 1; r < posts.size(); ++r) sum += static_cast<T*>(posts[r].data)[i];
    for (const Post& post : posts) static_cast<T*>(post.data)[i] = sum;
  }
}

void max_in_rank_order(const std::vector<Post>& posts) {
  for (size_t i = 0; i < posts[0].count; ++i) {
    double largest = static_cast<double*>(posts[0].data)[i];
    for (size_t r = 1; r < posts.size(); ++r) {
      double value = static_cast<double*>(posts[r].data)[i];
      if (value > largest) largest = value;
    }
    for (const Post& post : posts) static_cast<double*>(post.data)[i] = largest;
  }
}

// The group's meeting place. `generation` counts completed collectives; a
// rank that arrived in generation g waits until it changes, and by then its
// result is in its buffer and `outcome` holds the collective's Status. The
// next collective cannot complete (and overwrite `outcome`) before every
// rank has arrived at it, so each rank reads its own collective's outcome.
class Group {
 public:
  explicit Group(int size) : posts_(static_cast<size_t>(size)) {}

  Status meet(int rank, const Post& post) {
    std::unique_lock<std::mutex> lock(mutex_);
    posts_[static_cast<size_t>(rank)] = post;
    if (++arrived_ == static_cast<int>(posts_.size())) {
      outcome_ = run();
      arrived_ = 0;
      ++generation_;
      changed_.notify_all();
    } else {
      const uint64_t generation = generation_;
      changed_.wait(lock, [&] { return generation_ != generation; });
    }
    return outcome_;
  }

 private:
  // Runs the collective every rank has posted; called by the last arriver
  // with the lock held. Ranks that disagree on the call get an error and
  // unchanged buffers.
  Status run() {
    const Post& first = posts_[0];
    for (size_t r = 1; r < posts_.size(); ++r) {
      const Post& post = posts_[r];
      if (post.op != first.op || post.count != first.count || post.root != first.root) {
        return Status::error(std::string("ranks disagree on a collective: rank 0 called ") +
                             op_name(first.op) + " with count " + std::to_string(first.count) +
                             " and root " + std::to_string(first.root) + ", rank " +
                             std::to_string(r) + " called " + op_name(post.op) + " with count " +
                             std::to_string(post.count) + " and root " + std::to_string(post.root));
      }
    }
    switch (first.op) {
      case Op::sum_float:
        sum_in_rank_order<float>(posts_);
        break;
      case Op::sum_double:
        sum_in_rank_order<double>(posts_);
        break;
      case Op::max_double:
        max_in_rank_order(posts_);
        break;
      case Op::broadcast: {
        if (first.root < 0 || first.root >= static_cast<int>(posts_.size())) {
          return Status::error("broadcast from rank " + std::to_string(first.root) +
                               " of a group of " + std::to_string(posts_.size()));
        }
        const void* source = posts_[static_cast<size_t>(first.root)].data;
        for (const Post& post : posts_) {
          if (post.data != source && first.count > 0) std::memcpy(post.data, source, first.count);
        }
        break;
      }
      case Op::barrier:
        break;
    }
    return Status::ok();
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Post> posts_;  // (size): by rank, for the collective under way
  int arrived_ = 0;
  uint64_t generation_ = 0;
  Status outcome_;
};

class ThreadCommunicator final : public Communicator {
 public:
  ThreadCommunicator(std::shared_ptr<Group> group, int rank, int size)
      : group_(std::move(group)), rank_(rank), size_(size) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* kind() const override { return "threads"; }

  Status all_reduce_sum(float* data, size_t count) override {
    return group_->meet(rank_, {Op::sum_float, data, count, 0});
  }
  Status all_reduce_sum(double* data, size_t count) override {
    return group_->meet(rank_, {Op::sum_double, data, count, 0});
  }
  Status all_reduce_max(double* data, size_t count) override {
    return group_->meet(rank_, {Op::max_double, data, count, 0});
  }
  Status broadcast(void* data, size_t bytes, int root) override {
    return group_->meet(rank_, {Op::broadcast, data, bytes, root});
  }
  Status barrier() override { return group_->meet(rank_, {Op::barrier, nullptr, 0, 0}); }
  void abort(int) override {}

 private:
  std::shared_ptr<Group> group_;
  int rank_;
  int size_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_thread_communicators(int size) {
  MEMFIT_CHECK(size >= 1);
  auto group = std::make_shared<Group>(size);
  std::vector<std::unique_ptr<Communicator>> communicators;
  for (int rank = 0; rank < size; ++rank) {
    communicators.push_back(std::make_unique<ThreadCommunicator>(group, rank, size));
  }
  return communicators;
}

}  // namespace memfit
