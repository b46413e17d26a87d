// Reference kernels of the convolutions: conv2d, conv3d, their gradients, and
// the transposed convolutions. A 2-D convolution is run as a 3-D one of depth 1
// (one kernel tap, stride 1, no padding along depth), so there is one set of
// loops. Each output element is gathered from its sources with one double
// accumulator (no scatter), so every kernel is the textbook formula of
// docs/ops.md written as loops.
#include <array>

#include "backends/reference/ref_ops.h"
#include "backends/reference/ref_util.h"

namespace memfit {
namespace {

using Index3 = std::array<int64_t, 3>;  // (depth, row, column)

// Calls fn(p) for every p in [0, extent) in row-major order.
template <class Fn>
void for_each_position(const Index3& extent, Fn&& fn) {
  for (int64_t d = 0; d < extent[0]; ++d) {
    for (int64_t h = 0; h < extent[1]; ++h) {
      for (int64_t w = 0; w < extent[2]; ++w) fn(Index3{d, h, w});
    }
  }
}

// Sizes of one convolution: x (N, C, D, H, W), w (O, C/G, KD, KH, KW),
// y (N, O, OD, OH, OW).
struct ConvGeometry {
  int64_t n = 0, c = 0, o = 0;
  int64_t groups = 1, c_per_group = 0, o_per_group = 0;
  Index3 in{}, k{}, out{};
  Index3 stride{1, 1, 1}, pad{}, dilation{1, 1, 1};

  // The input position that output position `q` reads at kernel tap `t`;
  // false when it lies in the padding.
  bool input_at(const Index3& q, const Index3& t, Index3& p) const {
    for (size_t i = 0; i < 3; ++i) {
      p[i] = q[i] * stride[i] - pad[i] + t[i] * dilation[i];
      if (p[i] < 0 || p[i] >= in[i]) return false;
    }
    return true;
  }
  // The output position that reads input position `p` at kernel tap `t`, if any.
  bool output_at(const Index3& p, const Index3& t, Index3& q) const {
    for (size_t i = 0; i < 3; ++i) {
      const int64_t scaled = p[i] + pad[i] - t[i] * dilation[i];  // q stride
      if (scaled < 0 || scaled % stride[i] != 0 || scaled / stride[i] >= out[i]) return false;
      q[i] = scaled / stride[i];
    }
    return true;
  }

