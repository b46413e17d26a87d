// The optimizer updates, sgd_update and adamw_update: the reference kernels'
// formulas (src/backends/reference/ref_optimizer.cpp), element by element in
// double and rounded once, so the results equal the reference bit for bit,
// split across the OpenMP threads. In place on their state: each element
// reads its inputs before it writes its outputs.
#include <cmath>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/dnnl_util.h"
#include "core/check.h"

namespace memfit::cpu {
namespace {

// Inputs w, g[, v]; outputs w'[, v'].
class SgdKernel final : public Kernel {
 public:
  SgdKernel(const SgdAttrs& attrs, int64_t count) : attrs_(attrs), count_(count) {}

  void run(const KernelArgs& args) override {
    const bool has_velocity = attrs_.momentum != 0.0f;
    const double lr = static_cast<double>(attrs_.lr) * args.step.lr_scale;
    const double momentum = attrs_.momentum;
    const double weight_decay = attrs_.weight_decay;
    const auto* w = static_cast<const float*>(args.inputs[0]);
    const auto* g = static_cast<const float*>(args.inputs[1]);
    const auto* v = has_velocity ? static_cast<const float*>(args.inputs[2]) : nullptr;
    auto* w_next = static_cast<float*>(args.outputs[0]);
    auto* v_next = has_velocity ? static_cast<float*>(args.outputs[1]) : nullptr;
    if (has_velocity) {
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < count_; ++i) {
        const double w_i = w[i];
        const double v_i = momentum * v[i] + (g[i] + weight_decay * w_i);
        v_next[i] = static_cast<float>(v_i);
        w_next[i] = static_cast<float>(w_i - lr * v_i);
      }
    } else {
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < count_; ++i) {
        const double w_i = w[i];
        w_next[i] = static_cast<float>(w_i - lr * (g[i] + weight_decay * w_i));
      }
    }
  }

 private:
  SgdAttrs attrs_;
  int64_t count_;
};

// Inputs w, g, m, v; outputs w', m', v'.
class AdamWKernel final : public Kernel {
 public:
  AdamWKernel(const AdamWAttrs& attrs, int64_t count) : attrs_(attrs), count_(count) {}

  void run(const KernelArgs& args) override {
    const double lr = static_cast<double>(attrs_.lr) * args.step.lr_scale;
    const double beta1 = attrs_.beta1, beta2 = attrs_.beta2, eps = attrs_.eps;
    const double weight_decay = attrs_.weight_decay;
    const double t = static_cast<double>(args.step.optimizer_step + 1);
    const double correction1 = 1.0 - std::pow(beta1, t);
    const double correction2 = 1.0 - std::pow(beta2, t);
    const auto* w = static_cast<const float*>(args.inputs[0]);
    const auto* g = static_cast<const float*>(args.inputs[1]);
    const auto* m = static_cast<const float*>(args.inputs[2]);
    const auto* v = static_cast<const float*>(args.inputs[3]);
    auto* w_next = static_cast<float*>(args.outputs[0]);
    auto* m_next = static_cast<float*>(args.outputs[1]);
    auto* v_next = static_cast<float*>(args.outputs[2]);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count_; ++i) {
      const double w_i = w[i];
      const double g_i = g[i];
      const double m_i = beta1 * m[i] + (1.0 - beta1) * g_i;
      const double v_i = beta2 * v[i] + (1.0 - beta2) * g_i * g_i;
      const double step = (m_i / correction1) / (std::sqrt(v_i / correction2) + eps);
      m_next[i] = static_cast<float>(m_i);
      v_next[i] = static_cast<float>(v_i);
      w_next[i] = static_cast<float>(w_i - lr * (weight_decay * w_i + step));
    }
  }

 private:
  AdamWAttrs attrs_;
  int64_t count_;
};

std::unique_ptr<Kernel> make_optimizer_kernel(const Graph& graph, const Node& node) {
  // Every operand in the same layout (a blocked one's padding is zero and stays so).
  const Value& w = graph.value(node.inputs[0]);
  const int64_t count = stored_elements(w.type.shape, w.layout);
  switch (node.op) {
    case OpKind::sgd_update:
      return std::make_unique<SgdKernel>(std::get<SgdAttrs>(node.attrs), count);
    case OpKind::adamw_update:
      return std::make_unique<AdamWKernel>(std::get<AdamWAttrs>(node.attrs), count);
    default:
      MEMFIT_CHECK(false);
      return nullptr;
  }
}

}  // namespace

MEMFIT_CPU_KERNEL(sgd_update, make_optimizer_kernel)
MEMFIT_CPU_KERNEL(adamw_update, make_optimizer_kernel)

}  // namespace memfit::cpu
