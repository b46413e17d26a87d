// N ranks as N threads of one process. Every collective is a meeting: each
// rank posts what it brings, and the last to arrive does the whole
// collective for everyone, under the lock, while the others wait. So every
// sum is computed once per element, in rank order, and every rank receives
// the same bits (of a reduce-scatter, each rank its own block's).
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>

#include "core/check.h"
#include "memfit/dist.h"

namespace memfit {
namespace {

enum class Op {
  sum_float,
  sum_double,
  max_double,
  broadcast,
  barrier,
  reduce_scatter_sum,
  all_gather
};

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
    case Op::reduce_scatter_sum:
      return "reduce_scatter_sum";
    case Op::all_gather:
      return "all_gather";
  }
  return "?";
}

// What one rank brings to a collective.
struct Post {
  Op op = Op::barrier;
  void* data = nullptr;
  size_t count = 0;  // elements (per block for a reduce-scatter or an all-gather), or bytes
                     // for a broadcast
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

// For each rank r: the rank-order sum of block r (elements r*count ..
// (r+1)*count) of every rank's buffer, into the first block of rank r's
// buffer. Block 0 goes first: every result lands in some rank's block 0,
// which block 0's sum reads element by element before it writes that
// element, and which nothing reads afterwards.
void reduce_scatter_in_rank_order(const std::vector<Post>& posts) {
  const size_t count = posts[0].count;
  for (size_t block = 0; block < posts.size(); ++block) {
    float* result = static_cast<float*>(posts[block].data);
    for (size_t i = 0; i < count; ++i) {
      const size_t at = block * count + i;
      float sum = static_cast<const float*>(posts[0].data)[at];
      for (size_t r = 1; r < posts.size(); ++r) sum += static_cast<const float*>(posts[r].data)[at];
      result[i] = sum;
    }
  }
}

// Block r of rank r's buffer copied to block r of every other rank's. A
// rank's own block is read only, never written, so the order is free.
void all_gather_blocks(const std::vector<Post>& posts) {
  const size_t count = posts[0].count;
  if (count == 0) return;
  for (size_t block = 0; block < posts.size(); ++block) {
    const float* source = static_cast<const float*>(posts[block].data) + block * count;
    for (const Post& post : posts) {
      float* target = static_cast<float*>(post.data) + block * count;
      if (target != source) std::memcpy(target, source, count * sizeof(float));
    }
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
      case Op::reduce_scatter_sum:
      case Op::all_gather: {
        if (first.count > std::numeric_limits<size_t>::max() / sizeof(float) / posts_.size()) {
          return Status::error(std::string(op_name(first.op)) + " of " +
                               std::to_string(posts_.size()) + " blocks of " +
                               std::to_string(first.count) +
                               " floats: the buffer's size in bytes overflows size_t");
        }
        if (first.op == Op::reduce_scatter_sum) {
          reduce_scatter_in_rank_order(posts_);
        } else {
          all_gather_blocks(posts_);
        }
        break;
      }
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
  Status reduce_scatter_sum(float* data, size_t count) override {
    return group_->meet(rank_, {Op::reduce_scatter_sum, data, count, 0});
  }
  Status all_gather(float* data, size_t count) override {
    return group_->meet(rank_, {Op::all_gather, data, count, 0});
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
