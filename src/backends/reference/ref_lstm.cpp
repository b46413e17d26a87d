// Reference kernels of lstm_cell and lstm_cell_grad: each hidden unit's
// formulas in double, each output rounded once. Sigmoid and tanh are written
// with exp, as the cpu kernels write them (src/backends/cpu/cpu_lstm.cpp).
// In place: a unit reads its elements of every input before it writes its
// elements of the outputs, and reads no other unit's.
#include <cmath>

#include "backends/reference/ref_ops.h"

namespace memfit {
namespace {

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double tanh_of(double x) { return 1.0 - 2.0 / (std::exp(2.0 * x) + 1.0); }

}  // namespace

void ref_lstm_cell(const RefCall& call) {
  const int64_t n = call.out[0].shape[0], hidden = call.out[0].shape[1];
  const float* gates = call.in_f32(0);                                   // (N, 4H): i, f, g, o
  const float* c_prev = call.in.size() == 2 ? call.in_f32(1) : nullptr;  // (N, H); null: zeros
  float* h = call.out_f32(0);                                            // (N, H)
  float* c = call.out_f32(1);                                            // (N, H); may be c_prev
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < hidden; ++j) {
      const float* a = gates + r * 4 * hidden + j;
      const int64_t at = r * hidden + j;
      const double i = sigmoid(a[0]), f = sigmoid(a[hidden]), g = tanh_of(a[2 * hidden]),
                   o = sigmoid(a[3 * hidden]);
      const double cell = f * (c_prev ? static_cast<double>(c_prev[at]) : 0.0) + i * g;
      c[at] = static_cast<float>(cell);
      h[at] = static_cast<float>(o * tanh_of(cell));
    }
  }
}

// With tc = tanh(c): dc_total = dc + dh o (1 - tc^2); da_i = dc_total g i (1 - i),
// da_f = dc_total c_prev f (1 - f), da_g = dc_total i (1 - g^2),
// da_o = dh tc o (1 - o); dc_prev = dc_total f.
void ref_lstm_cell_grad(const RefCall& call) {
  const int64_t n = call.in[0].shape[0], hidden = call.in[0].shape[1];
  const float* dh = call.in_f32(0);                                      // (N, H)
  const float* dc = call.in_f32(1);                                      // (N, H)
  const float* gates = call.in_f32(2);                                   // (N, 4H)
  const float* c = call.in_f32(3);                                       // (N, H)
  const float* c_prev = call.in.size() == 5 ? call.in_f32(4) : nullptr;  // (N, H); null: zeros
  float* dgates = call.out_f32(0);                                       // (N, 4H); may be gates
  float* dc_prev = c_prev ? call.out_f32(1) : nullptr;                   // (N, H)
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < hidden; ++j) {
      const int64_t at = r * hidden + j;
      const int64_t g_at = r * 4 * hidden + j;
      const double i = sigmoid(gates[g_at]), f = sigmoid(gates[g_at + hidden]),
                   g = tanh_of(gates[g_at + 2 * hidden]), o = sigmoid(gates[g_at + 3 * hidden]);
      const double tc = tanh_of(c[at]);
      const double dh_at = dh[at];
      const double cp = c_prev ? static_cast<double>(c_prev[at]) : 0.0;
      const double d_cell = dc[at] + dh_at * o * (1.0 - tc * tc);
      dgates[g_at] = static_cast<float>(d_cell * g * i * (1.0 - i));
      dgates[g_at + hidden] = static_cast<float>(d_cell * cp * f * (1.0 - f));
      dgates[g_at + 2 * hidden] = static_cast<float>(d_cell * i * (1.0 - g * g));
      dgates[g_at + 3 * hidden] = static_cast<float>(dh_at * tc * o * (1.0 - o));
      if (dc_prev) dc_prev[at] = static_cast<float>(d_cell * f);
    }
  }
}

}  // namespace memfit
