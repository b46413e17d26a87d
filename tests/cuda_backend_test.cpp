// Which ops the cuda backend has kernels for, and that every node of the
// zoo's training steps has one (wherever CUDA is built); and the backend on a
// GPU (skipped without one, saying why):
// - every zoo model's step (SGD and AdamW; the deep ResNets aside, whose steps
//   no two implementations give alike) matches the cpu backend's within
//   float tolerance and gives the same bits twice;
// - a step peaks at exactly the planned arena, also with --fastest-kernels,
//   whose losses stay within TF32's rounding of the deterministic step's;
// - swapping, recomputation and accumulation give the plain step's bits;
// - a product's kernel takes a workspace at the plan's alignment;
// - a node it has no kernel for (a reorder into a blocked layout) is
//   refused, naming the op.
#include "backends/cuda/cuda_backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

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

StepSpec zoo_spec(const ModelOptions& model, BackendKind backend, bool adamw = false) {
  StepSpec spec = testing::test_spec(model);
  spec.backend = backend;
  if (adamw) spec.optimizer.kind = OptimizerConfig::Kind::adamw;
  return spec;
}

StepSpec mlp_spec(BackendKind backend) {
  return zoo_spec({.name = "mlp", .batch = 8}, backend);
}

// The ops of `model`'s training steps (plain layouts, as the cuda backend
// has them; SGD and AdamW; with and without accumulation) that the cuda
// backend has no kernel for.
std::set<std::string> ops_without_kernel(const ModelOptions& model) {
  std::set<std::string> missing;
  for (const bool adamw : {false, true}) {
    StepSpec spec = zoo_spec(model, BackendKind::cpu, adamw);
    spec.blocked_layouts = false;
    spec.accumulate = 2;
    auto step = compile_step(spec, {.accumulate_only = true});
    EXPECT_TRUE(step) << step.message();
    if (!step) return missing;
    for (const Executable* exe : {step->apply.get(), step->accumulate_only.get()}) {
      for (const Node& node : exe->graph().nodes()) {
        if (!cuda::has_kernel(exe->graph(), node)) missing.emplace(op_name(node.op));
      }
    }
  }
  return missing;
}

// The tiny zoo's models whose every node has a cuda kernel; the ResNets at
// 64 x 64 and batch 4, so that no batch norm normalizes fewer than 16
// values (with 2, its gradient is rounding noise, whatever the backend).
std::vector<ModelOptions> covered_zoo() {
  std::vector<ModelOptions> covered;
  for (ModelOptions model : testing::tiny_zoo()) {
    if (model.name.rfind("resnet", 0) == 0 && model.name != "resnet-cifar") {
      model.image_size = 64;
      model.batch = 4;
    }
    if (ops_without_kernel(model).empty()) covered.push_back(model);
  }
  return covered;
}

// Whether element i of parameter `name` may differ by more than rounding
// after one AdamW step: its first step moves each weight by about lr sign(g),
// however small g is, so where the gradient is rounding noise (below 1e-4 of
// the tensor's largest; a structural zero, such as the gradient of the
// attention's key bias, is noise too) the direction is as well. Judged by
// the first moment (m = (1 - beta1) g after one step) in `expected`.
std::vector<bool> adamw_noise(const StateStore& expected, const std::string& name) {
  const std::vector<float>* m = expected.find(name + ".adam_m");
  if (m == nullptr) return {};
  float largest = 0.0f;
  for (float x : *m) largest = std::max(largest, std::abs(x));
  std::vector<bool> noise(m->size());
  for (size_t i = 0; i < m->size(); ++i) noise[i] = std::abs((*m)[i]) < 1e-4f * largest;
  return noise;
}

// The cuda step `actual` against the cpu step `expected`: each loss and state
// element within float tolerance, AdamW's noise aside.
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
    const std::vector<bool> noise = adamw_noise(expected.state, name);
    size_t far = 0;
    for (size_t i = 0; i < data.size(); ++i) {
      const bool close = std::abs(data[i] - (*other)[i]) <= 1e-4 + 1e-3 * std::abs(data[i]);
      far += !close && (noise.empty() || !noise[i]);
    }
    EXPECT_EQ(far, 0u) << what << ": " << name;
  }
}

// Whether two implementations' steps of `model` agree to float tolerance at
// all. The deep ResNets (bottleneck blocks, 50 to 152 layers) at test sizes
// do not: their gradients at initialization are mostly cancellation, and
// even the cpu backend's own steps in its blocked and in the plain layouts
// differ beyond the tolerance (ResNet-101 at 64 x 64, width 16, batch 4:
// 45,975 elements of one weight's momentum). Their kernels are the
// ResNet-18's and -34's, checked op by op against the reference.
bool well_conditioned(const ModelOptions& model) {
  return model.name != "resnet50" && model.name != "resnet101" && model.name != "resnet152";
}

