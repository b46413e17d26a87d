// conv3d and the transposed convolutions beyond what the generic op tests see:
// hand-computed values, direct formulas written differently from the kernels
// (a scatter from each input element, where the kernels gather), agreement
// with the 2-D ops at depth 1, the CPU backend on shapes large enough for
// oneDNN's vectorized kernels, shape errors, and the builder's layers.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "memfit/builder.h"
#include "test_util.h"

namespace memfit {
namespace {

using testing::Words;
using Values = std::vector<float>;

// Runs one node of `op` on `backend` with the given input data.
std::vector<Values> run_op(const Backend& backend, OpKind op, const std::vector<Shape>& shapes,
                           const std::vector<Values>& values, const Attrs& attrs) {
  OpExample ex;
  for (const Shape& s : shapes) ex.inputs.push_back({s, DType::f32});
  ex.attrs = attrs;
  std::vector<Words> data;
  for (const Values& v : values) {
    Words words;
    for (float f : v) words.push_back(testing::as_word(f));
    data.push_back(std::move(words));
  }
  auto compiled = Executable::compile(testing::single_node_graph(op, ex), backend, ExecOptions{.poison = true});
  EXPECT_TRUE(compiled.is_ok()) << compiled.message();
  auto exe = std::move(compiled).value();
  return testing::run_outputs(*exe, data);
}

Values random_values(const Shape& shape, uint64_t seed) {
  return testing::random_normal(static_cast<size_t>(num_elements(shape)), seed);
}

void expect_close(const std::vector<double>& expected, const Values& actual, double tol,
                  const std::string& what) {
  ASSERT_EQ(expected.size(), actual.size()) << what;
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(expected[i], actual[i], tol * (1 + std::abs(expected[i])))
        << what << "[" << i << "]";
  }
}

void expect_close(const Values& expected, const Values& actual, double tol,
                  const std::string& what) {
  expect_close(std::vector<double>(expected.begin(), expected.end()), actual, tol, what);
}

// --- Hand-computed values ------------------------------------------------------

// x = [1 2; 3 4] and a 2x2 kernel w.
TEST(ConvTranspose, HandComputed) {
  const auto reference = make_reference_backend();
  const Shape x{1, 1, 2, 2}, w{1, 1, 2, 2};
  const Values xv{1, 2, 3, 4}, ones{1, 1, 1, 1}, wv{1, 2, 3, 4};
  // Stride 1: each x element adds a 2x2 block of ones at its own position.
  const ConvTranspose2dAttrs plain{};
  expect_close(Values{1, 3, 2, 4, 10, 6, 3, 7, 4},
               run_op(*reference, OpKind::conv_transpose2d, {x, w}, {xv, ones}, plain)[0], 1e-6,
               "stride 1");
  // Stride 2: disjoint 2x2 blocks, plus the bias.
  const ConvTranspose2dAttrs strided{{2, 2}, {0, 0}, {0, 0}, {1, 1}, 1};
  expect_close(
      Values{1.5f, 1.5f, 2.5f, 2.5f, 1.5f, 1.5f, 2.5f, 2.5f,  //
             3.5f, 3.5f, 4.5f, 4.5f, 3.5f, 3.5f, 4.5f, 4.5f},
      run_op(*reference, OpKind::conv_transpose2d, {x, w, {1}}, {xv, ones, {0.5f}}, strided)[0],
      1e-6, "stride 2, bias");
  // Pad 1 takes one row and column off each side of the 4x4 result above;
  // output_padding 1 gives back the last ones: rows and columns 1..3 of it.
  const ConvTranspose2dAttrs cropped{{2, 2}, {1, 1}, {1, 1}, {1, 1}, 1};
  expect_close(Values{1, 2, 2, 3, 4, 4, 3, 4, 4},
               run_op(*reference, OpKind::conv_transpose2d, {x, w}, {xv, ones}, cropped)[0], 1e-6,
               "pad 1, output_padding 1");
  // Stride 1, dilation 2: output row r = j + 2 k has exactly one (j, k), so
  // y[r][c] = x[j(r)][j(c)] w[k(r)][k(c)]; output_padding 1 (allowed as it is
  // below the dilation) appends a row and a column that no input reaches.
  const ConvTranspose2dAttrs dilated{{1, 1}, {0, 0}, {1, 1}, {2, 2}, 1};
  expect_close(Values{1, 2, 2, 4, 0, 3, 4, 6, 8, 0, 3, 6, 4, 8, 0, 9, 12, 12, 16, 0, 0, 0, 0, 0, 0},
               run_op(*reference, OpKind::conv_transpose2d, {x, w}, {xv, wv}, dilated)[0], 1e-6,
               "dilation 2, output_padding 1");
}

// --- Direct formulas -----------------------------------------------------------

// Sizes as (N, C, D, H, W); a 2-D shape gets D = 1 and a 2-D attribute the
// depth values (stride 1, pad 0, dilation 1, output_padding 0).
Shape as_3d(const Shape& s) { return s.size() == 5 ? s : Shape{s[0], s[1], 1, s[2], s[3]}; }
template <size_t R>
std::array<int64_t, 3> as_3d(const std::array<int64_t, R>& a, int64_t depth) {
  if constexpr (R == 2) {
    return {depth, a[0], a[1]};
  } else {
    return a;
  }
}

struct Window {
  std::array<int64_t, 3> stride, pad, dilation;
  int64_t groups;
};

template <class A>
Window window_of(const A& a) {
  return {as_3d(a.stride, 1), as_3d(a.pad, 0), as_3d(a.dilation, 1), a.groups};
}

// Calls fn(small position, tap, big position) for every small-side position
// q, kernel tap t and big-side position p = q stride - pad + t dilation that
// lies inside the big side. A convolution reads big and writes small; a
// transposed convolution reads small and writes big.
template <class Fn>
void for_each_tap(const Shape& big, const Shape& small, const Shape& k, const Window& win, Fn fn) {
  for (int64_t q0 = 0; q0 < small[2]; ++q0)
    for (int64_t q1 = 0; q1 < small[3]; ++q1)
      for (int64_t q2 = 0; q2 < small[4]; ++q2)
        for (int64_t t0 = 0; t0 < k[2]; ++t0)
          for (int64_t t1 = 0; t1 < k[3]; ++t1)
            for (int64_t t2 = 0; t2 < k[4]; ++t2) {
              const std::array<int64_t, 3> q{q0, q1, q2}, t{t0, t1, t2};
              std::array<int64_t, 3> p{};
              bool inside = true;
              for (size_t i = 0; i < 3; ++i) {
                p[i] = q[i] * win.stride[i] - win.pad[i] + t[i] * win.dilation[i];
                inside = inside && p[i] >= 0 && p[i] < big[2 + i];
              }
              if (!inside) continue;
              auto spatial = [](const Shape& s, const std::array<int64_t, 3>& i) {
                return (i[0] * s[3] + i[1]) * s[4] + i[2];
              };
              fn(spatial(small, q), spatial(k, t), spatial(big, p));
            }
}

// conv: x (N, C, S...) big, w (O, C/g, K...) -> y (N, O, OS...) small.
std::vector<double> direct_conv(const Shape& x5, const Shape& w5, const Shape& y5,
                                const Window& win, const Values& x, const Values& w) {
  std::vector<double> y(static_cast<size_t>(num_elements(y5)), 0.0);
  const int64_t cg = w5[1], og = w5[0] / win.groups;
  const int64_t xs = x5[2] * x5[3] * x5[4], ys = y5[2] * y5[3] * y5[4], ks = w5[2] * w5[3] * w5[4];
  for (int64_t n = 0; n < x5[0]; ++n)
    for (int64_t o = 0; o < w5[0]; ++o)
      for (int64_t c = 0; c < cg; ++c)
        for_each_tap(x5, y5, w5, win, [&](int64_t q, int64_t t, int64_t p) {
          const int64_t ci = (o / og) * cg + c;
          y[static_cast<size_t>((n * w5[0] + o) * ys + q)] +=
              static_cast<double>(x[static_cast<size_t>((n * x5[1] + ci) * xs + p)]) *
              w[static_cast<size_t>((o * cg + c) * ks + t)];
        });
  return y;
}

// conv_transpose: x (N, C, S...) small, w (C, O/g, K...), b (O) -> y (N, O, S'...) big,
// PyTorch's definition: every x[n, c, q] w[c, o, t] is added at p.
std::vector<double> direct_conv_transpose(const Shape& x5, const Shape& w5, const Shape& y5,
                                          const Window& win, const Values& x, const Values& w,
                                          const Values& b) {
  const int64_t og = w5[1], cg = w5[0] / win.groups, o_all = y5[1];
  const int64_t xs = x5[2] * x5[3] * x5[4], ys = y5[2] * y5[3] * y5[4], ks = w5[2] * w5[3] * w5[4];
  std::vector<double> y(static_cast<size_t>(num_elements(y5)), 0.0);
  for (size_t i = 0; i < y.size(); ++i) y[i] = b.empty() ? 0.0 : b[(i / ys) % o_all];
  for (int64_t n = 0; n < x5[0]; ++n)
    for (int64_t c = 0; c < x5[1]; ++c)
      for (int64_t o = 0; o < og; ++o)
        for_each_tap(y5, x5, w5, win, [&](int64_t q, int64_t t, int64_t p) {
          const int64_t oi = (c / cg) * og + o;
          y[static_cast<size_t>((n * o_all + oi) * ys + p)] +=
              static_cast<double>(x[static_cast<size_t>((n * x5[1] + c) * xs + q)]) *
              w[static_cast<size_t>((c * og + o) * ks + t)];
        });
  return y;
}

template <class A>
struct Case {
  Shape x, w;
  A attrs;
  bool bias;
};

// The output shape, from shape inference.
Shape inferred(OpKind op, const std::vector<Shape>& shapes, const Attrs& attrs) {
  std::vector<TensorType> in;
  for (const Shape& s : shapes) in.push_back({s, DType::f32});
  auto out = infer_types(op, in, attrs);
  EXPECT_TRUE(out.is_ok()) << out.message();
  return out.is_ok() ? (*out)[0].shape : Shape{};
}

template <class A>
void check_transpose_cases(OpKind op, const std::vector<Case<A>>& cases) {
  const auto reference = make_reference_backend();
  const auto cpu = make_cpu_backend();
  uint64_t seed = 100;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case<A>& k = cases[i];
    const Shape b_shape{k.w[1] * k.attrs.groups};
    std::vector<Shape> shapes{k.x, k.w};
    if (k.bias) shapes.push_back(b_shape);
    const Shape y = inferred(op, shapes, k.attrs);
    std::vector<Values> values{random_values(k.x, ++seed), random_values(k.w, ++seed)};
    if (k.bias) values.push_back(random_values(b_shape, ++seed));
    const std::vector<double> want =
        direct_conv_transpose(as_3d(k.x), as_3d(k.w), as_3d(y), window_of(k.attrs), values[0],
                              values[1], k.bias ? values[2] : Values{});
    const std::string what = std::string(op_name(op)) + " case " + std::to_string(i);
    expect_close(want, run_op(*reference, op, shapes, values, k.attrs)[0], 1e-5, what);
    expect_close(want, run_op(*cpu, op, shapes, values, k.attrs)[0], 1e-4, what + " on cpu");
  }
}

