// Reference kernels of max, average and global average pooling and their gradients.
#include <algorithm>
#include <vector>

#include "backends/reference/ref_ops.h"
#include "backends/reference/ref_util.h"

namespace memfit {
namespace {

// One (H, W) plane pooled into one (OH, OW) plane; the window of output
// (oy, ox) covers rows [oy stride - pad, oy stride - pad + kernel), likewise columns.
struct PoolGeometry {
  int64_t planes;  // N C
  int64_t h, w, oh, ow;
  Pair kernel, stride, pad;

  int64_t row0(int64_t oy) const { return oy * stride[0] - pad[0]; }
  int64_t col0(int64_t ox) const { return ox * stride[1] - pad[1]; }
  bool inside(int64_t row, int64_t col) const { return row >= 0 && row < h && col >= 0 && col < w; }
  // How many elements of the window of (oy, ox) lie inside the input.
  int64_t inside_count(int64_t oy, int64_t ox) const {
    int64_t count = 0;
    for (int64_t r = 0; r < kernel[0]; ++r) {
      for (int64_t s = 0; s < kernel[1]; ++s) count += inside(row0(oy) + r, col0(ox) + s);
    }
    return count;
  }
};

template <class A>
PoolGeometry pool_geometry(const Shape& x, const Shape& y, const A& attrs) {
  MEMFIT_CHECK(x.size() == 4 && y.size() == 4 && x[0] == y[0] && x[1] == y[1]);
  return {x[0] * x[1], x[2], x[3], y[2], y[3], attrs.kernel, attrs.stride, attrs.pad};
}

// The plane offset of the maximum in the window of (oy, ox): the first one in
// row-major window order on ties (strict >), never a padding position.
int64_t window_argmax(const float* plane, const PoolGeometry& g, int64_t oy, int64_t ox) {
  int64_t best = -1;
  for (int64_t r = 0; r < g.kernel[0]; ++r) {
    for (int64_t s = 0; s < g.kernel[1]; ++s) {
      const int64_t row = g.row0(oy) + r;
      const int64_t col = g.col0(ox) + s;
      if (!g.inside(row, col)) continue;
      const int64_t at = row * g.w + col;
      if (best < 0 || plane[at] > plane[best]) best = at;
    }
  }
  // Shape inference keeps pad < kernel, so every window meets the input.
  MEMFIT_CHECK(best >= 0);
  return best;
}

// The divisor of the window of (oy, ox) in average pooling.
double avg_divisor(const PoolGeometry& g, bool include_pad, int64_t oy, int64_t ox) {
  const int64_t count = include_pad ? g.kernel[0] * g.kernel[1] : g.inside_count(oy, ox);
  MEMFIT_CHECK(count > 0);
  return static_cast<double>(count);
}

}  // namespace

void ref_max_pool2d(const RefCall& call) {
  const PoolGeometry g =
      pool_geometry(call.in[0].shape, call.out[0].shape, call.attrs<Pool2dAttrs>());
  const float* x = call.in_f32(0);  // (N, C, H, W)
  float* y = call.out_f32(0);       // (N, C, OH, OW)
  for (int64_t p = 0; p < g.planes; ++p) {
    const float* plane = x + p * g.h * g.w;
    for (int64_t oy = 0; oy < g.oh; ++oy) {
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        y[(p * g.oh + oy) * g.ow + ox] = plane[window_argmax(plane, g, oy, ox)];
      }
    }
  }
}

// Each dy goes to the argmax of its window; overlapping windows add up (in double).
void ref_max_pool2d_grad(const RefCall& call) {
  const PoolGeometry g =
      pool_geometry(call.in[1].shape, call.in[0].shape, call.attrs<Pool2dAttrs>());
  const float* dy = call.in_f32(0);  // (N, C, OH, OW)
  const float* x = call.in_f32(1);   // (N, C, H, W)
  float* dx = call.out_f32(0);       // (N, C, H, W)
  std::vector<double> plane_dx(static_cast<size_t>(g.h * g.w));
  for (int64_t p = 0; p < g.planes; ++p) {
    const float* plane = x + p * g.h * g.w;
    std::fill(plane_dx.begin(), plane_dx.end(), 0.0);
    for (int64_t oy = 0; oy < g.oh; ++oy) {
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        plane_dx[static_cast<size_t>(window_argmax(plane, g, oy, ox))] +=
            dy[(p * g.oh + oy) * g.ow + ox];
      }
    }
    for (size_t i = 0; i < plane_dx.size(); ++i) {
      dx[static_cast<size_t>(p * g.h * g.w) + i] = static_cast<float>(plane_dx[i]);
    }
  }
}

