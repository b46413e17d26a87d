// Tests of the reference kernels against values derived independently of them:
// numbers worked out by hand, direct formulas written differently from the
// kernels (e.g. convolution over an explicitly zero-padded input), finite
// differences for gradients, and in-place runs against out-of-place runs.
#include "backends/reference/reference_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numbers>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/random.h"
#include "test_util.h"

namespace memfit {
namespace {

// A host tensor: f32 data, or i32 data for labels.
struct Tensor {
  TensorType type;
  std::vector<float> f;
  std::vector<int32_t> i;
  void* data() { return type.dtype == DType::i32 ? static_cast<void*>(i.data()) : f.data(); }
  size_t size() const { return static_cast<size_t>(num_elements(type.shape)); }
};

Tensor f32(Shape shape, std::vector<float> values) {
  Tensor t{{std::move(shape), DType::f32}, std::move(values), {}};
  MEMFIT_CHECK(t.f.size() == t.size());
  return t;
}

Tensor i32(Shape shape, std::vector<int32_t> values) {
  Tensor t{{std::move(shape), DType::i32}, {}, std::move(values)};
  MEMFIT_CHECK(t.i.size() == t.size());
  return t;
}

// An output buffer filled with NaN, so an element a kernel forgets to write fails.
Tensor out(Shape shape) {
  const auto count = static_cast<size_t>(num_elements(shape));
  return f32(std::move(shape), std::vector<float>(count, std::nanf("")));
}

Tensor random(Shape shape, uint64_t seed) {
  const auto count = static_cast<size_t>(num_elements(shape));
  return f32(std::move(shape), testing::random_normal(count, seed));
}

// Runs the reference kernel of `op`; an output may be the same Tensor as an input.
void run(OpKind op, const Attrs& attrs, const std::vector<Tensor*>& ins,
         const std::vector<Tensor*>& outs, StepContext step = {}) {
  Node node;
  node.op = op;
  node.attrs = attrs;
  std::vector<TensorType> in_types, out_types;
  std::vector<void*> in_buffers, out_buffers;
  for (Tensor* t : ins) {
    in_types.push_back(t->type);
    in_buffers.push_back(t->data());
  }
  for (Tensor* t : outs) {
    out_types.push_back(t->type);
    out_buffers.push_back(t->data());
  }
  KernelArgs args;
  args.inputs = in_buffers;
  args.outputs = out_buffers;
  args.step = step;
  reference_kernel(op)(RefCall{node, in_types, out_types, args});
}

std::vector<Tensor*> pointers(std::vector<Tensor>& tensors) {
  std::vector<Tensor*> p;
  for (Tensor& t : tensors) p.push_back(&t);
  return p;
}

// Runs a single-output op and returns its output of shape `shape`.
Tensor run1(OpKind op, const Attrs& attrs, const std::vector<Tensor*>& ins, Shape shape,
            StepContext step = {}) {
  Tensor y = out(std::move(shape));
  run(op, attrs, ins, {&y}, step);
  return y;
}

// |got - want| <= tol max(1, |want|) element by element.
template <class T>
void expect_near(const std::vector<float>& got, const std::vector<T>& want, double tol = 1e-6) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(static_cast<double>(want[i]))))
        << "element " << i;
  }
}

// d loss / d values[k] by central differences.
template <class F>
std::vector<double> numeric_grad(std::vector<float>& values, F loss, float h = 1e-2f) {
  std::vector<double> grad(values.size());
  for (size_t k = 0; k < values.size(); ++k) {
    const float saved = values[k];
    values[k] = saved + h;
    const double up = loss();
    values[k] = saved - h;
    const double down = loss();
    values[k] = saved;
    grad[k] = (up - down) / (2.0 * static_cast<double>(h));
  }
  return grad;
}

// sum_i r_i y_i in double.
double dot(const std::vector<float>& r, const std::vector<float>& y) {
  double sum = 0.0;
  for (size_t i = 0; i < r.size(); ++i) sum += static_cast<double>(r[i]) * y[i];
  return sum;
}

TEST(ReferenceKernels, EveryOpHasAKernel) {
  for (int op = 0; op < kNumOps; ++op) {
    EXPECT_NE(reference_kernel(static_cast<OpKind>(op)), nullptr) << op_name(OpKind(op));
  }
}

// a (2, 3) = [1 2 3; 4 5 6], b (3, 2) = [7 8; 9 10; 11 12]: a b = [58 64; 139 154].
TEST(ReferenceKernels, MatmulWithEveryTransposeCombination) {
  Tensor a = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor a_t = f32({3, 2}, {1, 4, 2, 5, 3, 6});
  Tensor b = f32({3, 2}, {7, 8, 9, 10, 11, 12});
  Tensor b_t = f32({2, 3}, {7, 9, 11, 8, 10, 12});
  const std::vector<float> want = {58, 64, 139, 154};
  expect_near(run1(OpKind::matmul, MatmulAttrs{}, {&a, &b}, {2, 2}).f, want);
  expect_near(run1(OpKind::matmul, MatmulAttrs{true, false}, {&a_t, &b}, {2, 2}).f, want);
  expect_near(run1(OpKind::matmul, MatmulAttrs{false, true}, {&a, &b_t}, {2, 2}).f, want);
  expect_near(run1(OpKind::matmul, MatmulAttrs{true, true}, {&a_t, &b_t}, {2, 2}).f, want);
}

// Batch 1 of a is [1 0 0; 0 1 -1]: with the shared b it gives [7 8; -2 -2], with
// its own b1 = [1 0; 0 1; 1 1] it gives [1 0; -1 0].
TEST(ReferenceKernels, MatmulBatchedWithSharedAndPerBatchB) {
  Tensor a = f32({2, 2, 3}, {1, 2, 3, 4, 5, 6, 1, 0, 0, 0, 1, -1});
  Tensor shared_b = f32({3, 2}, {7, 8, 9, 10, 11, 12});
  expect_near(run1(OpKind::matmul, MatmulAttrs{}, {&a, &shared_b}, {2, 2, 2}).f,
              std::vector<float>{58, 64, 139, 154, 7, 8, -2, -2});
  Tensor b_t = f32({2, 2, 3}, {7, 9, 11, 8, 10, 12, 1, 0, 1, 0, 1, 1});  // each b stored (N, K)
  expect_near(run1(OpKind::matmul, MatmulAttrs{false, true}, {&a, &b_t}, {2, 2, 2}).f,
              std::vector<float>{58, 64, 139, 154, 1, 0, -1, 0});
}

