// lstm_cell and lstm_cell_grad: an OpenMP loop over the rows (N), each
// vectorized over its hidden units (H), a unit computing its four gates, c and
// h (or their gradients) in float. Sigmoid and tanh are written with one
// exponential (exp_approx: a polynomial, within 2 ulp of std::exp, that the
// compiler vectorizes; AVX2 where the CPU has it), in the forward and the
// backward kernel alike, so the backward pass recomputes exactly the
// activations the forward pass used; the reference kernels evaluate the same
// formulas in double (src/backends/reference/ref_lstm.cpp). A unit reads its
// elements of every input before writing its elements of the outputs and
// touches no other unit's, so every in-place pair of the op table is safe,
// several at once too.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/dnnl_util.h"

namespace memfit::cpu {
namespace {

// e^x for x clamped to [-87, 88] (so e^x is a normal float, or +-1 below
// after the divisions): x = n ln 2 + r with |r| <= ln 2 / 2 (ln 2 in two
// parts, Cody and Waite), e^r by its degree-6 Taylor polynomial, times 2^n
// built in the exponent bits. No branch and no call, so a loop of it
// vectorizes. A NaN stays NaN.
inline float exp_approx(float x) {
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  // Rounded to the nearest integer by adding and taking away 1.5 * 2^23.
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const auto bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

inline float sigmoid(float x) { return 1.0f / (1.0f + exp_approx(-x)); }
// 1 - 2 / (e^2x + 1): +-1 where the exponential is clamped, never NaN.
inline float tanh_of(float x) { return 1.0f - 2.0f / (exp_approx(2.0f * x) + 1.0f); }

// One row of the cell: gates (4H), c_prev (H; HasPrev) -> h, c (H).
template <bool HasPrev>
__attribute__((target_clones("avx2", "default")))
void cell_row(const float* a, const float* c_prev, float* h, float* c, int64_t hidden) {
#pragma omp simd
  for (int64_t j = 0; j < hidden; ++j) {
    const float i = sigmoid(a[j]), f = sigmoid(a[hidden + j]), g = tanh_of(a[2 * hidden + j]),
                o = sigmoid(a[3 * hidden + j]);
    const float cell = HasPrev ? f * c_prev[j] + i * g : f * 0.0f + i * g;
    c[j] = cell;
    h[j] = o * tanh_of(cell);
  }
}

// One row of the gradient: dh, dc, c, c_prev (H; HasPrev), gates (4H) ->
// dgates (4H), dc_prev (H; HasPrev).
template <bool HasPrev>
__attribute__((target_clones("avx2", "default")))
void cell_grad_row(const float* dh, const float* dc, const float* gates, const float* c,
                   const float* c_prev, float* dgates, float* dc_prev, int64_t hidden) {
#pragma omp simd
  for (int64_t j = 0; j < hidden; ++j) {
    const float i = sigmoid(gates[j]), f = sigmoid(gates[hidden + j]),
                g = tanh_of(gates[2 * hidden + j]), o = sigmoid(gates[3 * hidden + j]);
    const float tc = tanh_of(c[j]);
    const float dh_at = dh[j];
    const float cp = HasPrev ? c_prev[j] : 0.0f;
    const float d_cell = dc[j] + dh_at * o * (1.0f - tc * tc);
    dgates[j] = d_cell * g * i * (1.0f - i);
    dgates[hidden + j] = d_cell * cp * f * (1.0f - f);
    dgates[2 * hidden + j] = d_cell * i * (1.0f - g * g);
    dgates[3 * hidden + j] = dh_at * tc * o * (1.0f - o);
    if constexpr (HasPrev) dc_prev[j] = d_cell * f;
  }
}

// gates (N, 4H) [, c_prev (N, H)] -> h (N, H), c (N, H)
class LstmCellKernel final : public Kernel {
 public:
  LstmCellKernel(int64_t rows, int64_t hidden, bool has_c_prev)
      : rows_(rows), hidden_(hidden), has_c_prev_(has_c_prev) {}

  void run(const KernelArgs& args) override {
    const auto* gates = static_cast<const float*>(args.inputs[0]);
    const auto* c_prev = has_c_prev_ ? static_cast<const float*>(args.inputs[1]) : nullptr;
    auto* h = static_cast<float*>(args.outputs[0]);
    auto* c = static_cast<float*>(args.outputs[1]);
    const int64_t hidden = hidden_;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows_; ++r) {
      if (c_prev) {
        cell_row<true>(gates + r * 4 * hidden, c_prev + r * hidden, h + r * hidden, c + r * hidden,
                       hidden);
      } else {
        cell_row<false>(gates + r * 4 * hidden, nullptr, h + r * hidden, c + r * hidden, hidden);
      }
    }
  }

 private:
  int64_t rows_, hidden_;
  bool has_c_prev_;
};

// dh, dc, gates, c [, c_prev] -> dgates [, dc_prev]: the formulas of ref_lstm_cell_grad.
class LstmCellGradKernel final : public Kernel {
 public:
  LstmCellGradKernel(int64_t rows, int64_t hidden, bool has_c_prev)
      : rows_(rows), hidden_(hidden), has_c_prev_(has_c_prev) {}

  void run(const KernelArgs& args) override {
    const auto* dh = static_cast<const float*>(args.inputs[0]);
    const auto* dc = static_cast<const float*>(args.inputs[1]);
    const auto* gates = static_cast<const float*>(args.inputs[2]);
    const auto* c = static_cast<const float*>(args.inputs[3]);
    const auto* c_prev = has_c_prev_ ? static_cast<const float*>(args.inputs[4]) : nullptr;
    auto* dgates = static_cast<float*>(args.outputs[0]);
    auto* dc_prev = has_c_prev_ ? static_cast<float*>(args.outputs[1]) : nullptr;
    const int64_t hidden = hidden_;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows_; ++r) {
      const int64_t at = r * hidden;
      if (c_prev) {
        cell_grad_row<true>(dh + at, dc + at, gates + 4 * at, c + at, c_prev + at, dgates + 4 * at,
                            dc_prev + at, hidden);
      } else {
        cell_grad_row<false>(dh + at, dc + at, gates + 4 * at, c + at, nullptr, dgates + 4 * at,
                             nullptr, hidden);
      }
    }
  }

 private:
  int64_t rows_, hidden_;
  bool has_c_prev_;
};

std::unique_ptr<Kernel> make_lstm_kernel(const Graph& graph, const Node& node) {
  if (node.op == OpKind::lstm_cell) {
    const Shape& h = output_shape(graph, node, 0);  // (N, H)
    return std::make_unique<LstmCellKernel>(h[0], h[1], node.inputs.size() == 2);
  }
  const Shape& dh = input_shape(graph, node, 0);  // (N, H)
  return std::make_unique<LstmCellGradKernel>(dh[0], dh[1], node.inputs.size() == 5);
}

}  // namespace

MEMFIT_CPU_KERNEL(lstm_cell, make_lstm_kernel)
MEMFIT_CPU_KERNEL(lstm_cell_grad, make_lstm_kernel)

}  // namespace memfit::cpu