  size_t x_at(int64_t in_n, int64_t ci, const Index3& p) const {
    return static_cast<size_t>((((in_n * c + ci) * in[0] + p[0]) * in[1] + p[1]) * in[2] + p[2]);
  }
  size_t w_at(int64_t co, int64_t cg, const Index3& t) const {
    return static_cast<size_t>((((co * c_per_group + cg) * k[0] + t[0]) * k[1] + t[1]) * k[2] +
                               t[2]);
  }
  size_t y_at(int64_t in_n, int64_t co, const Index3& q) const {
    return static_cast<size_t>((((in_n * o + co) * out[0] + q[0]) * out[1] + q[1]) * out[2] + q[2]);
  }
};

// The spatial part of a rank-4 or rank-5 shape as (D, H, W), D = 1 for rank 4.
Index3 spatial(const Shape& shape) {
  MEMFIT_CHECK(shape.size() == 4 || shape.size() == 5);
  if (shape.size() == 4) return {1, shape[2], shape[3]};
  return {shape[2], shape[3], shape[4]};
}

// stride, pad or dilation (Pair or Triple) as (depth, row, column).
template <size_t R>
Index3 spatial(const std::array<int64_t, R>& a, int64_t depth) {
  if constexpr (R == 2) {
    return {depth, a[0], a[1]};
  } else {
    return a;
  }
}

// The geometry of the convolution x -> y with weights w, from any conv attrs.
template <class A>
ConvGeometry conv_geometry(const Shape& x, const Shape& w, const Shape& y, const A& attrs) {
  MEMFIT_CHECK(x.size() == w.size() && x.size() == y.size());
  ConvGeometry g;
  g.n = x[0];
  g.c = x[1];
  g.o = w[0];
  g.in = spatial(x);
  g.k = spatial(w);
  g.out = spatial(y);
  g.groups = attrs.groups;
  MEMFIT_CHECK(g.groups >= 1 && g.c % g.groups == 0 && g.o % g.groups == 0);
  g.c_per_group = g.c / g.groups;
  g.o_per_group = g.o / g.groups;
  MEMFIT_CHECK(w[1] == g.c_per_group && y[0] == g.n && y[1] == g.o);
  g.stride = spatial(attrs.stride, 1);
  g.pad = spatial(attrs.pad, 0);
  g.dilation = spatial(attrs.dilation, 1);
  return g;
}

// y[n, o, q] = b[o] + sum over (cg, t) of x[n, g C/G + cg, q stride - pad + t dilation] w[o, cg,
// t], with g = o / (O/G); padding reads zero.
void conv_forward(const ConvGeometry& g, const float* x, const float* w, const float* bias,
                  float* y) {
  for (int64_t in_n = 0; in_n < g.n; ++in_n) {
    for (int64_t co = 0; co < g.o; ++co) {
      const int64_t c_first = (co / g.o_per_group) * g.c_per_group;
      for_each_position(g.out, [&](const Index3& q) {
        double sum = bias != nullptr ? bias[co] : 0.0;
        for (int64_t cg = 0; cg < g.c_per_group; ++cg) {
          for_each_position(g.k, [&](const Index3& t) {
            Index3 p;
            if (!g.input_at(q, t, p)) return;
            sum += static_cast<double>(x[g.x_at(in_n, c_first + cg, p)]) * w[g.w_at(co, cg, t)];
          });
        }
        y[g.y_at(in_n, co, q)] = static_cast<float>(sum);
      });
    }
  }
}

// dx[n, ci, p] = b[ci] + sum of dy[n, o, q] w[o, ci - g C/G, t] over the outputs o of
// the group of ci and the (q, t) with q stride - pad + t dilation = p. The data
// gradient of the convolution, and the transposed convolution with its bias.
void conv_backward_data(const ConvGeometry& g, const float* dy, const float* w, const float* bias,
                        float* dx) {
  for (int64_t in_n = 0; in_n < g.n; ++in_n) {
    for (int64_t ci = 0; ci < g.c; ++ci) {
      const int64_t group = ci / g.c_per_group;
      const int64_t cg = ci % g.c_per_group;
      for_each_position(g.in, [&](const Index3& p) {
        double sum = bias != nullptr ? bias[ci] : 0.0;
        for (int64_t og = 0; og < g.o_per_group; ++og) {
          const int64_t co = group * g.o_per_group + og;
          for_each_position(g.k, [&](const Index3& t) {
            Index3 q;
            if (!g.output_at(p, t, q)) return;
            sum += static_cast<double>(dy[g.y_at(in_n, co, q)]) * w[g.w_at(co, cg, t)];
          });
        }
        dx[g.x_at(in_n, ci, p)] = static_cast<float>(sum);
      });
    }
  }
}

// dw[o, cg, t] = sum over (n, q) of dy[n, o, q] x[n, g C/G + cg, q stride - pad + t dilation];
// db[o] = sum over (n, q) of dy[n, o, q] when db is given.
void conv_backward_weights(const ConvGeometry& g, const float* dy, const float* x, float* dw,
                           float* db) {
  for (int64_t co = 0; co < g.o; ++co) {
    const int64_t c_first = (co / g.o_per_group) * g.c_per_group;
    for (int64_t cg = 0; cg < g.c_per_group; ++cg) {
      for_each_position(g.k, [&](const Index3& t) {
        double sum = 0.0;
        for (int64_t in_n = 0; in_n < g.n; ++in_n) {
          for_each_position(g.out, [&](const Index3& q) {
            Index3 p;
            if (!g.input_at(q, t, p)) return;
            sum += static_cast<double>(dy[g.y_at(in_n, co, q)]) * x[g.x_at(in_n, c_first + cg, p)];
          });
        }
        dw[g.w_at(co, cg, t)] = static_cast<float>(sum);
      });
    }
  }
  if (db == nullptr) return;
  for (int64_t co = 0; co < g.o; ++co) {
    double sum = 0.0;
    for (int64_t in_n = 0; in_n < g.n; ++in_n) {
      for_each_position(g.out, [&](const Index3& q) { sum += dy[g.y_at(in_n, co, q)]; });
    }
    db[co] = static_cast<float>(sum);
  }
}

// conv2d, conv3d: x, w, optional b -> y.
template <class A>
void ref_conv(const RefCall& call) {
  const ConvGeometry g =
      conv_geometry(call.in[0].shape, call.in[1].shape, call.out[0].shape, call.attrs<A>());
  const float* bias = call.in.size() == 3 ? call.in_f32(2) : nullptr;
  conv_forward(g, call.in_f32(0), call.in_f32(1), bias, call.out_f32(0));
}

// conv2d_grad_input, conv3d_grad_input: dy, w -> dx.
template <class A>
void ref_conv_grad_input(const RefCall& call) {
  const ConvGeometry g =
      conv_geometry(call.out[0].shape, call.in[1].shape, call.in[0].shape, call.attrs<A>());
  conv_backward_data(g, call.in_f32(0), call.in_f32(1), nullptr, call.out_f32(0));
}

// conv2d_grad_weight, conv3d_grad_weight: dy, x -> dw [, db].
template <class A>
void ref_conv_grad_weight(const RefCall& call) {
  const A& attrs = call.attrs<A>();
  const ConvGeometry g =
      conv_geometry(call.in[1].shape, call.out[0].shape, call.in[0].shape, attrs);
  MEMFIT_CHECK(call.out.size() == (attrs.bias ? 2u : 1u));
  float* db = attrs.bias ? call.out_f32(1) : nullptr;
  conv_backward_weights(g, call.in_f32(0), call.in_f32(1), call.out_f32(0), db);
}

// conv_transpose2d, conv_transpose3d: x (N, C, S...), w (C, O/G, K...), optional b (O)
// -> y (N, O, S'...), the data gradient of the convolution y -> x with weights w.
template <class A>
void ref_conv_transpose(const RefCall& call) {
  const ConvGeometry g =
      conv_geometry(call.out[0].shape, call.in[1].shape, call.in[0].shape, call.attrs<A>());
  const float* bias = call.in.size() == 3 ? call.in_f32(2) : nullptr;
  conv_backward_data(g, call.in_f32(0), call.in_f32(1), bias, call.out_f32(0));
}

}  // namespace

void ref_conv2d(const RefCall& call) { ref_conv<Conv2dAttrs>(call); }
void ref_conv2d_grad_input(const RefCall& call) { ref_conv_grad_input<Conv2dGradAttrs>(call); }
void ref_conv2d_grad_weight(const RefCall& call) { ref_conv_grad_weight<Conv2dGradAttrs>(call); }
void ref_conv3d(const RefCall& call) { ref_conv<Conv3dAttrs>(call); }
void ref_conv3d_grad_input(const RefCall& call) { ref_conv_grad_input<Conv3dGradAttrs>(call); }
void ref_conv3d_grad_weight(const RefCall& call) { ref_conv_grad_weight<Conv3dGradAttrs>(call); }
void ref_conv_transpose2d(const RefCall& call) { ref_conv_transpose<ConvTranspose2dAttrs>(call); }
void ref_conv_transpose3d(const RefCall& call) { ref_conv_transpose<ConvTranspose3dAttrs>(call); }

}  // namespace memfit
