// lstm_cell and lstm_cell_grad: one OpenMP loop over the hidden units (N x H),
// each unit computing its four gates, c and h (or their gradients) in float.
// Sigmoid and tanh are written with std::exp, in the forward and the backward
// kernel alike, so the backward pass recomputes exactly the activations the
// forward pass used; the reference kernels evaluate the same formulas in
// double (src/backends/reference/ref_lstm.cpp). A unit reads its elements of
// every input before writing its elements of the outputs and touches no other
// unit's, so every in-place pair of the op table is safe, several at once too.
#include <cmath>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/dnnl_util.h"

namespace memfit::cpu {
namespace {

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// 1 - 2 / (e^2x + 1): +-1 where the exponential overflows or vanishes, never NaN.
inline float tanh_of(float x) { return 1.0f - 2.0f / (std::exp(2.0f * x) + 1.0f); }

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
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t r = 0; r < rows_; ++r) {
      for (int64_t j = 0; j < hidden; ++j) {
        const float* a = gates + r * 4 * hidden + j;
        const int64_t at = r * hidden + j;
        const float i = sigmoid(a[0]), f = sigmoid(a[hidden]), g = tanh_of(a[2 * hidden]),
                    o = sigmoid(a[3 * hidden]);
        const float cell = f * (c_prev ? c_prev[at] : 0.0f) + i * g;
        c[at] = cell;
        h[at] = o * tanh_of(cell);
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
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t r = 0; r < rows_; ++r) {
      for (int64_t j = 0; j < hidden; ++j) {
        const int64_t at = r * hidden + j;
        const int64_t g_at = r * 4 * hidden + j;
        const float i = sigmoid(gates[g_at]), f = sigmoid(gates[g_at + hidden]),
                    g = tanh_of(gates[g_at + 2 * hidden]), o = sigmoid(gates[g_at + 3 * hidden]);
        const float tc = tanh_of(c[at]);
        const float dh_at = dh[at];
        const float cp = c_prev ? c_prev[at] : 0.0f;
        const float d_cell = dc[at] + dh_at * o * (1.0f - tc * tc);
        dgates[g_at] = d_cell * g * i * (1.0f - i);
        dgates[g_at + hidden] = d_cell * cp * f * (1.0f - f);
        dgates[g_at + 2 * hidden] = d_cell * i * (1.0f - g * g);
        dgates[g_at + 3 * hidden] = dh_at * tc * o * (1.0f - o);
        if (dc_prev) dc_prev[at] = d_cell * f;
      }
    }
  }

 private:
  int64_t rows_, hidden_;
  bool has_c_prev_;
};

}  // namespace

std::unique_ptr<Kernel> make_lstm_kernel(const Graph& graph, const Node& node) {
  if (node.op == OpKind::lstm_cell) {
    const Shape& h = output_shape(graph, node, 0);  // (N, H)
    return std::make_unique<LstmCellKernel>(h[0], h[1], node.inputs.size() == 2);
  }
  const Shape& dh = input_shape(graph, node, 0);  // (N, H)
  return std::make_unique<LstmCellGradKernel>(dh[0], dh[1], node.inputs.size() == 5);
}

}  // namespace memfit::cpu