TEST(ReferenceKernels, LinearWithAndWithoutBiasAndAddingIntoC) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor w = f32({2, 3}, {1, 0, -1, 0.5f, 0.5f, 0.5f});
  Tensor b = f32({2}, {10, -1});
  Tensor c = f32({2, 2}, {1, -2, 0.25f, 100});
  expect_near(run1(OpKind::linear, NoAttrs{}, {&x, &w}, {2, 2}).f,
              std::vector<float>{-2, 3, -2, 7.5f});
  expect_near(run1(OpKind::linear, NoAttrs{}, {&x, &w, &b}, {2, 2}).f,
              std::vector<float>{8, 2, 8, 6.5f});
  expect_near(run1(OpKind::linear, NoAttrs{}, {&x, &w, &b, &c}, {2, 2}).f,
              std::vector<float>{9, 0, 8.25f, 106.5f});
}

// x = [1 2 3; 4 5 6; 7 8 9], w = [1 2; 3 4].
TEST(ReferenceKernels, Conv2dHandComputed) {
  Tensor x = f32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor w = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  Tensor b = f32({1}, {0.5f});
  // Plain: y00 = 1 + 4 + 12 + 20 and so on.
  expect_near(run1(OpKind::conv2d, Conv2dAttrs{}, {&x, &w, &b}, {1, 1, 2, 2}).f,
              std::vector<float>{37.5f, 47.5f, 67.5f, 77.5f});
  // Stride 2, pad 1: the four windows start at (-1, -1), (-1, 1), (1, -1), (1, 1).
  const Conv2dAttrs strided{{2, 2}, {1, 1}, {1, 1}, 1};
  expect_near(run1(OpKind::conv2d, strided, {&x, &w}, {1, 1, 2, 2}).f,
              std::vector<float>{4, 18, 36, 77});
  // Dilation 2: the taps are the four corners, 1 + 2 * 3 + 3 * 7 + 4 * 9.
  const Conv2dAttrs dilated{{1, 1}, {0, 0}, {2, 2}, 1};
  expect_near(run1(OpKind::conv2d, dilated, {&x, &w}, {1, 1, 1, 1}).f, std::vector<float>{64});
}

struct ConvCase {
  int64_t n, c, h, w, o, kh, kw;
  Conv2dAttrs attrs;
};

struct ConvResults {
  std::vector<double> y, dx, dw, db;
};

// Convolution and its gradients by a different route than the kernels: the
// input is first copied into an explicitly zero-padded buffer, so no bounds
// test is needed, and the gradients are scattered from each output element.
ConvResults direct_conv(const ConvCase& k, const Shape& y_shape, const std::vector<float>& x,
                        const std::vector<float>& w, const std::vector<float>& dy) {
  const int64_t sh = k.attrs.stride[0], sw = k.attrs.stride[1];
  const int64_t ph = k.attrs.pad[0], pw = k.attrs.pad[1];
  const int64_t dil_h = k.attrs.dilation[0], dil_w = k.attrs.dilation[1];
  const int64_t hp = k.h + 2 * ph, wp = k.w + 2 * pw, oh = y_shape[2], ow = y_shape[3];
  const int64_t cg = k.c / k.attrs.groups, og = k.o / k.attrs.groups;
  // Plane p = n C + c of x sits inside plane p of the padded buffer, offset by (ph, pw).
  auto padded_at = [&](int64_t p, int64_t r, int64_t s) {
    return static_cast<size_t>((p * hp + r + ph) * wp + s + pw);
  };
  std::vector<double> xp(static_cast<size_t>(k.n * k.c * hp * wp), 0.0), dxp(xp.size(), 0.0);
  for (int64_t p = 0; p < k.n * k.c; ++p)
    for (int64_t r = 0; r < k.h; ++r)
      for (int64_t s = 0; s < k.w; ++s) xp[padded_at(p, r, s)] = x[((p * k.h) + r) * k.w + s];
  ConvResults res{std::vector<double>(dy.size(), 0.0), std::vector<double>(x.size()),
                  std::vector<double>(w.size(), 0.0), std::vector<double>(k.o, 0.0)};
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t o = 0; o < k.o; ++o)
      for (int64_t y0 = 0; y0 < oh; ++y0)
        for (int64_t x0 = 0; x0 < ow; ++x0) {
          const auto yi = static_cast<size_t>(((n * k.o + o) * oh + y0) * ow + x0);
          res.db[o] += dy[yi];
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t r = 0; r < k.kh; ++r)
              for (int64_t s = 0; s < k.kw; ++s) {
                // Padded coordinates: no bounds test, the padding holds zeros.
                const size_t xi = padded_at(n * k.c + (o / og) * cg + c, y0 * sh + r * dil_h - ph,
                                            x0 * sw + s * dil_w - pw);
                const auto wi = static_cast<size_t>(((o * cg + c) * k.kh + r) * k.kw + s);
                res.y[yi] += xp[xi] * w[wi];
                dxp[xi] += static_cast<double>(dy[yi]) * w[wi];
                res.dw[wi] += static_cast<double>(dy[yi]) * xp[xi];
              }
        }
  for (int64_t p = 0; p < k.n * k.c; ++p)
    for (int64_t r = 0; r < k.h; ++r)
      for (int64_t s = 0; s < k.w; ++s) res.dx[((p * k.h) + r) * k.w + s] = dxp[padded_at(p, r, s)];
  return res;
}

