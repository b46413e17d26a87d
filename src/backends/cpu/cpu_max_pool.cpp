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
#include <limits>
#include <tuple>
#include <type_traits>
#include <vector>

#include <omp.h>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/dnnl_util.h"
#include "core/check.h"

namespace memfit::cpu {
namespace {

// Four lanes of a channel block: SSE vectors, which every x86-64 has.
typedef float Floats4 __attribute__((vector_size(16)));
typedef int32_t Indices4 __attribute__((vector_size(16)));

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
  // output of the B planes of one channel block (B = block; one plane when
  // plain), in output order, indices counted in elements of a plane
  // (multiply by B for offsets), lane l's elements at offset l, each lane
  // keeping its window's first maximum. A block's lanes are compared side by
  // side in SSE vectors; a plain plane's windows of one output row are.
  template <int64_t B, class F>
  void for_each_argmax(const float* volume, F&& f) const {
    if constexpr (B == 1) {
      for_each_argmax_in_rows(volume, f);
    } else {
      for_each_argmax_in_lanes<B>(volume, f);
    }
  }

  // for_each_argmax of a channel block: four lanes per SSE vector, compared
  // and selected without branches.
  template <int64_t B, class F>
  void for_each_argmax_in_lanes(const float* volume, F&& f) const {
    static_assert(B % 4 == 0);
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
          const auto first = static_cast<int32_t>((z_begin * in[1] + y_begin) * in[2] + x_begin);
          alignas(64) int32_t best[B];
          alignas(64) float best_value[B];
          constexpr int64_t kVectors = B / 4;
          Floats4 value[kVectors];
          Indices4 index[kVectors];
          for (int64_t c = 0; c < kVectors; ++c) {
            std::memcpy(&value[c], volume + first * B + 4 * c, sizeof(Floats4));
            index[c] = Indices4{} + first;
          }
          for (int64_t z = z_begin; z < z_end; ++z) {
            for (int64_t y = y_begin; y < y_end; ++y) {
              const int64_t row = (z * in[1] + y) * in[2];
              for (int64_t x = x_begin; x < x_end; ++x) {
                const float* v = volume + (row + x) * B;
                const Indices4 at = Indices4{} + static_cast<int32_t>(row + x);
                for (int64_t c = 0; c < kVectors; ++c) {
                  Floats4 candidate;
                  std::memcpy(&candidate, v + 4 * c, sizeof(Floats4));
                  const Indices4 greater = candidate > value[c];
                  index[c] = greater ? at : index[c];
                  value[c] = greater ? candidate : value[c];
                }
              }
            }
          }
          std::memcpy(best, index, sizeof(best));
          std::memcpy(best_value, value, sizeof(best_value));
          f(o, best, best_value);
        }
      }
    }
  }

  // for_each_argmax of one plain plane. Where a row's windows lie inside the
  // input along x, up to kRow of them are compared side by side (each tap's
  // elements copied together, then compared four to an SSE vector); the
  // others one at a time.
  template <class F>
  void for_each_argmax_in_rows(const float* volume, F&& f) const {
    constexpr int64_t kRow = 64;
    const int64_t sx = stride[2], px = pad[2], kx = kernel[2];
    // Outputs [inner_begin, inner_end) have x0 >= 0 and x0 + kernel <= W.
    const int64_t inner_begin = std::min(out[2], (px + sx - 1) / sx);
    const int64_t last = in[2] + px - kx;
    const int64_t inner_end =
        std::max(inner_begin, last < 0 ? int64_t{0} : std::min(out[2], last / sx + 1));
    for (int64_t oz = 0; oz < out[0]; ++oz) {
      const int64_t z0 = oz * stride[0] - pad[0];
      const int64_t z_begin = std::max<int64_t>(z0, 0), z_end = std::min(z0 + kernel[0], in[0]);
      for (int64_t oy = 0; oy < out[1]; ++oy) {
        const int64_t y0 = oy * stride[1] - pad[1];
        const int64_t y_begin = std::max<int64_t>(y0, 0), y_end = std::min(y0 + kernel[1], in[1]);
        const int64_t o_row = (oz * out[1] + oy) * out[2];
        auto one = [&](int64_t ox) {
          const int64_t x0 = ox * sx - px;
          const int64_t x_begin = std::max<int64_t>(x0, 0), x_end = std::min(x0 + kx, in[2]);
          auto best = static_cast<int32_t>((z_begin * in[1] + y_begin) * in[2] + x_begin);
          float best_value = volume[best];
          for (int64_t z = z_begin; z < z_end; ++z) {
            for (int64_t y = y_begin; y < y_end; ++y) {
              const int64_t row = (z * in[1] + y) * in[2];
              for (int64_t x = x_begin; x < x_end; ++x) {
                const float v = volume[row + x];
                const bool greater = v > best_value;
                best = greater ? static_cast<int32_t>(row + x) : best;
                best_value = greater ? v : best_value;
              }
            }
          }
          f(o_row + ox, &best, &best_value);
        };
        for (int64_t ox = 0; ox < inner_begin; ++ox) one(ox);
        for (int64_t first = inner_begin; first < inner_end; first += kRow) {
          const int64_t n = std::min(kRow, inner_end - first);
          const int64_t vectors = (n + 3) / 4;
          alignas(64) int32_t best[kRow];
          alignas(64) float best_value[kRow];
          alignas(64) float taps[kRow];  // one tap of each window, contiguous
          for (int64_t j = n; j < 4 * vectors; ++j) taps[j] = 0.0f;
          bool seeded = false;
          for (int64_t z = z_begin; z < z_end; ++z) {
            for (int64_t y = y_begin; y < y_end; ++y) {
              const int64_t row = (z * in[1] + y) * in[2];
              for (int64_t t = 0; t < kx; ++t) {
                const int64_t start = row + first * sx - px + t;  // output `first`'s tap
                for (int64_t j = 0; j < n; ++j) taps[j] = volume[start + j * sx];
                const Indices4 first_four = Indices4{0, 1, 2, 3} * static_cast<int32_t>(sx) +
                                            static_cast<int32_t>(start);
                for (int64_t c = 0; c < vectors; ++c) {
                  Floats4 candidate, value;
                  Indices4 index;
                  std::memcpy(&candidate, taps + 4 * c, sizeof(Floats4));
                  const Indices4 at = first_four + static_cast<int32_t>(4 * c * sx);
                  if (seeded) {
                    std::memcpy(&value, best_value + 4 * c, sizeof(Floats4));
                    std::memcpy(&index, best + 4 * c, sizeof(Indices4));
                    const Indices4 greater = candidate > value;
                    index = greater ? at : index;
                    value = greater ? candidate : value;
                  } else {
                    value = candidate;
                    index = at;
                  }
                  std::memcpy(best_value + 4 * c, &value, sizeof(Floats4));
                  std::memcpy(best + 4 * c, &index, sizeof(Indices4));
                }
                seeded = true;
              }
            }
          }
          for (int64_t j = 0; j < n; ++j) f(o_row + first + j, &best[j], &best_value[j]);
        }
        for (int64_t ox = std::max(inner_end, inner_begin); ox < out[2]; ++ox) one(ox);
      }
    }
  }
};

