#include "test_util.h"

#include <cmath>

#include "core/random.h"

namespace memfit::testing {

std::vector<float> random_normal(size_t count, uint64_t seed) {
  std::vector<float> out(count);
  for (size_t i = 0; i < count; ++i) {
    // Box-Muller on two counter-based uniforms; 1 - u keeps the log finite.
    const double u1 = 1.0 - random_uniform(seed, 0, 1, i);
    const double u2 = random_uniform(seed, 0, 2, i);
    out[i] = static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
  return out;
}

}  // namespace memfit::testing
