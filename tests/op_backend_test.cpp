// Every op of the table: the CPU backend (oneDNN where it has a kernel) against
// the reference backend on the op's examples, and every kernel called with an
// output aliasing an input wherever the table lists that in-place pair.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "test_util.h"

namespace memfit {
namespace {

using testing::Words;

void expect_close(const std::vector<float>& expected, const std::vector<float>& actual,
                  double rtol, double atol, const std::string& what) {
  ASSERT_EQ(expected.size(), actual.size()) << what;
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(expected[i], actual[i], atol + rtol * std::abs(expected[i])) << what << "[" << i << "]";
  }
}

class OpBackendTest : public ::testing::TestWithParam<OpKind> {};

TEST_P(OpBackendTest, CpuMatchesReference) {
  const OpKind op = GetParam();
  // A lone to_host or swap_wait is no valid plan (the verifier asks for the
  // pair); the copy ops run in whole step graphs in tests/swap_test.cpp.
  if (op == OpKind::to_host || op == OpKind::swap_wait) {
    GTEST_SKIP() << "copy ops are tested in pairs by swap_test";
  }
  const auto reference = make_reference_backend();
  const auto cpu = make_cpu_backend();
  const auto examples = op_info(op).examples();
  for (size_t e = 0; e < examples.size(); ++e) {
    const Graph graph = testing::single_node_graph(op, examples[e]);
    const auto data = testing::example_inputs(examples[e], 99 + e);
    const StepContext step{7, 11, 2};
    auto ref_exe = Executable::compile(graph, *reference).value();
    auto cpu_exe = Executable::compile(graph, *cpu).value();
    const auto expected = testing::run_outputs(*ref_exe, data, step);
    const auto actual = testing::run_outputs(*cpu_exe, data, step);
    // Twice: kernels are compiled once and must give the same result again.
    const auto again = testing::run_outputs(*cpu_exe, data, step);
    for (size_t o = 0; o < expected.size(); ++o) {
      const std::string what = std::string(op_name(op)) + " example " + std::to_string(e) +
                               " output " + std::to_string(o) + " on " + cpu_exe->node_backends()[0];
      expect_close(expected[o], actual[o], 1e-4, 1e-5, what);
      EXPECT_EQ(actual[o], again[o]) << what;
    }
  }
}

// Calls each backend's kernel directly with output o written over input i.
TEST_P(OpBackendTest, InPlacePairsAreSafe) {
  const OpKind op = GetParam();
  const OpInfo& info = op_info(op);
  const auto examples = info.examples();
  for (const auto& backend : {make_reference_backend(), make_cpu_backend()}) {
    for (size_t e = 0; e < examples.size(); ++e) {
      const Graph graph = testing::single_node_graph(op, examples[e]);
      const Node& node = graph.nodes()[0];
      if (!backend->supports(graph, node)) continue;
      for (const InplacePair& pair : info.inplace) {
        const auto in_index = static_cast<size_t>(pair.input);
        const auto out_index = static_cast<size_t>(pair.output);
        if (in_index >= node.inputs.size() || out_index >= node.outputs.size() ||
            graph.value(node.inputs[in_index]).type != graph.value(node.outputs[out_index]).type) {
          continue;
        }
        auto data = testing::example_inputs(examples[e], 5 + e);
        const StepContext step{3, 4, 1};
        auto exe = Executable::compile(graph, *backend).value();
        const auto expected = testing::run_outputs(*exe, data, step);

        auto kernel = backend->make_kernel(graph, NodeId(0)).value();
        std::vector<Words> outputs;
        for (ValueId v : node.outputs) outputs.emplace_back(static_cast<size_t>(graph.value(v).elements()));
        std::vector<void*> in_ptrs, out_ptrs;
        for (auto& d : data) in_ptrs.push_back(d.data());
        for (auto& d : outputs) out_ptrs.push_back(d.data());
        out_ptrs[out_index] = in_ptrs[in_index];
        std::vector<std::byte> workspace(kernel->workspace_bytes() + 1);
        kernel->run(KernelArgs{in_ptrs, out_ptrs, workspace.data(), step});
        const auto* result = static_cast<const uint32_t*>(out_ptrs[out_index]);
        std::vector<float> actual(expected[out_index].size());
        for (size_t k = 0; k < actual.size(); ++k) actual[k] = testing::as_float(result[k]);
        expect_close(expected[out_index], actual, 1e-5, 1e-6,
                     std::string(op_name(op)) + " in place " + std::to_string(pair.input) + "->" +
                         std::to_string(pair.output) + " on " + std::string(backend->name()));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryOp, OpBackendTest, ::testing::ValuesIn(testing::all_ops()),
                         testing::op_test_name);

}  // namespace
}  // namespace memfit