TEST(ReferenceKernels, Conv2dAndGradientsMatchDirectFormula) {
  const std::vector<ConvCase> cases = {
      {2, 3, 5, 6, 4, 3, 3, Conv2dAttrs{{1, 1}, {0, 0}, {1, 1}, 1}},
      {2, 4, 5, 6, 6, 3, 2, Conv2dAttrs{{2, 1}, {1, 2}, {1, 2}, 2}},
      {1, 4, 7, 7, 4, 3, 3, Conv2dAttrs{{3, 2}, {2, 1}, {2, 1}, 4}},
      {1, 2, 4, 4, 2, 1, 1, Conv2dAttrs{{2, 2}, {1, 1}, {1, 1}, 1}},
  };
  uint64_t seed = 10;
  for (const ConvCase& k : cases) {
    const auto& a = k.attrs;
    const Shape y_shape = {k.n, k.o,
                           (k.h + 2 * a.pad[0] - a.dilation[0] * (k.kh - 1) - 1) / a.stride[0] + 1,
                           (k.w + 2 * a.pad[1] - a.dilation[1] * (k.kw - 1) - 1) / a.stride[1] + 1};
    Tensor x = random({k.n, k.c, k.h, k.w}, ++seed);
    Tensor w = random({k.o, k.c / a.groups, k.kh, k.kw}, ++seed);
    Tensor dy = random(y_shape, ++seed);
    const ConvResults want = direct_conv(k, y_shape, x.f, w.f, dy.f);
    expect_near(run1(OpKind::conv2d, a, {&x, &w}, y_shape).f, want.y, 1e-5);

    Conv2dGradAttrs g{a.stride, a.pad, a.dilation, a.groups, x.type.shape, false};
    expect_near(run1(OpKind::conv2d_grad_input, g, {&dy, &w}, x.type.shape).f, want.dx, 1e-5);
    g.shape = w.type.shape;
    g.bias = true;
    Tensor dw = out(w.type.shape);
    Tensor db = out({k.o});
    run(OpKind::conv2d_grad_weight, g, {&dy, &x}, {&dw, &db});
    expect_near(dw.f, want.dw, 1e-5);
    expect_near(db.f, want.db, 1e-5);
  }
}

Pool2dAttrs pool_attrs(int64_t kernel, int64_t stride, int64_t pad, bool include_pad = false) {
  return Pool2dAttrs{{kernel, kernel}, {stride, stride}, {pad, pad}, include_pad};
}

// x = [1 2 5 3; 4 0 1 1; -1 -2 7 7; -3 -4 7 2]: the last window holds three 7s,
// and its gradient goes to the first of them in row-major order, (2, 2).
TEST(ReferenceKernels, MaxPoolAndTieRule) {
  Tensor x = f32({1, 1, 4, 4}, {1, 2, 5, 3, 4, 0, 1, 1, -1, -2, 7, 7, -3, -4, 7, 2});
  const Pool2dAttrs a = pool_attrs(2, 2, 0);
  expect_near(run1(OpKind::max_pool2d, a, {&x}, {1, 1, 2, 2}).f, std::vector<float>{4, 5, -1, 7});
  Tensor dy = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  expect_near(run1(OpKind::max_pool2d_grad, a, {&dy, &x}, {1, 1, 4, 4}).f,
              std::vector<float>{0, 0, 2, 0, 1, 0, 0, 0, 3, 0, 4, 0, 0, 0, 0, 0});
}

// All inputs negative with pad 1: the zero padding must never win, and the
// gradients of overlapping windows add up at each argmax.
TEST(ReferenceKernels, MaxPoolPaddingNeverWins) {
  Tensor x = f32({1, 1, 2, 2}, {-1, -2, -3, -4});
  const Pool2dAttrs a = pool_attrs(2, 1, 1);
  expect_near(run1(OpKind::max_pool2d, a, {&x}, {1, 1, 3, 3}).f,
              std::vector<float>{-1, -1, -2, -1, -1, -2, -3, -3, -4});
  Tensor dy = f32({1, 1, 3, 3}, std::vector<float>(9, 1.0f));
  expect_near(run1(OpKind::max_pool2d_grad, a, {&dy, &x}, {1, 1, 2, 2}).f,
              std::vector<float>{4, 2, 2, 1});
}

// x = [1 2; 3 4], kernel 2, stride 1, pad 1: corner windows hold one element,
// edge windows two, the center four.
TEST(ReferenceKernels, AvgPoolIncludePad) {
  Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  expect_near(run1(OpKind::avg_pool2d, pool_attrs(2, 1, 1, false), {&x}, {1, 1, 3, 3}).f,
              std::vector<float>{1, 1.5f, 2, 2, 2.5f, 3, 3, 3.5f, 4});
  expect_near(run1(OpKind::avg_pool2d, pool_attrs(2, 1, 1, true), {&x}, {1, 1, 3, 3}).f,
              std::vector<float>{0.25f, 0.75f, 0.5f, 1, 2.5f, 1.5f, 0.75f, 1.75f, 1});
  // dy = 1..9; x00 lies in windows (0,0), (0,1), (1,0), (1,1): 1/1 + 2/2 + 4/2 + 5/4.
  Tensor dy = f32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Pool2dGradAttrs g{{2, 2}, {1, 1}, {1, 1}, false, {1, 1, 2, 2}};
  expect_near(run1(OpKind::avg_pool2d_grad, g, {&dy}, {1, 1, 2, 2}).f,
              std::vector<float>{5.25f, 8.25f, 14.25f, 17.25f});
  g.include_pad = true;
  expect_near(run1(OpKind::avg_pool2d_grad, g, {&dy}, {1, 1, 2, 2}).f,
              std::vector<float>{3, 4, 6, 7});
}

// avg_pool2d_grad is the adjoint of avg_pool2d: <pool(x), dy> = <x, pool_grad(dy)>.
TEST(ReferenceKernels, AvgPoolGradIsAdjoint) {
  for (bool include_pad : {false, true}) {
    Tensor x = random({2, 3, 7, 6}, 21);
    const Shape y_shape = {2, 3, (7 + 2 - 3) / 2 + 1, (6 + 2 - 3) / 2 + 1};
    Tensor dy = random(y_shape, 22);
    const Tensor y = run1(OpKind::avg_pool2d, pool_attrs(3, 2, 1, include_pad), {&x}, y_shape);
    Pool2dGradAttrs g{{3, 3}, {2, 2}, {1, 1}, include_pad, x.type.shape};
    const Tensor dx = run1(OpKind::avg_pool2d_grad, g, {&dy}, x.type.shape);
    EXPECT_NEAR(dot(y.f, dy.f), dot(x.f, dx.f), 1e-4) << "include_pad " << include_pad;
  }
}

