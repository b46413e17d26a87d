// The MPI communicator, run by CTest under mpirun with several ranks: every
// test runs on every rank, which make the same collectives in the same
// order. Results are checked against what each rank can compute alone (all
// ranks' data is a function of the rank), and the bits are compared across
// ranks by broadcasting rank 0's. A rank never leaves a test early after a
// wrong value, since the others would wait for it in the next collective;
// it records the failure and goes on. Buffers above INT_MAX elements, which go
// in pieces (or, for an all-gather's blocks, as a derived datatype), are too
// large to test here; a reduce-scatter's refusal of such blocks is tested.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "memfit/dist.h"

namespace memfit {
namespace {

// The world, made in main before the tests and finalized after them.
Communicator* world = nullptr;

// Rank r's data: values that cancel across ranks (1e8, 1, -1e8, so a float
// sum depends on its order) mixed with random ones of many magnitudes.
template <class T>
std::vector<T> rank_data(int rank, size_t count) {
  std::mt19937 generator(99 + rank);
  std::uniform_real_distribution<double> mantissa(-1.0, 1.0);
  std::uniform_int_distribution<int> exponent(-20, 20);
  const T pattern[] = {T(1e8), T(1), T(-1e8)};
  std::vector<T> data(count);
  for (size_t i = 0; i < count; ++i) {
    data[i] = i % 2 == 0 ? pattern[(static_cast<size_t>(rank) + i / 2) % 3]
                         : static_cast<T>(std::ldexp(mantissa(generator), exponent(generator)));
  }
  return data;
}

// Whether `data` holds the same bits on every rank.
template <class T>
bool same_on_every_rank(const std::vector<T>& data) {
  std::vector<T> rank0 = data;
  const size_t bytes = data.size() * sizeof(T);
  EXPECT_TRUE(world->broadcast(rank0.data(), bytes, 0).is_ok());
  int differs = bytes > 0 && std::memcmp(rank0.data(), data.data(), bytes) != 0;
  double any = differs;
  EXPECT_TRUE(world->all_reduce_max(&any, 1).is_ok());
  return any == 0.0;
}

// The sum over ranks in any order is within (size - 1) * eps * sum |x| of the
// exact sum, so two orders differ by at most twice that. `sum` is of the
// elements offset .. offset + sum.size() of rank_data(rank, data_count), by
// default all of it.
template <class T>
void expect_sum_of_rank_data(const std::vector<T>& sum, size_t offset = 0, size_t data_count = 0) {
  const size_t count = sum.size();
  if (data_count == 0) data_count = count;
  std::vector<T> in_order(count, T(0));
  std::vector<double> magnitude(count, 0.0);
  for (int rank = 0; rank < world->size(); ++rank) {
    std::vector<T> data = rank_data<T>(rank, data_count);
    for (size_t i = 0; i < count; ++i) {
      in_order[i] += data[offset + i];
      magnitude[i] += std::abs(static_cast<double>(data[offset + i]));
    }
  }
  const double eps = std::numeric_limits<T>::epsilon();
  for (size_t i = 0; i < count; ++i) {
    const double bound = 2.0 * (world->size() - 1) * eps * magnitude[i];
    ASSERT_LE(std::abs(static_cast<double>(sum[i]) - in_order[i]), bound) << "element " << i;
  }
}

TEST(MpiCommunicator, RanksAreNumberedOnceEach) {
  EXPECT_STREQ(world->kind(), "mpi");
  ASSERT_GE(world->size(), 1);
  ASSERT_LT(world->rank(), world->size());
  EXPECT_EQ(launched_by_mpi(), world->size() > 1);
  // Each rank marks its own slot: every slot is marked exactly once.
  std::vector<double> slots(static_cast<size_t>(world->size()), 0.0);
  slots[static_cast<size_t>(world->rank())] = 1.0;
  ASSERT_TRUE(world->all_reduce_sum(slots.data(), slots.size()).is_ok());
  for (double slot : slots) EXPECT_EQ(slot, 1.0);
}

TEST(MpiCommunicator, SumsAreRightAndTheSameOnEveryRank) {
  // Small counts and one of 8 MiB of floats, which Open MPI sends by
  // another path (large messages between processes on one machine).
  for (size_t count : {size_t{1}, size_t{1000}, size_t{2} << 20}) {
    std::vector<float> floats = rank_data<float>(world->rank(), count);
    std::vector<double> doubles = rank_data<double>(world->rank(), count);
    ASSERT_TRUE(world->all_reduce_sum(floats.data(), count).is_ok());
    ASSERT_TRUE(world->all_reduce_sum(doubles.data(), count).is_ok());
    expect_sum_of_rank_data(floats);
    expect_sum_of_rank_data(doubles);
    EXPECT_TRUE(same_on_every_rank(floats)) << count << " floats";
    EXPECT_TRUE(same_on_every_rank(doubles)) << count << " doubles";
  }
}

// Each rank brings size blocks; its first block becomes the sum of every
// rank's block `rank` (MPI_IN_PLACE puts it there). Counts as for the sums,
// and 0.
TEST(MpiCommunicator, ReduceScatterSumsTheOwnBlock) {
  const size_t size = static_cast<size_t>(world->size());
  const size_t rank = static_cast<size_t>(world->rank());
  for (size_t count : {size_t{0}, size_t{1}, size_t{1000}, size_t{2} << 20}) {
    std::vector<float> data = rank_data<float>(world->rank(), size * count);
    ASSERT_TRUE(world->reduce_scatter_sum(data.data(), count).is_ok()) << count;
    const std::vector<float> block(data.begin(), data.begin() + count);
    expect_sum_of_rank_data(block, rank * count, size * count);
  }
}

// Every rank brings its own block (the others NaN) and ends with every
// rank's, the same bits on every rank.
TEST(MpiCommunicator, AllGatherGivesEveryRankEveryBlock) {
  const size_t size = static_cast<size_t>(world->size());
  const size_t rank = static_cast<size_t>(world->rank());
  for (size_t count : {size_t{0}, size_t{1}, size_t{1001}, size_t{2} << 20}) {
    const size_t total = size * count;
    std::vector<float> data(total, std::numeric_limits<float>::quiet_NaN());
    {
      const std::vector<float> own = rank_data<float>(world->rank(), total);
      std::copy(own.begin() + rank * count, own.begin() + (rank + 1) * count,
                data.begin() + rank * count);
    }
    ASSERT_TRUE(world->all_gather(data.data(), count).is_ok()) << count;
    size_t wrong = 0;
    for (size_t r = 0; r < size; ++r) {
      const std::vector<float> theirs = rank_data<float>(static_cast<int>(r), total);
      // memcmp is not given the null data() of empty vectors.
      wrong += count > 0 && std::memcmp(data.data() + r * count, theirs.data() + r * count,
                                        count * sizeof(float)) != 0;
    }
    EXPECT_EQ(wrong, 0u) << "blocks of " << count << " floats";
    EXPECT_TRUE(same_on_every_rank(data)) << count << " floats a block";
  }
}

// ZeRO's pair: reduce-scatter, the result moved to the rank's own block,
// all-gather. Every rank ends with the sum of the whole buffers, the same
// bits everywhere, and the same bits again when repeated.
TEST(MpiCommunicator, ReduceScatterThenAllGatherIsAnAllReduce) {
  const size_t size = static_cast<size_t>(world->size());
  const size_t rank = static_cast<size_t>(world->rank());
  const size_t count = (size_t{1} << 18) + 3;
  std::vector<float> first;
  for (int turn = 0; turn < 2; ++turn) {
    std::vector<float> data = rank_data<float>(world->rank(), size * count);
    ASSERT_TRUE(world->reduce_scatter_sum(data.data(), count).is_ok());
    std::copy(data.begin(), data.begin() + count, data.begin() + rank * count);
    ASSERT_TRUE(world->all_gather(data.data(), count).is_ok());
    expect_sum_of_rank_data(data);
    EXPECT_TRUE(same_on_every_rank(data));
    if (turn == 0) {
      first = data;
    } else {
      EXPECT_EQ(std::memcmp(first.data(), data.data(), data.size() * sizeof(float)), 0)
          << "a repeated reduce-scatter gave other bits";
    }
  }
}

// A block above INT_MAX floats cannot go to MPI_Reduce_scatter_block: every
// rank refuses it alike before touching the buffer (none is allocated here).
TEST(MpiCommunicator, ReduceScatterRefusesBlocksAboveIntMax) {
  const Status status = world->reduce_scatter_sum(nullptr, size_t{INT_MAX} + 1);
  ASSERT_FALSE(status.is_ok());
  EXPECT_NE(status.message().find("INT_MAX"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("split"), std::string::npos) << status.message();
  // Nobody waits in a collective: the group goes on.
  ASSERT_TRUE(world->barrier().is_ok());
}

TEST(MpiCommunicator, BroadcastFromTheLastRank) {
  const int root = world->size() - 1;
  for (size_t bytes : {size_t{0}, size_t{1001}, size_t{4} << 20}) {
    std::vector<uint8_t> data(bytes);
    for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>(i * 7 + world->rank());
    ASSERT_TRUE(world->broadcast(data.data(), bytes, root).is_ok());
    size_t wrong = 0;
    for (size_t i = 0; i < bytes; ++i) wrong += data[i] != static_cast<uint8_t>(i * 7 + root);
    EXPECT_EQ(wrong, 0u) << "of " << bytes << " bytes";
  }
  EXPECT_FALSE(world->broadcast(nullptr, 0, world->size()).is_ok());
}

TEST(MpiCommunicator, MaxIsTheLargest) {
  const double rank = world->rank();
  std::vector<double> data = {rank, -rank, world->rank() == 1 ? 1e300 : -1.0};
  ASSERT_TRUE(world->all_reduce_max(data.data(), data.size()).is_ok());
  EXPECT_EQ(data[0], world->size() - 1.0);
  EXPECT_EQ(data[1], 0.0);
  EXPECT_EQ(data[2], world->size() > 1 ? 1e300 : -1.0);
}

// Collectives of every kind and changing counts (0 among them), back to back.
TEST(MpiCommunicator, ManyCollectivesInARow) {
  const int size = world->size();
  const int rank = world->rank();
  std::string error;
  auto fail = [&](int round, const char* what) {
    if (error.empty()) error = "round " + std::to_string(round) + ": " + what;
  };
  for (int round = 0; round < 200; ++round) {
    const size_t count = static_cast<size_t>(round % 7 == 0 ? 0 : round % 13 + 1);
    const size_t blocks = static_cast<size_t>(size) * count;
    std::vector<double> sums(count, rank + round);
    std::vector<double> maxes(count, rank * 0.5);
    // Element i of block b is (rank + 1) * (b + 1) + i here, so block
    // `rank`'s sum is (rank + 1) * size * (size + 1) / 2 + size * i, exactly.
    std::vector<float> scattered(blocks);
    for (size_t i = 0; i < blocks; ++i)
      scattered[i] = static_cast<float>((rank + 1) * (i / count + 1) + i % count);
    // Only this rank's block is set; the others hold -1.
    std::vector<float> gathered(blocks, -1.0f);
    for (size_t i = 0; i < count; ++i)
      gathered[rank * count + i] = static_cast<float>(rank * 1000 + round + i);
    int value = rank == round % size ? round : -1;
    ASSERT_TRUE(world->all_reduce_sum(sums.data(), count).is_ok());
    ASSERT_TRUE(world->reduce_scatter_sum(scattered.data(), count).is_ok());
    ASSERT_TRUE(world->all_reduce_max(maxes.data(), count).is_ok());
    ASSERT_TRUE(world->all_gather(gathered.data(), count).is_ok());
    ASSERT_TRUE(world->broadcast(&value, sizeof value, round % size).is_ok());
    if (round % 5 == 0) {
      ASSERT_TRUE(world->barrier().is_ok());
    }
    for (size_t i = 0; i < count; ++i) {
      if (sums[i] != size * (size - 1) / 2.0 + size * round) fail(round, "wrong sum");
      if (maxes[i] != (size - 1) * 0.5) fail(round, "wrong max");
      if (scattered[i] != static_cast<float>((rank + 1) * size * (size + 1) / 2 + size * i))
        fail(round, "wrong reduce-scatter");
    }
    for (size_t i = 0; i < blocks; ++i) {
      if (gathered[i] != static_cast<float>(i / count * 1000 + round + i % count))
        fail(round, "wrong all-gather");
    }
    if (value != round) fail(round, "wrong broadcast");
  }
  EXPECT_EQ(error, "");
}

// MPI_THREAD_SERIALIZED: collectives may run on another thread than the one
// that started MPI, one thread at a time.
TEST(MpiCommunicator, CollectivesOnAnotherThread) {
  for (int turn = 0; turn < 3; ++turn) {
    std::vector<float> data(100, 1.0f);
    Status status;
    std::thread communication([&] {
      status = world->all_reduce_sum(data.data(), data.size());
      if (status) status = world->barrier();
    });
    communication.join();
    ASSERT_TRUE(status.is_ok()) << status.message();
    size_t wrong = 0;
    for (float value : data) wrong += value != static_cast<float>(world->size());
    EXPECT_EQ(wrong, 0u);
    // And back on the main thread.
    ASSERT_TRUE(world->barrier().is_ok());
  }
}

}  // namespace
}  // namespace memfit

int main(int argc, char** argv) {
  auto made = memfit::make_mpi_communicator();
  if (!made.is_ok()) {
    std::cerr << made.message() << "\n";
    return 1;
  }
  std::unique_ptr<memfit::Communicator> world = std::move(made).value();
  memfit::world = world.get();
  // Rank 0 reports everything; the others report only their failures. The
  // flag is read when gtest starts, and the command line may still set it.
  if (world->rank() != 0) GTEST_FLAG_SET(brief, true);
  ::testing::InitGoogleTest(&argc, argv);
  const int failed = RUN_ALL_TESTS();
  if (failed != 0) {
    std::cerr << "rank " << world->rank() << " of " << world->size() << ": tests failed\n";
  }
  world.reset();
  return failed;
}
