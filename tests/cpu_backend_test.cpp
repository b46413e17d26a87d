// The CPU backend against the reference backend: every op with a oneDNN kernel,
// in several configurations, run on the same random inputs. Each case also runs
// the kernel a second time on new buffers (primitives are reused, buffers
// rebound), in place where the op table allows it, with guard bytes around
// every buffer and the workspace (a kernel touches exactly the bytes it
// declares), and with poisoned outputs and workspace (nothing is read
// uninitialized).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "memfit/ir.h"
#include "ops/op_table.h"
#include "ops/typed_graph.h"
#include "runtime/kernel.h"
#include "test_util.h"

namespace memfit {
namespace {

// How a test fills an input.
enum class Fill {
  normal,    // N(0, 1)
  positive,  // |N(0, 1)| + 0.1: variances
  ties,      // N(0, 1) rounded to halves: many equal maxima in pooling windows
};

struct OpCase {
  OpKind op{};
  std::vector<Shape> inputs;
  Attrs attrs;
  std::vector<Fill> fills;  // one per input; empty means all normal
};

std::string describe(const OpCase& c) {
  std::string text(op_name(c.op));
  for (const Shape& s : c.inputs) {
    text += ' ';  // appended separately: GCC 12 warns on " " + string (a false -Wrestrict)
    text += shape_string(s);
  }
  return text;
}

// A one-node graph: the inputs, then the node, typed by shape inference.
struct OneNode {
  Graph graph;
  NodeId node;
};

OneNode build(const OpCase& c) {
  OneNode built;
  std::vector<ValueId> inputs;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    inputs.push_back(built.graph.add_input("in" + std::to_string(i),
                                           TensorType{c.inputs[i], DType::f32}, Role::input));
  }
  auto node = add_node(built.graph, c.op, inputs, c.attrs, "node");
  EXPECT_TRUE(node.is_ok()) << describe(c) << ": " << node.status().message();
  if (node.is_ok()) built.node = *node;
  return built;
}

std::vector<float> make_input(size_t count, Fill fill, uint64_t seed) {
  std::vector<float> values = testing::random_normal(count, seed);
  for (float& v : values) {
    if (fill == Fill::positive) v = std::abs(v) + 0.1f;
    if (fill == Fill::ties) v = std::round(v * 2) / 2;
  }
  return values;
}

std::vector<std::vector<float>> make_inputs(const OpCase& c, uint64_t seed) {
  std::vector<std::vector<float>> inputs;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const Fill fill = c.fills.empty() ? Fill::normal : c.fills[i];
    inputs.push_back(
        make_input(static_cast<size_t>(num_elements(c.inputs[i])), fill, seed * 131 + i));
  }
  return inputs;
}

// `bytes` bytes between two guard zones of a known pattern. The data starts
// 16-byte aligned, plus `shift` bytes.
class GuardedBuffer {
 public:
  GuardedBuffer(size_t bytes, uint8_t fill, size_t shift = 0)
      : bytes_(bytes), front_(kGuard + shift), storage_(front_ + bytes + kGuard, fill) {
    std::fill_n(storage_.begin(), front_, kPattern);
    std::fill_n(storage_.end() - kGuard, kGuard, kPattern);
  }
  void* data() { return storage_.data() + front_; }
  const void* data() const { return storage_.data() + front_; }
  size_t bytes() const { return bytes_; }
  bool guards_intact() const {
    const auto intact = [](uint8_t b) { return b == kPattern; };
    return std::all_of(storage_.begin(), storage_.begin() + front_, intact) &&
           std::all_of(storage_.end() - kGuard, storage_.end(), intact);
  }

 private:
  static constexpr size_t kGuard = 256;
  static constexpr uint8_t kPattern = 0xA5;
  size_t bytes_;
  size_t front_;
  std::vector<uint8_t> storage_;
};

// One run of a kernel. Buffers live as long as the object, so two runs alive
// at once have distinct addresses.
struct KernelRun {
  std::vector<GuardedBuffer> inputs;
  std::vector<GuardedBuffer> outputs;
  std::unique_ptr<GuardedBuffer> workspace;
  std::vector<std::vector<float>> results;  // one per output
};

