// The communicators of include/memfit/dist.h that run in one process: local
// (every collective the identity) and threads (N ranks as N threads), whose
// sums (all-reduce and reduce-scatter) must equal the sum taken in rank
// order, with the same bits on every rank, however the threads interleave.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "memfit/dist.h"

namespace memfit {
namespace {

// Runs body(communicator) on one thread per rank and waits for them all.
void run_ranks(std::vector<std::unique_ptr<Communicator>>& ranks,
               const std::function<void(Communicator&)>& body) {
  std::vector<std::thread> threads;
  for (auto& communicator : ranks) threads.emplace_back(body, std::ref(*communicator));
  for (std::thread& thread : threads) thread.join();
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Rank r's data for the sum tests: large values that cancel (1e8, 1, -1e8
// by rank, so a float sum depends on the order) mixed with random ones of
// many magnitudes.
template <class T>
std::vector<T> rank_data(int rank, size_t count) {
  std::mt19937 generator(1234 + rank);
  std::uniform_real_distribution<double> mantissa(-1.0, 1.0);
  std::uniform_int_distribution<int> exponent(-20, 20);
  const T pattern[] = {T(1e8), T(1), T(-1e8), T(0.1)};
  std::vector<T> data(count);
  for (size_t i = 0; i < count; ++i) {
    data[i] = i % 2 == 0 ? pattern[(static_cast<size_t>(rank) + i / 2) % 4]
                         : static_cast<T>(std::ldexp(mantissa(generator), exponent(generator)));
  }
  return data;
}

// The sum over ranks taken in rank order, as the threads communicator promises.
template <class T>
std::vector<T> rank_order_sum(int size, size_t count) {
  std::vector<T> sum = rank_data<T>(0, count);
  for (int rank = 1; rank < size; ++rank) {
    std::vector<T> data = rank_data<T>(rank, count);
    for (size_t i = 0; i < count; ++i) sum[i] += data[i];
  }
  return sum;
}

// The same sum taken from the last rank down: the data is such that, with 3
// ranks or more, its bits differ from rank_order_sum's.
std::vector<float> reverse_order_sum(int size, size_t count) {
  std::vector<float> sum = rank_data<float>(size - 1, count);
  for (int rank = size - 2; rank >= 0; --rank) {
    std::vector<float> data = rank_data<float>(rank, count);
    for (size_t i = 0; i < count; ++i) sum[i] += data[i];
  }
  return sum;
}

TEST(LocalCommunicator, EveryCollectiveIsTheIdentity) {
  auto local = make_local_communicator();
  EXPECT_EQ(local->rank(), 0);
  EXPECT_EQ(local->size(), 1);
  EXPECT_STREQ(local->kind(), "local");
  std::vector<float> floats = {1.5f, -2.0f, 1e30f};
  std::vector<double> doubles = {3.25, -1e300, 0.0};
  const std::vector<float> floats_before = floats;
  const std::vector<double> doubles_before = doubles;
  EXPECT_TRUE(local->all_reduce_sum(floats.data(), floats.size()).is_ok());
  EXPECT_TRUE(local->all_reduce_sum(doubles.data(), doubles.size()).is_ok());
  EXPECT_TRUE(local->all_reduce_max(doubles.data(), doubles.size()).is_ok());
  EXPECT_TRUE(local->broadcast(floats.data(), floats.size() * sizeof(float), 0).is_ok());
  EXPECT_TRUE(local->reduce_scatter_sum(floats.data(), floats.size()).is_ok());
  EXPECT_TRUE(local->all_gather(floats.data(), floats.size()).is_ok());
  EXPECT_TRUE(local->reduce_scatter_sum(nullptr, 0).is_ok());
  EXPECT_TRUE(local->all_gather(nullptr, 0).is_ok());
  EXPECT_TRUE(local->barrier().is_ok());
  EXPECT_TRUE(same_bits(floats, floats_before));
  EXPECT_TRUE(same_bits(doubles, doubles_before));
  EXPECT_FALSE(local->broadcast(floats.data(), 4, 1).is_ok());
}

// Sets an environment variable for one scope, then puts back what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    if (old != nullptr) old_ = old;
    had_ = old != nullptr;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

TEST(LaunchedByMpi, ReadsTheLaunchersRankCount) {
  ScopedEnv ompi("OMPI_COMM_WORLD_SIZE", nullptr);
  ScopedEnv pmi("PMI_SIZE", nullptr);
  ScopedEnv pmix("PMIX_SIZE", nullptr);
  EXPECT_FALSE(launched_by_mpi());
  {
    ScopedEnv two("PMI_SIZE", "2");
    EXPECT_TRUE(launched_by_mpi());
  }
  {
    ScopedEnv one("OMPI_COMM_WORLD_SIZE", "1");
    ScopedEnv many("PMIX_SIZE", "4");
    EXPECT_FALSE(launched_by_mpi()) << "Open MPI's own count comes first";
  }
  ScopedEnv three("OMPI_COMM_WORLD_SIZE", "3");
  EXPECT_TRUE(launched_by_mpi());
}

TEST(LocalRank, ReadsTheLaunchersLocalRank) {
  ScopedEnv ompi("OMPI_COMM_WORLD_LOCAL_RANK", nullptr);
  ScopedEnv mpich("MPI_LOCALRANKID", nullptr);
  ScopedEnv pmix("PMIX_LOCAL_RANK", nullptr);
  ScopedEnv slurm("SLURM_LOCALID", nullptr);
  EXPECT_EQ(local_rank(), 0) << "alone";
  {
    ScopedEnv two("SLURM_LOCALID", "2");
    EXPECT_EQ(local_rank(), 2);
    ScopedEnv three("MPI_LOCALRANKID", "3");
    EXPECT_EQ(local_rank(), 3) << "MPICH's comes before Slurm's";
  }
  {
    ScopedEnv garbage("OMPI_COMM_WORLD_LOCAL_RANK", "one");
    ScopedEnv negative("PMIX_LOCAL_RANK", "-1");
    EXPECT_EQ(local_rank(), 0) << "neither is a rank";
  }
  ScopedEnv one("OMPI_COMM_WORLD_LOCAL_RANK", "1");
  EXPECT_EQ(local_rank(), 1);
}

TEST(HostCommunicators, SumHostMemoryOnly) {
  EXPECT_FALSE(make_local_communicator()->sums_gpu_memory());
  EXPECT_FALSE(make_thread_communicators(2)[0]->sums_gpu_memory());
}

class ThreadCommunicators : public ::testing::TestWithParam<int> {};

TEST_P(ThreadCommunicators, KnowTheirPlace) {
  auto ranks = make_thread_communicators(GetParam());
  ASSERT_EQ(static_cast<int>(ranks.size()), GetParam());
  for (int rank = 0; rank < GetParam(); ++rank) {
    EXPECT_EQ(ranks[rank]->rank(), rank);
    EXPECT_EQ(ranks[rank]->size(), GetParam());
    EXPECT_STREQ(ranks[rank]->kind(), "threads");
  }
}

// Every rank ends with exactly the rank-order sum, float and double.
TEST_P(ThreadCommunicators, SumIsTheRankOrderSumOnEveryRank) {
  const int size = GetParam();
  const size_t count = 10007;
  auto ranks = make_thread_communicators(size);
  std::vector<std::vector<float>> floats(size);
  std::vector<std::vector<double>> doubles(size);
  std::vector<std::string> errors(size);
  run_ranks(ranks, [&](Communicator& comm) {
    const int rank = comm.rank();
    floats[rank] = rank_data<float>(rank, count);
    doubles[rank] = rank_data<double>(rank, count);
    Status status = comm.all_reduce_sum(floats[rank].data(), count);
    if (status) status = comm.all_reduce_sum(doubles[rank].data(), count);
    errors[rank] = status.message();
  });
  const std::vector<float> expected_floats = rank_order_sum<float>(size, count);
  const std::vector<double> expected_doubles = rank_order_sum<double>(size, count);
  // The data is such that another order gives other bits.
  if (size >= 3) {
    EXPECT_FALSE(same_bits(reverse_order_sum(size, count), expected_floats));
  }
  for (int rank = 0; rank < size; ++rank) {
    EXPECT_EQ(errors[rank], "") << "rank " << rank;
    EXPECT_TRUE(same_bits(floats[rank], expected_floats)) << "rank " << rank;
    EXPECT_TRUE(same_bits(doubles[rank], expected_doubles)) << "rank " << rank;
  }
}

// Each rank r brings size blocks of `count` floats; afterwards its first
// block is exactly the rank-order sum of every rank's block r.
TEST_P(ThreadCommunicators, ReduceScatterIsTheRankOrderSumOfTheOwnBlock) {
  const int size = GetParam();
  const size_t count = 1001;
  const size_t total = static_cast<size_t>(size) * count;
  auto ranks = make_thread_communicators(size);
  std::vector<std::vector<float>> data(size);
  std::vector<std::string> errors(size);
  run_ranks(ranks, [&](Communicator& comm) {
    const int rank = comm.rank();
    data[rank] = rank_data<float>(rank, total);
    errors[rank] = comm.reduce_scatter_sum(data[rank].data(), count).message();
  });
  // Block r of the rank-order sum of the whole buffers, taken sequentially.
  const std::vector<float> in_order = rank_order_sum<float>(size, total);
  // The data is such that another order gives other bits.
  if (size >= 3) {
    EXPECT_FALSE(same_bits(reverse_order_sum(size, total), in_order));
  }
  for (int rank = 0; rank < size; ++rank) {
    EXPECT_EQ(errors[rank], "") << "rank " << rank;
    const std::vector<float> expected(in_order.begin() + rank * count,
                                      in_order.begin() + (rank + 1) * count);
    const std::vector<float> result(data[rank].begin(), data[rank].begin() + count);
    EXPECT_TRUE(same_bits(result, expected)) << "rank " << rank;
  }
}

// Every rank brings only its own block (the others hold NaN) and ends with
// every rank's block, bit for bit.
TEST_P(ThreadCommunicators, AllGatherGivesEveryRankEveryBlock) {
  const int size = GetParam();
  const size_t count = 1001;
  const size_t total = static_cast<size_t>(size) * count;
  auto ranks = make_thread_communicators(size);
  std::vector<std::vector<float>> data(size);
  std::vector<std::string> errors(size);
  run_ranks(ranks, [&](Communicator& comm) {
    const int rank = comm.rank();
    const std::vector<float> own = rank_data<float>(rank, total);
    data[rank].assign(total, std::numeric_limits<float>::quiet_NaN());
    std::copy(own.begin() + rank * count, own.begin() + (rank + 1) * count,
              data[rank].begin() + rank * count);
    errors[rank] = comm.all_gather(data[rank].data(), count).message();
  });
  std::vector<float> expected(total);
  for (int rank = 0; rank < size; ++rank) {
    const std::vector<float> own = rank_data<float>(rank, total);
    std::copy(own.begin() + rank * count, own.begin() + (rank + 1) * count,
              expected.begin() + rank * count);
  }
  for (int rank = 0; rank < size; ++rank) {
    EXPECT_EQ(errors[rank], "") << "rank " << rank;
    EXPECT_TRUE(same_bits(data[rank], expected)) << "rank " << rank;
  }
}

// ZeRO's pair: a reduce-scatter, each rank's result moved to its own block,
// and an all-gather leave every rank with the rank-order all-reduce, the
// same bits as all_reduce_sum gives.
TEST_P(ThreadCommunicators, ReduceScatterThenAllGatherIsTheAllReduce) {
  const int size = GetParam();
  const size_t count = 777;
  const size_t total = static_cast<size_t>(size) * count;
  auto ranks = make_thread_communicators(size);
  std::vector<std::vector<float>> zero(size);
  std::vector<std::vector<float>> reduced(size);
  std::vector<std::string> errors(size);
  run_ranks(ranks, [&](Communicator& comm) {
    const int rank = comm.rank();
    zero[rank] = rank_data<float>(rank, total);
    reduced[rank] = zero[rank];
    Status status = comm.reduce_scatter_sum(zero[rank].data(), count);
    if (status) {
      std::copy(zero[rank].begin(), zero[rank].begin() + count, zero[rank].begin() + rank * count);
      status = comm.all_gather(zero[rank].data(), count);
    }
    if (status) status = comm.all_reduce_sum(reduced[rank].data(), total);
    errors[rank] = status.message();
  });
  for (int rank = 0; rank < size; ++rank) {
    EXPECT_EQ(errors[rank], "") << "rank " << rank;
    EXPECT_TRUE(same_bits(zero[rank], reduced[rank])) << "rank " << rank;
    EXPECT_TRUE(same_bits(zero[rank], zero[0])) << "rank " << rank;
  }
}

// A count of 0: nothing to sum or copy, on empty buffers too, and the group
// goes on.
TEST_P(ThreadCommunicators, ZeroCountsWork) {
  const int size = GetParam();
  auto ranks = make_thread_communicators(size);
  std::vector<std::vector<float>> data(size);
  std::vector<std::string> errors(size);
  run_ranks(ranks, [&](Communicator& comm) {
    const int rank = comm.rank();
    std::vector<float> empty;
    data[rank] = {1.5f, static_cast<float>(rank)};
    Status status = comm.reduce_scatter_sum(empty.data(), 0);
    if (status) status = comm.all_gather(empty.data(), 0);
    if (status) status = comm.all_gather(data[rank].data(), 0);
    if (status) status = comm.reduce_scatter_sum(data[rank].data(), 0);
    if (status) status = comm.barrier();
    errors[rank] = status.message();
  });
  for (int rank = 0; rank < size; ++rank) {
    EXPECT_EQ(errors[rank], "") << "rank " << rank;
    // A gather of empty blocks copies nothing.
    EXPECT_EQ(data[rank], (std::vector<float>{1.5f, static_cast<float>(rank)}));
  }
}

TEST_P(ThreadCommunicators, BroadcastFromTheLastRank) {
  const int size = GetParam();
  const int root = size - 1;
  auto ranks = make_thread_communicators(size);
  std::vector<std::vector<uint8_t>> data(size);
  std::vector<std::string> errors(size);
  run_ranks(ranks, [&](Communicator& comm) {
    const int rank = comm.rank();
    data[rank].assign(1001, 0);
    for (size_t i = 0; i < data[rank].size(); ++i)
      data[rank][i] = static_cast<uint8_t>(i * 7 + rank);
    errors[rank] = comm.broadcast(data[rank].data(), data[rank].size(), root).message();
  });
  for (int rank = 0; rank < size; ++rank) {
    EXPECT_EQ(errors[rank], "") << "rank " << rank;
    for (size_t i = 0; i < data[rank].size(); ++i) {
      ASSERT_EQ(data[rank][i], static_cast<uint8_t>(i * 7 + root))
          << "rank " << rank << " byte " << i;
    }
  }
}

TEST_P(ThreadCommunicators, MaxIsTheLargestOnEveryRank) {
  const int size = GetParam();
  auto ranks = make_thread_communicators(size);
  std::vector<std::vector<double>> data(size);
  std::vector<std::string> errors(size);
  run_ranks(ranks, [&](Communicator& comm) {
    const int rank = comm.rank();
    // Element i is largest on rank i % size; element 3 is -inf everywhere.
    data[rank] = {static_cast<double>(rank), -static_cast<double>(rank), rank == 1 ? 1e300 : -1.0,
                  -std::numeric_limits<double>::infinity()};
    errors[rank] = comm.all_reduce_max(data[rank].data(), data[rank].size()).message();
  });
  const std::vector<double> expected = {static_cast<double>(size - 1), 0.0, size > 1 ? 1e300 : -1.0,
                                        -std::numeric_limits<double>::infinity()};
  for (int rank = 0; rank < size; ++rank) {
    EXPECT_EQ(errors[rank], "") << "rank " << rank;
    EXPECT_EQ(data[rank], expected) << "rank " << rank;
  }
}

// Many collectives back to back, of every kind and of changing counts (0
// among them), must neither deadlock nor mix one collective's data into the
// next; a fast rank may already be waiting in the next one.
TEST_P(ThreadCommunicators, ManyCollectivesInARow) {
  const int size = GetParam();
  auto ranks = make_thread_communicators(size);
  std::vector<std::string> errors(size);
  run_ranks(ranks, [&](Communicator& comm) {
    const int rank = comm.rank();
    auto fail = [&](const std::string& what) {
      if (errors[rank].empty()) errors[rank] = what;
    };
    for (int round = 0; round < 300; ++round) {
      const size_t count = static_cast<size_t>(round % 7 == 0 ? 0 : round % 13 + 1);
      const size_t blocks = static_cast<size_t>(size) * count;
      std::vector<double> sums(count, rank + round);
      std::vector<float> floats(count, 1.0f);
      std::vector<double> maxes(count, rank * 0.5);
      // Element i of block b is (rank + 1) * (b + 1) + i here, so block
      // `rank`'s sum is (rank + 1) * size * (size + 1) / 2 + size * i.
      std::vector<float> scattered(blocks);
      for (size_t i = 0; i < blocks; ++i)
        scattered[i] = static_cast<float>((rank + 1) * (i / count + 1) + i % count);
      // Only this rank's block is set; the others hold -1.
      std::vector<float> gathered(blocks, -1.0f);
      for (size_t i = 0; i < count; ++i)
        gathered[rank * count + i] = static_cast<float>(rank * 1000 + round + i);
      int value = rank == round % size ? round : -1;
      if (!comm.all_reduce_sum(sums.data(), count)) fail("sum");
      if (!comm.reduce_scatter_sum(scattered.data(), count)) fail("reduce_scatter_sum");
      if (!comm.all_reduce_sum(floats.data(), count)) fail("float sum");
      if (!comm.all_gather(gathered.data(), count)) fail("all_gather");
      if (!comm.all_reduce_max(maxes.data(), count)) fail("max");
      if (!comm.broadcast(&value, sizeof value, round % size)) fail("broadcast");
      if (round % 5 == 0 && !comm.barrier()) fail("barrier");
      const double expected_sum = size * (size - 1) / 2.0 + size * round;
      for (size_t i = 0; i < count; ++i) {
        if (sums[i] != expected_sum) fail("round " + std::to_string(round) + ": wrong sum");
        if (floats[i] != static_cast<float>(size))
          fail("round " + std::to_string(round) + ": wrong float sum");
        if (maxes[i] != (size - 1) * 0.5) fail("round " + std::to_string(round) + ": wrong max");
        if (scattered[i] != static_cast<float>((rank + 1) * size * (size + 1) / 2 + size * i))
          fail("round " + std::to_string(round) + ": wrong reduce-scatter");
      }
      for (size_t i = 0; i < blocks; ++i) {
        if (gathered[i] != static_cast<float>(i / count * 1000 + round + i % count))
          fail("round " + std::to_string(round) + ": wrong all-gather");
      }
      if (value != round) fail("round " + std::to_string(round) + ": wrong broadcast");
    }
  });
  for (int rank = 0; rank < size; ++rank) EXPECT_EQ(errors[rank], "") << "rank " << rank;
}

INSTANTIATE_TEST_SUITE_P(Sizes, ThreadCommunicators, ::testing::Values(1, 2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "ranks" + std::to_string(info.param);
                         });

// Ranks that call with different counts all get an error, and no rank's data changes.
TEST(ThreadCommunicatorErrors, DifferentCountsFailOnEveryRank) {
  auto ranks = make_thread_communicators(3);
  std::vector<std::vector<double>> data(3);
  std::vector<std::string> errors(3);
  std::vector<std::string> barriers(3);
  run_ranks(ranks, [&](Communicator& comm) {
    const int rank = comm.rank();
    data[rank].assign(rank == 2 ? 5 : 4, 1.0);
    errors[rank] = comm.all_reduce_sum(data[rank].data(), data[rank].size()).message();
    // The group stays usable after a failed collective.
    barriers[rank] = comm.barrier().message();
  });
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_NE(errors[rank].find("count 4"), std::string::npos) << errors[rank];
    EXPECT_NE(errors[rank].find("count 5"), std::string::npos) << errors[rank];
    EXPECT_EQ(barriers[rank], "");
    for (double value : data[rank]) EXPECT_EQ(value, 1.0);
  }
}

// A rank that calls another collective, or the same one with another block
// count, gets an error on every rank; buffers keep their values.
TEST(ThreadCommunicatorErrors, MismatchedBlockCollectivesFailOnEveryRank) {
  auto ranks = make_thread_communicators(3);
  std::vector<std::vector<float>> data(3);
  std::vector<std::string> other_call(3);
  std::vector<std::string> other_count(3);
  std::vector<std::string> after(3);
  run_ranks(ranks, [&](Communicator& comm) {
    const int rank = comm.rank();
    data[rank].assign(3 * 5, static_cast<float>(rank));
    other_call[rank] = (rank == 1 ? comm.all_gather(data[rank].data(), 4)
                                  : comm.reduce_scatter_sum(data[rank].data(), 4))
                           .message();
    other_count[rank] = comm.all_gather(data[rank].data(), rank == 2 ? 5 : 4).message();
    // The group stays usable after a failed collective.
    after[rank] = comm.barrier().message();
  });
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_NE(other_call[rank].find("rank 0 called reduce_scatter_sum"), std::string::npos)
        << other_call[rank];
    EXPECT_NE(other_call[rank].find("rank 1 called all_gather"), std::string::npos)
        << other_call[rank];
    EXPECT_NE(other_count[rank].find("count 4"), std::string::npos) << other_count[rank];
    EXPECT_NE(other_count[rank].find("count 5"), std::string::npos) << other_count[rank];
    EXPECT_EQ(after[rank], "");
    for (float value : data[rank]) EXPECT_EQ(value, static_cast<float>(rank));
  }
}

TEST(MpiCommunicator, WithoutMpiTheErrorSaysWhatToInstall) {
  if (mpi_available())
    GTEST_SKIP() << "this build has MPI; tests/mpi_communicator_test.cpp covers it";
  auto world = make_mpi_communicator();
  ASSERT_FALSE(world.is_ok());
  EXPECT_NE(world.message().find("libopenmpi-dev"), std::string::npos) << world.message();
}

}  // namespace
}  // namespace memfit
