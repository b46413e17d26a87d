// Max pooling (2-D and 3-D) and its gradient on (N, C, [D,] H, W) tensors,
// plain or channel-blocked (c8, c16: channel c of image n lies at
// ((n C' + c - c % b) S + s) b + c % b for spatial offset s, C' the channels
// padded to a multiple of the block b), as OpenMP loops over the N x C'
// planes; padding planes hold zeros and pool to zeros. oneDNN 2.6 pools plain
// layouts with its generic implementation ("simple_nchw"), measured 20 to 30
// times slower than these loops on the zoo's shapes; these loops also keep the
// reference's choice among equal maxima in either layout.
//
// The window of output (oz, oy, ox) starts at (oz, oy, ox) * stride - pad and
// is clipped to the input; its maximum is the first one in row-major window
// order on ties (strict >), as the reference kernel picks it, so the forward
// pass equals the reference bit for bit. The gradient sends each dy to its
// window's argmax; where windows overlap (stride < kernel) the contributions
// add up in float, in output order (the reference adds in double).
// Planes are independent, so the results do not depend on the thread count.
// In a blocked layout the loops take a channel block's planes at once, their
// lanes compared side by side; plain, a block is one plane.
#include <algorithm>
#include <array>
#include <cstring>
#include <tuple>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/dnnl_util.h"
#include "core/check.h"

namespace memfit::cpu {
namespace {

// 2-D pooling is the case D = OD = 1 with a window of depth 1.
struct Windows {
  int64_t planes = 0;                  // N C', C' the channels padded to a whole block
  int64_t channels = 0;                // C'
  int64_t block = 1;                   // channels per block: 1 for plain
  std::array<int64_t, 3> in{}, out{};  // (D, H, W) and (OD, OH, OW)
  std::array<int64_t, 3> kernel{}, stride{}, pad{};

  int64_t in_volume() const { return in[0] * in[1] * in[2]; }
  int64_t out_volume() const { return out[0] * out[1] * out[2]; }
  // The offset of plane p's first element in a tensor of `volume` elements
  // per plane; its elements are `block` apart.
  int64_t plane_start(int64_t p, int64_t volume) const {
    const int64_t n = p / channels, c = p % channels;
    return ((n * channels + c - c % block) * volume) + c % block;
  }

  // Calls f(output index, argmax index per lane, maximum per lane) for every
  // output of the `block` planes of one channel block (one plane when plain),
  // indices counted in elements of a plane (multiply by `block` for offsets),
  // lane l's elements at offset l. The lanes are compared side by side
  // (vectorized), each keeping its first maximum.
  template <class F>
  void for_each_argmax(const float* volume, F&& f) const {
    constexpr int64_t kMaxBlock = 16;
    const int64_t b = block;
    MEMFIT_CHECK(b <= kMaxBlock);
    int64_t o = 0;
    for (int64_t oz = 0; oz < out[0]; ++oz) {
      const int64_t z0 = oz * stride[0] - pad[0];
      const int64_t z_begin = std::max<int64_t>(z0, 0), z_end = std::min(z0 + kernel[0], in[0]);
      for (int64_t oy = 0; oy < out[1]; ++oy) {
        const int64_t y0 = oy * stride[1] - pad[1];
        const int64_t y_begin = std::max<int64_t>(y0, 0), y_end = std::min(y0 + kernel[1], in[1]);
        for (int64_t ox = 0; ox < out[2]; ++ox, ++o) {
          const int64_t x0 = ox * stride[2] - pad[2];
          const int64_t x_begin = std::max<int64_t>(x0, 0), x_end = std::min(x0 + kernel[2], in[2]);
          const int64_t first = (z_begin * in[1] + y_begin) * in[2] + x_begin;
          int64_t best[kMaxBlock];
          float best_value[kMaxBlock];
          for (int64_t l = 0; l < b; ++l) {
            best[l] = first;
            best_value[l] = volume[first * b + l];
          }
          for (int64_t z = z_begin; z < z_end; ++z) {
            for (int64_t y = y_begin; y < y_end; ++y) {
              const int64_t row = (z * in[1] + y) * in[2];
              for (int64_t x = x_begin; x < x_end; ++x) {
                const float* v = volume + (row + x) * b;
#pragma omp simd
                for (int64_t l = 0; l < b; ++l) {
                  const bool greater = v[l] > best_value[l];
                  best[l] = greater ? row + x : best[l];
                  best_value[l] = greater ? v[l] : best_value[l];
                }
              }
            }
          }
          f(o, best, best_value);
        }
      }
    }
  }
};

template <class A>
Windows windows(const Shape& x, const Shape& y, Layout layout, const A& attrs) {
  constexpr size_t kSpatial = std::tuple_size_v<decltype(attrs.kernel)>;
  MEMFIT_CHECK(x.size() == kSpatial + 2 && y.size() == kSpatial + 2);
  const int64_t block = layout_block(layout);
  const int64_t channels = (x[1] + block - 1) / block * block;
  Windows w{x[0] * channels, channels, block, {1, 1, 1}, {1, 1, 1},
            {1, 1, 1},       {1, 1, 1}, {0, 0, 0}};
  for (size_t i = 0; i < kSpatial; ++i) {
    const size_t d = 3 - kSpatial + i;
    w.in[d] = x[2 + i];
    w.out[d] = y[2 + i];
    w.kernel[d] = attrs.kernel[i];
    w.stride[d] = attrs.stride[i];
    w.pad[d] = attrs.pad[i];
  }
  return w;
}

// x -> y.
class MaxPoolKernel final : public Kernel {
 public:
  explicit MaxPoolKernel(const Windows& w) : w_(w) {}