void ref_avg_pool2d(const RefCall& call) {
  const auto& attrs = call.attrs<Pool2dAttrs>();
  const PoolGeometry g = pool_geometry(call.in[0].shape, call.out[0].shape, attrs);
  const float* x = call.in_f32(0);  // (N, C, H, W)
  float* y = call.out_f32(0);       // (N, C, OH, OW)
  for (int64_t p = 0; p < g.planes; ++p) {
    const float* plane = x + p * g.h * g.w;
    for (int64_t oy = 0; oy < g.oh; ++oy) {
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        double sum = 0.0;
        for (int64_t r = 0; r < g.kernel[0]; ++r) {
          for (int64_t s = 0; s < g.kernel[1]; ++s) {
            const int64_t row = g.row0(oy) + r;
            const int64_t col = g.col0(ox) + s;
            if (g.inside(row, col)) sum += plane[row * g.w + col];
          }
        }
        y[(p * g.oh + oy) * g.ow + ox] =
            static_cast<float>(sum / avg_divisor(g, attrs.include_pad, oy, ox));
      }
    }
  }
}

// Each dy, divided as in the forward pass, goes to every input element of its window.
void ref_avg_pool2d_grad(const RefCall& call) {
  const auto& attrs = call.attrs<Pool2dGradAttrs>();
  const PoolGeometry g = pool_geometry(call.out[0].shape, call.in[0].shape, attrs);
  const float* dy = call.in_f32(0);  // (N, C, OH, OW)
  float* dx = call.out_f32(0);       // (N, C, H, W)
  std::vector<double> plane_dx(static_cast<size_t>(g.h * g.w));
  for (int64_t p = 0; p < g.planes; ++p) {
    std::fill(plane_dx.begin(), plane_dx.end(), 0.0);
    for (int64_t oy = 0; oy < g.oh; ++oy) {
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        const double share =
            dy[(p * g.oh + oy) * g.ow + ox] / avg_divisor(g, attrs.include_pad, oy, ox);
        for (int64_t r = 0; r < g.kernel[0]; ++r) {
          for (int64_t s = 0; s < g.kernel[1]; ++s) {
            const int64_t row = g.row0(oy) + r;
            const int64_t col = g.col0(ox) + s;
            if (g.inside(row, col)) plane_dx[static_cast<size_t>(row * g.w + col)] += share;
          }
        }
      }
    }
    for (size_t i = 0; i < plane_dx.size(); ++i) {
      dx[static_cast<size_t>(p * g.h * g.w) + i] = static_cast<float>(plane_dx[i]);
    }
  }
}

void ref_global_avg_pool(const RefCall& call) {
  const Shape& x_shape = call.in[0].shape;
  MEMFIT_CHECK(x_shape.size() == 4);
  const int64_t planes = x_shape[0] * x_shape[1];
  const int64_t area = x_shape[2] * x_shape[3];
  const float* x = call.in_f32(0);  // (N, C, H, W)
  float* y = call.out_f32(0);       // (N, C, 1, 1)
  for (int64_t p = 0; p < planes; ++p) {
    double sum = 0.0;
    for (int64_t i = 0; i < area; ++i) sum += x[p * area + i];
    y[p] = static_cast<float>(sum / static_cast<double>(area));
  }
}

void ref_global_avg_pool_grad(const RefCall& call) {
  const Shape& dx_shape = call.out[0].shape;
  MEMFIT_CHECK(dx_shape.size() == 4);
  const int64_t planes = dx_shape[0] * dx_shape[1];
  const int64_t area = dx_shape[2] * dx_shape[3];
  const float* dy = call.in_f32(0);  // (N, C, 1, 1)
  float* dx = call.out_f32(0);       // (N, C, H, W)
  for (int64_t p = 0; p < planes; ++p) {
    const float share = static_cast<float>(static_cast<double>(dy[p]) / static_cast<double>(area));
    for (int64_t i = 0; i < area; ++i) dx[p * area + i] = share;
  }
}

}  // namespace memfit