// Runs `kernel` on `values`. Outputs and workspace start as NaN (0xFF bytes).
// `alias` is an in-place pair (input, output) that shares one buffer, or none;
// the workspace starts `workspace_shift` bytes past a 16-byte boundary.
std::unique_ptr<KernelRun> run_kernel(Kernel& kernel, const Graph& graph, const Node& node,
                                      const std::vector<std::vector<float>>& values,
                                      const InplacePair* alias = nullptr,
                                      size_t workspace_shift = 0) {
  auto run = std::make_unique<KernelRun>();
  for (const auto& v : values) {
    run->inputs.emplace_back(v.size() * sizeof(float), 0);
    std::memcpy(run->inputs.back().data(), v.data(), v.size() * sizeof(float));
  }
  for (const ValueId id : node.outputs) run->outputs.emplace_back(graph.value(id).bytes(), 0xFF);
  run->workspace = std::make_unique<GuardedBuffer>(kernel.workspace_bytes(), 0xFF, workspace_shift);

  std::vector<void*> in_ptrs, out_ptrs;
  for (auto& b : run->inputs) in_ptrs.push_back(b.data());
  for (auto& b : run->outputs) out_ptrs.push_back(b.data());
  if (alias) {
    EXPECT_EQ(run->inputs[alias->input].bytes(), run->outputs[alias->output].bytes());
    out_ptrs[alias->output] = in_ptrs[alias->input];
  }
  KernelArgs args{in_ptrs, out_ptrs, kernel.workspace_bytes() ? run->workspace->data() : nullptr,
                  StepContext{}};
  kernel.run(args);

  for (const auto* list : {&run->inputs, &run->outputs}) {
    for (const GuardedBuffer& b : *list) EXPECT_TRUE(b.guards_intact()) << op_name(node.op);
  }
  EXPECT_TRUE(run->workspace->guards_intact()) << op_name(node.op) << ": workspace overrun";
  for (size_t o = 0; o < out_ptrs.size(); ++o) {
    const auto* data = static_cast<const float*>(out_ptrs[o]);
    run->results.emplace_back(data, data + graph.value(node.outputs[o]).elements());
  }
  return run;
}

// |got - want| <= rtol (|want| + scale), with scale the largest |want| (at least 1):
// relative where values are large, absolute near zero.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rtol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 1;
  for (float w : want) scale = std::max(scale, std::abs(static_cast<double>(w)));
  for (size_t i = 0; i < got.size(); ++i) {
    const double error = std::abs(static_cast<double>(got[i]) - want[i]);
    if (!(error <= rtol * (std::abs(want[i]) + scale))) {
      ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", expected " << want[i];
      return;
    }
  }
}

void expect_same_inputs(const KernelRun& run, const std::vector<std::vector<float>>& values,
                        const std::string& what) {
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(std::memcmp(run.inputs[i].data(), values[i].data(), values[i].size() * 4), 0)
        << what << ": input " << i << " was overwritten";
  }
}

constexpr double kTolerance = 1e-4;

// The whole check of one case, described at the top of this file.
void check_case(const OpCase& c) {
  SCOPED_TRACE(describe(c));
  const OneNode built = build(c);
  ASSERT_TRUE(built.node.valid());
  const Graph& graph = built.graph;
  const Node& node = graph.node(built.node);
  const auto cpu = make_cpu_backend();
  const auto reference = make_reference_backend();
  ASSERT_TRUE(cpu->supports(graph, node));
  auto cpu_kernel = cpu->make_kernel(graph, built.node);
  ASSERT_TRUE(cpu_kernel.is_ok()) << cpu_kernel.message();
  auto ref_kernel = reference->make_kernel(graph, built.node);
  ASSERT_TRUE(ref_kernel.is_ok()) << ref_kernel.message();
  Kernel& kernel = **cpu_kernel;

  const auto first_values = make_inputs(c, 1);
  const auto second_values = make_inputs(c, 2);
  const auto want_first = run_kernel(**ref_kernel, graph, node, first_values);
  const auto want_second = run_kernel(**ref_kernel, graph, node, second_values);

  const auto first = run_kernel(kernel, graph, node, first_values);
  expect_same_inputs(*first, first_values, "first run");
  const auto second = run_kernel(kernel, graph, node, second_values);
  // Nothing promises an aligned workspace; the results must not depend on it.
  const auto again = run_kernel(kernel, graph, node, first_values, nullptr, 4);
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    const std::string out = "output " + std::to_string(o);
    expect_close(first->results[o], want_first->results[o], kTolerance, out);
    expect_close(second->results[o], want_second->results[o], kTolerance, out + ", second run");
    EXPECT_EQ(first->results[o], again->results[o]) << out << ": a rerun differs";
  }

  for (const InplacePair& pair : inplace_pairs(node)) {
    // A pair names an input or output that this node may not have (sgd
    // without momentum has no velocity).
    if (static_cast<size_t>(pair.input) >= node.inputs.size() ||
        static_cast<size_t>(pair.output) >= node.outputs.size()) {
      continue;
    }
    // The planner writes in place only over an input of the output's type
    // (not over a broadcast operand).
    if (graph.value(node.inputs[static_cast<size_t>(pair.input)]).type !=
        graph.value(node.outputs[static_cast<size_t>(pair.output)]).type) {
      continue;
    }
    const auto in_place = run_kernel(kernel, graph, node, first_values, &pair);
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      expect_close(in_place->results[o], want_first->results[o], kTolerance,
                   "output " + std::to_string(o) + " in place (" + std::to_string(pair.input) +
                       " -> " + std::to_string(pair.output) + ")");
    }
  }
}