  void run(const KernelArgs& args) override {
    const auto* x = static_cast<const float*>(args.inputs[0]);
    auto* y = static_cast<float*>(args.outputs[0]);
    const int64_t in = w_.in_volume(), out = w_.out_volume();
    const int64_t b = w_.block;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < w_.planes; p += b) {
      float* pooled = y + w_.plane_start(p, out);
      w_.for_each_argmax(x + w_.plane_start(p, in), [&](int64_t o, const int64_t*, const float* value) {
        std::memcpy(pooled + o * b, value, static_cast<size_t>(b) * sizeof(float));
      });
    }
  }

 private:
  Windows w_;
};

// dy, x -> dx like x.
class MaxPoolGradKernel final : public Kernel {
 public:
  explicit MaxPoolGradKernel(const Windows& w) : w_(w) {}

  void run(const KernelArgs& args) override {
    const auto* dy = static_cast<const float*>(args.inputs[0]);
    const auto* x = static_cast<const float*>(args.inputs[1]);
    auto* dx = static_cast<float*>(args.outputs[0]);
    const int64_t in = w_.in_volume(), out = w_.out_volume();
    const int64_t b = w_.block;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < w_.planes; p += b) {
      float* grad = dx + w_.plane_start(p, in);
      const float* upstream = dy + w_.plane_start(p, out);
      std::memset(grad, 0, static_cast<size_t>(in * b) * sizeof(float));
      w_.for_each_argmax(x + w_.plane_start(p, in), [&](int64_t o, const int64_t* best, const float*) {
        for (int64_t l = 0; l < b; ++l) grad[best[l] * b + l] += upstream[o * b + l];
      });
    }
  }

 private:
  Windows w_;
};

}  // namespace

std::unique_ptr<Kernel> make_max_pool_kernel(const Graph& graph, const Node& node) {
  switch (node.op) {
    case OpKind::max_pool2d:
      return std::make_unique<MaxPoolKernel>(windows(input_shape(graph, node, 0),
                                                     output_shape(graph, node, 0),
                                                     graph.value(node.inputs[0]).layout,
                                                     std::get<Pool2dAttrs>(node.attrs)));
    case OpKind::max_pool3d:
      return std::make_unique<MaxPoolKernel>(windows(input_shape(graph, node, 0),
                                                     output_shape(graph, node, 0),
                                                     graph.value(node.inputs[0]).layout,
                                                     std::get<Pool3dAttrs>(node.attrs)));
    case OpKind::max_pool2d_grad:
      return std::make_unique<MaxPoolGradKernel>(windows(input_shape(graph, node, 1),
                                                         input_shape(graph, node, 0),
                                                         graph.value(node.inputs[1]).layout,
                                                         std::get<Pool2dAttrs>(node.attrs)));
    case OpKind::max_pool3d_grad:
      return std::make_unique<MaxPoolGradKernel>(windows(input_shape(graph, node, 1),
                                                         input_shape(graph, node, 0),
                                                         graph.value(node.inputs[1]).layout,
                                                         std::get<Pool3dAttrs>(node.attrs)));
    default:
      MEMFIT_CHECK(false);
      return nullptr;
  }
}

}  // namespace memfit::cpu
