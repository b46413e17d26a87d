// dropout: y = x / (1 - p) where the counter-based generator keeps element i
// (dropout_keeps(seed, micro_step, key, i, p), src/core/random.h), else 0;
// one Philox block gives the draws of four elements.
// Each element's draw depends on its index only, so the mask is the
// reference kernel's bit for bit, on any number of threads, and a recomputed
// dropout draws the same mask. The division is in double, rounded once, as
// in the reference. In place: y may be x.
#include <algorithm>
#include <array>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/dnnl_util.h"
#include "core/random.h"

namespace memfit::cpu {
namespace {

class DropoutKernel final : public Kernel {
 public:
  DropoutKernel(const DropoutAttrs& attrs, int64_t count) : attrs_(attrs), count_(count) {}

  void run(const KernelArgs& args) override {
    const auto* x = static_cast<const float*>(args.inputs[0]);
    auto* y = static_cast<float*>(args.outputs[0]);
    const double keep_fraction = 1.0 - static_cast<double>(attrs_.p);
    const auto seed = args.step.seed;
    const auto step = static_cast<uint64_t>(args.step.micro_step);
    // One Philox block draws four elements.
    const int64_t blocks = (count_ + 3) / 4;
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
      const std::array<uint32_t, 4> words = random_block(seed, step, attrs_.key, static_cast<uint64_t>(b));
      const int64_t end = std::min(count_, 4 * b + 4);
      for (int64_t i = 4 * b; i < end; ++i) {
        const bool keep = dropout_keeps_word(words[static_cast<size_t>(i - 4 * b)], attrs_.p);
        y[i] = keep ? static_cast<float>(x[i] / keep_fraction) : 0.0f;
      }
    }
  }

 private:
  DropoutAttrs attrs_;
  int64_t count_;
};

std::unique_ptr<Kernel> make_dropout_kernel(const Graph& graph, const Node& node) {
  return std::make_unique<DropoutKernel>(std::get<DropoutAttrs>(node.attrs),
                                         num_elements(input_shape(graph, node, 0)));
}

}  // namespace

MEMFIT_CPU_KERNEL(dropout, make_dropout_kernel)

}  // namespace memfit::cpu
