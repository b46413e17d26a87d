// Reference kernels of upsample (nearest and (bi/tri)linear, PyTorch's
// align_corners=false rules) and of its gradient, the transposed interpolation.
#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "backends/reference/ref_ops.h"
#include "backends/reference/ref_util.h"

namespace memfit {
namespace {

// Where one output coordinate along one spatial dimension reads from:
// y[o] = sum over t < count of weight[t] x[index[t]].
struct Taps {
  size_t count = 1;
  std::array<int64_t, 2> index{};
  std::array<double, 2> weight{};
};

// The taps of every output coordinate along a dimension of n inputs and factor s.
// Nearest: x[floor(o / s)]. Linear: the source coordinate c = (o + 0.5) / s - 0.5,
// clamped below at 0; l = floor(c), h = min(l + 1, n - 1); weights 1 - (c - l) and c - l.
std::vector<Taps> dimension_taps(int64_t n, int64_t s, bool linear) {
  std::vector<Taps> taps(static_cast<size_t>(n * s));
  for (int64_t o = 0; o < n * s; ++o) {
    Taps& t = taps[static_cast<size_t>(o)];
    if (!linear) {
      t.index[0] = o / s;
      t.weight[0] = 1.0;
      continue;
    }
    const double c = std::max((static_cast<double>(o) + 0.5) / static_cast<double>(s) - 0.5, 0.0);
    const auto l = static_cast<int64_t>(std::floor(c));
    const double lambda = c - static_cast<double>(l);
    t.count = 2;
    t.index = {l, std::min(l + 1, n - 1)};
    t.weight = {1.0 - lambda, lambda};
  }
  return taps;
}

// x (N, C, S1[, S2[, S3]]) seen as planes of (D, H, W) volumes; dimensions a
// 1-D or 2-D tensor lacks lead with size 1 and factor 1 (weight 1 on its element).
struct UpsampleGeometry {
  int64_t planes = 1;            // N C
  std::array<int64_t, 3> in{};   // D, H, W
  std::array<int64_t, 3> out{};  // OD, OH, OW
  std::array<std::vector<Taps>, 3> taps;

  int64_t in_volume() const { return in[0] * in[1] * in[2]; }
  int64_t out_volume() const { return out[0] * out[1] * out[2]; }

  // Calls f(input offset in the volume, weight) for each tap of output (oz, oy, ox):
  // one in nearest mode, 2^3 in linear mode.
  template <class F>
  void for_each_tap(int64_t oz, int64_t oy, int64_t ox, F&& f) const {
    const Taps& tz = taps[0][static_cast<size_t>(oz)];
    const Taps& ty = taps[1][static_cast<size_t>(oy)];
    const Taps& tx = taps[2][static_cast<size_t>(ox)];
    for (size_t a = 0; a < tz.count; ++a) {
      for (size_t b = 0; b < ty.count; ++b) {
        for (size_t c = 0; c < tx.count; ++c) {
          f((tz.index[a] * in[1] + ty.index[b]) * in[2] + tx.index[c],
            tz.weight[a] * ty.weight[b] * tx.weight[c]);
        }
      }
    }
  }
};

// `x` is the small shape (the input of upsample), `y` the upsampled one.
UpsampleGeometry upsample_geometry(const Shape& x, const Shape& y, const UpsampleAttrs& attrs) {
  const size_t spatial = x.size() - 2;
  MEMFIT_CHECK(spatial >= 1 && spatial <= 3 && y.size() == x.size() &&
               attrs.scale.size() == spatial);
  UpsampleGeometry g;
  g.planes = x[0] * x[1];
  g.in = {1, 1, 1};
  g.out = {1, 1, 1};
  for (size_t d = 0; d < 3; ++d) {
    const bool present = d >= 3 - spatial;
    const size_t i = present ? 2 + d - (3 - spatial) : 0;
    if (present) {
      MEMFIT_CHECK(y[i] == x[i] * attrs.scale[i - 2]);
      g.in[d] = x[i];
      g.out[d] = y[i];
    }
    g.taps[d] = dimension_taps(g.in[d], present ? attrs.scale[i - 2] : 1, attrs.linear);
  }
  return g;
}

}  // namespace

void ref_upsample(const RefCall& call) {
  const UpsampleGeometry g =
      upsample_geometry(call.in[0].shape, call.out[0].shape, call.attrs<UpsampleAttrs>());
  const float* x = call.in_f32(0);  // (N, C, S1, ...)
  float* y = call.out_f32(0);       // (N, C, S1 scale[0], ...)
  for (int64_t p = 0; p < g.planes; ++p) {
    const float* volume = x + p * g.in_volume();
    float* out = y + p * g.out_volume();
    for (int64_t oz = 0; oz < g.out[0]; ++oz) {
      for (int64_t oy = 0; oy < g.out[1]; ++oy) {
        for (int64_t ox = 0; ox < g.out[2]; ++ox) {
          double sum = 0.0;
          g.for_each_tap(oz, oy, ox, [&](int64_t at, double w) { sum += w * volume[at]; });
          out[(oz * g.out[1] + oy) * g.out[2] + ox] = static_cast<float>(sum);
        }
      }
    }
  }
}

// The transpose of ref_upsample: each dy scatters into the inputs it was
// interpolated from, with the same weights; sums in double.
void ref_upsample_grad(const RefCall& call) {
  const UpsampleGeometry g =
      upsample_geometry(call.out[0].shape, call.in[0].shape, call.attrs<UpsampleAttrs>());
  const float* dy = call.in_f32(0);  // (N, C, S1 scale[0], ...)
  float* dx = call.out_f32(0);       // (N, C, S1, ...)
  std::vector<double> volume_dx(static_cast<size_t>(g.in_volume()));
  for (int64_t p = 0; p < g.planes; ++p) {
    const float* grad = dy + p * g.out_volume();
    std::fill(volume_dx.begin(), volume_dx.end(), 0.0);
    for (int64_t oz = 0; oz < g.out[0]; ++oz) {
      for (int64_t oy = 0; oy < g.out[1]; ++oy) {
        for (int64_t ox = 0; ox < g.out[2]; ++ox) {
          const double d = grad[(oz * g.out[1] + oy) * g.out[2] + ox];
          g.for_each_tap(oz, oy, ox, [&](int64_t at, double w) {
            volume_dx[static_cast<size_t>(at)] += w * d;
          });
        }
      }
    }
    for (size_t i = 0; i < volume_dx.size(); ++i) {
      dx[static_cast<size_t>(p * g.in_volume()) + i] = static_cast<float>(volume_dx[i]);
    }
  }
}

}  // namespace memfit
