// checkpoint_diff A B TOLERANCE: compares two checkpoints of one model,
// tensor by tensor, and prints the largest |a - b| / (1 + |b|) and where it is.
// Exits 0 if it is at most TOLERANCE, 1 if not, 2 if the checkpoints cannot
// be read or do not hold the same tensors.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "train/checkpoint.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: checkpoint_diff A B TOLERANCE\n");
    return 2;
  }
  auto a = memfit::load_checkpoint(argv[1]);
  auto b = memfit::load_checkpoint(argv[2]);
  if (!a || !b) {
    std::fprintf(stderr, "checkpoint_diff: %s\n", (!a ? a.message() : b.message()).c_str());
    return 2;
  }
  const double tolerance = std::strtod(argv[3], nullptr);
  if (a->tensors.size() != b->tensors.size()) {
    std::fprintf(stderr, "checkpoint_diff: %zu tensors against %zu\n", a->tensors.size(),
                 b->tensors.size());
    return 2;
  }
  double worst = 0;
  std::string where = "(none)";
  for (size_t t = 0; t < a->tensors.size(); ++t) {
    const auto& x = a->tensors[t];
    const auto& y = b->tensors[t];
    if (x.name != y.name || x.data.size() != y.data.size()) {
      std::fprintf(stderr, "checkpoint_diff: tensor %zu is %s in one, %s in the other\n", t,
                   x.name.c_str(), y.name.c_str());
      return 2;
    }
    for (size_t i = 0; i < x.data.size(); ++i) {
      const double d = std::abs(double{x.data[i]} - y.data[i]) / (1.0 + std::abs(double{y.data[i]}));
      if (!(d <= worst)) {
        worst = d;
        where = x.name + "[" + std::to_string(i) + "]";
      }
    }
  }
  std::printf("largest relative difference %.3g at %s (tolerance %g)\n", worst, where.c_str(),
              tolerance);
  return worst <= tolerance ? 0 : 1;
}