TEST(ReferenceKernels, GlobalAvgPoolAndGrad) {
  Tensor x = f32({1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  expect_near(run1(OpKind::global_avg_pool, NoAttrs{}, {&x}, {1, 2, 1, 1}).f,
              std::vector<float>{2.5f, 6.5f});
  Tensor dy = f32({1, 2, 1, 1}, {4, 8});
  expect_near(run1(OpKind::global_avg_pool_grad, ShapeAttrs{{1, 2, 2, 2}}, {&dy}, {1, 2, 2, 2}).f,
              std::vector<float>{1, 1, 1, 1, 2, 2, 2, 2});
}

struct BatchNormOutputs {
  Tensor y, mean, var, running_mean, running_var;
};

BatchNormOutputs batch_norm(Tensor& x, Tensor& gamma, Tensor& beta, Tensor& rm, Tensor& rv,
                            const BatchNormAttrs& attrs) {
  const int64_t c = x.type.shape[1];
  BatchNormOutputs o{out(x.type.shape), out({c}), out({c}), out({c}), out({c})};
  run(OpKind::batch_norm, attrs, {&x, &gamma, &beta, &rm, &rv},
      {&o.y, &o.mean, &o.var, &o.running_mean, &o.running_var});
  return o;
}

// x (N=4, C=2): channel 0 = 1, 2, 3, 4 (mean 2.5, var 1.25, unbiased 5/3);
// channel 1 = 2, 2, 2, 6 (mean 3, var 3, unbiased 4).
TEST(ReferenceKernels, BatchNormStatisticsAndRunningUpdates) {
  Tensor x = f32({4, 2}, {1, 2, 2, 2, 3, 2, 4, 6});
  Tensor gamma = f32({2}, {2, 0.5f});
  Tensor beta = f32({2}, {1, -1});
  Tensor rm = f32({2}, {0, 1});
  Tensor rv = f32({2}, {1, 2});
  const BatchNormAttrs attrs{0.25f, 0.1f};
  const BatchNormOutputs o = batch_norm(x, gamma, beta, rm, rv, attrs);
  expect_near(o.mean.f, std::vector<float>{2.5f, 3});
  expect_near(o.var.f, std::vector<float>{1.25f, 3});
  expect_near(o.running_mean.f, std::vector<double>{0.25, 0.9 + 0.3});
  expect_near(o.running_var.f, std::vector<double>{0.9 + 0.1 * 5.0 / 3.0, 1.8 + 0.4});
  std::vector<double> want(8);
  const double mean[] = {2.5, 3}, var[] = {1.25, 3};
  for (size_t k = 0; k < 8; ++k) {
    const size_t ch = k % 2;
    want[k] = gamma.f[ch] * (x.f[k] - mean[ch]) / std::sqrt(var[ch] + 0.25) + beta.f[ch];
  }
  expect_near(o.y.f, want);
}

// For (N, C, H, W), channel c is x[:, c, :, :]: statistics computed here by an
// explicit index formula; y is normalized per channel.
TEST(ReferenceKernels, BatchNormFourDimensionalLayout) {
  Tensor x = random({2, 3, 2, 2}, 31);
  for (size_t k = 0; k < x.f.size(); ++k) x.f[k] = 3.0f * x.f[k] + static_cast<float>(k / 4 % 3);
  Tensor gamma = f32({3}, {1, 1, 1});
  Tensor beta = f32({3}, {0, 0, 0});
  Tensor rm = f32({3}, {0, 0, 0});
  Tensor rv = f32({3}, {1, 1, 1});
  const BatchNormOutputs o = batch_norm(x, gamma, beta, rm, rv, BatchNormAttrs{1e-5f, 0.1f});
  for (size_t c = 0; c < 3; ++c) {
    double sum = 0, sq = 0, y_sum = 0, y_sq = 0;
    for (size_t n = 0; n < 2; ++n) {
      for (size_t s = 0; s < 4; ++s) {
        const size_t at = (n * 3 + c) * 4 + s;
        sum += x.f[at];
        sq += static_cast<double>(x.f[at]) * x.f[at];
        y_sum += o.y.f[at];
        y_sq += static_cast<double>(o.y.f[at]) * o.y.f[at];
      }
    }
    const double mean = sum / 8, var = sq / 8 - mean * mean;
    EXPECT_NEAR(o.mean.f[c], mean, 1e-5);
    EXPECT_NEAR(o.var.f[c], var, 1e-4);
    EXPECT_NEAR(y_sum / 8, 0.0, 1e-5);
    EXPECT_NEAR(y_sq / 8, var / (var + 1e-5), 1e-5);
  }
}

// dx, dgamma, dbeta of L = sum r y against central differences of batch_norm.
TEST(ReferenceKernels, BatchNormGradMatchesFiniteDifferences) {
  Tensor x = random({2, 3, 2, 2}, 41);
  Tensor gamma = f32({3}, {1.5f, -0.5f, 0.8f});
  Tensor beta = f32({3}, {0.1f, 0.2f, -0.3f});
  Tensor rm = f32({3}, {0, 0, 0});
  Tensor rv = f32({3}, {1, 1, 1});
  Tensor r = random(x.type.shape, 42);
  const BatchNormAttrs attrs{1e-3f, 0.1f};
  auto loss = [&] { return dot(r.f, batch_norm(x, gamma, beta, rm, rv, attrs).y.f); };
  BatchNormOutputs fwd = batch_norm(x, gamma, beta, rm, rv, attrs);
  Tensor dx = out(x.type.shape), dgamma = out({3}), dbeta = out({3});
  run(OpKind::batch_norm_grad, attrs, {&r, &x, &gamma, &fwd.mean, &fwd.var},
      {&dx, &dgamma, &dbeta});
  expect_near(dx.f, numeric_grad(x.f, loss), 2e-3);
  expect_near(dgamma.f, numeric_grad(gamma.f, loss), 2e-3);
  expect_near(dbeta.f, numeric_grad(beta.f, loss), 2e-3);
}

TEST(ReferenceKernels, Activations) {
  Tensor x = f32({4}, {1, -1, 0, 2});
  expect_near(run1(OpKind::relu, NoAttrs{}, {&x}, {4}).f, std::vector<float>{1, 0, 0, 2});
  // x Phi(x) with Phi(1) = 0.841344746..., Phi(2) = 0.977249868...
  expect_near(run1(OpKind::gelu, NoAttrs{}, {&x}, {4}).f,
              std::vector<double>{0.8413447460685429, -0.15865525393145707, 0, 1.9544997361036416});
  expect_near(run1(OpKind::tanh, NoAttrs{}, {&x}, {4}).f,
              std::vector<double>{0.7615941559557649, -0.7615941559557649, 0, 0.9640275800758169});
  expect_near(run1(OpKind::sigmoid, NoAttrs{}, {&x}, {4}).f,
              std::vector<double>{0.7310585786300049, 0.2689414213699951, 0.5, 0.8807970779778823});
  expect_near(run1(OpKind::scale, ScaleAttrs{-2}, {&x}, {4}).f, std::vector<float>{-2, 2, 0, -4});
}

TEST(ReferenceKernels, ActivationGradients) {
  Tensor dy = f32({3}, {1, 2, 3});
  Tensor y = f32({3}, {0.25f, 0, -0.5f});
  expect_near(run1(OpKind::relu_grad, NoAttrs{}, {&dy, &y}, {3}).f, std::vector<float>{1, 0, 0});
  expect_near(run1(OpKind::tanh_grad, NoAttrs{}, {&dy, &y}, {3}).f,
              std::vector<float>{0.9375f, 2, 2.25f});
  expect_near(run1(OpKind::sigmoid_grad, NoAttrs{}, {&dy, &y}, {3}).f,
              std::vector<float>{0.1875f, 0, -2.25f});
  // Phi(x) + x phi(x) at x = 1, -1, 0 with phi(1) = 0.241970724...
  Tensor x = f32({3}, {1, -1, 0});
  expect_near(run1(OpKind::gelu_grad, NoAttrs{}, {&dy, &x}, {3}).f,
              std::vector<double>{1.0833154705876864, 2 * -0.08331547058768642, 1.5});
}

TEST(ReferenceKernels, BroadcastingBinaryOps) {
  Tensor a = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor row = f32({3}, {10, 20, 30});
  expect_near(run1(OpKind::add, NoAttrs{}, {&a, &row}, {2, 3}).f,
              std::vector<float>{11, 22, 33, 14, 25, 36});
  Tensor column = f32({2, 1}, {2, 3});
  Tensor row2 = f32({1, 3}, {1, 2, 3});
  expect_near(run1(OpKind::mul, NoAttrs{}, {&column, &row2}, {2, 3}).f,
              std::vector<float>{2, 4, 6, 3, 6, 9});
  Tensor scalar = f32({}, {5});
  expect_near(run1(OpKind::sub, NoAttrs{}, {&a, &scalar}, {2, 3}).f,
              std::vector<float>{-4, -3, -2, -1, 0, 1});
  Tensor b = f32({2, 3}, {1, 1, 1, 2, 2, 2});
  Tensor a_row = f32({3}, {1, 2, 3});
  expect_near(run1(OpKind::sub, NoAttrs{}, {&a_row, &b}, {2, 3}).f,
              std::vector<float>{0, 1, 2, -1, 0, 1});
  // (2, 1, 2) + (3, 1) -> (2, 3, 2): out[i, j, k] = p[i, 0, k] + q[j, 0].
  Tensor p = f32({2, 1, 2}, {1, 2, 3, 4});
  Tensor q = f32({3, 1}, {10, 20, 30});
  const Tensor sum = run1(OpKind::add, NoAttrs{}, {&p, &q}, {2, 3, 2});
  for (size_t i = 0; i < 2; ++i)
    for (size_t j = 0; j < 3; ++j)
      for (size_t k = 0; k < 2; ++k) EXPECT_EQ(sum.f[(i * 3 + j) * 2 + k], p.f[i * 2 + k] + q.f[j]);
}

TEST(ReferenceKernels, DropoutMaskIsAFunctionOfSeedStepAndKey) {
  const int64_t count = 20000;
  Tensor x = f32({count}, std::vector<float>(static_cast<size_t>(count), 2.0f));
  const DropoutAttrs attrs{0.3f, 7};
  const StepContext step{123, 5, 0};
  const Tensor y = run1(OpKind::dropout, attrs, {&x}, {count}, step);
  int64_t kept = 0;
  for (int64_t i = 0; i < count; ++i) {
    const bool keeps = dropout_keeps(123, 5, 7, static_cast<uint64_t>(i), 0.3f);
    ASSERT_NEAR(y.f[static_cast<size_t>(i)], keeps ? 2.0 / 0.7 : 0.0, 1e-6) << i;
    kept += keeps;
  }
  EXPECT_NEAR(static_cast<double>(kept) / count, 0.7, 0.02);

  auto differing = [&](const DropoutAttrs& a, StepContext s) {
    const Tensor other = run1(OpKind::dropout, a, {&x}, {count}, s);
    int64_t n = 0;
    for (size_t i = 0; i < other.f.size(); ++i) n += other.f[i] != y.f[i];
    return n;
  };
  EXPECT_EQ(differing(attrs, step), 0);
  // Two independent masks with keep 0.7 differ at 2 * 0.7 * 0.3 = 42% of the elements.
  EXPECT_GT(differing(attrs, StepContext{123, 6, 0}), count / 3);
  EXPECT_GT(differing(DropoutAttrs{0.3f, 8}, step), count / 3);
  EXPECT_GT(differing(attrs, StepContext{124, 5, 0}), count / 3);
  // The optimizer step is no part of the key.
  EXPECT_EQ(differing(attrs, StepContext{123, 5, 9}), 0);
}

TEST(ReferenceKernels, DropoutExtremeProbabilities) {
  Tensor x = random({100}, 51);
  expect_near(run1(OpKind::dropout, DropoutAttrs{0.0f, 1}, {&x}, {100}).f, x.f, 0);
  expect_near(run1(OpKind::dropout, DropoutAttrs{1.0f, 1}, {&x}, {100}).f,
              std::vector<float>(100, 0.0f), 0);
}

TEST(ReferenceKernels, ReshapeAndBroadcastTo) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  expect_near(run1(OpKind::reshape, ShapeAttrs{{3, 2}}, {&x}, {3, 2}).f, x.f, 0);
  // In place the kernel must leave the shared buffer as it is.
  const std::vector<float> before = x.f;
  run(OpKind::reshape, ShapeAttrs{{2, 3}}, {&x}, {&x});
  EXPECT_EQ(x.f, before);
  Tensor column = f32({3, 1}, {1, 2, 3});
  expect_near(run1(OpKind::broadcast_to, ShapeAttrs{{2, 3, 2}}, {&column}, {2, 3, 2}).f,
              std::vector<float>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}, 0);
}

