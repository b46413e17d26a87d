// Reference kernels of the optimizer updates. They are in place on their state
// (w' may be w, v' may be v, m' may be m), so each element reads all of its
// inputs into locals before it writes any output.
#include <cmath>

#include "backends/reference/ref_ops.h"
#include "core/check.h"

namespace memfit {

// Inputs w, g, and v when momentum != 0; outputs w', and v' when momentum != 0.
// d = g + weight_decay w; v' = momentum v + d (without v: v' = d); w' = w - lr v'.
void ref_sgd_update(const RefCall& call) {
  const auto& attrs = call.attrs<SgdAttrs>();
  const bool has_velocity = attrs.momentum != 0.0f;
  MEMFIT_CHECK(call.in.size() == (has_velocity ? 3u : 2u));
  MEMFIT_CHECK(call.out.size() == (has_velocity ? 2u : 1u));
  // The schedule scales the configured rate step by step (docs/ops.md).
  const double lr = static_cast<double>(attrs.lr) * call.args.step.lr_scale;
  const double momentum = attrs.momentum;
  const double weight_decay = attrs.weight_decay;
  const int64_t count = num_elements(call.in[0].shape);
  const float* w = call.in_f32(0);
  const float* g = call.in_f32(1);
  const float* v = has_velocity ? call.in_f32(2) : nullptr;
  float* w_next = call.out_f32(0);                           // may be w
  float* v_next = has_velocity ? call.out_f32(1) : nullptr;  // may be v
  for (int64_t i = 0; i < count; ++i) {
    const double w_i = w[i];
    const double d = g[i] + weight_decay * w_i;
    const double v_i = has_velocity ? momentum * v[i] + d : d;
    if (has_velocity) v_next[i] = static_cast<float>(v_i);
    w_next[i] = static_cast<float>(w_i - lr * v_i);
  }
}

// Inputs w, g, m, v; outputs w', m', v'. With t = optimizer_step + 1:
// m' = beta1 m + (1 - beta1) g; v' = beta2 v + (1 - beta2) g^2;
// w' = w - lr (weight_decay w + (m' / (1 - beta1^t)) / (sqrt(v' / (1 - beta2^t)) + eps)).
void ref_adamw_update(const RefCall& call) {
  const auto& attrs = call.attrs<AdamWAttrs>();
  // The schedule scales the configured rate step by step (docs/ops.md).
  const double lr = static_cast<double>(attrs.lr) * call.args.step.lr_scale;
  const double beta1 = attrs.beta1;
  const double beta2 = attrs.beta2;
  const double eps = attrs.eps;
  const double weight_decay = attrs.weight_decay;
  const double t = static_cast<double>(call.args.step.optimizer_step + 1);
  const double correction1 = 1.0 - std::pow(beta1, t);
  const double correction2 = 1.0 - std::pow(beta2, t);
  const int64_t count = num_elements(call.in[0].shape);
  const float* w = call.in_f32(0);
  const float* g = call.in_f32(1);
  const float* m = call.in_f32(2);
  const float* v = call.in_f32(3);
  float* w_next = call.out_f32(0);  // may be w
  float* m_next = call.out_f32(1);  // may be m
  float* v_next = call.out_f32(2);  // may be v
  for (int64_t i = 0; i < count; ++i) {
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

}  // namespace memfit
