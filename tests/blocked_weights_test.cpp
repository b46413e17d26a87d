// Convolution weights in oneDNN's blocked weights layout (oi8, oi16) between
// steps: the host conversion of state (pack_layout, unpack_layout) against
// oneDNN's own reorder, the layout pass keeping weights, their gradients and
// their optimizer state blocked with no reorder per step, training steps and
// accumulation equal to those with plain weights bit for bit, and the state
// copied between differently laid out executables.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "backends/cpu/dnnl_util.h"
#include "passes/assign_layouts.h"
#include "passes/fuse_gradient_sums.h"
#include "step/compile_step.h"
#include "test_util.h"

namespace memfit {
namespace {

std::vector<float> counting(int64_t n) {
  std::vector<float> data(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) data[static_cast<size_t>(i)] = static_cast<float>(i + 1);
  return data;
}

// pack_layout writes what oneDNN's reorder writes (padding zero) and
// unpack_layout gives the plain tensor back, in every blocked layout, with
// channels in whole and in partial blocks.
TEST(BlockedWeights, PackLayoutEqualsOneDnnsReorder) {
  const Shape shapes[] = {{16, 8, 3, 3}, {20, 3, 5, 5}, {5, 19, 1, 1}, {9, 17, 2, 3, 2}};
  for (const Shape& shape : shapes) {
    for (Layout layout : {Layout::c8, Layout::c16, Layout::oi8, Layout::oi16}) {
      SCOPED_TRACE(shape_string(shape) + " " + std::string(layout_name(layout)));
      const std::vector<float> plain = counting(num_elements(shape));
      std::vector<float> packed(static_cast<size_t>(stored_elements(shape, layout)), -1.0f);
      pack_layout(plain.data(), shape, layout, packed.data());
      // oneDNN's reorder into the same layout, over a buffer of NaN.
      const dnnl::memory::desc to = cpu::layout_md(shape, layout);
      ASSERT_EQ(to.get_size(), packed.size() * sizeof(float));
      std::vector<float> expected(packed.size(), std::nanf(""));
      dnnl::memory from_memory(cpu::plain_md(shape), cpu::engine(), const_cast<float*>(plain.data()));
      dnnl::memory to_memory(to, cpu::engine(), expected.data());
      dnnl::reorder(from_memory, to_memory).execute(cpu::stream(), from_memory, to_memory);
      cpu::stream().wait();
      size_t zeros = 0;
      for (size_t i = 0; i < packed.size(); ++i) {
        ASSERT_EQ(packed[i], expected[i]) << i;
        zeros += packed[i] == 0.0f;
      }
      EXPECT_EQ(zeros, packed.size() - plain.size());  // the padding, and only it
      std::vector<float> back(plain.size(), -1.0f);
      unpack_layout(packed.data(), shape, layout, back.data());
      EXPECT_EQ(back, plain);
    }
  }
}

const ModelOptions kResnet{.name = "resnet18", .batch = 2, .image_size = 16, .classes = 4, .width = 16};

Layout native_weight_layout(const Backend& backend) {
  return backend.blocked_layout() == Layout::c16 ? Layout::oi16 : Layout::oi8;
}

// In resnet18's step every convolution but the first keeps its weights and
// their momentum or Adam moments in the weights layout (on AVX2; see below),
// and no reorder reads state or writes its next value: nothing of the state
// is converted in a step. (A weight gradient and its accumulator are in it where oneDNN's
// weight-gradient kernel writes it so, at every layer of resnet18 at 224^2;
// at this test's 2x2 and 1x1 layers it does not, and the gradient is
// reordered once for the update.)
TEST(BlockedWeights, StepKeepsConvolutionWeightsAndTheirStateBlocked) {
  for (OptimizerConfig::Kind kind : {OptimizerConfig::Kind::sgd, OptimizerConfig::Kind::adamw}) {
    for (int64_t accumulate : {1, 2}) {
      StepSpec spec = testing::test_spec(kResnet, accumulate);
      spec.optimizer.kind = kind;
      SCOPED_TRACE(std::string(kind == OptimizerConfig::Kind::sgd ? "sgd" : "adamw") + " accumulate " +
                   std::to_string(accumulate));
      const CompiledStep step = compile_step(spec, {.accumulate_only = true}).value();
      const Layout weights = native_weight_layout(*step.backend);
      EXPECT_EQ(step.passes.layouts.weights, weights);
      for (const Executable* exe : {step.apply.get(), step.accumulate_only.get()}) {
        if (exe == nullptr) continue;
        const Graph& graph = exe->graph();
        size_t blocked_weights = 0, blocked_moments = 0;
        for (const Value& v : graph.values()) {
          if (v.producer.valid() || !is_persistent(v.role) || v.type.shape.size() != 4) continue;
          const bool first_layer = v.name.rfind("conv1.", 0) == 0;
          const bool accumulator = v.name.find(".grad_acc") != std::string::npos;
          if (first_layer) {
            EXPECT_EQ(v.layout, Layout::plain) << v.name;
          }
          if (first_layer || accumulator || v.layout == Layout::plain) continue;
          EXPECT_EQ(v.layout, weights) << v.name;
          blocked_weights += v.role == Role::parameter;
          blocked_moments += v.role == Role::optimizer_state;
        }
        // 20 convolutions (3 of them 1x1 shortcuts) less conv1, where oneDNN
        // 2.6 chooses OIhw8i8o for all of them (AVX2); another ISA's kernels
        // may choose other formats for some, whose weights then stay plain.
        if (step.backend->isa() == "avx2") {
          EXPECT_EQ(blocked_weights, 19u);
        } else {
          EXPECT_GE(blocked_weights, 1u);
        }
        const bool applies = exe == step.apply.get();
        const size_t moments = kind == OptimizerConfig::Kind::sgd ? 1 : 2;
        EXPECT_EQ(blocked_moments, applies ? moments * blocked_weights : 0u);
        for (const Node& node : graph.nodes()) {
          if (node.op != OpKind::reorder) continue;
          const Value& from = graph.value(node.inputs[0]);
          EXPECT_FALSE(!from.producer.valid() && is_persistent(from.role)) << node.name;
        }
        for (const StateUpdate& u : graph.updates()) {
          const NodeId producer = graph.value(u.next).producer;
          EXPECT_NE(graph.node(producer).op, OpKind::reorder) << graph.value(u.state).name;
        }
      }
    }
  }
}

// Two SGD steps (momentum read in the second) of resnet18's step graph with
// weights in their blocked layout and with plain weights that each kernel
// reorders: the same kernels on the same bytes, so every loss and every bit
// of the state (which comes out plain) are equal, with accumulation too.
TEST(BlockedWeights, StepsEqualThoseOfPlainWeightsBitForBit) {
  const auto cpu = make_cpu_backend();
  for (UpdateMode mode : {UpdateMode::apply, UpdateMode::accumulate_and_apply}) {
    SCOPED_TRACE(mode == UpdateMode::apply ? "apply" : "accumulate and apply");
    Model model;
    const Graph built = fuse_gradient_sums(
        build_step_graph(kResnet, mode == UpdateMode::apply ? 1 : 2, testing::sgd(), mode, &model, true)
            .value());
    LayoutSummary with_summary, without_summary;
    const Graph with = assign_layouts(built, *cpu, &with_summary).value();
    const Graph without = assign_layouts(built, *cpu, &without_summary, {.blocked_weights = false}).value();
    EXPECT_GT(with_summary.weight_values, 0u);  // weights, gradients, momentum (and accumulators)
    EXPECT_EQ(without_summary.weight_values, 0u);
    // Data and state as the host holds them.
    std::vector<std::vector<float>> data;
    std::vector<std::vector<int32_t>> labels;
    Feeds feeds;
    StateStore initial;
    for (const Value& v : built.values()) {
      if (v.producer.valid()) continue;
      const int64_t n = v.elements();
      if (is_persistent(v.role)) {
        std::vector<float>& tensor = initial[v.name];
        for (int64_t i = 0; i < n; ++i) tensor.push_back(0.1f * std::sin(0.37f * static_cast<float>(i) + v.name.size()));
      } else if (v.type.dtype == DType::i32) {
        labels.emplace_back();
        for (int64_t i = 0; i < n; ++i) labels.back().push_back(static_cast<int32_t>(i % 4));
        feeds[v.name] = labels.back().data();
      } else {
        data.emplace_back();
        for (int64_t i = 0; i < n; ++i) data.back().push_back(std::cos(0.11f * static_cast<float>(i)));
        feeds[v.name] = data.back().data();
      }
    }
    auto run = [&](const Graph& graph) {
      auto exe = Executable::compile(graph, *cpu, ExecOptions{.poison = true}).value();
      StateStore state = initial;
      std::vector<float> outputs;
      for (int64_t step = 0; step < 2; ++step) {
        StepResult result = exe->run(state, feeds, StepContext{.optimizer_step = step}).value();
        for (ValueId v : graph.outputs()) {
          const std::vector<float>& out = result.outputs.at(graph.value(v).name);
          outputs.insert(outputs.end(), out.begin(), out.end());
        }
      }
      return std::make_pair(outputs, state);
    };
    const auto [expected_outputs, expected_state] = run(without);
    const auto [outputs, state] = run(with);
    ASSERT_FALSE(outputs.empty());
    EXPECT_EQ(outputs, expected_outputs);
    for (const auto& [name, tensor] : expected_state.tensors()) {
      ASSERT_NE(state.find(name), nullptr) << name;
      EXPECT_EQ(*state.find(name), tensor) << name;
    }
  }
}

// State copied between an executable with blocked weights and one with plain
// ones goes through the plain layout: both hold the same tensors after it.
TEST(BlockedWeights, CopiesStateBetweenLayouts) {
  StepSpec spec = testing::test_spec(kResnet);
  const CompiledStep blocked = compile_step(spec).value();
  spec.blocked_layouts = false;
  const CompiledStep plain = compile_step(spec).value();
  StateStore initial;
  for (const auto& [name, shape] : blocked.persistent) initial[name] = counting(num_elements(shape));
  ASSERT_TRUE(blocked.apply->allocate(true).is_ok());
  ASSERT_TRUE(plain.apply->allocate(true).is_ok());
  ASSERT_TRUE(blocked.apply->load_state(initial).is_ok());
  ASSERT_TRUE(plain.apply->copy_state_from(*blocked.apply).is_ok());
  StateStore from_plain;
  ASSERT_TRUE(plain.apply->store_state(from_plain).is_ok());
  ASSERT_TRUE(blocked.apply->copy_state_from(*plain.apply).is_ok());
  StateStore round_trip;
  ASSERT_TRUE(blocked.apply->store_state(round_trip).is_ok());
  for (const auto& [name, tensor] : initial.tensors()) {
    EXPECT_EQ(*from_plain.find(name), tensor) << name;
    EXPECT_EQ(*round_trip.find(name), tensor) << name;
  }
}

}  // namespace
}  // namespace memfit
