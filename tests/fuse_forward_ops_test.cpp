// fuse_forward_ops: which pairs of the zoo's forward graphs fuse, and a fused
// step equals the unfused one (bit for bit where oneDNN applies the post-op
// to the product's float result).
#include <gtest/gtest.h>

#include "ir/verifier.h"
#include "memfit/builder.h"
#include "ops/typed_graph.h"
#include "passes/fuse_forward_ops.h"
#include "test_util.h"

namespace memfit {
namespace {

size_t count_of(const Graph& g, OpKind op) {
  size_t n = 0;
  for (const Node& node : g.nodes()) n += node.op == op;
  return n;
}

const ModelOptions kLenet{.name = "lenet", .batch = 4};
const ModelOptions kVgg{.name = "vgg16", .batch = 2, .image_size = 32, .classes = 4, .width = 4};
const ModelOptions kResnetCifar{
    .name = "resnet-cifar", .batch = 2, .image_size = 8, .depth = 11, .width = 4};

TEST(FuseForwardOps, FusesEachProductIntoItsFollower) {
  struct Case {
    ModelOptions model;
    FusedOps expected;
  };
  // lenet: conv + relu, pool, twice, then linear + relu, linear; vgg16: 13
  // convolutions and 2 hidden linears, each with a ReLU; resnet-cifar depth
  // 11: each of its 3 pre-activation bottleneck blocks has 3 batch norms with
  // a ReLU and ends in a convolution added to its shortcut, and a batch norm
  // with a ReLU comes before the pooling; resnet18: the stem's batch norm and
  // the first of each of the 8 blocks' two (the second's ReLU follows the
  // residual add).
  const ModelOptions resnet18{.name = "resnet18", .batch = 2, .image_size = 16, .classes = 4, .width = 4};
  for (const Case& c : {Case{kLenet, {2, 0, 1, 0}}, Case{kVgg, {13, 0, 2, 0}},
                        Case{kResnetCifar, {0, 3, 0, 10}}, Case{resnet18, {0, 0, 0, 9}}}) {
    SCOPED_TRACE(c.model.name);
    const Model model = build_model(c.model, true).value();
    FusedOps fused;
    std::vector<ValueId> map;
    const Graph out = fuse_forward_ops(model.graph, &fused, &map);
    EXPECT_TRUE(verify_graph(out).is_ok());
    EXPECT_EQ(fused.conv_relu, c.expected.conv_relu);
    EXPECT_EQ(fused.conv_add, c.expected.conv_add);
    EXPECT_EQ(fused.linear_relu, c.expected.linear_relu);
    EXPECT_EQ(fused.norm_relu, c.expected.norm_relu);
    EXPECT_EQ(out.num_nodes(), model.graph.num_nodes() - fused.total());
    EXPECT_EQ(count_of(out, OpKind::conv2d_relu), fused.conv_relu);
    EXPECT_EQ(count_of(out, OpKind::conv2d_add), fused.conv_add);
    EXPECT_EQ(count_of(out, OpKind::linear_relu), fused.linear_relu);
    // The loss keeps its name under the renumbering.
    ASSERT_EQ(map.size(), model.graph.num_values());
    EXPECT_EQ(out.value(map[model.loss.idx()]).name, model.graph.value(model.loss).name);
    // Nothing left to fuse.
    FusedOps again;
    fuse_forward_ops(out, &again);
    EXPECT_EQ(again.total(), 0u);
  }
}

TEST(FuseForwardOps, AProductReadElsewhereStaysApart) {
  Graph g;
  const ValueId x = g.add_input("x", TensorType{{3, 4}, DType::f32}, Role::input);
  const ValueId w = g.add_input("w", TensorType{{2, 4}, DType::f32}, Role::parameter);
  const ValueId z = g.node(add_node(g, OpKind::linear, {x, w}, NoAttrs{}, "z").value()).outputs[0];
  const ValueId y = g.node(add_node(g, OpKind::relu, {z}, NoAttrs{}, "y").value()).outputs[0];
  g.mark_output(y);
  Graph shared = g;
  shared.mark_output(z);  // z is read besides the relu
  FusedOps fused;
  EXPECT_EQ(fuse_forward_ops(shared, &fused).num_nodes(), 2u);
  EXPECT_EQ(fused.total(), 0u);
  const Graph alone = fuse_forward_ops(g, &fused);
  EXPECT_EQ(fused.linear_relu, 1u);
  ASSERT_EQ(alone.num_nodes(), 1u);
  EXPECT_EQ(alone.nodes()[0].op, OpKind::linear_relu);
  EXPECT_EQ(alone.value(alone.outputs()[0]).name, "y");
}

// One SGD step with and without the fusions (StepSpec::fuse) on both
// backends, in plain and blocked layouts: the ReLU post-ops (applied to the
// finished float result on every ISA) leave every bit as it was; the
// residual add of conv2d_add is within float rounding on the cpu backend
// (oneDNN may add r into partial sums: it does in blocked layouts on an AVX2
// machine, and the kernels it picks differ by ISA), bit for bit on the
// reference backend.
class ForwardFusion : public ::testing::TestWithParam<ModelOptions> {};

TEST_P(ForwardFusion, KeepsTheUnfusedStep) {
  for (const BackendKind kind : {BackendKind::reference, BackendKind::cpu}) {
    const std::string backend(name_of(kind));
    for (bool blocked : {false, true}) {
      if (backend == "reference" && blocked) continue;
      SCOPED_TRACE(backend + (blocked ? " blocked" : " plain"));
      StepSpec fused = testing::test_spec(GetParam());
      fused.backend = kind;
      fused.blocked_layouts = blocked;
      StepSpec apart = fused;
      apart.fuse = false;
      const testing::StepRun with = testing::run_verified_step(fused);
      const testing::StepRun without = testing::run_verified_step(apart);
      // Fusion never raises the most live bytes; the heap's placement of
      // the rest may differ by a little either way.
      EXPECT_LE(with.lower_bound, without.lower_bound);
      EXPECT_LE(with.arena, without.arena + without.arena / 50);
      if (backend == "reference" || GetParam().name != "resnet-cifar") {
        testing::expect_identical_steps(without, with, backend);
        continue;
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
}

INSTANTIATE_TEST_SUITE_P(Models, ForwardFusion,
                         ::testing::Values(kLenet, ModelOptions{.name = "mlp", .batch = 4}, kVgg,
                                           kResnetCifar,
                                           ModelOptions{.name = "resnet18", .batch = 2, .image_size = 16,
                                                        .classes = 4, .width = 8}),
                         testing::model_param_name);

}  // namespace
}  // namespace memfit