TEST(ReferenceKernels, Transpose) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  expect_near(run1(OpKind::transpose, PermAttrs{{1, 0}}, {&x}, {3, 2}).f,
              std::vector<float>{1, 4, 2, 5, 3, 6}, 0);
  // perm (2, 0, 1): y[a, b, c] = x[b, c, a], y is (4, 2, 3).
  Tensor x3 = random({2, 3, 4}, 61);
  const Tensor y = run1(OpKind::transpose, PermAttrs{{2, 0, 1}}, {&x3}, {4, 2, 3});
  for (size_t a = 0; a < 4; ++a)
    for (size_t b = 0; b < 2; ++b)
      for (size_t c = 0; c < 3; ++c) EXPECT_EQ(y.f[(a * 2 + b) * 3 + c], x3.f[(b * 3 + c) * 4 + a]);
}

TEST(ReferenceKernels, ConcatSliceAndSliceGrad) {
  Tensor x0 = f32({2, 1}, {1, 2});
  Tensor x1 = f32({2, 2}, {3, 4, 5, 6});
  expect_near(run1(OpKind::concat, AxisAttrs{1}, {&x0, &x1}, {2, 3}).f,
              std::vector<float>{1, 3, 4, 2, 5, 6}, 0);
  Tensor top = f32({1, 2}, {1, 2});
  expect_near(run1(OpKind::concat, AxisAttrs{0}, {&top, &x1}, {3, 2}).f,
              std::vector<float>{1, 2, 3, 4, 5, 6}, 0);
  Tensor x = f32({2, 4}, {0, 1, 2, 3, 4, 5, 6, 7});
  expect_near(run1(OpKind::slice, SliceAttrs{1, 1, 3, {}}, {&x}, {2, 2}).f,
              std::vector<float>{1, 2, 5, 6}, 0);
  Tensor dy = f32({2, 2}, {1, 2, 3, 4});
  expect_near(run1(OpKind::slice_grad, SliceAttrs{1, 1, 3, {2, 4}}, {&dy}, {2, 4}).f,
              std::vector<float>{0, 1, 2, 0, 0, 3, 4, 0}, 0);
}

