// reduce_sum and reduce_mean over a set of axes. When the reduced axes are
// consecutive, x is seen as (A, R, B): the axes before them, the reduced
// ones and those after, and y as (A, B). Each output element sums its R
// inputs in double, in increasing order, as the reference kernel does, so the
// results equal the reference bit for bit; threads take blocks of outputs
// (the B elements of a block accumulate side by side, reading x row by row).
// Over axes that are not consecutive, each output element (split across
// threads) walks its inputs in row-major order with an odometer over the
// reduced dimensions: the same sums in the same order.
#include <algorithm>
#include <array>
#include <vector>

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
#pragma omp parallel for schedule(static) if (worth_threads(static_cast<size_t>(a_ * r_ * b_) * sizeof(float)))
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

class ScatteredReduceKernel final : public Kernel {
 public:
  ScatteredReduceKernel(const Shape& x, const std::vector<int64_t>& axes, bool mean) : mean_(mean) {
    std::vector<int64_t> strides(x.size(), 1);
    for (size_t i = x.size(); i-- > 1;) strides[i - 1] = strides[i] * x[i];
    for (size_t i = 0; i < x.size(); ++i) {
      const bool reduced = std::find(axes.begin(), axes.end(), static_cast<int64_t>(i)) != axes.end();
      (reduced ? reduced_dims_ : kept_dims_).push_back(x[i]);
      (reduced ? reduced_strides_ : kept_strides_).push_back(strides[i]);
    }
    for (int64_t d : kept_dims_) outputs_ *= d;
    for (int64_t d : reduced_dims_) count_ *= d;
  }

  void run(const KernelArgs& args) override {
    const auto* x = static_cast<const float*>(args.inputs[0]);
    auto* y = static_cast<float*>(args.outputs[0]);
    const size_t rank = reduced_dims_.size();
#pragma omp parallel for schedule(static) if (worth_threads(static_cast<size_t>(outputs_ * count_) * sizeof(float)))
    for (int64_t o = 0; o < outputs_; ++o) {
      int64_t rest = o, base = 0;
      for (size_t d = kept_dims_.size(); d-- > 0;) {
        base += rest % kept_dims_[d] * kept_strides_[d];
        rest /= kept_dims_[d];
      }
      std::vector<int64_t> at(rank, 0);  // the odometer over the reduced dimensions
      double sum = 0;
      int64_t offset = base;
      for (int64_t i = 0; i < count_; ++i) {
        sum += x[offset];
        for (size_t d = rank; d-- > 0;) {  // the next coordinate, last dimension fastest
          offset += reduced_strides_[d];
          if (++at[d] < reduced_dims_[d]) break;
          offset -= at[d] * reduced_strides_[d];
          at[d] = 0;
        }
      }
      y[o] = static_cast<float>(mean_ ? sum / static_cast<double>(count_) : sum);
    }
  }

 private:
  bool mean_;
  std::vector<int64_t> kept_dims_, kept_strides_, reduced_dims_, reduced_strides_;
  int64_t outputs_ = 1, count_ = 1;
};

bool consecutive(std::vector<int64_t> axes) {
  std::sort(axes.begin(), axes.end());
  for (size_t i = 1; i < axes.size(); ++i) {
    if (axes[i] != axes[i - 1] + 1) return false;
  }
  return true;
}

bool reduce_supported(const Node& node) { return !std::get<ReduceAttrs>(node.attrs).axes.empty(); }

// One or more axes (reduce_supported), f32.
bool reduce_takes(const Graph& graph, const Node& node) {
  return reduce_supported(node) && has_op_dtypes(graph, node);
}

std::unique_ptr<Kernel> make_reduce_kernel(const Graph& graph, const Node& node) {
  MEMFIT_CHECK(reduce_supported(node));
  const std::vector<int64_t>& axes = std::get<ReduceAttrs>(node.attrs).axes;
  const bool mean = node.op == OpKind::reduce_mean;
  if (consecutive(axes)) {
    return std::make_unique<ReduceKernel>(input_shape(graph, node, 0), axes, mean);
  }
  return std::make_unique<ScatteredReduceKernel>(input_shape(graph, node, 0), axes, mean);
}

}  // namespace

MEMFIT_CPU_KERNEL(reduce_sum, make_reduce_kernel, reduce_takes)
MEMFIT_CPU_KERNEL(reduce_mean, make_reduce_kernel, reduce_takes)

}  // namespace memfit::cpu