TEST(ConvTranspose, TwoDMatchesPyTorchsDefinition) {
  using A = ConvTranspose2dAttrs;
  check_transpose_cases<A>(
      OpKind::conv_transpose2d,
      {
          {{2, 3, 4, 5}, {3, 4, 3, 3}, A{{1, 1}, {0, 0}, {0, 0}, {1, 1}, 1}, true},
          {{2, 3, 4, 5}, {3, 4, 3, 3}, A{{2, 2}, {1, 1}, {1, 1}, {1, 1}, 1}, false},
          {{1, 4, 5, 3}, {4, 3, 2, 3}, A{{3, 2}, {2, 0}, {2, 1}, {1, 2}, 2}, true},
          {{1, 6, 3, 4}, {6, 1, 3, 3}, A{{1, 2}, {1, 1}, {1, 1}, {3, 1}, 6}, true},  // depthwise
          {{2, 16, 6, 6}, {16, 8, 4, 4}, A{{2, 2}, {1, 1}, {0, 0}, {1, 1}, 1}, true},
          {{1, 32, 5, 5}, {32, 8, 3, 3}, A{{2, 2}, {1, 1}, {1, 1}, {1, 1}, 2}, false},
      });
}

TEST(ConvTranspose, ThreeDMatchesPyTorchsDefinition) {
  using A = ConvTranspose3dAttrs;
  check_transpose_cases<A>(OpKind::conv_transpose3d,
                           {
                               {{1, 2, 3, 4, 3},
                                {2, 3, 2, 2, 2},
                                A{{2, 2, 2}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, 1},
                                true},
                               {{2, 4, 2, 3, 3},
                                {4, 2, 3, 2, 3},
                                A{{1, 2, 3}, {1, 0, 1}, {1, 1, 2}, {2, 1, 1}, 2},
                                false},
                               {{1, 16, 3, 4, 4},
                                {16, 16, 2, 2, 2},
                                A{{2, 2, 2}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, 1},
                                true},
                           });
}

