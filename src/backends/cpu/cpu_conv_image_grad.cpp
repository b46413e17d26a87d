// conv2d_grad_weight of a first layer that reads a one-channel image (LeNet's
// conv1 on Fashion-MNIST): oneDNN 2.6 runs it as im2col and one small gemm
// per image (x64:gemm:jit), 10 to 15 ms for LeNet's 37 MFLOP at batch 64, a
// third of the step. Here: every image's K = KH KW shifted copies (im2col,
// in the planned workspace, split across threads by image and tap), then per
// output channel (split across threads) and image, each tap's dot product of
// dy's plane with its copy, vectorized along the plane in float, added into
// a double per tap. Sums in another order than the reference's: they agree
// within float rounding, and do not depend on the thread count.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/dnnl_util.h"
#include "core/check.h"

namespace memfit::cpu {
namespace {

constexpr size_t kAlignment = 64;

float dot(const float* a, const float* b, int64_t count) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < count; ++i) s += a[i] * b[i];
  return s;
}

float sum(const float* a, int64_t count) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < count; ++i) s += a[i];
  return s;
}

class ImageConvGradWeightKernel final : public Kernel {
 public:
  // dy (N, O, OH, OW), x (N, 1, H, W) -> dw (O, 1, KH, KW) [, db (O)].
  ImageConvGradWeightKernel(const Shape& dy, const Shape& x, const Conv2dGradAttrs& a)
      : n_(dy[0]), o_(dy[1]), oh_(dy[2]), ow_(dy[3]), h_(x[2]), w_(x[3]), kh_(a.shape[2]),
        kw_(a.shape[3]), sh_(a.stride[0]), sw_(a.stride[1]), ph_(a.pad[0]), pw_(a.pad[1]),
        bias_(a.bias) {}

  size_t workspace_bytes() const override {
    return static_cast<size_t>(n_ * kh_ * kw_ * oh_ * ow_) * sizeof(float) + kAlignment;
  }

  void run(const KernelArgs& args) override {
    const auto* dy = static_cast<const float*>(args.inputs[0]);
    const auto* x = static_cast<const float*>(args.inputs[1]);
    auto* dw = static_cast<float*>(args.outputs[0]);
    auto* db = bias_ ? static_cast<float*>(args.outputs[1]) : nullptr;
    const auto start = reinterpret_cast<uintptr_t>(args.workspace);
    auto* columns = reinterpret_cast<float*>((start + kAlignment - 1) / kAlignment * kAlignment);
    const int64_t taps = kh_ * kw_, plane = oh_ * ow_;
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t n = 0; n < n_; ++n) {
      for (int64_t k = 0; k < taps; ++k) shift_copy(x + n * h_ * w_, k, columns + (n * taps + k) * plane);
    }
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < o_; ++o) {
      std::vector<double> totals(static_cast<size_t>(taps), 0.0);
      double bias_sum = 0.0;
      for (int64_t n = 0; n < n_; ++n) {
        const float* d = dy + (n * o_ + o) * plane;
        if (bias_) bias_sum += sum(d, plane);
        for (int64_t k = 0; k < taps; ++k) {
          totals[static_cast<size_t>(k)] += dot(d, columns + (n * taps + k) * plane, plane);
        }
      }
      for (int64_t k = 0; k < taps; ++k) dw[o * taps + k] = static_cast<float>(totals[static_cast<size_t>(k)]);
      if (bias_) db[o] = static_cast<float>(bias_sum);
    }
  }

 private:
  // out (OH, OW) = the input pixel that tap k = (i, j) reads for each output
  // position, 0 in the padding.
  void shift_copy(const float* image, int64_t k, float* out) const {
    const int64_t i = k / kw_, j = k % kw_;
    for (int64_t r = 0; r < oh_; ++r) {
      const int64_t ih = r * sh_ + i - ph_;
      float* row = out + r * ow_;
      for (int64_t c = 0; c < ow_; ++c) {
        const int64_t iw = c * sw_ + j - pw_;
        row[c] = ih >= 0 && ih < h_ && iw >= 0 && iw < w_ ? image[ih * w_ + iw] : 0.0f;
      }
    }
  }

  int64_t n_, o_, oh_, ow_, h_, w_, kh_, kw_, sh_, sw_, ph_, pw_;
  bool bias_;
};

}  // namespace

bool is_image_conv_grad_weight(const Graph& graph, const Node& node) {
  if (node.op != OpKind::conv2d_grad_weight) return false;
  const auto& a = std::get<Conv2dGradAttrs>(node.attrs);
  const Value& x = graph.value(node.inputs[1]);
  return x.type.shape[1] == 1 && a.groups == 1 && a.dilation == Pair{1, 1} &&
         x.layout == Layout::plain && graph.value(node.inputs[0]).layout == Layout::plain;
}

std::unique_ptr<Kernel> make_image_conv_grad_weight_kernel(const Graph& graph, const Node& node) {
  MEMFIT_CHECK(is_image_conv_grad_weight(graph, node));
  return std::make_unique<ImageConvGradWeightKernel>(input_shape(graph, node, 0), input_shape(graph, node, 1),
                                                     std::get<Conv2dGradAttrs>(node.attrs));
}

}  // namespace memfit::cpu
