// Helpers shared by the tests.
#pragma once

#include <cstdint>
#include <vector>

namespace memfit::testing {

// Deterministic normal(0, 1) numbers from a seed.
std::vector<float> random_normal(size_t count, uint64_t seed);

}  // namespace memfit::testing