TEST(Conv3d, MatchesDirectFormula) {
  const auto reference = make_reference_backend();
  const auto cpu = make_cpu_backend();
  const std::vector<Case<Conv3dAttrs>> cases = {
      {{2, 3, 4, 5, 4}, {4, 3, 3, 2, 3}, {{1, 1, 1}, {1, 0, 1}, {1, 1, 1}, 1}, false},
      {{1, 4, 6, 5, 7}, {6, 2, 2, 3, 2}, {{2, 1, 3}, {0, 2, 1}, {2, 1, 2}, 2}, false},
      {{2, 16, 5, 6, 6}, {32, 16, 3, 3, 3}, {{1, 2, 1}, {1, 1, 1}, {1, 1, 1}, 1}, false},
  };
  uint64_t seed = 200;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& k = cases[i];
    const Shape y = inferred(OpKind::conv3d, {k.x, k.w}, k.attrs);
    const std::vector<Values> values{random_values(k.x, ++seed), random_values(k.w, ++seed)};
    const std::vector<double> want =
        direct_conv(k.x, k.w, y, window_of(k.attrs), values[0], values[1]);
    const std::string what = "conv3d case " + std::to_string(i);
    expect_close(want, run_op(*reference, OpKind::conv3d, {k.x, k.w}, values, k.attrs)[0], 1e-5,
                 what);
    expect_close(want, run_op(*cpu, OpKind::conv3d, {k.x, k.w}, values, k.attrs)[0], 1e-4,
                 what + " on cpu");
  }
}

