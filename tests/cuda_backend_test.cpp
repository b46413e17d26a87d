// Which ops the cuda backend has kernels for, and that every node of the
// mlp's and lenet's steps is among them (wherever CUDA is built); and the
// backend on a GPU (skipped without one, saying why): steps of the mlp and
// lenet (SGD and AdamW) match the cpu backend's within float tolerance and
// give the same bits twice; a step peaks at exactly the planned arena and
// gives the same bits with swapping and recomputation as without; a model
// with an op it has no kernel for yet is refused, naming the op.
#include "backends/cuda/cuda_backend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "backends/cuda/cuda_device.h"
#include "backends/cuda/cuda_kernels.h"
#include "step/compile_step.h"
#include "test_util.h"

namespace memfit {
namespace {

#define REQUIRE_CUDA_BACKEND()                                                     \
  do {                                                                             \
    if (auto probe = make_cuda_backend(); !probe) GTEST_SKIP() << probe.message(); \
  } while (0)

StepSpec mlp_spec(const std::string& backend, bool adamw = false, const char* model = "mlp") {
  StepSpec spec = testing::test_spec({.name = model, .batch = 8});
  spec.backend = backend;
  if (adamw) spec.optimizer.kind = OptimizerConfig::Kind::adamw;
  return spec;
}

void expect_close_steps(const testing::StepRun& expected, const testing::StepRun& actual,
                        const std::string& what) {
  ASSERT_EQ(expected.losses.size(), actual.losses.size()) << what;
  for (size_t i = 0; i < expected.losses.size(); ++i) {
    EXPECT_NEAR(expected.losses[i], actual.losses[i], 1e-4 * std::abs(expected.losses[i])) << what;
  }
  for (const auto& [name, data] : expected.state.tensors()) {
    const std::vector<float>* other = actual.state.find(name);
    ASSERT_NE(other, nullptr) << what << ": " << name;
    ASSERT_EQ(data.size(), other->size()) << what << ": " << name;
    size_t far = 0;
    for (size_t i = 0; i < data.size(); ++i)
      far += std::abs(data[i] - (*other)[i]) > 1e-4 + 1e-3 * std::abs(data[i]);
    EXPECT_EQ(far, 0u) << what << ": " << name;
  }
}

// The ops the cuda backend has kernels for, as README.md lists them: each
// op's examples (which has_kernel answers without a GPU).
TEST(CudaKernels, CoverTheListedOps) {
  if (!cuda::built_with_cuda()) GTEST_SKIP() << "built without CUDA";
  std::vector<std::string> covered;
  for (OpKind op : testing::all_ops()) {
    const auto examples = op_info(op).examples();
    bool any = false;
    for (const OpExample& example : examples) {
      const Graph graph = testing::single_node_graph(op, example);
      any = any || cuda::has_kernel(graph, graph.nodes()[0]);
    }
    if (any) covered.emplace_back(op_name(op));
  }
  // clang-format off
  const std::vector<std::string> listed = {
      "matmul", "linear", "conv2d", "conv2d_grad_input", "conv2d_grad_weight",
      "max_pool2d", "max_pool2d_grad", "avg_pool2d", "avg_pool2d_grad",
      "max_pool3d", "max_pool3d_grad", "avg_pool3d", "avg_pool3d_grad",
      "global_avg_pool", "global_avg_pool_grad",
      "relu", "relu_grad", "gelu", "gelu_grad", "tanh", "tanh_grad", "sigmoid", "sigmoid_grad",
      "add", "sub", "mul", "scale", "reshape", "dropout",
      "softmax", "softmax_grad", "log_softmax", "log_softmax_grad",
      "softmax_cross_entropy", "softmax_cross_entropy_grad", "reduce_sum", "reduce_mean",
      "fill", "sgd_update", "adamw_update", "conv2d_relu", "conv2d_add", "linear_relu"};
  // clang-format on
  EXPECT_EQ(covered, listed);
  EXPECT_EQ(testing::all_ops().size(), 83u);
}

// Every node of the mlp's and lenet's training steps (plain layouts, as the
// cuda backend has them) has a cuda kernel: both train on a GPU.
TEST(CudaKernels, CoverTheMlpAndLenetSteps) {
  if (!cuda::built_with_cuda()) GTEST_SKIP() << "built without CUDA";
  for (const char* model : {"mlp", "lenet"}) {
    for (const bool adamw : {false, true}) {
      StepSpec spec = testing::test_spec({.name = model, .batch = 4});
      spec.blocked_layouts = false;
      if (adamw) spec.optimizer.kind = OptimizerConfig::Kind::adamw;
      spec.accumulate = 2;
      auto step = compile_step(spec, {.accumulate_only = true});
      ASSERT_TRUE(step) << step.message();
      for (const Executable* exe : {step->apply.get(), step->accumulate_only.get()}) {
        for (const Node& node : exe->graph().nodes()) {
          EXPECT_TRUE(cuda::has_kernel(exe->graph(), node)) << model << ": " << node.name;
        }
      }
    }
  }
}

TEST(CudaBackend, MlpAndLenetStepsMatchTheCpu) {
  REQUIRE_CUDA_BACKEND();
  for (const char* model : {"mlp", "lenet"}) {
    for (const bool adamw : {false, true}) {
      const std::string what = std::string(model) + (adamw ? ", adamw" : ", sgd");
      const testing::StepRun cpu = testing::run_verified_step(mlp_spec("cpu", adamw, model));
      const testing::StepRun cuda = testing::run_verified_step(mlp_spec("cuda", adamw, model));
      expect_close_steps(cpu, cuda, what);
      const testing::StepRun again = testing::run_verified_step(mlp_spec("cuda", adamw, model));
      testing::expect_identical_steps(cuda, again, what + ", run twice");
    }
  }
}

TEST(CudaBackend, PeaksAtThePlannedArena) {
  REQUIRE_CUDA_BACKEND();
  auto program = TrainingProgram::create(mlp_spec("cuda"), 2, true);
  ASSERT_TRUE(program) << program.message();
  StateStore state;
  (*program)->init_state(state, 7);
  testing::run_synthetic_micro_batches(**program, 1, state);
  const Executable& exe = (*program)->step_executable();
  EXPECT_EQ(exe.node_backends(), std::vector<std::string>(exe.graph().num_nodes(), "cuda"));
  EXPECT_GT(exe.plan().arena_bytes, 0u);
  EXPECT_EQ((*program)->high_water_bytes(), exe.plan().arena_bytes);
}

TEST(CudaBackend, TechniquesGiveTheSameBits) {
  REQUIRE_CUDA_BACKEND();
  const testing::StepRun plain = testing::run_verified_step(mlp_spec("cuda"));
  StepSpec swapped = mlp_spec("cuda");
  swapped.swap = Swap::budget;
  const testing::StepRun with_swap = testing::run_verified_step(swapped);
  EXPECT_GT(with_swap.swap.swapped_values, 0u);
  testing::expect_identical_steps(plain, with_swap, "mlp on cuda, --swap budget");
  StepSpec recomputed = mlp_spec("cuda");
  recomputed.recompute = Recompute::sqrt;
  testing::expect_identical_steps(plain, testing::run_verified_step(recomputed),
                                  "mlp on cuda, --recompute sqrt");
  StepSpec accumulated = mlp_spec("cuda");
  accumulated.accumulate = 2;
  const testing::StepRun two = testing::run_verified_step(accumulated);
  EXPECT_EQ(two.losses.size(), 2u);
}

TEST(CudaBackend, RefusesAnOpWithoutAKernel) {
  REQUIRE_CUDA_BACKEND();
  StepSpec spec = testing::test_spec(
      {.name = "resnet-cifar", .batch = 2, .image_size = 8, .depth = 11, .width = 4});
  spec.backend = "cuda";
  auto program = TrainingProgram::create(spec, 2, false);
  ASSERT_FALSE(program);
  EXPECT_NE(program.message().find("the cuda backend has no kernel for batch_norm"),
            std::string::npos)
      << program.message();
}

}  // namespace
}  // namespace memfit