TEST(ReferenceKernels, DataMovementCarriesInt32) {
  Tensor labels = i32({4}, {3, 1, 4, 1});
  Tensor sliced = i32({2}, {-1, -1});
  run(OpKind::slice, SliceAttrs{0, 1, 3, {}}, {&labels}, {&sliced});
  EXPECT_EQ(sliced.i, (std::vector<int32_t>{1, 4}));
  Tensor reshaped = i32({2, 2}, {0, 0, 0, 0});
  run(OpKind::reshape, ShapeAttrs{{2, 2}}, {&labels}, {&reshaped});
  EXPECT_EQ(reshaped.i, labels.i);
}

TEST(ReferenceKernels, SoftmaxAndLogSoftmaxHandComputed) {
  const double ln2 = std::numbers::ln2, ln3 = std::log(3.0);
  Tensor x = f32({2, 3}, {0, static_cast<float>(ln2), static_cast<float>(ln3), 1000, 1000, 1000});
  expect_near(run1(OpKind::softmax, AxisAttrs{1}, {&x}, {2, 3}).f,
              std::vector<double>{1.0 / 6, 2.0 / 6, 3.0 / 6, 1.0 / 3, 1.0 / 3, 1.0 / 3});
  expect_near(run1(OpKind::log_softmax, AxisAttrs{1}, {&x}, {2, 3}).f,
              std::vector<double>{-std::log(6.0), std::log(2.0 / 6), std::log(3.0 / 6),
                                  -std::log(3.0), -std::log(3.0), -std::log(3.0)});
  // Along axis 0 the rows are the columns: (0, ln 3) -> (1/4, 3/4), (0, 1) -> (1, e) / (1 + e).
  Tensor c = f32({2, 2}, {0, 0, static_cast<float>(ln3), 1});
  const double e = std::numbers::e;
  expect_near(run1(OpKind::softmax, AxisAttrs{0}, {&c}, {2, 2}).f,
              std::vector<double>{0.25, 1 / (1 + e), 0.75, e / (1 + e)});
}

TEST(ReferenceKernels, SoftmaxRowsSumToOne) {
  Tensor x = random({3, 4, 5}, 71);
  const Tensor y = run1(OpKind::softmax, AxisAttrs{1}, {&x}, {3, 4, 5});
  for (size_t o = 0; o < 3; ++o) {
    for (size_t i = 0; i < 5; ++i) {
      double sum = 0;
      for (size_t j = 0; j < 4; ++j) sum += y.f[(o * 4 + j) * 5 + i];
      EXPECT_NEAR(sum, 1.0, 1e-6);
    }
  }
}

TEST(ReferenceKernels, SoftmaxGradientsMatchFiniteDifferences) {
  for (OpKind fwd : {OpKind::softmax, OpKind::log_softmax}) {
    const OpKind grad = fwd == OpKind::softmax ? OpKind::softmax_grad : OpKind::log_softmax_grad;
    const Shape shape = {2, 3, 4};
    Tensor x = random(shape, 81);
    Tensor r = random(shape, 82);
    auto loss = [&] { return dot(r.f, run1(fwd, AxisAttrs{1}, {&x}, shape).f); };
    Tensor y = run1(fwd, AxisAttrs{1}, {&x}, shape);
    expect_near(run1(grad, AxisAttrs{1}, {&r, &y}, shape).f, numeric_grad(x.f, loss), 1e-3);
  }
}

// logits [0 0; ln 3 0], labels (0, 1): losses ln 2 and -ln(1/4), mean 1.5 ln 2.
TEST(ReferenceKernels, SoftmaxCrossEntropyHandComputed) {
  Tensor logits = f32({2, 2}, {0, 0, static_cast<float>(std::log(3.0)), 0});
  Tensor labels = i32({2}, {0, 1});
  expect_near(run1(OpKind::softmax_cross_entropy, NoAttrs{}, {&logits, &labels}, {}).f,
              std::vector<double>{1.5 * std::numbers::ln2});
  // dloss / N = 1: (softmax - onehot) = (-1/2, 1/2), (3/4, -3/4).
  Tensor dloss = f32({}, {2});
  expect_near(
      run1(OpKind::softmax_cross_entropy_grad, NoAttrs{}, {&dloss, &logits, &labels}, {2, 2}).f,
      std::vector<float>{-0.5f, 0.5f, 0.75f, -0.75f});
}

TEST(ReferenceKernels, SoftmaxCrossEntropyGradMatchesFiniteDifferences) {
  Tensor logits = random({3, 5}, 91);
  Tensor labels = i32({3}, {4, 0, 2});
  Tensor dloss = f32({}, {1.5f});
  auto loss = [&] {
    return 1.5 * run1(OpKind::softmax_cross_entropy, NoAttrs{}, {&logits, &labels}, {}).f[0];
  };
  expect_near(
      run1(OpKind::softmax_cross_entropy_grad, NoAttrs{}, {&dloss, &logits, &labels}, {3, 5}).f,
      numeric_grad(logits.f, loss), 1e-3);
}

