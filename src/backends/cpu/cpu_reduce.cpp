// reduce_sum and reduce_mean over a set of axes. When the reduced axes are
// consecutive, x is seen as (A, R, B): the axes before them, the reduced
// ones and those after, and y as (A, B). Each output element sums its R
// inputs in double, in increasing order, as the reference kernel does, so the
// results equal the reference bit for bit; threads take blocks of outputs
// (the B elements of a block accumulate side by side, reading x row by row).
// Reductions over axes that are not consecutive are left to the reference
// kernel (reduce_supported).
#include <algorithm>
#include <array>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/dnnl_util.h"
#include "core/check.h"

namespace memfit::cpu {
namespace {

constexpr int64_t kBlock = 256;  // outputs per task

class ReduceKernel final : public Kernel {
 public:
  ReduceKernel(const Shape& x, const std::vector<int64_t>& axes, bool mean) : mean_(mean) {
    const auto first = static_cast<size_t>(*std::min_element(axes.begin(), axes.end()));
    const auto last = static_cast<size_t>(*std::max_element(axes.begin(), axes.end()));
    for (size_t i = 0; i < x.size(); ++i) {
      (i < first ? a_ : i <= last ? r_ : b_) *= x[i];
    }
  }

  void run(const KernelArgs& args) override {
    const auto* x = static_cast<const float*>(args.inputs[0]);
    auto* y = static_cast<float*>(args.outputs[0]);
    const int64_t blocks = (b_ + kBlock - 1) / kBlock;
    const double divisor = mean_ ? static_cast<double>(r_) : 1.0;
#pragma omp parallel for schedule(static)
    for (int64_t task = 0; task < a_ * blocks; ++task) {
      const int64_t a = task / blocks;
      const int64_t b0 = task % blocks * kBlock;
      const int64_t width = std::min(kBlock, b_ - b0);
      std::array<double, kBlock> sums{};
      for (int64_t r = 0; r < r_; ++r) {
        const float* row = x + (a * r_ + r) * b_ + b0;
        for (int64_t j = 0; j < width; ++j) sums[static_cast<size_t>(j)] += row[j];
      }
      float* out = y + a * b_ + b0;
      for (int64_t j = 0; j < width; ++j) {
        out[j] = static_cast<float>(mean_ ? sums[static_cast<size_t>(j)] / divisor
                                          : sums[static_cast<size_t>(j)]);
      }
    }
  }

 private:
  bool mean_;
  int64_t a_ = 1, r_ = 1, b_ = 1;
};

}  // namespace

bool reduce_supported(const Node& node) {
  std::vector<int64_t> axes = std::get<ReduceAttrs>(node.attrs).axes;
  if (axes.empty()) return false;
  std::sort(axes.begin(), axes.end());
  for (size_t i = 1; i < axes.size(); ++i) {
    if (axes[i] != axes[i - 1] + 1) return false;
  }
  return true;
}

std::unique_ptr<Kernel> make_reduce_kernel(const Graph& graph, const Node& node) {
  MEMFIT_CHECK(reduce_supported(node));
  return std::make_unique<ReduceKernel>(input_shape(graph, node, 0),
                                        std::get<ReduceAttrs>(node.attrs).axes,
                                        node.op == OpKind::reduce_mean);
}

}  // namespace memfit::cpu
