// causal_mask: y = x with every element above the diagonal shifted by
// `offset` (key j > query i + offset) set to `value`, rows split across
// threads. Exact, so the result is the reference kernel's. In place: y may be x.
#include <algorithm>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/dnnl_util.h"
#include "core/check.h"

namespace memfit::cpu {
namespace {

class CausalMaskKernel final : public Kernel {
 public:
  CausalMaskKernel(const Shape& x, const CausalMaskAttrs& attrs) : attrs_(attrs) {
    MEMFIT_CHECK(x.size() >= 2);
    tq_ = x[x.size() - 2];
    tk_ = x[x.size() - 1];
    rows_ = num_elements(x) / tk_;
  }

  void run(const KernelArgs& args) override {
    const auto* x = static_cast<const float*>(args.inputs[0]);
    auto* y = static_cast<float*>(args.outputs[0]);
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < rows_; ++row) {
      const int64_t i = row % tq_;
      // Keys 0 .. i + offset are kept, the rest masked.
      const int64_t kept = std::clamp<int64_t>(i + attrs_.offset + 1, 0, tk_);
      const float* in = x + row * tk_;
      float* out = y + row * tk_;
      if (out != in) std::copy(in, in + kept, out);
      std::fill(out + kept, out + tk_, attrs_.value);
    }
  }

 private:
  CausalMaskAttrs attrs_;
  int64_t tq_ = 1, tk_ = 1, rows_ = 0;
};

std::unique_ptr<Kernel> make_causal_mask_kernel(const Graph& graph, const Node& node) {
  return std::make_unique<CausalMaskKernel>(input_shape(graph, node, 0),
                                            std::get<CausalMaskAttrs>(node.attrs));
}

}  // namespace

MEMFIT_CPU_KERNEL(causal_mask, make_causal_mask_kernel)

}  // namespace memfit::cpu