// --- Cases --------------------------------------------------------------------

// The output shape of a case, from shape inference.
Shape output_of(const OpCase& c, size_t index = 0) {
  const OneNode built = build(c);
  return built.graph.value(built.graph.node(built.node).outputs[index]).type.shape;
}

struct ConvConfig {
  Shape x, w;
  Conv2dAttrs attrs;
  bool bias = false;
};

std::vector<ConvConfig> conv_configs() {
  return {
      {{2, 3, 7, 7}, {4, 3, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}, true},
      {{2, 4, 9, 8}, {6, 4, 3, 3}, {{2, 2}, {0, 0}, {1, 1}, 1}, false},
      {{1, 3, 10, 10}, {5, 3, 3, 3}, {{1, 1}, {2, 2}, {2, 2}, 1}, true},
      {{2, 4, 6, 6}, {6, 2, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 2}, false},
      {{2, 8, 7, 7}, {8, 1, 3, 3}, {{2, 2}, {1, 1}, {1, 1}, 8}, true},  // depthwise
      {{1, 2, 8, 7}, {3, 2, 2, 3}, {{3, 2}, {1, 0}, {1, 2}, 1}, true},  // floor, uneven
      {{4, 16, 5, 5}, {8, 16, 1, 1}, {{1, 1}, {0, 0}, {1, 1}, 1}, false},
      {{2, 32, 9, 9}, {16, 32, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}, true},
      {{2, 32, 8, 8}, {64, 16, 3, 3}, {{2, 2}, {1, 1}, {1, 1}, 2}, false},
  };
}

Conv2dGradAttrs grad_attrs(const Conv2dAttrs& a, Shape shape, bool bias) {
  return {a.stride, a.pad, a.dilation, a.groups, std::move(shape), bias};
}

TEST(CpuBackend, Conv2d) {
  for (const ConvConfig& k : conv_configs()) {
    OpCase c{OpKind::conv2d, {k.x, k.w}, k.attrs, {}};
    if (k.bias) c.inputs.push_back({k.w[0]});
    check_case(c);
  }
}

TEST(CpuBackend, Conv2dGradInput) {
  for (const ConvConfig& k : conv_configs()) {
    const Shape y = output_of({OpKind::conv2d, {k.x, k.w}, k.attrs, {}});
    check_case({OpKind::conv2d_grad_input, {y, k.w}, grad_attrs(k.attrs, k.x, false), {}});
  }
}

TEST(CpuBackend, Conv2dGradWeight) {
  for (const ConvConfig& k : conv_configs()) {
    const Shape y = output_of({OpKind::conv2d, {k.x, k.w}, k.attrs, {}});
    check_case({OpKind::conv2d_grad_weight, {y, k.x}, grad_attrs(k.attrs, k.w, k.bias), {}});
  }
}

struct PoolConfig {
  Shape x;
  Pool2dAttrs attrs;
  Fill fill = Fill::normal;
};

std::vector<PoolConfig> pool_configs() {
  return {
      {{2, 3, 8, 8}, {{2, 2}, {2, 2}, {0, 0}, false}},
      {{2, 4, 7, 9}, {{3, 3}, {2, 2}, {1, 1}, false}},
      {{2, 4, 7, 9}, {{3, 3}, {2, 2}, {1, 1}, true}},
      {{1, 3, 5, 6}, {{3, 2}, {2, 1}, {1, 1}, true}},
      {{1, 2, 4, 4}, {{2, 2}, {1, 1}, {1, 1}, false}},  // y larger than x
      {{2, 16, 9, 9}, {{3, 3}, {1, 1}, {1, 1}, false}, Fill::ties},
      {{2, 3, 6, 6}, {{2, 2}, {2, 2}, {0, 0}, false}, Fill::ties},
  };
}

TEST(CpuBackend, MaxPool2d) {
  for (const PoolConfig& p : pool_configs()) {
    check_case({OpKind::max_pool2d, {p.x}, p.attrs, {p.fill}});
  }
}

// Ties go to the first maximum of the window, as in the reference.
TEST(CpuBackend, MaxPool2dGrad) {
  for (const PoolConfig& p : pool_configs()) {
    const Shape y = output_of({OpKind::max_pool2d, {p.x}, p.attrs, {}});
    check_case({OpKind::max_pool2d_grad, {y, p.x}, p.attrs, {Fill::normal, p.fill}});
  }
}

