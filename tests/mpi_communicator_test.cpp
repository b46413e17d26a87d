// The MPI communicator, run by CTest under mpirun with several ranks: every
// test runs on every rank, which make the same collectives in the same
// order. Results are checked against what each rank can compute alone (all
// ranks' data is a function of the rank), and the bits are compared across
// ranks by broadcasting rank 0's. A rank never leaves a test early after a
// wrong value, since the others would wait for it in the next collective;
// it records the failure and goes on. Buffers above INT_MAX elements, which go
// in pieces, are too large to test here.
#include <gtest/gtest.h>

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
  int differs = std::memcmp(rank0.data(), data.data(), bytes) != 0;
  double any = differs;
  EXPECT_TRUE(world->all_reduce_max(&any, 1).is_ok());
  return any == 0.0;
}

// The sum over ranks in any order is within (size - 1) * eps * sum |x| of the
// exact sum, so two orders differ by at most twice that.
template <class T>
void expect_sum_of_rank_data(const std::vector<T>& sum) {
  const size_t count = sum.size();
  std::vector<T> in_order(count, T(0));
  std::vector<double> magnitude(count, 0.0);
  for (int rank = 0; rank < world->size(); ++rank) {
    std::vector<T> data = rank_data<T>(rank, count);
    for (size_t i = 0; i < count; ++i) {
      in_order[i] += data[i];
      magnitude[i] += std::abs(static_cast<double>(data[i]));
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
    std::vector<double> sums(count, rank + round);
    std::vector<double> maxes(count, rank * 0.5);
    int value = rank == round % size ? round : -1;
    ASSERT_TRUE(world->all_reduce_sum(sums.data(), count).is_ok());
    ASSERT_TRUE(world->all_reduce_max(maxes.data(), count).is_ok());
    ASSERT_TRUE(world->broadcast(&value, sizeof value, round % size).is_ok());
    if (round % 5 == 0) {
      ASSERT_TRUE(world->barrier().is_ok());
    }
    for (size_t i = 0; i < count; ++i) {
      if (sums[i] != size * (size - 1) / 2.0 + size * round) fail(round, "wrong sum");
      if (maxes[i] != (size - 1) * 0.5) fail(round, "wrong max");
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
