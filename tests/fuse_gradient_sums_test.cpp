// fuse_gradient_sums: matmuls add into the gradient sums they feed. The fused
// step graph is valid and smaller; its step equals the unfused one bit for
// bit on the reference backend (whose fused matmul rounds the product, then
// adds) and within float rounding on the cpu backend; a product that another
// node also reads stays apart.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/verifier.h"
#include "models/zoo.h"
#include "ops/typed_graph.h"
#include "passes/fuse_gradient_sums.h"
#include "step/compile_step.h"
#include "test_util.h"

namespace memfit {
namespace {

Graph step_graph(const ModelOptions& model) {
  return build_step_graph(model, 1, testing::sgd(), UpdateMode::apply, nullptr).value();
}

const ModelOptions kLstm{.name = "lstm-lm", .batch = 2, .depth = 2, .width = 16, .seq_len = 4,
                         .vocab = 16};

TEST(FuseGradientSums, FusesEachProductIntoItsSum) {
  const Graph step = step_graph(kLstm);
  size_t fused = 0;
  const Graph out = fuse_gradient_sums(step, &fused);
  EXPECT_TRUE(verify_graph(out).is_ok());
  // Per time step after the first, each layer's w_hh product joins its sum,
  // and so does the slice_grad of the layer's projection (N, T, 4H).
  EXPECT_GE(fused, 2u * 3u * 2u);
  EXPECT_EQ(out.num_nodes(), step.num_nodes() - fused);
  size_t with_c = 0, with_acc = 0;
  for (const Node& node : out.nodes()) {
    with_c += node.op == OpKind::matmul && node.inputs.size() == 3;
    with_acc += node.op == OpKind::slice_grad && node.inputs.size() == 2;
  }
  EXPECT_GE(with_c, 2u * 3u);
  EXPECT_GE(with_acc, 2u * 3u);
  EXPECT_EQ(with_c + with_acc, fused);
  // Nothing left to fuse.
  size_t again = 0;
  fuse_gradient_sums(out, &again);
  EXPECT_EQ(again, 0u);
}

TEST(FuseGradientSums, AProductReadElsewhereStaysApart) {
  Graph g;
  const ValueId a = g.add_input("a", TensorType{{3, 4}, DType::f32}, Role::input);
  const ValueId b = g.add_input("b", TensorType{{4, 2}, DType::f32}, Role::input);
  const ValueId c = g.add_input("c", TensorType{{3, 2}, DType::f32}, Role::input);
  const ValueId p = g.node(add_node(g, OpKind::matmul, {a, b}, MatmulAttrs{}, "p").value()).outputs[0];
  const ValueId sum = g.node(add_node(g, OpKind::add, {c, p}, NoAttrs{}, "sum").value()).outputs[0];
  g.mark_output(sum);
  Graph shared = g;
  shared.mark_output(p);  // p is read besides the add
  size_t fused = 0;
  EXPECT_EQ(fuse_gradient_sums(shared, &fused).num_nodes(), 2u);
  EXPECT_EQ(fused, 0u);
  const Graph alone = fuse_gradient_sums(g, &fused);
  EXPECT_EQ(fused, 1u);
  ASSERT_EQ(alone.num_nodes(), 1u);
  EXPECT_EQ(alone.nodes()[0].inputs.size(), 3u);
  EXPECT_EQ(alone.value(alone.outputs()[0]).name, g.value(sum).name);
}

class FusedStep : public ::testing::TestWithParam<ModelOptions> {};

TEST_P(FusedStep, EqualsTheUnfusedStep) {
  for (const BackendKind kind : {BackendKind::reference, BackendKind::cpu}) {
    const std::string backend(name_of(kind));
    StepSpec fused = testing::test_spec(GetParam());
    fused.backend = kind;
    StepSpec apart = fused;
    apart.fuse = false;
    const testing::StepRun with = testing::run_verified_step(fused);
    const testing::StepRun without = testing::run_verified_step(apart);
    // Fusion costs no memory, up to the few aligned slices by which the
    // schedule and placement heuristics move the arena of graphs this small
    // either way (lstm-lm's 32 KiB: 320 bytes more or 128 bytes less).
    EXPECT_LE(with.arena, without.arena + without.arena / 50) << backend;
    if (backend == "reference") {
      testing::expect_identical_steps(without, with, "reference backend");
      continue;
    }
    ASSERT_EQ(with.losses.size(), without.losses.size());
    for (size_t i = 0; i < with.losses.size(); ++i) {
      EXPECT_NEAR(with.losses[i], without.losses[i], 1e-5 * std::abs(without.losses[i]));
    }
    for (const auto& [name, tensor] : without.state.tensors()) {
      const std::vector<float>& other = *with.state.find(name);
      ASSERT_EQ(other.size(), tensor.size()) << name;
      for (size_t i = 0; i < tensor.size(); ++i) {
        EXPECT_NEAR(other[i], tensor[i], 1e-5 + 1e-4 * std::abs(tensor[i])) << name << "[" << i << "]";
      }
    }
  }
}

// lstm-lm over two windows (kLstmWindow steps and 2 more): the second window
// starts from the first one's states.
const ModelOptions kLstmTwoWindows{.name = "lstm-lm", .batch = 2, .depth = 2, .width = 8,
                                   .seq_len = kLstmWindow + 2, .vocab = 16};

INSTANTIATE_TEST_SUITE_P(Models, FusedStep,
                         ::testing::Values(kLstm, kLstmTwoWindows, ModelOptions{.name = "mlp", .batch = 4},
                                           ModelOptions{.name = "gpt", .batch = 2, .depth = 2,
                                                        .width = 16, .seq_len = 4, .vocab = 16}),
                         [](const ::testing::TestParamInfo<ModelOptions>& info) {
                           return testing::model_test_name(info.param) + "_" +
                                  std::to_string(info.param.seq_len);
                         });

}  // namespace
}  // namespace memfit