// Max pooling picks the reference's element, so its forward pass equals the
// reference bit for bit, on planes spread over threads; it needs no workspace.
TEST(CpuBackend, MaxPool2dEqualsReferenceBitForBit) {
  std::vector<PoolConfig> configs = pool_configs();
  configs.push_back({{4, 64, 28, 28}, {{3, 3}, {2, 2}, {1, 1}, false}});
  for (const PoolConfig& p : configs) {
    const OpCase c{OpKind::max_pool2d, {p.x}, p.attrs, {p.fill}};
    SCOPED_TRACE(describe(c));
    const OneNode built = build(c);
    const Node& node = built.graph.node(built.node);
    auto cpu = make_cpu_backend()->make_kernel(built.graph, built.node).value();
    auto ref = make_reference_backend()->make_kernel(built.graph, built.node).value();
    EXPECT_EQ(cpu->workspace_bytes(), 0u);
    const auto values = make_inputs(c, 3);
    EXPECT_EQ(run_kernel(*cpu, built.graph, node, values)->results[0],
              run_kernel(*ref, built.graph, node, values)->results[0]);
  }
}

// The gradient of max pooling is the float scatter "dx[argmax] += dy" in
// output order, argmax the window's first maximum, bit for bit: overlapping
// windows (stride < kernel), ties and padding included.
TEST(CpuBackend, MaxPool2dGradEqualsTheScatterInOutputOrder) {
  std::vector<PoolConfig> configs = pool_configs();
  configs.push_back({{2, 16, 15, 13}, {{3, 3}, {2, 2}, {1, 1}, false}, Fill::ties});
  for (const PoolConfig& p : configs) {
    const Shape y = output_of({OpKind::max_pool2d, {p.x}, p.attrs, {}});
    const OpCase c{OpKind::max_pool2d_grad, {y, p.x}, p.attrs, {Fill::normal, p.fill}};
    SCOPED_TRACE(describe(c));
    const OneNode built = build(c);
    const Node& node = built.graph.node(built.node);
    auto cpu = make_cpu_backend()->make_kernel(built.graph, built.node).value();
    const auto values = make_inputs(c, 5);
    const std::vector<float>& dy = values[0];
    const std::vector<float>& x = values[1];
    std::vector<float> expected(x.size(), 0.0f);
    const int64_t h = p.x[2], w = p.x[3], oh = y[2], ow = y[3];
    for (int64_t plane = 0; plane < p.x[0] * p.x[1]; ++plane) {
      for (int64_t oy = 0; oy < oh; ++oy) {
        for (int64_t ox = 0; ox < ow; ++ox) {
          int64_t best = -1;
          for (int64_t i = 0; i < p.attrs.kernel[0]; ++i) {
            for (int64_t j = 0; j < p.attrs.kernel[1]; ++j) {
              const int64_t yy = oy * p.attrs.stride[0] - p.attrs.pad[0] + i;
              const int64_t xx = ox * p.attrs.stride[1] - p.attrs.pad[1] + j;
              if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
              const int64_t at = (plane * h + yy) * w + xx;
              if (best < 0 || x[at] > x[best]) best = at;
            }
          }
          expected[best] += dy[(plane * oh + oy) * ow + ox];
        }
      }
    }
    EXPECT_EQ(run_kernel(*cpu, built.graph, node, values)->results[0], expected);
  }
}

TEST(CpuBackend, AvgPool2d) {
  for (const PoolConfig& p : pool_configs()) {
    check_case({OpKind::avg_pool2d, {p.x}, p.attrs, {}});
  }
}

TEST(CpuBackend, AvgPool2dGrad) {
  for (const PoolConfig& p : pool_configs()) {
    const Shape y = output_of({OpKind::avg_pool2d, {p.x}, p.attrs, {}});
    const Pool2dGradAttrs attrs{p.attrs.kernel, p.attrs.stride, p.attrs.pad, p.attrs.include_pad,
                                p.x};
    check_case({OpKind::avg_pool2d_grad, {y}, attrs, {}});
  }
}

TEST(CpuBackend, GlobalAvgPool) {
  for (const Shape& x : {Shape{2, 3, 4, 5}, Shape{2, 16, 7, 7}, Shape{3, 5, 1, 1}}) {
    check_case({OpKind::global_avg_pool, {x}, NoAttrs{}, {}});
    check_case({OpKind::global_avg_pool_grad, {{x[0], x[1], 1, 1}}, ShapeAttrs{x}, {}});
  }
}

struct Pool3dConfig {
  Shape x;
  Pool3dAttrs attrs;
  Fill fill = Fill::normal;
};