// Every op has a cuda kernel for one of its examples at least (has_kernel
// answers without a GPU), as docs/results.md says (the cuda backend).
TEST(CudaKernels, CoverEveryOp) {
  if (!cuda::built_with_cuda()) GTEST_SKIP() << "built without CUDA";
  std::vector<std::string> uncovered;
  for (OpKind op : testing::all_ops()) {
    bool any = false;
    for (const OpExample& example : op_info(op).examples()) {
      const Graph graph = testing::single_node_graph(op, example);
      any = any || cuda::has_kernel(graph, graph.nodes()[0]);
    }
    if (!any) uncovered.emplace_back(op_name(op));
  }
  EXPECT_EQ(uncovered, std::vector<std::string>{});
  EXPECT_EQ(testing::all_ops().size(), 83u);
}

// Each rank takes the GPU its local rank names, unless it sees one GPU only
// (its launcher gave each rank its own by CUDA_VISIBLE_DEVICES): that one.
TEST(RankGpu, TheLocalRanksOrTheOnlyVisibleOne) {
  EXPECT_EQ(rank_gpu(0, 4), 0);
  EXPECT_EQ(rank_gpu(3, 4), 3);
  EXPECT_EQ(rank_gpu(3, 1), 0);
  EXPECT_EQ(rank_gpu(2, 0), 2) << "no GPU: the backend's error names the local rank's";
  EXPECT_EQ(rank_gpu(5, 2), 5) << "too few GPUs: the same";
}

// A reorder is a copy between plain values; into or out of the cpu
// backend's blocked layouts it has no kernel.
TEST(CudaKernels, ReorderOnlyPlainToPlain) {
  if (!cuda::built_with_cuda()) GTEST_SKIP() << "built without CUDA";
  const Graph blocked = testing::blocked_round_trip_graph();
  EXPECT_FALSE(cuda::has_kernel(blocked, blocked.nodes()[0]));
  EXPECT_FALSE(cuda::has_kernel(blocked, blocked.nodes()[1]));
  const Graph plain =
      testing::single_node_graph(OpKind::reorder, op_info(OpKind::reorder).examples()[0]);
  EXPECT_TRUE(cuda::has_kernel(plain, plain.nodes()[0]));
}

// Every kernel has_kernel promises is made without a GPU (the kernels only
// read their node when made; the convolutions, which ask cuDNN, aside):
// for every example of every op and every node of the tiny zoo's steps.
TEST(CudaKernels, AreMadeForWhatTheyCover) {
  if (!cuda::built_with_cuda()) GTEST_SKIP() << "built without CUDA";
  const auto context = std::make_shared<const cuda::Context>();
  const auto make_all = [&](const Graph& graph, const std::string& what) {
    for (const Node& node : graph.nodes()) {
      if (!cuda::has_kernel(graph, node) || cuda::conv_has_kernel(graph, node)) continue;
      const auto kernel = cuda::make_kernel(graph, node, context);
      EXPECT_TRUE(kernel) << what << ": " << node.name << ": " << kernel.message();
    }
  };
  for (OpKind op : testing::all_ops()) {
    for (const OpExample& example : op_info(op).examples()) {
      make_all(testing::single_node_graph(op, example), std::string(op_name(op)));
    }
  }
  for (const ModelOptions& model : testing::tiny_zoo()) {
    StepSpec spec = zoo_spec(model, BackendKind::cpu, true);
    spec.blocked_layouts = false;
    spec.swap = Swap::budget;
    auto step = compile_step(spec, {});
    ASSERT_TRUE(step) << step.message();
    make_all(step->apply->graph(), model.name);
  }
}

// Every node of every zoo model's training step has a cuda kernel: the
// whole zoo trains on a GPU.
TEST(CudaKernels, CoverTheZooSteps) {
  if (!cuda::built_with_cuda()) GTEST_SKIP() << "built without CUDA";
  for (const ModelOptions& model : testing::tiny_zoo()) {
    EXPECT_EQ(ops_without_kernel(model), std::set<std::string>{}) << model.name;
  }
}

