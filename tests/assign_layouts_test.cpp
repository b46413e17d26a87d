// The layout pass (src/passes/assign_layouts.h) on small graphs in text form:
// which values it blocks, where its reorder nodes go, that it changes no
// result, and that a backend without a blocked layout gets the graph as it was.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "backends/cpu/cpu_kernels.h"
#include "core/check.h"
#include "ops/typed_graph.h"
#include "passes/assign_layouts.h"
#include "test_util.h"

namespace memfit {
namespace {

// A convolution of a plain image, an activation, global pooling, then a
// flatten that only reads plain data; the activation is also a graph output.
// `channels` is the convolution's output channels. No budget: the pass does not plan.
std::string conv_net(int channels) {
  const std::string c = std::to_string(channels);
  return "memfit-graph 1\n"
         "input %x f32[2,3,8,8] input\n"
         "input %w f32[" + c + ",3,3,3] input\n"
         "node conv = conv2d(%x, %w) {stride=[1,1] pad=[1,1] dilation=[1,1] groups=1} -> %conv f32[2," + c + ",8,8] activation\n"
         "node relu = relu(%conv) -> %relu f32[2," + c + ",8,8] activation\n"
         "node pool = global_avg_pool(%relu) -> %pool f32[2," + c + ",1,1] activation\n"
         "node flat = reshape(%pool) {shape=[2," + c + "]} -> %flat f32[2," + c + "] activation\n"
         "node flat_relu = reshape(%relu) {shape=[2," + std::to_string(channels * 64) + "]} -> %flat_relu f32[2," + std::to_string(channels * 64) + "] activation\n"
         "output %flat\n"
         "output %flat_relu\n"
         "output %relu\n";
}

Graph parsed(const std::string& text) {
  Result<Graph> graph = parse_graph(text);
  MEMFIT_CHECK(graph.is_ok());
  MEMFIT_CHECK(verify_graph(*graph).is_ok());
  return std::move(graph).value();
}

size_t position_of(const Graph& graph, const std::string& node) {
  for (size_t n = 0; n < graph.num_nodes(); ++n) {
    if (graph.nodes()[n].name == node) return n;
  }
  ADD_FAILURE() << "no node " << node;
  return 0;
}

const Node& reader_of(const Graph& graph, const std::string& node, size_t input = 0) {
  const ValueId v = graph.nodes()[position_of(graph, node)].inputs[input];
  return graph.node(graph.value(v).producer);
}

TEST(AssignLayouts, BlocksTheConvolutionNetworkAndReordersAtItsEdges) {
  const auto cpu = make_cpu_backend();
  const Layout blocked = cpu->blocked_layout();
  ASSERT_NE(blocked, Layout::plain);
  LayoutSummary summary;
  const Graph out = assign_layouts(parsed(conv_net(16)), *cpu, &summary).value();
  ASSERT_TRUE(verify_graph(out).is_ok());
  // The image stays plain (a convolution reads it as it is); what the
  // convolution, the activation and the pooling write is blocked.
  EXPECT_EQ(out.value(out.find_value("x")).layout, Layout::plain);
  for (const char* v : {"conv", "relu", "pool"}) EXPECT_EQ(out.value(out.find_value(v)).layout, blocked) << v;
  EXPECT_EQ(out.value(out.find_value("flat")).layout, Layout::plain);
  // Two reorders to plain: the pooled values before the flatten, and the
  // activation, once for its flatten and the graph output both.
  EXPECT_EQ(summary.reorders, 2u);
  EXPECT_EQ(summary.blocked_values, 3u);
  const Node& pool_plain = reader_of(out, "flat");
  EXPECT_EQ(pool_plain.op, OpKind::reorder);
  EXPECT_EQ(position_of(out, pool_plain.name) + 1, position_of(out, "flat"));
  const Node& relu_plain = reader_of(out, "flat_relu");
  EXPECT_EQ(relu_plain.op, OpKind::reorder);
  EXPECT_EQ(position_of(out, relu_plain.name) + 1, position_of(out, "flat_relu"));
  EXPECT_EQ(out.outputs()[2], relu_plain.outputs[0]);
}

// Channels that end in a partial block are padded by default where there
// are more than a block of them, and on request always or never.
TEST(AssignLayouts, PadsPartialBlocksBeyondOneBlock) {
  const auto cpu = make_cpu_backend();
  const Layout blocked = cpu->blocked_layout();
  const int64_t block = layout_block(blocked);
  const int channels = static_cast<int>(block + 3);
  LayoutSummary summary;
  const Graph padded = assign_layouts(parsed(conv_net(channels)), *cpu, &summary).value();
  EXPECT_EQ(summary.blocked_values, 3u);
  // Bytes: the block + 3 channels are padded to two whole blocks.
  EXPECT_EQ(padded.value(padded.find_value("conv")).bytes(),
            static_cast<size_t>(2 * 2 * block * 8 * 8 * 4));
  const Graph whole = assign_layouts(parsed(conv_net(channels)), *cpu, &summary,
                                     {.partial_blocks = PartialBlocks::keep_plain})
                          .value();
  EXPECT_EQ(summary.reorders, 0u);
  EXPECT_EQ(print_graph(whole), print_graph(parsed(conv_net(channels))));
  // Fewer channels than a block stay plain unless asked.
  const Graph few = assign_layouts(parsed(conv_net(5)), *cpu, &summary).value();
  EXPECT_EQ(summary.reorders, 0u);
  EXPECT_EQ(print_graph(few), print_graph(parsed(conv_net(5))));
  const Graph few_padded =
      assign_layouts(parsed(conv_net(5)), *cpu, &summary, {.partial_blocks = PartialBlocks::pad})
          .value();
  EXPECT_EQ(summary.blocked_values, 3u);
  EXPECT_EQ(few_padded.value(few_padded.find_value("conv")).bytes(),
            static_cast<size_t>(2 * block * 8 * 8 * 4));
}

TEST(AssignLayouts, ChangesNoResult) {
  const auto cpu = make_cpu_backend();
  const Graph plain = parsed(conv_net(16));
  const Graph blocked = assign_layouts(plain, *cpu).value();
  OpExample example;
  example.inputs = {plain.value(plain.find_value("x")).type, plain.value(plain.find_value("w")).type};
  const auto data = testing::example_inputs(example, 5);
  auto run = [&](const Graph& graph) {
    auto exe = Executable::compile(graph, *cpu, ExecOptions{.poison = true}).value();
    Feeds feeds{{"x", data[0].data()}, {"w", data[1].data()}};
    StateStore state;
    auto result = exe->run(state, feeds, StepContext{}).value();
    std::vector<std::vector<float>> outputs;
    for (ValueId v : graph.outputs()) outputs.push_back(result.outputs.at(graph.value(v).name));
    return outputs;
  };
  const auto expected = run(plain);
  const auto actual = run(blocked);
  ASSERT_EQ(expected.size(), actual.size());
  for (size_t o = 0; o < expected.size(); ++o) {
    ASSERT_EQ(expected[o].size(), actual[o].size());
    for (size_t i = 0; i < expected[o].size(); ++i) {
      EXPECT_NEAR(expected[o][i], actual[o][i], 1e-5 + 1e-4 * std::abs(expected[o][i]))
          << "output " << o << " [" << i << "]";
    }
  }
}

// A first layer's weight gradient reads its image plain beside a blocked dy
// where oneDNN has a direct kernel for that pair (oneDNN 2.6 does with AVX2),
// so dy is not reordered to plain; else dy is reordered. Either way its
// result is the plain graph's.
TEST(AssignLayouts, FirstLayerWeightGradientReadsABlockedDy) {
  const auto cpu = make_cpu_backend();
  const Layout blocked = cpu->blocked_layout();
  const std::string text =
      "memfit-graph 1\n"
      "input %x f32[2,3,16,16] input\n"
      "input %w f32[16,3,3,3] input\n"
      "node conv = conv2d(%x, %w) {stride=[2,2] pad=[1,1] dilation=[1,1] groups=1} -> %conv f32[2,16,8,8] activation\n"
      "node relu = relu(%conv) -> %relu f32[2,16,8,8] activation\n"
      "node dw = conv2d_grad_weight(%relu, %x) {stride=[2,2] pad=[1,1] dilation=[1,1] groups=1 shape=[16,3,3,3] bias=false} -> %dw f32[16,3,3,3] gradient\n"
      "output %dw\n";
  const Graph plain = parsed(text);
  LayoutSummary summary;
  const Graph out = assign_layouts(plain, *cpu, &summary).value();
  ASSERT_TRUE(verify_graph(out).is_ok());
  const bool direct = cpu::image_grad_weight_reads_blocked_dy(
      plain, plain.nodes()[position_of(plain, "dw")], blocked);
  if (cpu->isa() == "avx2") {
    EXPECT_TRUE(direct);
  }
  const Node& dw = out.nodes()[position_of(out, "dw")];
  EXPECT_EQ(out.value(dw.inputs[0]).layout, direct ? blocked : Layout::plain);
  EXPECT_EQ(out.value(dw.inputs[1]).layout, Layout::plain);
  EXPECT_EQ(summary.reorders, direct ? 0u : 1u);
  OpExample example;
  example.inputs = {plain.value(plain.find_value("x")).type, plain.value(plain.find_value("w")).type};
  const auto data = testing::example_inputs(example, 9);
  auto run = [&](const Graph& graph, const Backend& backend) {
    auto exe = Executable::compile(graph, backend, ExecOptions{.poison = true}).value();
    Feeds feeds{{"x", data[0].data()}, {"w", data[1].data()}};
    StateStore state;
    return exe->run(state, feeds, StepContext{}).value().outputs.at("dw");
  };
  const auto expected = run(plain, *make_reference_backend());
  const auto actual = run(out, *cpu);
  ASSERT_EQ(expected.size(), actual.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(expected[i], actual[i], 1e-4 + 1e-4 * std::abs(expected[i])) << i;
  }
}

TEST(AssignLayouts, LeavesTheGraphOfABackendWithoutBlockedLayouts) {
  const auto reference = make_reference_backend();
  const Graph plain = parsed(conv_net(16));
  LayoutSummary summary;
  const Graph out = assign_layouts(plain, *reference, &summary).value();
  EXPECT_EQ(print_graph(out), print_graph(plain));
  EXPECT_EQ(summary.reorders, 0u);
}

// The reference backend refuses a node that touches a blocked value, naming it.
TEST(AssignLayouts, ReferenceKernelsReadPlainLayoutsOnly) {
  const auto cpu = make_cpu_backend();
  const auto reference = make_reference_backend();
  const Graph out = assign_layouts(parsed(conv_net(16)), *cpu).value();
  const auto kernel = reference->make_kernel(out, NodeId(static_cast<int32_t>(position_of(out, "relu"))));
  ASSERT_FALSE(kernel.is_ok());
  EXPECT_NE(kernel.message().find("reads plain layouts only"), std::string::npos) << kernel.message();
}

}  // namespace
}  // namespace memfit
