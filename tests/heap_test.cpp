// The heap algorithms on random buffers: greedy by size gives the same offsets
// whether it finds the overlapping placed buffers by scanning them all or
// through its index of steps, and every placement keeps buffers that are live
// together apart.
#include "memory/heap.h"

#include <gtest/gtest.h>

#include <random>

namespace memfit {
namespace {

constexpr size_t kAlign = 64;

// `count` buffers over `steps` steps: a few persistent ones, short and long
// intervals, sizes from one to 4096 alignment units (many equal sizes).
std::vector<PlanBuffer> random_buffers(size_t count, int32_t steps, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<PlanBuffer> buffers(count);
  for (PlanBuffer& b : buffers) {
    b.bytes = kAlign * (1 + rng() % (rng() % 2 ? 16 : 4096));
    if (rng() % 20 == 0) {
      b.persistent = true;
      b.live = {-1, steps};
      continue;
    }
    b.live.def = static_cast<int32_t>(rng() % static_cast<uint32_t>(steps + 1)) - 1;
    const int32_t length = static_cast<int32_t>(rng() % (rng() % 4 == 0 ? steps : 8));
    b.live.last = std::min(steps, b.live.def + length);
  }
  return buffers;
}

void expect_disjoint_when_live_together(const std::vector<PlanBuffer>& buffers,
                                        const Placement& placement) {
  for (size_t a = 0; a < buffers.size(); ++a) {
    EXPECT_EQ(placement.offsets[a] % kAlign, 0u) << "buffer " << a;
    EXPECT_LE(placement.offsets[a] + buffers[a].bytes, placement.arena_bytes) << "buffer " << a;
    for (size_t b = a + 1; b < buffers.size(); ++b) {
      const bool live_together =
          buffers[a].live.def <= buffers[b].live.last && buffers[b].live.def <= buffers[a].live.last;
      const bool apart = placement.offsets[a] + buffers[a].bytes <= placement.offsets[b] ||
                         placement.offsets[b] + buffers[b].bytes <= placement.offsets[a];
      if (live_together) {
        ASSERT_TRUE(apart) << "buffers " << a << " and " << b << " share bytes";
      }
    }
  }
}

TEST(Heap, GreedyBySizeGivesTheSameOffsetsByEitherSearch) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    const std::vector<PlanBuffer> buffers = random_buffers(300 + 20 * seed, 200, seed);
    const Placement scanned = place_greedy_by_size(buffers, buffers.size());
    const Placement indexed = place_greedy_by_size(buffers, 0);
    ASSERT_EQ(scanned.offsets, indexed.offsets) << "seed " << seed;
    ASSERT_EQ(scanned.arena_bytes, indexed.arena_bytes) << "seed " << seed;
    expect_disjoint_when_live_together(buffers, scanned);
  }
}

TEST(Heap, EveryPlacementKeepsBuffersLiveTogetherApart) {
  const std::vector<PlanBuffer> buffers = random_buffers(500, 300, 99);
  expect_disjoint_when_live_together(buffers, place_greedy_by_size(buffers));
  expect_disjoint_when_live_together(buffers, place_by_time(buffers));
  expect_disjoint_when_live_together(buffers, place_without_sharing(buffers));
}

}  // namespace
}  // namespace memfit