// x (2, 3, 2) = 0..11, x[i, j, k] = 6 i + 2 j + k.
TEST(ReferenceKernels, ReduceSumAndMean) {
  std::vector<float> iota(12);
  for (size_t k = 0; k < 12; ++k) iota[k] = static_cast<float>(k);
  Tensor x = f32({2, 3, 2}, iota);
  // Over (0, 2): 8 j + 14.
  expect_near(run1(OpKind::reduce_sum, ReduceAttrs{{0, 2}, false}, {&x}, {3}).f,
              std::vector<float>{14, 22, 30});
  expect_near(run1(OpKind::reduce_sum, ReduceAttrs{{0, 2}, true}, {&x}, {1, 3, 1}).f,
              std::vector<float>{14, 22, 30});
  expect_near(run1(OpKind::reduce_mean, ReduceAttrs{{0, 2}, false}, {&x}, {3}).f,
              std::vector<float>{3.5f, 5.5f, 7.5f});
  // Over (1): 18 i + 6 + 3 k.
  expect_near(run1(OpKind::reduce_sum, ReduceAttrs{{1}, false}, {&x}, {2, 2}).f,
              std::vector<float>{6, 9, 24, 27});
  expect_near(run1(OpKind::reduce_mean, ReduceAttrs{{0, 1, 2}, false}, {&x}, {}).f,
              std::vector<float>{5.5f});
  expect_near(run1(OpKind::reduce_sum, ReduceAttrs{{}, false}, {&x}, {2, 3, 2}).f, iota);
}

TEST(ReferenceKernels, Fill) {
  expect_near(run1(OpKind::fill, FillAttrs{3.5f, {2, 2}}, {}, {2, 2}).f,
              std::vector<float>{3.5f, 3.5f, 3.5f, 3.5f}, 0);
}

// w = (1, -2), g = (0.5, 0.5), lr 0.1, weight decay 0.01: d = (0.51, 0.48).
TEST(ReferenceKernels, SgdOneStepByHand) {
  Tensor w = f32({2}, {1, -2});
  Tensor g = f32({2}, {0.5f, 0.5f});
  expect_near(run1(OpKind::sgd_update, SgdAttrs{0.1f, 0.0f, 0.01f}, {&w, &g}, {2}).f,
              std::vector<double>{0.949, -2.048});
  // With momentum 0.9 and v = (1, -1): v' = (1.41, -0.42), w' = w - 0.1 v'.
  Tensor v = f32({2}, {1, -1});
  Tensor w_next = out({2}), v_next = out({2});
  run(OpKind::sgd_update, SgdAttrs{0.1f, 0.9f, 0.01f}, {&w, &g, &v}, {&w_next, &v_next});
  expect_near(v_next.f, std::vector<double>{1.41, -0.42});
  expect_near(w_next.f, std::vector<double>{0.859, -1.958});
}

TEST(ReferenceKernels, AdamWFirstStepByHand) {
  // t = 1: m' = 0.1 g, v' = 0.001 g^2, the bias-corrected step is g / (|g| + eps) ~ sign(g).
  Tensor w = f32({2}, {1, -2});
  Tensor g = f32({2}, {0.5f, -0.25f});
  Tensor m = f32({2}, {0, 0});
  Tensor v = f32({2}, {0, 0});
  Tensor w2 = out({2}), m2 = out({2}), v2 = out({2});
  const AdamWAttrs attrs{0.1f, 0.9f, 0.999f, 1e-8f, 0.01f};
  run(OpKind::adamw_update, attrs, {&w, &g, &m, &v}, {&w2, &m2, &v2}, StepContext{0, 0, 0});
  expect_near(m2.f, std::vector<double>{0.05, -0.025});
  expect_near(v2.f, std::vector<double>{0.00025, 0.0000625});
  expect_near(w2.f, std::vector<double>{1 - 0.1 * (0.01 + 1), -2 - 0.1 * (-0.02 - 1)});
}

TEST(ReferenceKernels, AdamWLaterStepByHand) {
  // optimizer_step 2, so t = 3: 1 - 0.9^3 = 0.271, 1 - 0.999^3 = 0.002997001.
  Tensor w = f32({2}, {1, -2});
  Tensor g = f32({2}, {0.5f, -0.5f});
  Tensor m = f32({2}, {0.1f, 0.2f});
  Tensor v = f32({2}, {0.01f, 0.04f});
  Tensor w2 = out({2}), m2 = out({2}), v2 = out({2});
  const AdamWAttrs attrs{0.1f, 0.9f, 0.999f, 1e-8f, 0.01f};
  run(OpKind::adamw_update, attrs, {&w, &g, &m, &v}, {&w2, &m2, &v2}, StepContext{0, 0, 2});
  const std::vector<double> m_want = {0.14, 0.13}, v_want = {0.01024, 0.04021};
  expect_near(m2.f, m_want);
  expect_near(v2.f, v_want);
  std::vector<double> w_want(2);
  for (size_t k = 0; k < 2; ++k) {
    const double step = (m_want[k] / 0.271) / (std::sqrt(v_want[k] / 0.002997001) + 1e-8);
    w_want[k] = w.f[k] - 0.1 * (0.01 * w.f[k] + step);
  }
  expect_near(w2.f, w_want, 1e-5);
}

// An op run with output o in the buffer of input i must give exactly what it
// gives out of place, for every in-place pair of docs/ops.md.
struct InplaceCase {
  OpKind op;
  Attrs attrs;
  std::vector<Tensor> inputs;
  std::vector<Shape> outputs;
  std::vector<std::pair<size_t, size_t>> pairs;  // (input, output) sharing a buffer
};

