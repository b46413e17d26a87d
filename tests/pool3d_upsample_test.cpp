// max_pool3d, avg_pool3d and upsample on both backends against numbers worked
// out by hand (upsampling with PyTorch's align_corners=false formula: source
// coordinate (o + 0.5) / s - 0.5, clamped below at 0), against the 2-D pooling
// ops where the depth is 1, and their shape errors and builder methods.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "memfit/builder.h"
#include "test_util.h"

namespace memfit {
namespace {

using testing::Words;

struct Input {
  Shape shape;
  std::vector<float> values;
};

Words words(const std::vector<float>& values) {
  Words w;
  for (float v : values) w.push_back(testing::as_word(v));
  return w;
}

// The one output of a one-node graph of `op` on the backend.
std::vector<float> run_op(const Backend& backend, OpKind op, const Attrs& attrs,
                          const std::vector<Input>& inputs) {
  OpExample example;
  example.attrs = attrs;
  std::vector<Words> data;
  for (const Input& in : inputs) {
    example.inputs.push_back(TensorType{in.shape, DType::f32});
    data.push_back(words(in.values));
  }
  const Graph graph = testing::single_node_graph(op, example);
  auto exe = Executable::compile(graph, backend, ExecOptions{.poison = true}).value();
  return testing::run_outputs(*exe, data).at(0);
}

// Runs on the reference and the CPU backend and checks both against `want`.
void expect_op(OpKind op, const Attrs& attrs, const std::vector<Input>& inputs,
               const std::vector<float>& want) {
  for (const auto& backend : {make_reference_backend(), make_cpu_backend()}) {
    SCOPED_TRACE(std::string(op_name(op)) + " on " + std::string(backend->name()));
    const std::vector<float> got = run_op(*backend, op, attrs, inputs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << "element " << i;
  }
}

std::vector<float> iota(size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = static_cast<float>(i + 1);
  return v;
}

// x = [1 2; 3 4] doubled: each element becomes a 2 x 2 block.
TEST(Upsample, Nearest2x) {
  const UpsampleAttrs a{{2, 2}, false, {}};
  expect_op(OpKind::upsample, a, {{{1, 1, 2, 2}, {1, 2, 3, 4}}},
            {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
  // The gradient sums each block of dy = 1..16: 1+2+5+6, 3+4+7+8, ...
  expect_op(OpKind::upsample_grad, UpsampleAttrs{{2, 2}, false, {1, 1, 2, 2}},
            {{{1, 1, 4, 4}, iota(16)}}, {14, 22, 46, 54});
}

// Along a dimension of 2 with factor 2 the coordinates are 0 (clamped from
// -0.25), 0.25, 0.75 and 1.25, which read x0, 0.75 x0 + 0.25 x1,
// 0.25 x0 + 0.75 x1 and x1 (the upper neighbour clamped to x1). The rows of
// [1 2; 3 4] become [1 1.25 1.75 2] and [3 3.25 3.75 4]; the columns mix them alike.
TEST(Upsample, Bilinear2x) {
  expect_op(
      OpKind::upsample, UpsampleAttrs{{2, 2}, true, {}}, {{{1, 1, 2, 2}, {1, 2, 3, 4}}},
      {1, 1.25f, 1.75f, 2, 1.5f, 1.75f, 2.25f, 2.5f, 2.5f, 2.75f, 3.25f, 3.5f, 3, 3.25f, 3.75f, 4});
  // dy = 16 at (1, 2) only: rows weigh (0.75, 0.25), columns (0.25, 0.75), so
  // dx = 16 [0.1875 0.5625; 0.0625 0.1875].
  std::vector<float> dy(16, 0.0f);
  dy[1 * 4 + 2] = 16;
  expect_op(OpKind::upsample_grad, UpsampleAttrs{{2, 2}, true, {1, 1, 2, 2}}, {{{1, 1, 4, 4}, dy}},
            {3, 9, 1, 3});
}

// Factor 3 over x = [0 3]: coordinates 0 (clamped), 0 (clamped), 1/3, 2/3, 1, 4/3 (clamped).
TEST(Upsample, Linear1dFactor3) {
  expect_op(OpKind::upsample, UpsampleAttrs{{3}, true, {}}, {{{1, 1, 2}, {0, 3}}},
            {0, 0, 1, 2, 3, 3});
  expect_op(OpKind::upsample, UpsampleAttrs{{3}, false, {}}, {{{1, 1, 2}, {0, 3}}},
            {0, 0, 0, 3, 3, 3});
}

// Trilinear interpolation reproduces a linear function x = 4 d + 2 h + w at the
// clamped coordinates c = (0, 0.25, 0.75, 1) of each dimension.
TEST(Upsample, TrilinearOfALinearFunction) {
  std::vector<float> x;
  for (int d = 0; d < 2; ++d) {
    for (int h = 0; h < 2; ++h) {
      for (int w = 0; w < 2; ++w) x.push_back(static_cast<float>(4 * d + 2 * h + w));
    }
  }
  const float c[] = {0, 0.25f, 0.75f, 1};
  std::vector<float> want;
  for (float cd : c) {
    for (float ch : c) {
      for (float cw : c) want.push_back(4 * cd + 2 * ch + cw);
    }
  }
  expect_op(OpKind::upsample, UpsampleAttrs{{2, 2, 2}, true, {}}, {{{1, 1, 2, 2, 2}, x}}, want);
}

// Linear with factor 1 reads each element with weight 1: the identity.
TEST(Upsample, FactorOneIsIdentity) {
  const std::vector<float> x = testing::random_normal(2 * 3 * 4 * 5, 7);
  for (const bool linear : {false, true}) {
    expect_op(OpKind::upsample, UpsampleAttrs{{1, 1}, linear, {}}, {{{2, 3, 4, 5}, x}}, x);
  }
}

// Depth 0 holds the 2-D example of max_pool2d's tie test; depth 1 is zero but
// for a 6 and a 7. Windows (kernel 2, stride 2): max 4 at (0,1,0); 6 at
// (1,0,2); 0, first at (1,2,0) in (d, h, w) order; 7, first at (0,2,2).
TEST(Pool3d, MaxAndTieRule) {
  std::vector<float> x = {1, 2, 5, 3, 4, 0, 1, 1, -1, -2, 7, 7, -3, -4, 7, 2,  // d = 0
                          0, 0, 6, 0, 0, 0, 0, 0, 0,  0,  0, 0, 0,  0,  7, 0};
  const Pool3dAttrs a{{2, 2, 2}, {2, 2, 2}, {0, 0, 0}, false};
  expect_op(OpKind::max_pool3d, a, {{{1, 1, 2, 4, 4}, x}}, {4, 6, 0, 7});
  std::vector<float> dx(32, 0.0f);
  dx[0 * 16 + 1 * 4 + 0] = 1;
  dx[1 * 16 + 0 * 4 + 2] = 2;
  dx[1 * 16 + 2 * 4 + 0] = 3;
  dx[0 * 16 + 2 * 4 + 2] = 4;
  expect_op(OpKind::max_pool3d_grad, a, {{{1, 1, 1, 2, 2}, {1, 2, 3, 4}}, {{1, 1, 2, 4, 4}, x}},
            dx);
}

// Ones (2 x 2 x 2), kernel 2, stride 1, pad 1: a window holds n(od) n(oh) n(ow)
// inputs with n = (1, 2, 1), so the average is 1 without padding in the
// divisor and n n n / 8 with it. Each input lies in 8 windows: with dy = 1 its
// gradient is 8 / 8 = 1 with padding, and (1 + 1/2)^3 without.
TEST(Pool3d, AvgWithPadding) {
  const std::vector<float> ones(8, 1.0f);
  const std::vector<float> n = {1, 2, 1};
  std::vector<float> with_pad;
  for (float a : n) {
    for (float b : n) {
      for (float c : n) with_pad.push_back(a * b * c / 8);
    }
  }
  Pool3dAttrs a{{2, 2, 2}, {1, 1, 1}, {1, 1, 1}, false};
  expect_op(OpKind::avg_pool3d, a, {{{1, 1, 2, 2, 2}, ones}}, std::vector<float>(27, 1.0f));
  a.include_pad = true;
  expect_op(OpKind::avg_pool3d, a, {{{1, 1, 2, 2, 2}, ones}}, with_pad);

  Pool3dGradAttrs g{a.kernel, a.stride, a.pad, false, {1, 1, 2, 2, 2}};
  const std::vector<float> dy(27, 1.0f);
  expect_op(OpKind::avg_pool3d_grad, g, {{{1, 1, 3, 3, 3}, dy}}, std::vector<float>(8, 3.375f));
  g.include_pad = true;
  expect_op(OpKind::avg_pool3d_grad, g, {{{1, 1, 3, 3, 3}, dy}}, std::vector<float>(8, 1.0f));
}

// With depth 1 and a window of depth 1, the 3-D ops are the 2-D ones.
TEST(Pool3d, DepthOneMatches2d) {
  const Shape x2{2, 3, 7, 6};
  const Shape x3{2, 3, 1, 7, 6};
  const std::vector<float> x = testing::random_normal(2 * 3 * 7 * 6, 11);
  for (const bool include_pad : {false, true}) {
    const Pool2dAttrs a2{{3, 3}, {2, 2}, {1, 1}, include_pad};
    const Pool3dAttrs a3{{1, 3, 3}, {1, 2, 2}, {0, 1, 1}, include_pad};
    const Shape y2{2, 3, 4, 3};
    const Shape y3{2, 3, 1, 4, 3};
    const std::vector<float> dy = testing::random_normal(2 * 3 * 4 * 3, 12);
    for (const auto& backend : {make_reference_backend(), make_cpu_backend()}) {
      SCOPED_TRACE(std::string(backend->name()) + (include_pad ? ", include_pad" : ""));
      const Backend& b = *backend;
      EXPECT_EQ(run_op(b, OpKind::max_pool3d, a3, {{x3, x}}),
                run_op(b, OpKind::max_pool2d, a2, {{x2, x}}));
      EXPECT_EQ(run_op(b, OpKind::max_pool3d_grad, a3, {{y3, dy}, {x3, x}}),
                run_op(b, OpKind::max_pool2d_grad, a2, {{y2, dy}, {x2, x}}));
      const std::vector<float> avg3 = run_op(b, OpKind::avg_pool3d, a3, {{x3, x}});
      const std::vector<float> avg2 = run_op(b, OpKind::avg_pool2d, a2, {{x2, x}});
      const std::vector<float> grad3 =
          run_op(b, OpKind::avg_pool3d_grad,
                 Pool3dGradAttrs{a3.kernel, a3.stride, a3.pad, include_pad, x3}, {{y3, dy}});
      const std::vector<float> grad2 =
          run_op(b, OpKind::avg_pool2d_grad,
                 Pool2dGradAttrs{a2.kernel, a2.stride, a2.pad, include_pad, x2}, {{y2, dy}});
      for (size_t i = 0; i < avg2.size(); ++i) EXPECT_NEAR(avg3[i], avg2[i], 1e-6) << i;
      for (size_t i = 0; i < grad2.size(); ++i) EXPECT_NEAR(grad3[i], grad2[i], 1e-6) << i;
    }
  }
}

// The error of shape inference for one node, or "" when it is accepted.
std::string infer_error(OpKind op, const std::vector<Shape>& inputs, const Attrs& attrs) {
  std::vector<TensorType> types;
  for (const Shape& s : inputs) types.push_back(TensorType{s, DType::f32});
  auto result = infer_types(op, types, attrs);
  return result.is_ok() ? "" : result.message();
}

TEST(Pool3d, ShapeErrors) {
  const Pool3dAttrs a;
  EXPECT_NE(infer_error(OpKind::max_pool3d, {{1, 2, 4, 4}}, a).find("rank 5"), std::string::npos);
  Pool3dAttrs big_pad = a;
  big_pad.pad = {0, 2, 0};
  EXPECT_NE(infer_error(OpKind::avg_pool3d, {{1, 2, 4, 4, 4}}, big_pad).find("smaller than"),
            std::string::npos);
  EXPECT_NE(infer_error(OpKind::max_pool3d, {{1, 2, 1, 4, 4}}, a).find("does not fit"),
            std::string::npos);
  EXPECT_NE(infer_error(OpKind::max_pool3d_grad, {{1, 2, 2, 2, 1}, {1, 2, 4, 4, 4}}, a)
                .find("should be [1,2,2,2,2]"),
            std::string::npos);
  EXPECT_EQ(infer_error(OpKind::max_pool3d, {{1, 2, 4, 6, 8}}, a), "");
  // A window past the end by less than the stride still does not fit (no
  // truncation of a negative span to one output), in 2-D as in 3-D.
  EXPECT_NE(infer_error(OpKind::max_pool2d, {{1, 2, 1, 4}}, Pool2dAttrs{}).find("does not fit"),
            std::string::npos);
}

TEST(Upsample, ShapeErrors) {
  const auto error = [](const Shape& x, const UpsampleAttrs& a) {
    return infer_error(OpKind::upsample, {x}, a);
  };
  EXPECT_NE(error({4, 5}, {{2}, false, {}}).find("1 to 3 spatial dimensions"), std::string::npos);
  EXPECT_NE(error({1, 1, 2, 2, 2, 2}, {{2, 2, 2, 2}, false, {}}).find("1 to 3 spatial"),
            std::string::npos);
  EXPECT_NE(error({1, 1, 4, 4}, {{2}, true, {}}).find("1 factors for the 2 spatial"),
            std::string::npos);
  EXPECT_NE(error({1, 1, 4}, {{0}, true, {}}).find("positive"), std::string::npos);
  EXPECT_NE(error({1, 1, 4}, {{2}, true, {1, 1, 4}}).find("upsample_grad's"), std::string::npos);
  EXPECT_NE(error({1, 1, 1 << 20}, {{int64_t{1} << 40}, false, {}}).find("2^48"),
            std::string::npos);
  EXPECT_NE(infer_error(OpKind::upsample_grad, {{1, 1, 7}}, UpsampleAttrs{{2}, false, {1, 1, 4}})
                .find("should be [1,1,8]"),
            std::string::npos);
  EXPECT_EQ(error({2, 3, 4, 5, 6}, {{2, 1, 3}, true, {}}), "");
}

// The builder's layers: a 3-D encoder-decoder step keeps its shape.
TEST(Pool3d, BuilderLayers) {
  ModelBuilder b("unet-step", true);
  const ValueId x = b.input("images", {2, 4, 8, 8, 8});
  const ValueId down = b.max_pool3d(x, 2, 2);
  EXPECT_EQ(b.shape(down), (Shape{2, 4, 4, 4, 4}));
  const ValueId avg = b.avg_pool3d(down, 3, 1, 1);
  EXPECT_EQ(b.shape(avg), (Shape{2, 4, 4, 4, 4}));
  const ValueId up = b.upsample(avg, 2, true);
  EXPECT_EQ(b.shape(up), (Shape{2, 4, 8, 8, 8}));
  // Rank 2 has no spatial dimension to upsample: finish() reports it.
  b.upsample(b.flatten(up), 3, false);
  const Result<Model> model = b.finish();
  ASSERT_FALSE(model.is_ok());
  EXPECT_NE(model.message().find("1 to 3 spatial dimensions"), std::string::npos)
      << model.message();
}

TEST(Upsample, BuilderUsesOneFactorPerSpatialDimension) {
  ModelBuilder b("decoder", false);
  const ValueId x = b.input("images", {2, 3, 5});
  const ValueId up = b.upsample(x, 4, false);
  EXPECT_EQ(b.shape(up), (Shape{2, 3, 20}));
  const ValueId up2 =
      b.upsample(b.op(OpKind::reshape, {up}, ShapeAttrs{{2, 3, 4, 5}}, "r"), 2, true);
  EXPECT_EQ(b.shape(up2), (Shape{2, 3, 8, 10}));
}

}  // namespace
}  // namespace memfit
