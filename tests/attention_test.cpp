// The fused attention op against the composed form it replaces (matmul,
// scale, causal_mask, a key mask by where, softmax, dropout, matmul): the
// same outputs and gradients within 1e-5 relative error on the reference and
// the CPU backend, masks and dropout included; the zoo's transformers in both
// forms; the planner's view of the fused form (no (T, T) value, activations
// linear in T); and the longest sequence that fits a budget.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "autodiff/autodiff.h"
#include "memfit/plan.h"
#include "ops/typed_graph.h"
#include "step/compile_step.h"
#include "test_util.h"

namespace memfit {
namespace {

using testing::Words;

struct AttentionCase {
  std::string name;
  int64_t b, h, tq, tk, d, dv;
  bool causal = false;
  int64_t offset = 0;
  bool key_mask = false;
  float p = 0.0f;
};

// The largest difference relative to the largest magnitude of `expected`.
double relative_error(const std::vector<float>& expected, const std::vector<float>& actual) {
  EXPECT_EQ(expected.size(), actual.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < expected.size() && i < actual.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(expected[i]) - actual[i]));
    scale = std::max(scale, std::abs(static_cast<double>(expected[i])));
  }
  return diff / std::max(scale, 1e-30);
}

// in0 q, in1 k, in2 v, in3 w (like o), in4 the key mask (B, 1, 1, Tk) for the
// composed form, and in5 the same mask (B, Tk) for the fused op. Outputs:
// o, then dq, dk, dv of the loss sum(o * w).
Graph attention_graph(const AttentionCase& c, bool fused) {
  Graph g;
  const ValueId q = g.add_input("in0", TensorType{{c.b, c.h, c.tq, c.d}}, Role::input);
  const ValueId k = g.add_input("in1", TensorType{{c.b, c.h, c.tk, c.d}}, Role::input);
  const ValueId v = g.add_input("in2", TensorType{{c.b, c.h, c.tk, c.dv}}, Role::input);
  const ValueId w = g.add_input("in3", TensorType{{c.b, c.h, c.tq, c.dv}}, Role::input);
  const ValueId mask4 = g.add_input("in4", TensorType{{c.b, 1, 1, c.tk}, DType::i32}, Role::input);
  const ValueId mask2 = g.add_input("in5", TensorType{{c.b, c.tk}, DType::i32}, Role::input);
  auto first = [&](OpKind op, std::vector<ValueId> in, Attrs attrs, const std::string& name) {
    auto node = add_node(g, op, std::move(in), std::move(attrs), name);
    EXPECT_TRUE(node.is_ok()) << node.message();
    return g.node(*node).outputs[0];
  };
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
  constexpr uint64_t kKey = 9;
  ValueId o;
  if (fused) {
    std::vector<ValueId> in = {q, k, v};
    if (c.key_mask) in.push_back(mask2);
    o = first(OpKind::attention, in, AttentionAttrs{scale, c.causal, c.offset, c.p, kKey},
              "attention");
  } else {
    ValueId s = first(OpKind::scale, {first(OpKind::matmul, {q, k}, MatmulAttrs{false, true}, "qk")},
                      ScaleAttrs{scale}, "scale");
    if (c.causal) {
      s = first(OpKind::causal_mask, {s}, CausalMaskAttrs{kAttentionMaskValue, c.offset}, "causal");
    }
    if (c.key_mask) {
      const ValueId masked =
          first(OpKind::fill, {}, FillAttrs{kAttentionMaskValue, {c.b, c.h, c.tq, c.tk}}, "masked");
      s = first(OpKind::where, {mask4, s, masked}, NoAttrs{}, "key_mask");
    }
    ValueId p = first(OpKind::softmax, {s}, AxisAttrs{3}, "softmax");
    if (c.p > 0) p = first(OpKind::dropout, {p}, DropoutAttrs{c.p, kKey}, "dropout");
    o = first(OpKind::matmul, {p, v}, MatmulAttrs{}, "pv");
  }
  const ValueId loss = first(OpKind::reduce_sum, {first(OpKind::mul, {o, w}, NoAttrs{}, "ow")},
                             ReduceAttrs{{0, 1, 2, 3}, false}, "loss");
  const std::vector<ValueId> grads = append_gradients(g, loss, {q, k, v}).value();
  g.mark_output(o);
  for (ValueId grad : grads) g.mark_output(grad);
  return g;
}