// Calls f(std::integral_constant<int64_t, B>) with B = block (1, 8 or 16).
template <class F>
void with_block(int64_t block, F&& f) {
  switch (block) {
    case 8:
      return f(std::integral_constant<int64_t, 8>{});
    case 16:
      return f(std::integral_constant<int64_t, 16>{});
    default:
      MEMFIT_CHECK(block == 1);
      return f(std::integral_constant<int64_t, 1>{});
  }
}

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
  explicit MaxPoolKernel(const Windows& w) : w_(w) {
    MEMFIT_CHECK(w_.in_volume() <= std::numeric_limits<int32_t>::max());
  }

  void run(const KernelArgs& args) override {
    const auto* x = static_cast<const float*>(args.inputs[0]);
    auto* y = static_cast<float*>(args.outputs[0]);
    with_block(w_.block, [&](auto block) {
      constexpr int64_t B = decltype(block)::value;
      const int64_t in = w_.in_volume(), out = w_.out_volume();
#pragma omp parallel for schedule(static)
      for (int64_t p = 0; p < w_.planes; p += B) {
        float* pooled = y + w_.plane_start(p, out);
        w_.for_each_argmax<B>(x + w_.plane_start(p, in), [&](int64_t o, const int32_t*, const float* value) {
          std::memcpy(pooled + o * B, value, B * sizeof(float));
        });
      }
    });
  }

 private:
  Windows w_;
};

// The output windows along one axis that hold input coordinate i: those
// with o * stride - pad <= i < o * stride - pad + kernel, within [0, out).
struct WindowRange {
  int64_t begin, end;
};
std::vector<WindowRange> windows_holding(int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                                         int64_t out) {
  std::vector<WindowRange> ranges;
  for (int64_t i = 0; i < in; ++i) {
    const int64_t low = i + pad - kernel + 1;
    const int64_t begin = low <= 0 ? 0 : (low + stride - 1) / stride;
    const int64_t end = std::min((i + pad) / stride + 1, out);
    ranges.push_back({begin, std::max(begin, end)});
  }
  return ranges;
}

// windows_holding along (D, H, W).
struct HoldingWindows {
  explicit HoldingWindows(const Windows& w) {
    for (size_t d = 0; d < 3; ++d) {
      axis[d] = windows_holding(w.in[d], w.kernel[d], w.stride[d], w.pad[d], w.out[d]);
    }
  }
  std::array<std::vector<WindowRange>, 3> axis;
};