TEST(ReferenceKernels, InPlaceMatchesOutOfPlace) {
  const Shape s = {2, 3, 4};
  const Shape nchw = {2, 3, 2, 2};
  auto r = [&](uint64_t seed) { return random(s, seed); };
  auto pos = [&](uint64_t seed) {
    Tensor t = random(s, seed);
    for (float& v : t.f) v = std::abs(v) + 0.1f;
    return t;
  };
  Tensor gamma = f32({3}, {1.5f, -0.5f, 0.8f});
  Tensor mean = f32({3}, {0.1f, -0.2f, 0.3f});
  Tensor var = f32({3}, {1.2f, 0.7f, 2.0f});
  const StepContext step{5, 3, 2};
  const std::vector<InplaceCase> cases = {
      {OpKind::relu, NoAttrs{}, {r(1)}, {s}, {{0, 0}}},
      {OpKind::relu_grad, NoAttrs{}, {r(2), r(3)}, {s}, {{0, 0}}},
      {OpKind::gelu_grad, NoAttrs{}, {r(4), r(5)}, {s}, {{0, 0}}},
      {OpKind::tanh, NoAttrs{}, {r(6)}, {s}, {{0, 0}}},
      {OpKind::tanh_grad, NoAttrs{}, {r(7), r(8)}, {s}, {{0, 0}}},
      {OpKind::sigmoid, NoAttrs{}, {r(9)}, {s}, {{0, 0}}},
      {OpKind::sigmoid_grad, NoAttrs{}, {r(10), r(11)}, {s}, {{0, 0}}},
      {OpKind::add, NoAttrs{}, {r(12), random({3, 1}, 13)}, {s}, {{0, 0}}},
      {OpKind::sub, NoAttrs{}, {random({4}, 14), r(15)}, {s}, {{1, 0}}},
      {OpKind::mul, NoAttrs{}, {random({1, 3, 1}, 16), r(17)}, {s}, {{1, 0}}},
      {OpKind::scale, ScaleAttrs{0.5f}, {r(18)}, {s}, {{0, 0}}},
      {OpKind::dropout, DropoutAttrs{0.4f, 3}, {r(19)}, {s}, {{0, 0}}},
      {OpKind::softmax, AxisAttrs{1}, {r(21)}, {s}, {{0, 0}}},
      {OpKind::softmax_grad, AxisAttrs{1}, {r(22), pos(23)}, {s}, {{0, 0}}},
      {OpKind::log_softmax, AxisAttrs{2}, {r(24)}, {s}, {{0, 0}}},
      {OpKind::log_softmax_grad, AxisAttrs{0}, {r(25), r(26)}, {s}, {{0, 0}}},
      {OpKind::batch_norm_grad,
       BatchNormAttrs{},
       {random(nchw, 27), random(nchw, 28), gamma, mean, var},
       {nchw, {3}, {3}},
       {{0, 0}}},
      {OpKind::sgd_update,
       SgdAttrs{0.1f, 0.9f, 0.01f},
       {r(29), r(30), r(31)},
       {s, s},
       {{0, 0}, {2, 1}}},
      {OpKind::adamw_update,
       AdamWAttrs{},
       {r(32), r(33), r(34), pos(35)},
       {s, s, s},
       {{0, 0}, {2, 1}, {3, 2}}},
      {OpKind::linear,
       NoAttrs{},
       {random({3, 4}, 36), random({5, 4}, 37), random({5}, 38), random({3, 5}, 39)},
       {{3, 5}},
       {{3, 0}}},
      {OpKind::lstm_cell,
       NoAttrs{},
       {random({3, 8}, 40), random({3, 2}, 41)},
       {{3, 2}, {3, 2}},
       {{1, 1}}},
      // dgates over gates and dc_prev over dc at once, as the planner may place them.
      {OpKind::lstm_cell_grad,
       NoAttrs{},
       {random({3, 2}, 42), random({3, 2}, 43), random({3, 8}, 44), random({3, 2}, 45),
        random({3, 2}, 46)},
       {{3, 8}, {3, 2}},
       {{2, 0}, {1, 1}}},
      {OpKind::lstm_cell_grad,
       NoAttrs{},
       {random({3, 2}, 47), random({3, 2}, 48), random({3, 8}, 49), random({3, 2}, 50),
        random({3, 2}, 51)},
       {{3, 8}, {3, 2}},
       {{2, 0}, {0, 1}}},
      {OpKind::lstm_cell_grad,
       NoAttrs{},
       {random({3, 2}, 52), random({3, 2}, 53), random({3, 8}, 54), random({3, 2}, 55),
        random({3, 2}, 56)},
       {{3, 8}, {3, 2}},
       {{3, 1}}},
  };
  for (const InplaceCase& c : cases) {
    SCOPED_TRACE(op_name(c.op));
    std::vector<Tensor> ins = c.inputs, shared = c.inputs, outs, fresh;
    for (const Shape& shape : c.outputs) {
      outs.push_back(out(shape));
      fresh.push_back(out(shape));
    }
    run(c.op, c.attrs, pointers(ins), pointers(outs), step);
    // In place: output o of a pair (i, o) is written into the buffer of input i.
    std::vector<Tensor*> shared_out = pointers(fresh);
    for (auto [i, o] : c.pairs) shared_out[o] = &shared[i];
    run(c.op, c.attrs, pointers(shared), shared_out, step);
    for (size_t o = 0; o < outs.size(); ++o) {
      EXPECT_EQ(shared_out[o]->f, outs[o].f) << "output " << o;
    }
  }
}

// A kernel made from a graph keeps its own copy of the node and its types: it
// still runs after the graph is gone.
TEST(ReferenceBackend, MakesKernelsFromGraphNodes) {
  const std::unique_ptr<Backend> backend = make_reference_backend();
  EXPECT_EQ(backend->name(), "reference");
  std::unique_ptr<Kernel> kernel;
  {
    Graph graph;
    const ValueId a = graph.add_input("a", TensorType{{2, 3}}, Role::input);
    const ValueId b = graph.add_input("b", TensorType{{2, 3}}, Role::parameter);
    const ValueId y = graph.add_value_raw(
        Value{.name = "y", .type = {{2, 2}}, .producer = NodeId(0), .output_index = 0});
    const NodeId id = graph.add_node_raw(Node{.op = OpKind::matmul,
                                              .name = "mm",
                                              .inputs = {a, b},
                                              .outputs = {y},
                                              .attrs = MatmulAttrs{false, true}});
    EXPECT_TRUE(backend->supports(graph, graph.node(id)));
    auto made = backend->make_kernel(graph, id);
    ASSERT_TRUE(made.is_ok()) << made.message();
    kernel = std::move(made.value());
  }
  // a b^T with a = [1 2 3; 4 5 6], b = [1 0 -1; 1 1 1].
  std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {1, 0, -1, 1, 1, 1}, y(4, std::nanf(""));
  std::vector<void*> ins = {a.data(), b.data()}, outs = {y.data()};
  KernelArgs args;
  args.inputs = ins;
  args.outputs = outs;
  kernel->run(args);
  expect_near(y, std::vector<float>{-2, 6, -2, 15});
}

}  // namespace
}  // namespace memfit