// --- The 3-D ops at depth 1 are the 2-D ones -------------------------------------

Shape with_depth_one(const Shape& s) { return {s[0], s[1], 1, s[2], s[3]}; }

TEST(Conv3d, DepthOneEqualsConv2d) {
  const Conv2dAttrs a2{{2, 1}, {1, 0}, {1, 2}, 2};
  const Conv3dAttrs a3{{1, 2, 1}, {0, 1, 0}, {1, 1, 2}, 2};
  const Shape x{2, 4, 7, 6}, w{6, 2, 3, 2}, b{6};
  const Shape y = inferred(OpKind::conv2d, {x, w}, a2);
  const Values xv = random_values(x, 1), wv = random_values(w, 2), bv = random_values(b, 3);
  const Values dy = random_values(y, 4);
  const Conv2dGradAttrs gi2{a2.stride, a2.pad, a2.dilation, 2, x, false};
  const Conv2dGradAttrs gw2{a2.stride, a2.pad, a2.dilation, 2, w, true};
  const Conv3dGradAttrs gi3{a3.stride, a3.pad, a3.dilation, 2, with_depth_one(x), false};
  const Conv3dGradAttrs gw3{a3.stride, a3.pad, a3.dilation, 2, with_depth_one(w), true};
  for (const auto& backend : {make_reference_backend(), make_cpu_backend()}) {
    const std::string on = " on " + std::string(backend->name());
    expect_close(run_op(*backend, OpKind::conv2d, {x, w, b}, {xv, wv, bv}, a2)[0],
                 run_op(*backend, OpKind::conv3d, {with_depth_one(x), with_depth_one(w), b},
                        {xv, wv, bv}, a3)[0],
                 1e-5, "conv3d" + on);
    expect_close(run_op(*backend, OpKind::conv2d_grad_input, {y, w}, {dy, wv}, gi2)[0],
                 run_op(*backend, OpKind::conv3d_grad_input, {with_depth_one(y), with_depth_one(w)},
                        {dy, wv}, gi3)[0],
                 1e-5, "conv3d_grad_input" + on);
    const auto dw2 = run_op(*backend, OpKind::conv2d_grad_weight, {y, x}, {dy, xv}, gw2);
    const auto dw3 = run_op(*backend, OpKind::conv3d_grad_weight,
                            {with_depth_one(y), with_depth_one(x)}, {dy, xv}, gw3);
    ASSERT_EQ(dw3.size(), 2u);
    expect_close(dw2[0], dw3[0], 1e-5, "conv3d_grad_weight dw" + on);
    expect_close(dw2[1], dw3[1], 1e-5, "conv3d_grad_weight db" + on);
  }
}

