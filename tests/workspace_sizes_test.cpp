// The policies' planner (step_planner) creates one kernel per distinct node
// signature and keeps none: every node's workspace it assumes is the one a
// kernel of that node asks for, and its plan of a step is Executable::prepare's.
#include "step/workspace_sizes.h"

#include <gtest/gtest.h>

#include "passes/recompute_policy.h"
#include "runtime/backend_plan.h"
#include "step/compile_step.h"
#include "test_util.h"

namespace memfit {
namespace {

using testing::model_param_name;

// The step graph of `model` with sqrt recomputation: recomputed nodes repeat
// the signatures of forward nodes.
Graph recomputed_step(const ModelOptions& model, const Backend& backend) {
  auto graph = build_step_graph(model, 1, testing::sgd(), UpdateMode::apply, nullptr);
  EXPECT_TRUE(graph.is_ok()) << graph.message();
  PolicyContext context;
  context.plan = step_planner(backend, true);
  auto recomputed = recompute_step_graph(std::move(graph).value(), Recompute::sqrt, context);
  EXPECT_TRUE(recomputed.is_ok()) << recomputed.message();
  return std::move(recomputed->graph);
}

// Every node's workspace as a kernel made for it alone reports it.
std::vector<size_t> kernel_workspaces(const Graph& graph, const Backend& backend) {
  const auto reference = make_reference_backend();
  std::vector<size_t> bytes;
  for (size_t n = 0; n < graph.num_nodes(); ++n) {
    const NodeId id(static_cast<int32_t>(n));
    auto made = make_node_kernel(graph, id, backend, *reference);
    EXPECT_TRUE(made.is_ok()) << made.message();
    bytes.push_back(made.is_ok() ? made->kernel->workspace_bytes() : 0);
  }
  return bytes;
}

class WorkspaceSizesTest : public ::testing::TestWithParam<ModelOptions> {};

TEST_P(WorkspaceSizesTest, AreTheKernelsWorkspaces) {
  const auto backend = make_cpu_backend(2);
  const Graph step = recomputed_step(GetParam(), *backend);
  WorkspaceSizes workspaces(*backend);
  auto sizes = workspaces.of(step);
  ASSERT_TRUE(sizes.is_ok()) << sizes.message();
  EXPECT_EQ(*sizes, kernel_workspaces(step, *backend));
}

TEST_P(WorkspaceSizesTest, PlannerPlansAsPrepare) {
  const auto backend = make_cpu_backend(2);
  const Graph step = recomputed_step(GetParam(), *backend);
  auto planned = step_planner(*backend, true)(step);
  ASSERT_TRUE(planned.is_ok()) << planned.message();
  auto prepared = Executable::prepare(step, *backend, ExecOptions{.share = true});
  ASSERT_TRUE(prepared.is_ok()) << prepared.message();
  const Executable& exe = **prepared;
  EXPECT_EQ(print_graph(planned->graph), print_graph(exe.graph()));
  EXPECT_EQ(planned->value_bytes, exe.sizes().value_bytes);
  EXPECT_EQ(planned->plan.arena_bytes, exe.plan().arena_bytes);
  EXPECT_EQ(planned->plan.host_bytes, exe.plan().host_bytes);
  ASSERT_EQ(planned->plan.value_slices.size(), exe.plan().value_slices.size());
  for (size_t v = 0; v < exe.plan().value_slices.size(); ++v) {
    EXPECT_EQ(planned->plan.value_slices[v].offset, exe.plan().value_slices[v].offset) << "value " << v;
  }
  ASSERT_EQ(planned->plan.workspace_slices.size(), exe.plan().workspace_slices.size());
  for (size_t n = 0; n < exe.plan().workspace_slices.size(); ++n) {
    EXPECT_EQ(planned->plan.workspace_slices[n].bytes, exe.plan().workspace_slices[n].bytes) << "node " << n;
    EXPECT_EQ(planned->plan.workspace_slices[n].offset, exe.plan().workspace_slices[n].offset) << "node " << n;
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, WorkspaceSizesTest, ::testing::ValuesIn(testing::tiny_zoo()),
                         model_param_name);

// The comparisons above mean something only where kernels ask for workspace:
// oneDNN's convolutions and pooling at these sizes do.
TEST(WorkspaceSizes, SomeKernelsAskForWorkspace) {
  const auto backend = make_cpu_backend(2);
  const Graph step = recomputed_step({.name = "resnet-cifar", .batch = 8, .image_size = 32, .depth = 11},
                                     *backend);
  WorkspaceSizes workspaces(*backend);
  auto sizes = workspaces.of(step);
  ASSERT_TRUE(sizes.is_ok()) << sizes.message();
  size_t asking = 0;
  for (size_t bytes : *sizes) asking += bytes > 0;
  EXPECT_GT(asking, 0u);
  EXPECT_EQ(*sizes, kernel_workspaces(step, *backend));
}

}  // namespace
}  // namespace memfit