std::vector<Pool3dConfig> pool3d_configs() {
  return {
      {{2, 3, 4, 4, 4}, {{2, 2, 2}, {2, 2, 2}, {0, 0, 0}, false}},
      {{2, 4, 5, 7, 6}, {{3, 3, 3}, {2, 2, 2}, {1, 1, 1}, false}},
      {{2, 4, 5, 7, 6}, {{3, 3, 3}, {2, 2, 2}, {1, 1, 1}, true}},
      {{1, 3, 3, 5, 6}, {{3, 3, 2}, {2, 1, 2}, {1, 1, 0}, true}},
      {{1, 2, 3, 4, 4}, {{2, 2, 2}, {1, 1, 1}, {1, 1, 1}, false}},  // y larger than x
      {{2, 16, 5, 5, 5}, {{3, 3, 3}, {1, 1, 1}, {1, 1, 1}, false}, Fill::ties},
      {{2, 3, 4, 6, 6}, {{2, 2, 2}, {2, 2, 2}, {0, 0, 0}, false}, Fill::ties},
  };
}

TEST(CpuBackend, MaxPool3d) {
  for (const Pool3dConfig& p : pool3d_configs()) {
    check_case({OpKind::max_pool3d, {p.x}, p.attrs, {p.fill}});
    const Shape y = output_of({OpKind::max_pool3d, {p.x}, p.attrs, {}});
    check_case({OpKind::max_pool3d_grad, {y, p.x}, p.attrs, {Fill::normal, p.fill}});
  }
}

TEST(CpuBackend, AvgPool3d) {
  for (const Pool3dConfig& p : pool3d_configs()) {
    check_case({OpKind::avg_pool3d, {p.x}, p.attrs, {}});
    const Shape y = output_of({OpKind::avg_pool3d, {p.x}, p.attrs, {}});
    const Pool3dGradAttrs attrs{p.attrs.kernel, p.attrs.stride, p.attrs.pad, p.attrs.include_pad,
                                p.x};
    check_case({OpKind::avg_pool3d_grad, {y}, attrs, {}});
  }
}

// Nearest and linear, 1 to 3 spatial dimensions, factors of 1 included; 16
// channels reach oneDNN's vectorized implementations.
TEST(CpuBackend, Upsample) {
  const std::vector<std::pair<Shape, std::vector<int64_t>>> configs = {
      {{2, 3, 5}, {2}},
      {{2, 4, 7}, {3}},
      {{2, 3, 4, 5}, {2, 2}},
      {{1, 16, 6, 7}, {2, 3}},
      {{2, 2, 3, 3}, {1, 4}},
      {{1, 3, 3, 4, 5}, {2, 2, 2}},
      {{1, 16, 3, 3, 3}, {2, 1, 3}},
      // Coordinates up to 120: oneDNN computes them in float, the reference in double.
      {{1, 4, 40, 33}, {3, 2}},
  };
  for (const auto& [x, scale] : configs) {
    for (const bool linear : {false, true}) {
      check_case({OpKind::upsample, {x}, UpsampleAttrs{scale, linear, {}}, {}});
      const Shape y = output_of({OpKind::upsample, {x}, UpsampleAttrs{scale, linear, {}}, {}});
      check_case({OpKind::upsample_grad, {y}, UpsampleAttrs{scale, linear, x}, {}});
    }
  }
}

TEST(CpuBackend, BatchNorm) {
  const std::vector<Fill> fills = {Fill::normal, Fill::normal, Fill::normal, Fill::normal,
                                   Fill::positive};
  for (const Shape& x : {Shape{4, 3, 5, 5}, Shape{6, 4}, Shape{8, 16, 3, 3}}) {
    for (const BatchNormAttrs& attrs : {BatchNormAttrs{1e-5f, 0.1f}, BatchNormAttrs{1e-3f, 0.3f}}) {
      const Shape c{x[1]};
      check_case({OpKind::batch_norm, {x, c, c, c, c}, attrs, fills});
    }
  }
}

TEST(CpuBackend, BatchNormGrad) {
  const std::vector<Fill> fills = {Fill::normal, Fill::normal, Fill::normal, Fill::normal,
                                   Fill::positive};
  for (const Shape& x : {Shape{4, 3, 5, 5}, Shape{6, 4}, Shape{8, 16, 3, 3}}) {
    const Shape c{x[1]};
    check_case({OpKind::batch_norm_grad, {x, x, c, c, c}, BatchNormAttrs{1e-5f, 0.1f}, fills});
  }
}

TEST(CpuBackend, Matmul) {
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      const MatmulAttrs attrs{ta, tb};
      const auto a = [&](Shape batch, int64_t m, int64_t k) {
        batch.insert(batch.end(), {ta ? k : m, ta ? m : k});
        return batch;
      };
      const auto b = [&](Shape batch, int64_t k, int64_t n) {
        batch.insert(batch.end(), {tb ? n : k, tb ? k : n});
        return batch;
      };
      check_case({OpKind::matmul, {a({}, 5, 7), b({}, 7, 3)}, attrs, {}});
      check_case({OpKind::matmul, {a({3}, 5, 7), b({3}, 7, 4)}, attrs, {}});
      check_case({OpKind::matmul, {a({2, 3}, 4, 5), b({2, 3}, 5, 6)}, attrs, {}});
      if (!ta) {  // shape inference allows a shared 2-D b only with a plain a
        check_case({OpKind::matmul, {a({3}, 4, 5), b({}, 5, 6)}, attrs, {}});
        check_case({OpKind::matmul, {a({2, 2}, 3, 8), b({}, 8, 2)}, attrs, {}});
      }
      check_case({OpKind::matmul, {a({}, 64, 128), b({}, 128, 96)}, attrs, {}});
    }
  }
}