// dx of one channel block (B lanes, B = w.block) from the argmax of its
// outputs (`argmax`, plane indices, B per output) and dy: each element of dx
// sums, in output order, the dy of the windows that hold it and picked it.
// Adding a zero where a window picked another element changes nothing (the
// sum starts at +0 and is never -0), so this is the scatter "dx[argmax] +=
// dy" in output order, bit for bit, vectorized over the lanes and written
// once.
template <int64_t B>
void gather_block(const Windows& w, const HoldingWindows& holding, const int32_t* argmax,
                  const float* dy, float* dx) {
  int32_t i = 0;  // the plane index of (z, y, x)
  for (int64_t z = 0; z < w.in[0]; ++z) {
    const WindowRange rz = holding.axis[0][z];
    for (int64_t y = 0; y < w.in[1]; ++y) {
      const WindowRange ry = holding.axis[1][y];
      for (int64_t x = 0; x < w.in[2]; ++x, ++i) {
        const WindowRange rx = holding.axis[2][x];
        alignas(64) float sum[B] = {};
        for (int64_t oz = rz.begin; oz < rz.end; ++oz) {
          for (int64_t oy = ry.begin; oy < ry.end; ++oy) {
            const int64_t row = (oz * w.out[1] + oy) * w.out[2];
            for (int64_t ox = rx.begin; ox < rx.end; ++ox) {
              const int32_t* picked = argmax + (row + ox) * B;
              const float* upstream = dy + (row + ox) * B;
#pragma omp simd
              for (int64_t l = 0; l < B; ++l) {
                const float dy_l = upstream[l];  // read always, so the loop has no branch
                sum[l] += picked[l] == i ? dy_l : 0.0f;
              }
            }
          }
        }
        std::memcpy(dx + i * B, sum, sizeof(sum));
      }
    }
  }
}

// dy, x -> dx like x. A plain plane's dx is zeroed, then each dy added at
// its window's argmax in output order. A channel block's argmaxes are found
// first, into the thread's part of the workspace, and dx gathered from them
// (gather_block: the same sums, its lanes side by side).
class MaxPoolGradKernel final : public Kernel {
 public:
  explicit MaxPoolGradKernel(const Windows& w)
      : w_(w), holding_(w), threads_(omp_get_max_threads()) {
    MEMFIT_CHECK(w_.in_volume() <= std::numeric_limits<int32_t>::max());
  }

  size_t workspace_bytes() const override {
    if (w_.block == 1) return 0;
    return static_cast<size_t>(threads_ * w_.out_volume() * w_.block) * sizeof(int32_t);
  }

  void run(const KernelArgs& args) override {
    const auto* dy = static_cast<const float*>(args.inputs[0]);
    const auto* x = static_cast<const float*>(args.inputs[1]);
    auto* dx = static_cast<float*>(args.outputs[0]);
    auto* indices = static_cast<int32_t*>(args.workspace);
    with_block(w_.block, [&](auto block) {
      constexpr int64_t B = decltype(block)::value;
      const int64_t in = w_.in_volume(), out = w_.out_volume();
#pragma omp parallel num_threads(threads_)
      {
#pragma omp for schedule(static)
        for (int64_t p = 0; p < w_.planes; p += B) {
          const float* upstream = dy + w_.plane_start(p, out);
          float* grad = dx + w_.plane_start(p, in);
          if constexpr (B == 1) {
            std::memset(grad, 0, static_cast<size_t>(in) * sizeof(float));
            w_.for_each_argmax<1>(x + w_.plane_start(p, in),
                                  [&](int64_t o, const int32_t* best, const float*) {
                                    grad[*best] += upstream[o];
                                  });
          } else {
            int32_t* argmax = indices + omp_get_thread_num() * out * B;
            w_.for_each_argmax<B>(x + w_.plane_start(p, in),
                                  [&](int64_t o, const int32_t* best, const float*) {
                                    std::memcpy(argmax + o * B, best, B * sizeof(int32_t));
                                  });
            gather_block<B>(w_, holding_, argmax, upstream, grad);
          }
        }
      }
    });
  }

 private:
  Windows w_;
  HoldingWindows holding_;
  int threads_;
};

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

}  // namespace

MEMFIT_CPU_KERNEL(max_pool2d, make_max_pool_kernel)
MEMFIT_CPU_KERNEL(max_pool2d_grad, make_max_pool_kernel)
MEMFIT_CPU_KERNEL(max_pool3d, make_max_pool_kernel)
MEMFIT_CPU_KERNEL(max_pool3d_grad, make_max_pool_kernel)

}  // namespace memfit::cpu
