// Reference kernels of the elementwise ops: activations and their gradients,
// broadcasting add / sub / mul, scale and dropout. Every formula is evaluated in
// double and rounded once. Where an op is in place, output i is written only
// after element i of every input was read, and no other element is read later.
#include <cmath>
#include <numbers>

#include "backends/reference/ref_ops.h"
#include "backends/reference/ref_util.h"
#include "core/random.h"

namespace memfit {
namespace {

// y[i] = f(x[i]) for a single input of the output's shape.
template <class F>
void map_unary(const RefCall& call, F f) {
  const int64_t count = num_elements(call.out[0].shape);
  const float* x = call.in_f32(0);
  float* y = call.out_f32(0);
  for (int64_t i = 0; i < count; ++i) y[i] = static_cast<float>(f(static_cast<double>(x[i])));
}

// dx[i] = f(dy[i], other[i]) for a gradient op with inputs (dy, y or x) of the output's shape.
template <class F>
void map_grad(const RefCall& call, F f) {
  const int64_t count = num_elements(call.out[0].shape);
  const float* dy = call.in_f32(0);
  const float* other = call.in_f32(1);
  float* dx = call.out_f32(0);
  for (int64_t i = 0; i < count; ++i) {
    dx[i] = static_cast<float>(f(static_cast<double>(dy[i]), static_cast<double>(other[i])));
  }
}

// out = f(a, b) with a and b broadcast to the output's shape (NumPy rules).
template <class F>
void map_broadcast(const RefCall& call, F f) {
  const Shape& out_shape = call.out[0].shape;
  const std::vector<int64_t> a_strides = broadcast_strides(call.in[0].shape, out_shape);
  const std::vector<int64_t> b_strides = broadcast_strides(call.in[1].shape, out_shape);
  const int64_t count = num_elements(out_shape);
  const float* a = call.in_f32(0);
  const float* b = call.in_f32(1);
  float* out = call.out_f32(0);
  for (int64_t i = 0; i < count; ++i) {
    const double a_i = a[strided_offset(i, out_shape, a_strides)];
    const double b_i = b[strided_offset(i, out_shape, b_strides)];
    out[i] = static_cast<float>(f(a_i, b_i));
  }
}

// The standard normal distribution function Phi and density phi.
double normal_cdf(double x) { return 0.5 * (1.0 + std::erf(x / std::numbers::sqrt2)); }
double normal_pdf(double x) { return std::exp(-0.5 * x * x) / std::sqrt(2.0 * std::numbers::pi); }

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

}  // namespace

void ref_relu(const RefCall& call) {
  map_unary(call, [](double x) { return x > 0.0 ? x : 0.0; });
}

void ref_relu_grad(const RefCall& call) {
  map_grad(call, [](double dy, double y) { return y > 0.0 ? dy : 0.0; });
}

void ref_gelu(const RefCall& call) {
  map_unary(call, [](double x) { return x * normal_cdf(x); });
}

void ref_gelu_grad(const RefCall& call) {
  map_grad(call, [](double dy, double x) { return dy * (normal_cdf(x) + x * normal_pdf(x)); });
}

void ref_tanh(const RefCall& call) {
  map_unary(call, [](double x) { return std::tanh(x); });
}

void ref_tanh_grad(const RefCall& call) {
  map_grad(call, [](double dy, double y) { return dy * (1.0 - y * y); });
}

void ref_sigmoid(const RefCall& call) {
  map_unary(call, [](double x) { return sigmoid(x); });
}

void ref_sigmoid_grad(const RefCall& call) {
  map_grad(call, [](double dy, double y) { return dy * y * (1.0 - y); });
}

void ref_add(const RefCall& call) {
  map_broadcast(call, [](double a, double b) { return a + b; });
}

void ref_sub(const RefCall& call) {
  map_broadcast(call, [](double a, double b) { return a - b; });
}

void ref_mul(const RefCall& call) {
  map_broadcast(call, [](double a, double b) { return a * b; });
}

void ref_scale(const RefCall& call) {
  const double alpha = call.attrs<ScaleAttrs>().alpha;
  map_unary(call, [alpha](double x) { return alpha * x; });
}

// y[i] = x[i] / (1 - p) where dropout_keeps(seed, micro_step, key, i, p), else 0.
// A kept element has a draw >= p, so p < 1 wherever 1 - p divides; p = 1 gives
// zeros rather than 0 / 0.
void ref_dropout(const RefCall& call) {
  const auto& attrs = call.attrs<DropoutAttrs>();
  const StepContext& step = call.args.step;
  const int64_t count = num_elements(call.out[0].shape);
  const double keep_fraction = 1.0 - static_cast<double>(attrs.p);
  const float* x = call.in_f32(0);
  float* y = call.out_f32(0);
  for (int64_t i = 0; i < count; ++i) {
    const bool keep = dropout_keeps(step.seed, static_cast<uint64_t>(step.micro_step), attrs.key,
                                    static_cast<uint64_t>(i), attrs.p);
    y[i] = keep ? static_cast<float>(x[i] / keep_fraction) : 0.0f;
  }
}

}  // namespace memfit