TEST(CpuBackend, Linear) {
  check_case({OpKind::linear, {{8, 16}, {10, 16}, {10}}, NoAttrs{}, {}});
  check_case({OpKind::linear, {{8, 16}, {10, 16}}, NoAttrs{}, {}});
  check_case({OpKind::linear, {{1, 3}, {1, 3}, {1}}, NoAttrs{}, {}});
  check_case({OpKind::linear, {{32, 100}, {64, 100}, {64}}, NoAttrs{}, {}});
  // Adding into c (an LSTM step's gates), in place over c too.
  check_case({OpKind::linear, {{8, 16}, {10, 16}, {10}, {8, 10}}, NoAttrs{}, {}});
  check_case({OpKind::linear, {{20, 650}, {2600, 650}, {2600}, {20, 2600}}, NoAttrs{}, {}});
}

// Sizes that split across threads, lstm-lm's (20, 650) among them.
TEST(CpuBackend, LstmCell) {
  for (const auto& [n, hidden] : {std::pair<int64_t, int64_t>{7, 33}, {20, 650}, {1, 5}}) {
    const Shape gates{n, 4 * hidden}, state{n, hidden};
    check_case({OpKind::lstm_cell, {gates, state}, NoAttrs{}, {}});
    check_case({OpKind::lstm_cell, {gates}, NoAttrs{}, {}});
    check_case({OpKind::lstm_cell_grad, {state, state, gates, state, state}, NoAttrs{}, {}});
    check_case({OpKind::lstm_cell_grad, {state, state, gates, state}, NoAttrs{}, {}});
  }
}

TEST(CpuBackend, Activations) {
  for (const Shape& x : {Shape{3, 4, 5}, Shape{1000}, Shape{2, 1}}) {
    for (const OpKind op : {OpKind::relu, OpKind::gelu, OpKind::tanh, OpKind::sigmoid}) {
      check_case({op, {x}, NoAttrs{}, {}});
    }
    for (const OpKind op :
         {OpKind::relu_grad, OpKind::gelu_grad, OpKind::tanh_grad, OpKind::sigmoid_grad}) {
      check_case({op, {x, x}, NoAttrs{}, {}});
    }
  }
}

// Large |x| too: the tails of erf and of the normal density.
TEST(CpuBackend, GeluWideRange) {
  std::vector<float> x(801);
  for (size_t i = 0; i < x.size(); ++i) x[i] = -8.0f + 0.02f * static_cast<float>(i);
  const std::vector<float> dy(x.size(), 1.0f);
  for (const OpKind op : {OpKind::gelu, OpKind::gelu_grad}) {
    SCOPED_TRACE(op_name(op));
    const bool grad = op == OpKind::gelu_grad;
    const OneNode built =
        grad ? build({op, {{801}, {801}}, NoAttrs{}, {}}) : build({op, {{801}}, NoAttrs{}, {}});
    const Node& node = built.graph.node(built.node);
    const std::vector<std::vector<float>> values =
        grad ? std::vector<std::vector<float>>{dy, x} : std::vector<std::vector<float>>{x};
    auto cpu = make_cpu_backend()->make_kernel(built.graph, built.node);
    auto ref = make_reference_backend()->make_kernel(built.graph, built.node);
    ASSERT_TRUE(cpu.is_ok() && ref.is_ok());
    const auto got = run_kernel(**cpu, built.graph, node, values);
    const auto want = run_kernel(**ref, built.graph, node, values);
    expect_close(got->results[0], want->results[0], kTolerance, "wide range");
  }
}

TEST(CpuBackend, Scale) {
  for (const Shape& x : {Shape{3, 4}, Shape{}, Shape{7, 1, 3}}) {
    check_case({OpKind::scale, {x}, ScaleAttrs{-2.5f}, {}});
  }
}

TEST(CpuBackend, Softmax) {
  const std::vector<std::pair<Shape, int64_t>> configs = {
      {{3, 5}, 1}, {{2, 4, 3}, 1}, {{2, 4, 3}, 0}, {{2, 4, 3}, 2}, {{4, 1000}, 1}, {{6, 1}, 1}};
  for (const auto& [x, axis] : configs) {
    for (const OpKind op : {OpKind::softmax, OpKind::log_softmax}) {
      check_case({op, {x}, AxisAttrs{axis}, {}});
    }
    for (const OpKind op : {OpKind::softmax_grad, OpKind::log_softmax_grad}) {
      check_case({op, {x, x}, AxisAttrs{axis}, {}});
    }
  }
}