// Inputs of a case: normal q, k, v, w; a key mask that masks about a third
// of the keys, and every key of batch entry 1 when there are two or more.
std::vector<Words> case_inputs(const AttentionCase& c) {
  std::vector<Words> inputs;
  uint64_t seed = 21;
  for (int64_t count : {c.b * c.h * c.tq * c.d, c.b * c.h * c.tk * c.d, c.b * c.h * c.tk * c.dv,
                        c.b * c.h * c.tq * c.dv}) {
    Words words;
    for (float x : testing::random_normal(static_cast<size_t>(count), seed++)) {
      words.push_back(testing::as_word(x));
    }
    inputs.push_back(words);
  }
  Words mask;
  for (int64_t b = 0; b < c.b; ++b) {
    for (int64_t j = 0; j < c.tk; ++j) mask.push_back(b == 1 || (j * 7 + b) % 3 == 1 ? 0u : 1u);
  }
  inputs.push_back(mask);
  inputs.push_back(mask);
  return inputs;
}

class AttentionFusedTest : public ::testing::TestWithParam<AttentionCase> {};

// Every output and gradient of the fused op equals the composed form's on
// the same backend within 1e-5 relative error (the largest difference over
// the largest magnitude), dropout masks included.
TEST_P(AttentionFusedTest, EqualsTheComposedForm) {
  const AttentionCase& c = GetParam();
  const std::vector<Words> inputs = case_inputs(c);
  const StepContext step{.seed = 5, .micro_step = 3};
  for (const auto& backend : {make_reference_backend(), make_cpu_backend()}) {
    std::vector<std::vector<float>> results[2];
    for (bool fused : {false, true}) {
      auto exe = Executable::compile(attention_graph(c, fused), *backend,
                                     ExecOptions{.poison = true});
      ASSERT_TRUE(exe.is_ok()) << exe.message();
      results[fused] = testing::run_outputs(**exe, inputs, step);
    }
    const char* names[] = {"o", "dq", "dk", "dv"};
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_LE(relative_error(results[0][i], results[1][i]), 1e-5)
          << c.name << " " << backend->name() << " " << names[i];
      for (float x : results[1][i]) ASSERT_TRUE(std::isfinite(x)) << c.name << " " << names[i];
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, AttentionFusedTest,
    ::testing::Values(AttentionCase{"plain", 2, 2, 9, 13, 8, 8},
                      AttentionCase{"causal", 1, 3, 70, 70, 16, 16, true},
                      AttentionCase{"causal_offset", 2, 1, 20, 37, 8, 4, true, 17},
                      AttentionCase{"causal_negative_offset", 1, 2, 12, 12, 8, 8, true, -3},
                      AttentionCase{"key_mask", 3, 2, 11, 29, 8, 8, false, 0, true},
                      AttentionCase{"dropout", 2, 2, 33, 33, 8, 8, true, 0, false, 0.3f},
                      AttentionCase{"all_together", 2, 2, 40, 150, 16, 8, true, 110, true, 0.2f},
                      AttentionCase{"one_query", 4, 1, 1, 50, 32, 32, false, 0, true, 0.1f},
                      AttentionCase{"long", 1, 2, 300, 300, 64, 64, true, 0, false, 0.1f}),
    [](const ::testing::TestParamInfo<AttentionCase>& info) { return info.param.name; });

// A small GPT and Transformer: fused and naive attention give the same loss
// and, after one SGD step, the same parameters and momenta (the gradients)
// within float rounding; their dropout masks are the same draws. (At 24
// positions the attention matrices are too small to change the arena.)
TEST(AttentionZooTest, FusedAndNaiveTransformersAgree) {
  for (const char* name : {"gpt", "transformer"}) {
    ModelOptions model{.name = name, .batch = 2, .depth = 2, .width = 64, .seq_len = 24,
                       .vocab = 40};
    model.attention = AttentionForm::naive;
    const testing::StepRun naive = testing::run_verified_step(testing::test_spec(model));
    model.attention = AttentionForm::fused;
    const testing::StepRun fused = testing::run_verified_step(testing::test_spec(model));
    ASSERT_EQ(naive.losses.size(), fused.losses.size());
    EXPECT_NEAR(naive.losses[0], fused.losses[0], 1e-5 * std::abs(naive.losses[0])) << name;
    for (const auto& [value, tensor] : naive.state.tensors()) {
      const std::vector<float>* other = fused.state.find(value);
      ASSERT_NE(other, nullptr) << value;
      EXPECT_LE(relative_error(tensor, *other), 2e-5) << name << " " << value;
    }
  }
}

// Recomputation recomputes the fused op: the same step bit for bit.
TEST(AttentionZooTest, RecomputedAttentionGivesTheSameStep) {
  const ModelOptions model{.name = "gpt", .batch = 2, .depth = 3, .width = 64, .seq_len = 32,
                           .vocab = 40};
  const testing::StepRun plain = testing::run_verified_step(testing::test_spec(model));
  for (Recompute strategy : {Recompute::sqrt, Recompute::optimal}) {
    StepSpec spec = testing::test_spec(model);
    spec.recompute = strategy;
    const testing::StepRun recomputed = testing::run_verified_step(spec);
    EXPECT_GT(recomputed.recompute.recomputed_nodes, 0u);
    testing::expect_identical_steps(plain, recomputed, std::string(name_of(strategy)));
  }
}

// The fused GPT (4 heads) keeps no value with a (T, T) pair of dimensions,
// and its activations grow linearly with T: doubling T at most 2.1 times the
// bytes besides the parameters and optimizer state, where the naive form's
// grow by more than 2.5 times. (T is none of the widths 256, 768 and 1024.)
TEST(AttentionPlanTest, FusedActivationsAreLinearInTheSequence) {
  auto gpt = [](int64_t t, AttentionForm form) {
    ModelOptions model{.name = "gpt", .batch = 1, .depth = 2, .width = 256, .seq_len = t,
                       .vocab = 50};
    model.attention = form;
    return model;
  };
  auto activations = [&](int64_t t, AttentionForm form) {
    PlanRequest request;
    request.step.model = gpt(t, form);
    const PlanReport report = plan_training_step(request).value();
    return static_cast<double>(report.arena_bytes) -
           static_cast<double>(report.by_role.parameters + report.by_role.optimizer_state);
  };
  for (int64_t t : {320, 640}) {
    const Graph step =
        build_step_graph(gpt(t, AttentionForm::fused), 1, OptimizerConfig{}, UpdateMode::apply,
                         nullptr)
            .value();
    for (const Value& value : step.values()) {
      const Shape& s = value.type.shape;
      EXPECT_FALSE(s.size() >= 2 && s[s.size() - 1] == t && s[s.size() - 2] == t)
          << value.name << " " << shape_string(s);
    }
  }
  const double fused_320 = activations(320, AttentionForm::fused);
  const double fused_640 = activations(640, AttentionForm::fused);
  EXPECT_LE(fused_640 / fused_320, 2.1);
  EXPECT_GT(activations(640, AttentionForm::naive) / activations(320, AttentionForm::naive), 2.5);
  EXPECT_LT(fused_640, activations(640, AttentionForm::naive));
}

// maxbatch --vary seq-len: the longest sequence whose plan fits, which the
// next longer one does not; the fused form reaches further than the naive.
TEST(AttentionPlanTest, LongestSequenceThatFits) {
  PlanRequest request;
  request.step.model =
      ModelOptions{.name = "gpt", .batch = 1, .depth = 2, .width = 64, .vocab = 50};
  request.step.budget = size_t{24} << 20;
  int64_t longest[2] = {0, 0};
  for (AttentionForm form : {AttentionForm::naive, AttentionForm::fused}) {
    request.step.model.attention = form;
    const MaxBatchReport report = find_max_batch(request, Capacity::seq_len).value();
    EXPECT_EQ(report.vary, Capacity::seq_len);
    EXPECT_LE(report.plan.arena_bytes, request.step.budget);
    PlanRequest next = request;
    next.step.model.seq_len = report.max_batch + 1;
    next.step.budget = 0;
    EXPECT_GT(plan_training_step(next).value().arena_bytes, request.step.budget);
    longest[form == AttentionForm::fused] = report.max_batch;
    const std::string json = max_batch_json(request, report);
    EXPECT_NE(json.find("\"max_seq_len\": " + std::to_string(report.max_batch)), std::string::npos)
        << json;
  }
  EXPECT_GT(longest[1], longest[0]);
  request.step.model = ModelOptions{.name = "lenet"};
  const auto images = find_max_batch(request, Capacity::seq_len);
  ASSERT_FALSE(images.is_ok());
  EXPECT_NE(images.message().find("needs a sequence model"), std::string::npos)
      << images.message();
}

TEST(AttentionShapeTest, ErrorsNameTheProblem) {
  const TensorType q{{2, 3, 4, 8}}, k{{2, 3, 5, 8}}, v{{2, 3, 5, 6}};
  auto ok = infer_types(OpKind::attention, {q, k, v}, AttentionAttrs{});
  ASSERT_TRUE(ok.is_ok()) << ok.message();
  EXPECT_EQ((*ok)[0].shape, (Shape{2, 3, 4, 6}));
  EXPECT_EQ((*ok)[1].shape, (Shape{2, 3, 4}));
  auto width = infer_types(OpKind::attention, {q, TensorType{{2, 3, 5, 7}}, v}, AttentionAttrs{});
  ASSERT_FALSE(width.is_ok());
  EXPECT_NE(width.message().find("widths of q and k"), std::string::npos) << width.message();
  auto mask = infer_types(OpKind::attention, {q, k, v, TensorType{{2, 4}, DType::i32}},
                          AttentionAttrs{});
  ASSERT_FALSE(mask.is_ok());
  EXPECT_NE(mask.message().find("key_mask must be i32 [2,5]"), std::string::npos)
      << mask.message();
  auto p = infer_types(OpKind::attention, {q, k, v}, AttentionAttrs{1.0f, false, 0, 1.0f, 0});
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.message().find("dropout p must be in [0, 1)"), std::string::npos) << p.message();
}

}  // namespace
}  // namespace memfit
