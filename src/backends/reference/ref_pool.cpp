// Reference kernels of max, average (2-D and 3-D) and global average pooling
// and their gradients.
#include <algorithm>
#include <array>
#include <tuple>
#include <vector>

#include "backends/reference/ref_ops.h"
#include "backends/reference/ref_util.h"

namespace memfit {
namespace {

// One (D, H, W) volume pooled into one (OD, OH, OW) volume; 2-D pooling is the
// case D = OD = 1 with a window of depth 1. The window of output (oz, oy, ox)
// covers depths [oz stride - pad, oz stride - pad + kernel), likewise rows and columns.
struct PoolGeometry {
  int64_t planes;  // N C
  std::array<int64_t, 3> in;   // D, H, W
  std::array<int64_t, 3> out;  // OD, OH, OW
  Triple kernel, stride, pad;

  int64_t in_volume() const { return in[0] * in[1] * in[2]; }
  int64_t out_volume() const { return out[0] * out[1] * out[2]; }
  int64_t kernel_volume() const { return kernel[0] * kernel[1] * kernel[2]; }
  // Calls f(input offset within the volume) for each element of the window of
  // output `o` (row-major over OD, OH, OW) that lies inside the input, in
  // row-major window order.
  template <class F>
  void for_each_in_window(int64_t o, F&& f) const {
    const int64_t z0 = o / (out[1] * out[2]) * stride[0] - pad[0];
    const int64_t y0 = o / out[2] % out[1] * stride[1] - pad[1];
    const int64_t x0 = o % out[2] * stride[2] - pad[2];
    for (int64_t z = std::max<int64_t>(z0, 0); z < std::min(z0 + kernel[0], in[0]); ++z) {
      for (int64_t y = std::max<int64_t>(y0, 0); y < std::min(y0 + kernel[1], in[1]); ++y) {
        for (int64_t x = std::max<int64_t>(x0, 0); x < std::min(x0 + kernel[2], in[2]); ++x) {
          f((z * in[1] + y) * in[2] + x);
        }
      }
    }
  }
  // How many elements of the window of `o` lie inside the input.
  int64_t inside_count(int64_t o) const {
    int64_t count = 0;
    for_each_in_window(o, [&](int64_t) { ++count; });
    return count;
  }
};

// x (N, C, [D,] H, W) pooled into y (N, C, [OD,] OH, OW); A is a 2-D or 3-D pooling struct.
template <class A>
PoolGeometry pool_geometry(const Shape& x, const Shape& y, const A& attrs) {
  constexpr size_t kSpatial = std::tuple_size_v<decltype(attrs.kernel)>;
  MEMFIT_CHECK(x.size() == kSpatial + 2 && y.size() == kSpatial + 2 && x[0] == y[0] &&
               x[1] == y[1]);
  // Leading spatial dimensions a 2-D op lacks are of size 1, with a window of 1.
  PoolGeometry g{x[0] * x[1], {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}};
  for (size_t i = 0; i < kSpatial; ++i) {
    const size_t d = 3 - kSpatial + i;
    g.in[d] = x[2 + i];
    g.out[d] = y[2 + i];
    g.kernel[d] = attrs.kernel[i];
    g.stride[d] = attrs.stride[i];
    g.pad[d] = attrs.pad[i];
  }
  return g;
}

// The volume offset of the maximum in the window of `o`: the first one in
// row-major window order on ties (strict >), never a padding position.
int64_t window_argmax(const float* volume, const PoolGeometry& g, int64_t o) {
  int64_t best = -1;
  g.for_each_in_window(o, [&](int64_t at) {
    if (best < 0 || volume[at] > volume[best]) best = at;
  });
  // Shape inference keeps pad < kernel, so every window meets the input.
  MEMFIT_CHECK(best >= 0);
  return best;
}

// The divisor of the window of `o` in average pooling.
double avg_divisor(const PoolGeometry& g, bool include_pad, int64_t o) {
  const int64_t count = include_pad ? g.kernel_volume() : g.inside_count(o);
  MEMFIT_CHECK(count > 0);
  return static_cast<double>(count);
}

// x (N, C, [D,] H, W) -> y (N, C, [OD,] OH, OW).
void max_pool(const PoolGeometry& g, const float* x, float* y) {
  for (int64_t p = 0; p < g.planes; ++p) {
    const float* volume = x + p * g.in_volume();
    for (int64_t o = 0; o < g.out_volume(); ++o) {
      y[p * g.out_volume() + o] = volume[window_argmax(volume, g, o)];
    }
  }
}

// Each dy goes to the argmax of its window; overlapping windows add up (in double).
void max_pool_grad(const PoolGeometry& g, const float* dy, const float* x, float* dx) {
  std::vector<double> volume_dx(static_cast<size_t>(g.in_volume()));
  for (int64_t p = 0; p < g.planes; ++p) {
    const float* volume = x + p * g.in_volume();
    std::fill(volume_dx.begin(), volume_dx.end(), 0.0);
    for (int64_t o = 0; o < g.out_volume(); ++o) {
      volume_dx[static_cast<size_t>(window_argmax(volume, g, o))] += dy[p * g.out_volume() + o];
    }
    for (size_t i = 0; i < volume_dx.size(); ++i) {
      dx[static_cast<size_t>(p * g.in_volume()) + i] = static_cast<float>(volume_dx[i]);
    }
  }
}

void avg_pool(const PoolGeometry& g, bool include_pad, const float* x, float* y) {
  for (int64_t p = 0; p < g.planes; ++p) {
    const float* volume = x + p * g.in_volume();
    for (int64_t o = 0; o < g.out_volume(); ++o) {
      double sum = 0.0;
      g.for_each_in_window(o, [&](int64_t at) { sum += volume[at]; });
      y[p * g.out_volume() + o] = static_cast<float>(sum / avg_divisor(g, include_pad, o));
    }
  }
}

// Each dy, divided as in the forward pass, goes to every input element of its window.
void avg_pool_grad(const PoolGeometry& g, bool include_pad, const float* dy, float* dx) {
  std::vector<double> volume_dx(static_cast<size_t>(g.in_volume()));
  for (int64_t p = 0; p < g.planes; ++p) {
    std::fill(volume_dx.begin(), volume_dx.end(), 0.0);
    for (int64_t o = 0; o < g.out_volume(); ++o) {
      const double share = dy[p * g.out_volume() + o] / avg_divisor(g, include_pad, o);
      g.for_each_in_window(o, [&](int64_t at) { volume_dx[static_cast<size_t>(at)] += share; });
    }
    for (size_t i = 0; i < volume_dx.size(); ++i) {
      dx[static_cast<size_t>(p * g.in_volume()) + i] = static_cast<float>(volume_dx[i]);
    }
  }
}

// The four kernels of one pooling family: A is Pool2dAttrs or Pool3dAttrs, G its Grad form.
template <class A>
void max_pool_kernel(const RefCall& call) {
  max_pool(pool_geometry(call.in[0].shape, call.out[0].shape, call.attrs<A>()), call.in_f32(0),
           call.out_f32(0));
}

// Inputs (dy, x).
template <class A>
void max_pool_grad_kernel(const RefCall& call) {
  max_pool_grad(pool_geometry(call.in[1].shape, call.in[0].shape, call.attrs<A>()), call.in_f32(0),
                call.in_f32(1), call.out_f32(0));
}

template <class A>
void avg_pool_kernel(const RefCall& call) {
  const A& attrs = call.attrs<A>();
  avg_pool(pool_geometry(call.in[0].shape, call.out[0].shape, attrs), attrs.include_pad,
           call.in_f32(0), call.out_f32(0));
}

template <class G>
void avg_pool_grad_kernel(const RefCall& call) {
  const G& attrs = call.attrs<G>();
  avg_pool_grad(pool_geometry(call.out[0].shape, call.in[0].shape, attrs), attrs.include_pad,
                call.in_f32(0), call.out_f32(0));
}

}  // namespace

void ref_max_pool2d(const RefCall& call) { max_pool_kernel<Pool2dAttrs>(call); }
void ref_max_pool2d_grad(const RefCall& call) { max_pool_grad_kernel<Pool2dAttrs>(call); }
void ref_avg_pool2d(const RefCall& call) { avg_pool_kernel<Pool2dAttrs>(call); }
void ref_avg_pool2d_grad(const RefCall& call) { avg_pool_grad_kernel<Pool2dGradAttrs>(call); }
void ref_max_pool3d(const RefCall& call) { max_pool_kernel<Pool3dAttrs>(call); }
void ref_max_pool3d_grad(const RefCall& call) { max_pool_grad_kernel<Pool3dAttrs>(call); }
void ref_avg_pool3d(const RefCall& call) { avg_pool_kernel<Pool3dAttrs>(call); }
void ref_avg_pool3d_grad(const RefCall& call) { avg_pool_grad_kernel<Pool3dGradAttrs>(call); }

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
