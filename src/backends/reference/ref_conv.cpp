// Reference kernels of conv2d and its two gradients. Each output element is
// gathered from its sources with one double accumulator (no scatter), so every
// kernel is the textbook formula of docs/ops.md written as loops.
#include "backends/reference/ref_ops.h"
#include "backends/reference/ref_util.h"

namespace memfit {
namespace {

// Sizes of one convolution: x (N, C, H, W), w (O, C/G, KH, KW), y (N, O, OH, OW).
struct ConvGeometry {
  int64_t n, c, h, w;
  int64_t o, kh, kw;
  int64_t oh, ow;
  int64_t groups, c_per_group, o_per_group;
  Pair stride, pad, dilation;

  // Input row (or column) read by output row `out` at kernel row `k`; may lie in the padding.
  int64_t in_row(int64_t out, int64_t k) const {
    return out * stride[0] - pad[0] + k * dilation[0];
  }
  int64_t in_col(int64_t out, int64_t k) const {
    return out * stride[1] - pad[1] + k * dilation[1];
  }
  bool inside(int64_t row, int64_t col) const { return row >= 0 && row < h && col >= 0 && col < w; }

  size_t x_at(int64_t in, int64_t ci, int64_t row, int64_t col) const {
    return static_cast<size_t>(((in * c + ci) * h + row) * w + col);
  }
  size_t w_at(int64_t co, int64_t cg, int64_t r, int64_t s) const {
    return static_cast<size_t>(((co * c_per_group + cg) * kh + r) * kw + s);
  }
  size_t y_at(int64_t in, int64_t co, int64_t row, int64_t col) const {
    return static_cast<size_t>(((in * o + co) * oh + row) * ow + col);
  }
};

template <class A>
ConvGeometry conv_geometry(const Shape& x, const Shape& w, const Shape& y, const A& attrs) {
  MEMFIT_CHECK(x.size() == 4 && w.size() == 4 && y.size() == 4);
  ConvGeometry g{};
  g.n = x[0];
  g.c = x[1];
  g.h = x[2];
  g.w = x[3];
  g.o = w[0];
  g.kh = w[2];
  g.kw = w[3];
  g.oh = y[2];
  g.ow = y[3];
  g.groups = attrs.groups;
  MEMFIT_CHECK(g.groups >= 1 && g.c % g.groups == 0 && g.o % g.groups == 0);
  g.c_per_group = g.c / g.groups;
  g.o_per_group = g.o / g.groups;
  MEMFIT_CHECK(w[1] == g.c_per_group && y[0] == g.n && y[1] == g.o);
  g.stride = attrs.stride;
  g.pad = attrs.pad;
  g.dilation = attrs.dilation;
  return g;
}

}  // namespace

// y[n, o, oh, ow] = b[o] + sum over (cg, r, s) of x[n, g C/G + cg, ih, iw] w[o, cg, r, s],
// with g = o / (O/G), ih = oh stride - pad + r dilation (likewise iw); padding reads zero.
void ref_conv2d(const RefCall& call) {
  const ConvGeometry g = conv_geometry(call.in[0].shape, call.in[1].shape, call.out[0].shape,
                                       call.attrs<Conv2dAttrs>());
  const float* x = call.in_f32(0);                                     // (N, C, H, W)
  const float* w = call.in_f32(1);                                     // (O, C/G, KH, KW)
  const float* bias = call.in.size() == 3 ? call.in_f32(2) : nullptr;  // (O)
  float* y = call.out_f32(0);                                          // (N, O, OH, OW)
  for (int64_t in = 0; in < g.n; ++in) {
    for (int64_t co = 0; co < g.o; ++co) {
      const int64_t c_first = (co / g.o_per_group) * g.c_per_group;
      for (int64_t oy = 0; oy < g.oh; ++oy) {
        for (int64_t ox = 0; ox < g.ow; ++ox) {
          double sum = bias != nullptr ? bias[co] : 0.0;
          for (int64_t cg = 0; cg < g.c_per_group; ++cg) {
            for (int64_t r = 0; r < g.kh; ++r) {
              for (int64_t s = 0; s < g.kw; ++s) {
                const int64_t iy = g.in_row(oy, r);
                const int64_t ix = g.in_col(ox, s);
                if (!g.inside(iy, ix)) continue;
                sum += static_cast<double>(x[g.x_at(in, c_first + cg, iy, ix)]) *
                       w[g.w_at(co, cg, r, s)];
              }
            }
          }
          y[g.y_at(in, co, oy, ox)] = static_cast<float>(sum);
        }
      }
    }
  }
}

// dx[n, ci, ih, iw] = sum of dy[n, o, oh, ow] w[o, ci - g C/G, r, s] over the
// outputs o of the group of ci and the (oh, r), (ow, s) with
// oh stride - pad + r dilation = ih (likewise for columns).
void ref_conv2d_grad_input(const RefCall& call) {
  const ConvGeometry g = conv_geometry(call.out[0].shape, call.in[1].shape, call.in[0].shape,
                                       call.attrs<Conv2dGradAttrs>());
  const float* dy = call.in_f32(0);  // (N, O, OH, OW)
  const float* w = call.in_f32(1);   // (O, C/G, KH, KW)
  float* dx = call.out_f32(0);       // (N, C, H, W)
  for (int64_t in = 0; in < g.n; ++in) {
    for (int64_t ci = 0; ci < g.c; ++ci) {
      const int64_t group = ci / g.c_per_group;
      const int64_t cg = ci % g.c_per_group;
      for (int64_t iy = 0; iy < g.h; ++iy) {
        for (int64_t ix = 0; ix < g.w; ++ix) {
          double sum = 0.0;
          for (int64_t og = 0; og < g.o_per_group; ++og) {
            const int64_t co = group * g.o_per_group + og;
            for (int64_t r = 0; r < g.kh; ++r) {
              const int64_t row = iy + g.pad[0] - r * g.dilation[0];  // oy * stride
              if (row < 0 || row % g.stride[0] != 0 || row / g.stride[0] >= g.oh) continue;
              for (int64_t s = 0; s < g.kw; ++s) {
                const int64_t col = ix + g.pad[1] - s * g.dilation[1];  // ox * stride
                if (col < 0 || col % g.stride[1] != 0 || col / g.stride[1] >= g.ow) continue;
                sum +=
                    static_cast<double>(dy[g.y_at(in, co, row / g.stride[0], col / g.stride[1])]) *
                    w[g.w_at(co, cg, r, s)];
              }
            }
          }
          dx[g.x_at(in, ci, iy, ix)] = static_cast<float>(sum);
        }
      }
    }
  }
}

// dw[o, cg, r, s] = sum over (n, oh, ow) of dy[n, o, oh, ow] x[n, g C/G + cg, ih, iw];
// db[o] = sum over (n, oh, ow) of dy[n, o, oh, ow] when attrs.bias.
void ref_conv2d_grad_weight(const RefCall& call) {
  const auto& attrs = call.attrs<Conv2dGradAttrs>();
  const ConvGeometry g =
      conv_geometry(call.in[1].shape, call.out[0].shape, call.in[0].shape, attrs);
  const float* dy = call.in_f32(0);  // (N, O, OH, OW)
  const float* x = call.in_f32(1);   // (N, C, H, W)
  float* dw = call.out_f32(0);       // (O, C/G, KH, KW)
  for (int64_t co = 0; co < g.o; ++co) {
    const int64_t c_first = (co / g.o_per_group) * g.c_per_group;
    for (int64_t cg = 0; cg < g.c_per_group; ++cg) {
      for (int64_t r = 0; r < g.kh; ++r) {
        for (int64_t s = 0; s < g.kw; ++s) {
          double sum = 0.0;
          for (int64_t in = 0; in < g.n; ++in) {
            for (int64_t oy = 0; oy < g.oh; ++oy) {
              for (int64_t ox = 0; ox < g.ow; ++ox) {
                const int64_t iy = g.in_row(oy, r);
                const int64_t ix = g.in_col(ox, s);
                if (!g.inside(iy, ix)) continue;
                sum += static_cast<double>(dy[g.y_at(in, co, oy, ox)]) *
                       x[g.x_at(in, c_first + cg, iy, ix)];
              }
            }
          }
          dw[g.w_at(co, cg, r, s)] = static_cast<float>(sum);
        }
      }
    }
  }
  if (!attrs.bias) return;
  MEMFIT_CHECK(call.out.size() == 2);
  float* db = call.out_f32(1);  // (O)
  for (int64_t co = 0; co < g.o; ++co) {
    double sum = 0.0;
    for (int64_t in = 0; in < g.n; ++in) {
      for (int64_t oy = 0; oy < g.oh; ++oy) {
        for (int64_t ox = 0; ox < g.ow; ++ox) sum += dy[g.y_at(in, co, oy, ox)];
      }
    }
    db[co] = static_cast<float>(sum);
  }
}

}  // namespace memfit