TEST(ConvTranspose, DepthOneEqualsTwoD) {
  const ConvTranspose2dAttrs a2{{2, 1}, {1, 0}, {1, 1}, {1, 2}, 2};
  const ConvTranspose3dAttrs a3{{1, 2, 1}, {0, 1, 0}, {0, 1, 1}, {1, 1, 2}, 2};
  const Shape x{2, 4, 3, 5}, w{4, 3, 3, 2}, b{6};
  const Values xv = random_values(x, 5), wv = random_values(w, 6), bv = random_values(b, 7);
  for (const auto& backend : {make_reference_backend(), make_cpu_backend()}) {
    expect_close(run_op(*backend, OpKind::conv_transpose2d, {x, w, b}, {xv, wv, bv}, a2)[0],
                 run_op(*backend, OpKind::conv_transpose3d,
                        {with_depth_one(x), with_depth_one(w), b}, {xv, wv, bv}, a3)[0],
                 1e-5, "conv_transpose3d on " + std::string(backend->name()));
  }
}

// oneDNN has no negative padding, so a transposed convolution whose
// output_padding reaches pad + stride (possible with a larger dilation) runs on
// the reference kernel; a shorter one runs on oneDNN.
TEST(ConvTranspose, CpuBackendLeavesWhatOneDnnCannotExpressToTheReference) {
  const auto cpu = make_cpu_backend();
  const std::vector<Shape> shapes{{1, 2, 4, 4}, {2, 3, 2, 2}};
  const auto backend_of = [&](const ConvTranspose2dAttrs& a) {
    OpExample ex;
    for (const Shape& s : shapes) ex.inputs.push_back({s, DType::f32});
    ex.attrs = a;
    return Executable::compile(testing::single_node_graph(OpKind::conv_transpose2d, ex), *cpu, ExecOptions{.poison = true})
        .value()
        ->node_backends()[0];
  };
  EXPECT_EQ(backend_of({{1, 1}, {0, 0}, {1, 0}, {2, 1}, 1}), "reference");
  EXPECT_EQ(backend_of({{1, 1}, {1, 0}, {1, 0}, {2, 1}, 1}), "cpu");
  EXPECT_EQ(backend_of({{2, 2}, {0, 0}, {1, 1}, {1, 1}, 1}), "cpu");
  const ConvTranspose2dAttrs a{{1, 2}, {0, 1}, {1, 1}, {2, 1}, 1};
  const std::vector<Values> values{random_values(shapes[0], 8), random_values(shapes[1], 9)};
  expect_close(run_op(*make_reference_backend(), OpKind::conv_transpose2d, shapes, values, a)[0],
               run_op(*cpu, OpKind::conv_transpose2d, shapes, values, a)[0], 1e-5,
               "output_padding >= pad + stride");
}

// --- Shape errors ---------------------------------------------------------------

std::string infer_error(OpKind op, const std::vector<Shape>& shapes, const Attrs& attrs) {
  std::vector<TensorType> in;
  for (const Shape& s : shapes) in.push_back({s, DType::f32});
  auto out = infer_types(op, in, attrs);
  return out.is_ok() ? std::string("no error") : out.message();
}

void expect_error(const std::string& message, const std::string& part) {
  EXPECT_NE(message.find(part), std::string::npos) << message;
}

TEST(ConvTranspose, BadShapesAndAttributesAreRefused) {
  using A = ConvTranspose2dAttrs;
  const OpKind t2 = OpKind::conv_transpose2d;
  const Shape x{1, 4, 5, 5};
  // output_padding must stay below the stride or the dilation.
  expect_error(infer_error(t2, {x, {4, 2, 3, 3}}, A{{2, 2}, {0, 0}, {2, 0}, {1, 1}, 1}),
               "output_padding");
  expect_error(infer_error(t2, {x, {4, 2, 3, 3}}, A{{1, 1}, {0, 0}, {0, 1}, {1, 1}, 1}),
               "output_padding");
  EXPECT_EQ(infer_error(t2, {x, {4, 2, 3, 3}}, A{{1, 1}, {0, 0}, {0, 1}, {1, 2}, 1}), "no error");
  // w is (C, O/groups, K...): its first dimension is the input channels.
  expect_error(infer_error(t2, {x, {2, 4, 3, 3}}, A{}), "one row per input channel");
  expect_error(infer_error(t2, {x, {4, 2, 3, 3}}, A{{1, 1}, {0, 0}, {0, 0}, {1, 1}, 3}),
               "groups (3)");
  expect_error(infer_error(t2, {x, {4, 2, 3, 3}, {2}}, A{{1, 1}, {0, 0}, {0, 0}, {1, 1}, 2}),
               "b must have one element per output channel (4)");
  expect_error(infer_error(t2, {x, {4, 2, 1, 1}}, A{{1, 1}, {3, 3}, {0, 0}, {1, 1}, 1}),
               "leaves no output");
  expect_error(infer_error(t2, {x, {4, 2, 3, 3}}, A{{0, 1}, {0, 0}, {0, 0}, {1, 1}, 1}),
               "stride and dilation must be positive");
  expect_error(infer_error(OpKind::conv_transpose3d, {x, {4, 2, 3, 3}}, ConvTranspose3dAttrs{}),
               "x (N, C, D, H, W) must have rank 5");
}