TEST(CpuBackend, SameShapeBinary) {
  for (const Shape& x : {Shape{3, 4, 5}, Shape{1000}, Shape{2, 1}, Shape{}}) {
    for (const OpKind op : {OpKind::add, OpKind::sub, OpKind::mul}) {
      check_case({op, {x, x}, NoAttrs{}, {}});
    }
  }
}

// Same-shape add, sub and mul run the backend's own loops in float, the
// reference kernels in double rounded once: the bits agree, operands of very
// different magnitudes included (where a sum is not exact in float).
TEST(CpuBackend, SameShapeBinaryIsBitIdenticalToReference) {
  const size_t count = 4099;  // not a multiple of any vector width
  std::vector<float> a = make_input(count, Fill::normal, 11);
  std::vector<float> b = make_input(count, Fill::normal, 12);
  for (size_t i = 0; i < count; ++i) b[i] = std::ldexp(b[i], static_cast<int>(i % 81) - 40);
  for (const OpKind op : {OpKind::add, OpKind::sub, OpKind::mul}) {
    SCOPED_TRACE(op_name(op));
    const OneNode built = build({op, {{count}, {count}}, NoAttrs{}, {}});
    const Node& node = built.graph.node(built.node);
    const auto cpu = make_cpu_backend();
    ASSERT_TRUE(cpu->supports(built.graph, node));
    auto fast = cpu->make_kernel(built.graph, built.node);
    auto ref = make_reference_backend()->make_kernel(built.graph, built.node);
    ASSERT_TRUE(fast.is_ok() && ref.is_ok());
    const auto got = run_kernel(**fast, built.graph, node, {a, b});
    const auto want = run_kernel(**ref, built.graph, node, {a, b});
    ASSERT_EQ(got->results[0].size(), count);
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(testing::as_word(got->results[0][i]), testing::as_word(want->results[0][i]))
          << "element " << i << ": " << a[i] << ", " << b[i];
    }
  }
}

