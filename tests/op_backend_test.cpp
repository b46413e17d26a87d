// Every op of the table: the CPU backend (oneDNN where it has a kernel) against
// the reference backend on the op's examples, and every kernel called with an
// output aliasing an input wherever the table lists that in-place pair.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/nccl_communicator.h"
#include "ops/typed_graph.h"
#include "passes/assign_layouts.h"
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

// all_reduce_start's sum over one rank: its outputs are its packed inputs.
Communicator& one_rank() {
  static const std::unique_ptr<Communicator> comm = make_local_communicator();
  return *comm;
}

// The same sum for steps whose arena is on a GPU: NCCL over one rank, or the
// reason there is none (no GPU, or built without NCCL).
Result<Communicator*> one_gpu_rank() {
  static auto comm = cuda::make_nccl_communicator(one_rank());
  if (!comm) return Status::error(comm.message());
  return comm->get();
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
    auto ref_exe = Executable::compile(graph, *reference, ExecOptions{.poison = true, .comm = &one_rank()}).value();
    auto cpu_exe = Executable::compile(graph, *cpu, ExecOptions{.poison = true, .comm = &one_rank()}).value();
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

// The cuda backend's kernel, where it has one, against the reference on the
// same examples, run twice for the same bits. Skips without a GPU (and
// without CUDA in the build), saying why.
TEST_P(OpBackendTest, CudaMatchesReference) {
  const OpKind op = GetParam();
  auto cuda = make_cuda_backend();
  if (!cuda) GTEST_SKIP() << cuda.message();
  const auto reference = make_reference_backend();
  const auto examples = op_info(op).examples();
  size_t ran = 0;
  for (size_t e = 0; e < examples.size(); ++e) {
    const Graph graph = testing::single_node_graph(op, examples[e]);
    if (!(*cuda)->supports(graph, graph.nodes()[0])) continue;
    const auto data = testing::example_inputs(examples[e], 99 + e);
    const StepContext step{7, 11, 2};
    Communicator* gpu_comm = nullptr;
    if (op_info(op).comm) {
      auto nccl = one_gpu_rank();
      if (!nccl) GTEST_SKIP() << "no communicator for the cuda backend: " << nccl.message();
      gpu_comm = *nccl;
    }
    auto ref_exe =
        Executable::compile(graph, *reference, ExecOptions{.poison = true, .comm = &one_rank()})
            .value();
    auto cuda_exe =
        Executable::compile(graph, **cuda, ExecOptions{.poison = true, .comm = gpu_comm});
    ASSERT_TRUE(cuda_exe) << cuda_exe.message();
    const auto expected = testing::run_outputs(*ref_exe, data, step);
    const auto actual = testing::run_outputs(**cuda_exe, data, step);
    const auto again = testing::run_outputs(**cuda_exe, data, step);
    for (size_t o = 0; o < expected.size(); ++o) {
      const std::string what = std::string(op_name(op)) + " example " + std::to_string(e) +
                               " output " + std::to_string(o) + " on cuda";
      expect_close(expected[o], actual[o], 1e-4, 1e-5, what);
      EXPECT_EQ(actual[o], again[o]) << what;
    }
    ++ran;
  }
  if (ran == 0) GTEST_SKIP() << "the cuda backend has no kernel for " << op_name(op) << " yet";
}

// The same examples in the cpu backend's blocked layout, wherever its kernel
// takes one (assign_layouts: reorders in and out), in poison mode, so that a
// kernel that leaves the padding of a blocked output unwritten (NaN) fails.
class BlockedOpTest : public ::testing::TestWithParam<OpKind> {};

// single_node_graph with every f32 input of rank 4 or 5 reordered into the
// backend's blocked layout first, as if a blocked node had made it.
Graph blocked_input_graph(OpKind op, const OpExample& example, Layout blocked) {
  Graph graph;
  std::vector<ValueId> inputs;
  for (size_t i = 0; i < example.inputs.size(); ++i) {
    const TensorType& type = example.inputs[i];
    ValueId in = graph.add_input("in" + std::to_string(i), type, Role::input);
    if (type.dtype == DType::f32 && (type.shape.size() == 4 || type.shape.size() == 5)) {
      const NodeId reorder =
          add_node(graph, OpKind::reorder, {in}, NoAttrs{}, "blocked" + std::to_string(i)).value();
      in = graph.node(reorder).outputs[0];
      graph.value(in).layout = blocked;
    }
    inputs.push_back(in);
  }
  const NodeId node = add_node(graph, op, inputs, example.attrs, "node").value();
  for (ValueId out : graph.node(node).outputs) graph.mark_output(out);
  return graph;
}

// Whether the node of `op` in `graph` reads or writes a blocked value.
bool op_node_blocked(const Graph& graph, OpKind op) {
  for (const Node& node : graph.nodes()) {
    if (node.op != op) continue;
    for (const std::vector<ValueId>* values : {&node.inputs, &node.outputs}) {
      for (ValueId v : *values) {
        if (graph.value(v).layout != Layout::plain) return true;
      }
    }
  }
  return false;
}

// The example graphs of `op` in which the layout pass leaves its node with a
// blocked operand, from plain inputs and from blocked ones, with their
// example index.
std::vector<std::pair<size_t, Graph>> blocked_examples(OpKind op, const Backend& cpu) {
  std::vector<std::pair<size_t, Graph>> found;
  const auto examples = op_info(op).examples();
  for (size_t e = 0; e < examples.size(); ++e) {
    for (const Graph& graph : {testing::single_node_graph(op, examples[e]),
                               blocked_input_graph(op, examples[e], cpu.blocked_layout())}) {
      // Partial blocks too: the examples' few channels pad every block.
      Graph blocked = assign_layouts(graph, cpu, nullptr, {.partial_blocks = PartialBlocks::pad}).value();
      if (op_node_blocked(blocked, op)) found.emplace_back(e, std::move(blocked));
    }
  }
  return found;
}

std::vector<OpKind> ops_with_blocked_examples() {
  const auto cpu = make_cpu_backend();
  std::vector<OpKind> ops;
  for (OpKind op : testing::all_ops()) {
    if (!blocked_examples(op, *cpu).empty()) ops.push_back(op);
  }
  return ops;
}

TEST_P(BlockedOpTest, CpuMatchesReference) {
  const OpKind op = GetParam();
  const auto reference = make_reference_backend();
  const auto cpu = make_cpu_backend();
  ASSERT_NE(cpu->blocked_layout(), Layout::plain);
  const auto examples = op_info(op).examples();
  for (const auto& [e, blocked] : blocked_examples(op, *cpu)) {
    const Graph graph = testing::single_node_graph(op, examples[e]);
    for (const Node& node : blocked.nodes()) {
      EXPECT_TRUE(cpu->supports(blocked, node)) << node.name;
    }
    const auto data = testing::example_inputs(examples[e], 31 + e);
    const StepContext step{7, 11, 2};
    auto ref_exe = Executable::compile(graph, *reference, ExecOptions{.poison = true, .comm = &one_rank()}).value();
    auto cpu_exe = Executable::compile(blocked, *cpu, ExecOptions{.poison = true, .comm = &one_rank()}).value();
    const auto expected = testing::run_outputs(*ref_exe, data, step);
    const auto actual = testing::run_outputs(*cpu_exe, data, step);
    const auto again = testing::run_outputs(*cpu_exe, data, step);
    for (size_t o = 0; o < expected.size(); ++o) {
      const std::string what = std::string(op_name(op)) + " example " + std::to_string(e) +
                               " output " + std::to_string(o) + " blocked";
      expect_close(expected[o], actual[o], 1e-4, 1e-5, what);
      EXPECT_EQ(actual[o], again[o]) << what;
    }
  }
}

// Batch norm in a blocked layout runs loops that reduce each channel in the
// reference's order, in double: the reference's bits, not just its values.
TEST(BlockedBatchNorm, EqualsTheReferenceBitForBit) {
  const auto reference = make_reference_backend();
  const auto cpu = make_cpu_backend();
  for (OpKind op : {OpKind::batch_norm, OpKind::batch_norm_grad, OpKind::batch_norm_inference,
                    OpKind::batch_norm_inference_grad}) {
    const auto examples = op_info(op).examples();
    const auto blocked = blocked_examples(op, *cpu);
    ASSERT_FALSE(blocked.empty()) << op_name(op);
    for (const auto& [e, graph] : blocked) {
      const auto data = testing::example_inputs(examples[e], 77 + e);
      auto ref_exe =
          Executable::compile(testing::single_node_graph(op, examples[e]), *reference, ExecOptions{.poison = true, .comm = &one_rank()}).value();
      auto cpu_exe = Executable::compile(graph, *cpu, ExecOptions{.poison = true, .comm = &one_rank()}).value();
      const auto expected = testing::run_outputs(*ref_exe, data, StepContext{});
      const auto actual = testing::run_outputs(*cpu_exe, data, StepContext{});
      EXPECT_EQ(expected, actual) << op_name(op) << " example " << e;
    }
  }
}

// The ops whose kernels take blocked operands; a change that stops one of
// them from being blocked shows here.
TEST(BlockedOps, AreTheConvolutionNetworkOps) {
  std::vector<std::string> names;
  for (OpKind op : ops_with_blocked_examples()) names.emplace_back(op_name(op));
  for (const char* op : {"conv2d", "conv2d_grad_input", "conv2d_grad_weight", "conv3d",
                         "max_pool2d", "avg_pool2d", "global_avg_pool", "batch_norm",
                         "batch_norm_grad", "relu", "relu_grad", "add", "sgd_update",
                         "adamw_update"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), op), names.end()) << op;
  }
  for (const char* op : {"linear", "softmax", "reshape", "concat", "dropout", "upsample"}) {
    EXPECT_EQ(std::find(names.begin(), names.end(), op), names.end()) << op;
  }
}