TEST(Conv3d, BadShapesAndAttributesAreRefused) {
  const OpKind c3 = OpKind::conv3d;
  const Shape x{1, 4, 5, 5, 5};
  expect_error(infer_error(c3, {{1, 4, 5, 5}, {2, 4, 3, 3}}, Conv3dAttrs{}),
               "x (N, C, D, H, W) must have rank 5");
  expect_error(infer_error(c3, {x, {2, 3, 3, 3, 3}}, Conv3dAttrs{}), "does not match 4 input");
  expect_error(infer_error(c3, {x, {2, 4, 6, 3, 3}}, Conv3dAttrs{}), "does not fit");
  expect_error(infer_error(c3, {x, {2, 4, 3, 3, 3}, {3}}, Conv3dAttrs{}),
               "b must have one element per output channel");
  expect_error(infer_error(OpKind::conv3d_grad_input, {{1, 2, 2, 3, 3}, {2, 4, 3, 3, 3}},
                           Conv3dGradAttrs{{1, 1, 1}, {0, 0, 0}, {1, 1, 1}, 1, x, false}),
               "dy [1,2,2,3,3] should be [1,2,3,3,3]");
}

// --- Builder layers --------------------------------------------------------------

TEST(ConvLayers, BuilderParametersHavePyTorchsShapesAndBounds) {
  ModelBuilder b("conv-layers", true);
  ValueId x = b.input("volumes", {2, 3, 4, 8, 8});
  x = b.conv3d("enc", x, 8, 3, 1, 1);        // (2, 8, 4, 8, 8)
  x = b.conv_transpose3d("up", x, 4, 2, 2);  // (2, 4, 8, 16, 16)
  EXPECT_EQ(b.shape(x), (Shape{2, 4, 8, 16, 16}));
  x = b.conv3d("narrow", x, 2, 1, 1, 0, false);  // (2, 2, 8, 16, 16)
  x = b.op(OpKind::reshape, {x}, ShapeAttrs{{2, 16, 16, 16}}, "to_2d");
  x = b.conv_transpose2d("up2", x, 5, 3, 2, 1);  // (2, 5, 31, 31)
  EXPECT_EQ(b.shape(x), (Shape{2, 5, 31, 31}));
  x = b.conv_transpose2d("plain", x, 3, 1, 1, 0, false);  // (2, 3, 31, 31)
  b.cross_entropy(b.linear("fc", b.flatten(x), 3), b.labels(2));
  auto model = b.finish();
  ASSERT_TRUE(model.is_ok()) << model.message();

  struct Param {
    std::string name;
    Shape shape;
    double fan_in;
  };
  // Transposed weights are (C, O, K...), and PyTorch's fan_in is O K^R.
  const std::vector<Param> expected = {
      {"enc.weight", {8, 3, 3, 3, 3}, 3 * 27},
      {"enc.bias", {8}, 3 * 27},
      {"up.weight", {8, 4, 2, 2, 2}, 4 * 8},
      {"up.bias", {4}, 4 * 8},
      {"narrow.weight", {2, 4, 1, 1, 1}, 4},
      {"up2.weight", {16, 5, 3, 3}, 5 * 9},
      {"up2.bias", {5}, 5 * 9},
      {"plain.weight", {5, 3, 1, 1}, 3},
      {"fc.weight", {3, 3 * 31 * 31}, 3 * 31 * 31},
      {"fc.bias", {3}, 3 * 31 * 31},
  };
  ASSERT_EQ(model->params.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const Value& v = model->graph.value(model->params[i]);
    EXPECT_EQ(v.name, expected[i].name);
    EXPECT_EQ(v.type.shape, expected[i].shape) << expected[i].name;
    const Init& init = model->init.at(expected[i].name);
    EXPECT_EQ(init.kind, Init::Kind::uniform) << expected[i].name;
    EXPECT_FLOAT_EQ(init.bound, static_cast<float>(1 / std::sqrt(expected[i].fan_in)))
        << expected[i].name;
  }
}

}  // namespace
}  // namespace memfit