// Every example of the op table, for every op the backend runs on oneDNN.
TEST(CpuBackend, OpTableExamples) {
  const auto cpu = make_cpu_backend();
  int checked = 0;
  for (int i = 0; i < kNumOps; ++i) {
    const auto op = static_cast<OpKind>(i);
    for (const OpExample& ex : op_info(op).examples()) {
      // Ops with i32 operands (labels) have no oneDNN kernel.
      const auto is_f32 = [](const TensorType& t) { return t.dtype == DType::f32; };
      if (!std::all_of(ex.inputs.begin(), ex.inputs.end(), is_f32)) continue;
      OpCase c{op, {}, ex.attrs, {}};
      for (size_t k = 0; k < ex.inputs.size(); ++k) {
        c.inputs.push_back(ex.inputs[k].shape);
        const bool positive = k < ex.init.size() && ex.init[k].kind == InputInit::positive;
        c.fills.push_back(positive ? Fill::positive : Fill::normal);
      }
      const OneNode built = build(c);
      if (!built.node.valid() || !cpu->supports(built.graph, built.graph.node(built.node))) {
        continue;
      }
      check_case(c);
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

// Ops without a CPU kernel (here a broadcasting add) run the reference kernel.
TEST(CpuBackend, DelegatesOtherOpsToReference) {
  const auto cpu = make_cpu_backend();
  EXPECT_EQ(cpu->name(), "cpu");
  const OneNode built = build({OpKind::broadcast_to, {{4}}, ShapeAttrs{{3, 4}}, {}});
  const Node& node = built.graph.node(built.node);
  EXPECT_FALSE(cpu->supports(built.graph, node));
  auto kernel = cpu->make_kernel(built.graph, built.node);
  ASSERT_TRUE(kernel.is_ok()) << kernel.message();
  const std::vector<std::vector<float>> values = {make_input(4, Fill::normal, 6)};
  const auto run = run_kernel(**kernel, built.graph, node, values);
  for (size_t i = 0; i < 12; ++i) EXPECT_EQ(run->results[0][i], values[0][i % 4]);
}

// oneDNN and the cpu backend's loops index a tensor by 32-bit integers: a
// node with a tensor of 2^31 elements or more (here a 65536 x 65536 image)
// is the reference kernels', and no blocked layout is asked of oneDNN for
// it (that query divided by zero inside oneDNN).
TEST(CpuBackend, LeavesTensorsOf2To31ElementsToTheReference) {
  const auto cpu = make_cpu_backend();
  const Conv2dAttrs attrs{{1, 1}, {2, 2}, {1, 1}, 1};
  const OneNode small = build({OpKind::conv2d, {{1, 1, 32768, 65535}, {1, 1, 5, 5}}, attrs, {}});
  EXPECT_TRUE(cpu->supports(small.graph, small.graph.node(small.node)));
  const OneNode large = build({OpKind::conv2d, {{1, 1, 32768, 65536}, {1, 1, 5, 5}}, attrs, {}});
  const Node& node = large.graph.node(large.node);
  EXPECT_FALSE(cpu->supports(large.graph, node));
  EXPECT_EQ(cpu->blocked_operands(large.graph, node).kind, BlockedOperands::Kind::none);
  const OneNode pool = build(
      {OpKind::max_pool2d, {{1, 1, 65536, 65536}}, Pool2dAttrs{{2, 2}, {2, 2}, {0, 0}, false}, {}});
  EXPECT_FALSE(cpu->supports(pool.graph, pool.graph.node(pool.node)));
}

}  // namespace
}  // namespace memfit

namespace memfit {
namespace {

// The cpu kernels that promise the reference's bits: data movement, dropout's
// mask, reductions summed in the reference's order, the optimizer updates;
// sizes large enough to split across threads.
TEST(CpuBackend, KernelsEqualReferenceBitForBit) {
  const std::vector<OpCase> cases = {
      {OpKind::dropout, {{1 << 17}}, DropoutAttrs{0.3f, 77}, {}},
      {OpKind::transpose, {{2, 64, 4, 32}}, PermAttrs{{0, 2, 1, 3}}, {}},
      {OpKind::transpose, {{48, 80}}, PermAttrs{{1, 0}}, {}},
      {OpKind::transpose, {{3, 4, 5, 6}}, PermAttrs{{3, 1, 0, 2}}, {}},
      {OpKind::slice, {{6, 40, 9}}, SliceAttrs{1, 7, 30, {}}, {}},
      {OpKind::concat, {{40, 3, 5}, {40, 7, 5}, {40, 1, 5}}, AxisAttrs{1}, {}},
      {OpKind::split, {{40, 11, 5}}, SplitAttrs{1, {3, 7, 1}}, {}},
      {OpKind::reshape, {{40, 11, 5}}, ShapeAttrs{{440, 5}}, {}},
      {OpKind::add, {{64, 3, 100}, {100}}, NoAttrs{}, {}},
      {OpKind::sub, {{64, 1, 100}, {7, 1}}, NoAttrs{}, {}},
      {OpKind::mul, {{5, 1}, {3, 5, 64}}, NoAttrs{}, {}},
      {OpKind::causal_mask, {{4, 64, 64}}, CausalMaskAttrs{-1e9f, 2}, {}},
      {OpKind::slice_grad, {{6, 23, 9}}, SliceAttrs{1, 7, 30, {6, 40, 9}}, {}},
      {OpKind::reduce_sum, {{700, 1000}}, ReduceAttrs{{0}, false}, {}},
      {OpKind::reduce_sum, {{3, 50, 40, 7}}, ReduceAttrs{{1, 2}, true}, {}},
      {OpKind::reduce_mean, {{8, 33, 300}}, ReduceAttrs{{2}, false}, {}},
      {OpKind::reduce_sum, {{3, 20, 4, 5, 6}}, ReduceAttrs{{0, 2, 3, 4}, false}, {}},
      {OpKind::reduce_mean, {{7, 6, 5, 4}}, ReduceAttrs{{1, 3}, true}, {}},
      {OpKind::sgd_update, {{50000}, {50000}, {50000}}, SgdAttrs{0.1f, 0.9f, 1e-4f}, {}},
      {OpKind::sgd_update, {{50000}, {50000}}, SgdAttrs{0.1f, 0.0f, 0.0f}, {}},
      {OpKind::adamw_update, {{50000}, {50000}, {50000}, {50000}}, AdamWAttrs{},
       {Fill::normal, Fill::normal, Fill::normal, Fill::positive}},
  };
  for (const OpCase& c : cases) {
    SCOPED_TRACE(describe(c));
    const OneNode built = build(c);
    ASSERT_TRUE(built.node.valid());
    const Node& node = built.graph.node(built.node);
    const auto cpu = make_cpu_backend();
    ASSERT_TRUE(cpu->supports(built.graph, node));
    auto fast = cpu->make_kernel(built.graph, built.node).value();
    auto ref = make_reference_backend()->make_kernel(built.graph, built.node).value();
    const auto values = make_inputs(c, 5);
    const auto want = run_kernel(*ref, built.graph, node, values);
    const auto got = run_kernel(*fast, built.graph, node, values);
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      EXPECT_EQ(got->results[o], want->results[o]) << "output " << o;
    }
  }
}

}  // namespace
}  // namespace memfit