TEST(CudaBackend, ZooStepsMatchTheCpu) {
  REQUIRE_CUDA_BACKEND();
  for (const ModelOptions& model : covered_zoo()) {
    if (!well_conditioned(model)) continue;
    for (const bool adamw : {false, true}) {
      const std::string what = model.name + (adamw ? ", adamw" : ", sgd");
      const testing::StepRun cpu = testing::run_verified_step(zoo_spec(model, BackendKind::cpu, adamw));
      const testing::StepRun cuda = testing::run_verified_step(zoo_spec(model, BackendKind::cuda, adamw));
      expect_close_steps(cpu, cuda, what);
      const testing::StepRun again = testing::run_verified_step(zoo_spec(model, BackendKind::cuda, adamw));
      testing::expect_identical_steps(cuda, again, what + ", run twice");
    }
  }
}

TEST(CudaBackend, PeaksAtThePlannedArena) {
  REQUIRE_CUDA_BACKEND();
  auto program = TrainingProgram::create(mlp_spec(BackendKind::cuda), 2, true);
  ASSERT_TRUE(program) << program.message();
  StateStore state;
  (*program)->init_state(state, 7);
  testing::run_synthetic_micro_batches(**program, 1, state);
  const Executable& exe = (*program)->step_executable();
  EXPECT_EQ(exe.node_backends(), std::vector<std::string>(exe.graph().num_nodes(), "cuda"));
  EXPECT_GT(exe.plan().arena_bytes, 0u);
  EXPECT_EQ((*program)->high_water_bytes(), exe.plan().arena_bytes);
}

// Node times come from CUDA events: the kernels of one stream run one after
// another, inside the step, and their times add up to at most the step's.
TEST(CudaBackend, TimesKernelsByTheGpusClock) {
  REQUIRE_CUDA_BACKEND();
  auto program = TrainingProgram::create(zoo_spec({.name = "lenet", .batch = 64}, BackendKind::cuda), 2);
  ASSERT_TRUE(program) << program.message();
  ASSERT_TRUE((*program)->time_step_kernels().is_ok());
  StateStore state;
  (*program)->init_state(state, 7);
  testing::run_synthetic_micro_batches(**program, 1, state);
  const Executable& exe = (*program)->step_executable();
  const StepTimeline& step = exe.last_step();
  double previous_end = step.data_in.end, total = 0;
  for (size_t n = 0; n < exe.graph().num_nodes(); ++n) {
    const Span& span = step.nodes[n];
    EXPECT_GE(span.start, previous_end - 1e-6) << n;
    EXPECT_GE(span.end, span.start) << n;
    previous_end = span.end;
    total += span.end - span.start;
  }
  EXPECT_LE(previous_end, step.seconds + 1e-6);
  EXPECT_GT(total, 0.0);
  EXPECT_LE(total, step.seconds);
  // The outputs' copy counts from the kernels' end, not from the host's last
  // launch: the parts of the step do not overlap, and a profile's phases add
  // up to at most the step.
  EXPECT_GE(step.data_out.start, previous_end - 1e-6);
  EXPECT_LE(step.data_out.start, step.data_out.end);
  EXPECT_LE(step.data_in.end + total + (step.data_out.end - step.data_out.start),
            step.seconds + 1e-6);
}

TEST(CudaBackend, TechniquesGiveTheSameBits) {
  REQUIRE_CUDA_BACKEND();
  for (const ModelOptions& model : covered_zoo()) {
    const std::string what = model.name + " on cuda";
    const testing::StepRun plain = testing::run_verified_step(zoo_spec(model, BackendKind::cuda));
    StepSpec swapped = zoo_spec(model, BackendKind::cuda);
    swapped.swap = Swap::budget;
    const testing::StepRun with_swap = testing::run_verified_step(swapped);
    EXPECT_GT(with_swap.swap.swapped_values, 0u) << what;
    testing::expect_identical_steps(plain, with_swap, what + ", --swap budget");
    StepSpec recomputed = zoo_spec(model, BackendKind::cuda);
    recomputed.recompute = Recompute::sqrt;
    testing::expect_identical_steps(plain, testing::run_verified_step(recomputed),
                                    what + ", --recompute sqrt");
    StepSpec accumulated = zoo_spec(model, BackendKind::cuda);
    accumulated.accumulate = 2;
    EXPECT_EQ(testing::run_verified_step(accumulated).losses.size(), 2u) << what;
  }
}