// Every example has its op's dtypes: i32 at the inputs its row lists as
// i32_inputs, f32 elsewhere. The backends choose their kernels by the row.
TEST_P(OpBackendTest, ExamplesHaveTheOpsDtypes) {
  const OpKind op = GetParam();
  for (const OpExample& example : op_info(op).examples()) {
    const Graph graph = testing::single_node_graph(op, example);
    EXPECT_TRUE(has_op_dtypes(graph, graph.nodes()[0])) << op_name(op);
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
      for (const InplacePair& pair : inplace_pairs(node)) {
        const auto in_index = static_cast<size_t>(pair.input);
        const auto out_index = static_cast<size_t>(pair.output);
        if (in_index >= node.inputs.size() || out_index >= node.outputs.size() ||
            graph.value(node.inputs[in_index]).type != graph.value(node.outputs[out_index]).type) {
          continue;
        }
        auto data = testing::example_inputs(examples[e], 5 + e);
        const StepContext step{3, 4, 1};
        auto exe = Executable::compile(graph, *backend, ExecOptions{.poison = true, .comm = &one_rank()}).value();
        const auto expected = testing::run_outputs(*exe, data, step);

        auto kernel = backend->make_kernel(graph, NodeId(0)).value();
        std::vector<Words> outputs;
        for (ValueId v : node.outputs) outputs.emplace_back(static_cast<size_t>(graph.value(v).elements()), 0x7fc00000u);  // NaN
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
INSTANTIATE_TEST_SUITE_P(BlockedLayouts, BlockedOpTest,
                         ::testing::ValuesIn(ops_with_blocked_examples()), testing::op_test_name);

}  // namespace
}  // namespace memfit