// With --fastest-kernels (cuDNN's and cuBLAS's fastest algorithms, TF32
// tensor cores included), steps of the convolution and product models still
// peak at their planned arena, and their losses stay within TF32's rounding
// (1e-2) of the deterministic FP32 step's.
TEST(CudaBackend, FastestKernelsKeepThePlan) {
  REQUIRE_CUDA_BACKEND();
  for (const ModelOptions& model : testing::tiny_zoo()) {
    if (model.name != "lenet" && model.name != "mlp" && model.name != "resnet-cifar" &&
        model.name != "resnet18") {
      continue;
    }
    StepSpec fastest = zoo_spec(model, BackendKind::cuda);
    fastest.fastest_kernels = true;
    const testing::StepRun fast = testing::run_verified_step(fastest);
    const testing::StepRun exact = testing::run_verified_step(zoo_spec(model, BackendKind::cuda));
    ASSERT_EQ(fast.losses.size(), exact.losses.size()) << model.name;
    for (size_t i = 0; i < fast.losses.size(); ++i) {
      EXPECT_NEAR(fast.losses[i], exact.losses[i], 1e-2 * std::abs(exact.losses[i])) << model.name;
    }
    auto program = TrainingProgram::create(fastest, 1, true);
    ASSERT_TRUE(program) << program.message();
    StateStore state;
    (*program)->init_state(state, 7);
    testing::run_synthetic_micro_batches(**program, 1, state);
    EXPECT_EQ((*program)->high_water_bytes(), (*program)->step_executable().plan().arena_bytes)
        << model.name;
  }
}

// cublasSetWorkspace takes a pointer aligned to 256 bytes, and the plan
// aligns a slice to 64 only: a product's kernel given its workspace 64 bytes
// past a 256-byte boundary (as a plan may place it) gives the reference's
// output, and the device's synchronize reports no failed library call.
TEST(CudaBackend, ProductsTakeAWorkspaceAtThePlansAlignment) {
  REQUIRE_CUDA_BACKEND();
  auto cuda = make_cuda_backend();
  const auto reference = make_reference_backend();
  for (const OpKind op : {OpKind::linear, OpKind::matmul}) {
    SCOPED_TRACE(op_name(op));
    const OpExample example = op_info(op).examples()[0];
    const Graph graph = testing::single_node_graph(op, example);
    auto kernel = (*cuda)->make_kernel(graph, NodeId(0));
    auto expected_kernel = reference->make_kernel(graph, NodeId(0));
    ASSERT_TRUE(kernel && expected_kernel);
    const std::vector<testing::Words> inputs = testing::example_inputs(example, 5);
    const size_t out_bytes = graph.value(graph.nodes()[0].outputs[0]).bytes();
    // Inputs and output at 256-byte boundaries, the workspace 64 bytes past one.
    const auto rounded = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
    std::vector<size_t> at;
    size_t end = 0;
    for (const testing::Words& words : inputs) {
      at.push_back(end);
      end += rounded(words.size() * sizeof(uint32_t));
    }
    const size_t out_at = end;
    const size_t workspace_at = out_at + rounded(out_bytes) + 64;
    const Device& device = *(*cuda)->device();
    auto arena = device.allocate(workspace_at + (*kernel)->workspace_bytes());
    ASSERT_TRUE(arena) << arena.message();
    std::byte* base = arena->get();
    std::vector<void*> on_gpu, on_host;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const size_t bytes = inputs[i].size() * sizeof(uint32_t);
      ASSERT_TRUE(device.to_device(base + at[i], inputs[i].data(), bytes).is_ok());
      on_gpu.push_back(base + at[i]);
      on_host.push_back(const_cast<uint32_t*>(inputs[i].data()));
    }
    const std::vector<void*> gpu_out{base + out_at};
    (*kernel)->run(KernelArgs{on_gpu, gpu_out, base + workspace_at, {}});
    const Status synchronized = device.synchronize();
    ASSERT_TRUE(synchronized.is_ok()) << synchronized.message();
    std::vector<float> actual(out_bytes / sizeof(float)), expected(actual.size());
    ASSERT_TRUE(device.to_host(actual.data(), base + out_at, out_bytes).is_ok());
    const std::vector<void*> host_out{expected.data()};
    std::vector<std::byte> host_workspace((*expected_kernel)->workspace_bytes() + 1);
    (*expected_kernel)->run(KernelArgs{on_host, host_out, host_workspace.data(), {}});
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_NEAR(expected[i], actual[i], 1e-5 + 1e-4 * std::abs(expected[i])) << i;
    }
  }
}

// A node the cuda backend has no kernel for (a reorder into the cpu
// backend's blocked layout; a plain-to-plain reorder is a copy) is refused
// when its executable is made, naming the op: the reference kernels run on
// the host, not on the device.
TEST(CudaBackend, RefusesAnOpWithoutAKernel) {
  REQUIRE_CUDA_BACKEND();
  auto cuda = make_cuda_backend();
  const Graph graph = testing::blocked_round_trip_graph();
  auto exe = Executable::compile(graph, **cuda, ExecOptions{});
  ASSERT_FALSE(exe);
  EXPECT_NE(exe.message().find("the cuda backend has no kernel for reorder"), std::string::npos)
      << exe.message();
}

}  // namespace
}  // namespace memfit
