// ONNX import (src/onnx/): every supported operator in a tiny model of its
// own, mapped onto the op table as expected (op kinds, attributes, shapes)
// and trained for one step (a finite loss, every parameter changed); forward
// values against hand computations where they are cheap; weights as
// parameters, running statistics as state, scalars as constants; refusals
// whose messages name the node, the operator and the reason; and trained
// weights written back into the file.
#include "onnx/onnx_import.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "autodiff/autodiff.h"
#include "memfit/builder.h"
#include "onnx/onnx_file.h"
#include "runtime/kernel.h"
#include "test_util.h"
#include "train/training_program.h"

namespace memfit {
namespace {

using testing::ScratchDir;
using testing::Words;
using Floats = std::vector<float>;

constexpr int64_t kBatch = 2;
constexpr auto kFloat = onnx::TensorProto::FLOAT;
constexpr auto kInt64 = onnx::TensorProto::INT64;
constexpr auto kBool = onnx::TensorProto::BOOL;

// --- Writing ONNX models -----------------------------------------------------------

onnx::TensorProto float_tensor(const std::string& name, const Shape& dims, const Floats& values) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(kFloat);
  for (const int64_t d : dims) t.add_dims(d);
  for (const float v : values) t.add_float_data(v);
  return t;
}

// INT64 tensors keep their data in int64_data, BOOL ones in int32_data.
onnx::TensorProto int_tensor(const std::string& name, const Shape& dims,
                             const std::vector<int64_t>& values, int type = kInt64) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(type);
  for (const int64_t d : dims) t.add_dims(d);
  for (const int64_t v : values) {
    if (type == kInt64) {
      t.add_int64_data(v);
    } else {
      t.add_int32_data(static_cast<int32_t>(v));
    }
  }
  return t;
}

// Small seeded values, as a fresh layer's weights.
Floats seeded(const Shape& dims, uint64_t seed) {
  Floats v = testing::random_normal(static_cast<size_t>(num_elements(dims)), seed);
  for (float& x : v) x *= 0.3f;
  return v;
}

// A model of opset 17 (or another), built node by node as exporters write it.
class OnnxModel {
 public:
  explicit OnnxModel(int64_t opset = 17) {
    proto_.set_ir_version(8);
    proto_.set_producer_name("onnx_import_test");
    onnx::OperatorSetIdProto* o = proto_.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    graph().set_name("test");
  }

  // A data input (batch, dims...) whose first dimension is symbolic.
  void input(const std::string& name, const Shape& dims, int type = kFloat) {
    onnx::ValueInfoProto* in = graph().add_input();
    in->set_name(name);
    auto* tensor = in->mutable_type()->mutable_tensor_type();
    tensor->set_elem_type(type);
    tensor->mutable_shape()->add_dim()->set_dim_param("batch");
    for (const int64_t d : dims) tensor->mutable_shape()->add_dim()->set_dim_value(d);
  }
  // An f32 initializer: the given values, or seeded ones.
  const Floats& weight(const std::string& name, const Shape& dims, Floats values = {}) {
    if (values.empty()) values = seeded(dims, next_seed_++);
    *graph().add_initializer() = float_tensor(name, dims, values);
    return weights_[name] = std::move(values);
  }
  void scalar(const std::string& name, float value) {
    *graph().add_initializer() = float_tensor(name, {}, {value});
  }
  void ints(const std::string& name, const Shape& dims, const std::vector<int64_t>& values) {
    *graph().add_initializer() = int_tensor(name, dims, values);
  }
  onnx::NodeProto& node(const std::string& op, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, std::string name = "") {
    onnx::NodeProto* n = graph().add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? "/" + outputs.at(0) + "/" + op : name);
    for (const std::string& i : inputs) n->add_input(i);
    for (const std::string& o : outputs) n->add_output(o);
    return *n;
  }
  void output(const std::string& name) { graph().add_output()->set_name(name); }

  // Gemm(x, W, b) with transB = 1, as torch.nn.Linear exports: weights
  // `name.weight` (out, in) and `name.bias` (out). Returns the output.
  std::string linear(const std::string& name, const std::string& x, int64_t in, int64_t out) {
    weight(name + ".weight", {out, in});
    weight(name + ".bias", {out});
    attr_int(node("Gemm", {x, name + ".weight", name + ".bias"}, {name}), "transB", 1);
    return name;
  }

  static void attr_int(onnx::NodeProto& n, const std::string& name, int64_t v) {
    onnx::AttributeProto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr_float(onnx::NodeProto& n, const std::string& name, float v) {
    onnx::AttributeProto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void attr_ints(onnx::NodeProto& n, const std::string& name,
                        const std::vector<int64_t>& v) {
    onnx::AttributeProto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (const int64_t x : v) a->add_ints(x);
  }
  static void attr_string(onnx::NodeProto& n, const std::string& name, const std::string& v) {
    onnx::AttributeProto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  static void attr_tensor(onnx::NodeProto& n, const std::string& name, onnx::TensorProto t) {
    onnx::AttributeProto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::TENSOR);
    *a->mutable_t() = std::move(t);
  }

  onnx::GraphProto& graph() { return *proto_.mutable_graph(); }
  const std::unordered_map<std::string, Floats>& weights() const { return weights_; }
  std::string bytes() const {
    std::string out;
    EXPECT_TRUE(proto_.SerializeToString(&out));
    return out;
  }
  std::string write(const ScratchDir& dir, const std::string& file) const {
    const std::string path = dir.file(file);
    std::ofstream(path, std::ios::binary) << bytes();
    return path;
  }

 private:
  onnx::ModelProto proto_;
  std::unordered_map<std::string, Floats> weights_;
  uint64_t next_seed_ = 1;
};

// --- Importing ---------------------------------------------------------------------

OnnxImport training(int64_t batch = kBatch) {
  OnnxImport o;
  o.batch = batch;
  o.name = "test";
  return o;
}

OnnxImport evaluation(int64_t batch = kBatch) {
  OnnxImport o = training(batch);
  o.training = false;
  return o;
}

Result<Model> import_bytes(const std::string& bytes, const OnnxImport& options = training()) {
  MEMFIT_ASSIGN_OR_RETURN(std::shared_ptr<const OnnxFile> file, parse_onnx(bytes, "test.onnx"));
  return import_onnx(*file, options);
}

// The model imported, or nullopt with a test failure that says why.
std::optional<Model> imported(const OnnxModel& m, const OnnxImport& options = training()) {
  Result<Model> model = import_bytes(m.bytes(), options);
  EXPECT_TRUE(model.is_ok()) << model.message();
  if (!model) return std::nullopt;
  return std::move(model).value();
}

// The import's error message ("" with a test failure when it succeeds).
std::string refusal(const std::string& bytes, const OnnxImport& options = training()) {
  Result<Model> model = import_bytes(bytes, options);
  EXPECT_FALSE(model.is_ok()) << "imported, but should be refused";
  return model ? std::string() : model.message();
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::vector<const Node*> nodes_of(const Model& model, OpKind op) {
  std::vector<const Node*> out;
  for (const Node& n : model.graph.nodes()) {
    if (n.op == op) out.push_back(&n);
  }
  return out;
}

const Shape& shape_of(const Model& model, ValueId v) { return model.graph.value(v).type.shape; }
const Shape& out_shape(const Model& model, const Node& n, size_t k = 0) {
  return shape_of(model, n.outputs.at(k));
}

// The shape of the ONNX model's first output: the labels' shape and the
// classes (cross-entropy), or the labels' shape (mse).
Shape output_shape(const Model& model) {
  Shape s = shape_of(model, model.labels);
  if (model.graph.value(model.labels).type.dtype == DType::i32) {
    s.push_back(shape_of(model, model.logits).back());
  }
  return s;
}

std::vector<std::string> param_names(const Model& model) {
  std::vector<std::string> names;
  for (const ValueId p : model.params) names.push_back(model.graph.value(p).name);
  std::sort(names.begin(), names.end());
  return names;
}

// --- Running -------------------------------------------------------------------------

// Seeded feeds for every data input of `model`: normal f32 data, token ids
// below `ids`, labels below the classes.
std::vector<Words> make_feeds(const Model& model, int64_t ids, Feeds& feeds) {
  std::vector<Words> data;
  const int64_t classes = shape_of(model, model.logits).back();
  for (const ValueId id : model.inputs) {
    const Value& v = model.graph.value(id);
    const auto n = static_cast<size_t>(v.elements());
    Words w(n);
    if (v.type.dtype == DType::f32) {
      const Floats normal = testing::random_normal(n, 100 + data.size());
      for (size_t k = 0; k < n; ++k) w[k] = testing::as_word(normal[k]);
    } else {
      const int64_t range = v.role == Role::label ? classes : ids;
      for (size_t k = 0; k < n; ++k) {
        w[k] = static_cast<uint32_t>((k * 5 + 1) % static_cast<size_t>(range));
      }
    }
    data.push_back(std::move(w));
    feeds[v.name] = data.back().data();
  }
  return data;
}

// One training step of an ONNX model: its loss, and the parameters it left as they were.
struct OneStep {
  float loss = std::numeric_limits<float>::quiet_NaN();
  std::vector<std::string> unchanged;
  StateStore before, after;
};

// Writes `m` to a file and runs one SGD step of it at batch 2 (cpu backend,
// poison mode, through make_model as `memfit train --onnx` does) on seeded
// data; failures are test failures (and a NaN loss).
OneStep train_step(const OnnxModel& m, const std::string& loss = "", int64_t ids = 3) {
  ScratchDir dir;
  StepSpec spec = testing::test_spec(ModelOptions{
      .name = "test", .onnx = m.write(dir, "model.onnx"), .loss = loss, .batch = kBatch});
  spec.threads = 1;
  OneStep step;
  auto program = TrainingProgram::create(spec, kBatch, /*poison=*/true);
  EXPECT_TRUE(program.is_ok()) << program.message();
  if (!program) return step;
  TrainingProgram& p = **program;
  p.init_state(step.before, 7);
  EXPECT_TRUE(p.load_state(step.before).is_ok());
  Feeds feeds;
  const std::vector<Words> data = make_feeds(p.model(), ids, feeds);
  StepCounters counters;
  auto result = p.micro_step(feeds, 3, 1.0f, counters);
  EXPECT_TRUE(result.is_ok()) << result.message();
  if (!result) return step;
  step.loss = *result;
  EXPECT_FALSE(p.model().params.empty()) << "a model without parameters trains nothing";
  EXPECT_TRUE(p.store_state(step.after).is_ok());
  for (const ValueId id : p.model().params) {
    const std::string& name = p.model().graph.value(id).name;
    const Floats* before = step.before.find(name);
    const Floats* after = step.after.find(name);
    if (before == nullptr || after == nullptr || *before == *after) step.unchanged.push_back(name);
  }
  return step;
}

// A finite loss and every parameter changed by the step.
void expect_trains(const OnnxModel& m, const std::string& loss = "", int64_t ids = 3) {
  const OneStep step = train_step(m, loss, ids);
  EXPECT_TRUE(std::isfinite(step.loss)) << "loss " << step.loss;
  for (const std::string& name : step.unchanged) {
    ADD_FAILURE() << "parameter " << name << " did not change";
  }
}

// The model's first output, imported for evaluation at batch 2 and run on the
// reference backend with its initializers and `inputs` (by the graph's names).
Floats forward(const OnnxModel& m, const std::unordered_map<std::string, Floats>& inputs) {
  const std::optional<Model> model = imported(m, evaluation());
  if (!model) return {};
  auto backend = make_reference_backend();
  auto exe = Executable::compile(model->graph, *backend);
  EXPECT_TRUE(exe.is_ok()) << exe.message();
  if (!exe) return {};
  StateStore state;
  for (const auto& [name, init] : model->init) state[name] = *init.values;
  Feeds feeds;
  std::vector<Words> labels;
  for (const ValueId id : model->inputs) {
    const Value& v = model->graph.value(id);
    const auto it = inputs.find(v.name);
    if (it != inputs.end()) {
      EXPECT_EQ(static_cast<int64_t>(it->second.size()), v.elements()) << v.name;
      feeds[v.name] = it->second.data();
    } else {
      labels.emplace_back(static_cast<size_t>(v.elements()), 0u);
      feeds[v.name] = labels.back().data();
    }
  }
  auto run = (*exe)->run(state, feeds, StepContext{});
  EXPECT_TRUE(run.is_ok()) << run.message();
  if (!run) return {};
  return run->outputs.at(model->graph.value(model->logits).name);
}

void expect_near_all(const Floats& expected, const Floats& actual, float tol) {
  ASSERT_EQ(expected.size(), actual.size());
  for (size_t k = 0; k < expected.size(); ++k) {
    EXPECT_NEAR(expected[k], actual[k], tol * (1 + std::abs(expected[k]))) << "element " << k;
  }
}

// x (N, 4) -> Gemm (fc) -> y (N, 3): the base the refusal tests change.
OnnxModel linear_model() {
  OnnxModel m;
  m.input("x", {4});
  m.output(m.linear("fc", "x", 4, 3));
  return m;
}

// --- Convolutions, normalization and pooling ---------------------------------------------

// The sizes of a direct convolution: x (batch, channels, side, side) by
// w (out, channels, kernel, kernel).
struct ConvSizes {
  int64_t batch, channels, side, out, kernel;
};

// A direct 2-D convolution plus bias, (batch, out, rows, rows) row-major.
Floats direct_conv2d(const Floats& x, const Floats& w, const Floats& b, const ConvSizes& z,
                     int64_t stride, int64_t pad) {
  const int64_t rows = (z.side + 2 * pad - z.kernel) / stride + 1;
  Floats y;
  for (int64_t n = 0; n < z.batch; ++n) {
    for (int64_t o = 0; o < z.out; ++o) {
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < rows; ++j) {
          double sum = b[o];
          for (int64_t c = 0; c < z.channels; ++c) {
            for (int64_t ki = 0; ki < z.kernel; ++ki) {
              for (int64_t kj = 0; kj < z.kernel; ++kj) {
                const int64_t r = stride * i - pad + ki, s = stride * j - pad + kj;
                if (r < 0 || r >= z.side || s < 0 || s >= z.side) continue;
                sum += x[((n * z.channels + c) * z.side + r) * z.side + s] *
                       w[((o * z.channels + c) * z.kernel + ki) * z.kernel + kj];
              }
            }
          }
          y.push_back(static_cast<float>(sum));
        }
      }
    }
  }
  return y;
}

// Conv 2-D with bias, stride 2 and pads 1: conv2d with those attributes; the
// values equal a direct convolution.
TEST(OnnxOperators, Conv2d) {
  OnnxModel m;
  m.input("x", {2, 5, 5});
  const Floats w = m.weight("conv.weight", {3, 2, 3, 3});
  const Floats b = m.weight("conv.bias", {3});
  onnx::NodeProto& conv = m.node("Conv", {"x", "conv.weight", "conv.bias"}, {"c"});
  OnnxModel::attr_ints(conv, "kernel_shape", {3, 3});
  OnnxModel::attr_ints(conv, "strides", {2, 2});
  OnnxModel::attr_ints(conv, "pads", {1, 1, 1, 1});
  OnnxModel::attr_ints(conv, "dilations", {1, 1});
  OnnxModel::attr_int(conv, "group", 1);
  m.node("Flatten", {"c"}, {"y"});
  m.output("y");

  const auto model = imported(m);
  ASSERT_TRUE(model);
  EXPECT_EQ(model->graph.value(model->inputs[0]).name, "images");
  const auto convs = nodes_of(*model, OpKind::conv2d);
  ASSERT_EQ(convs.size(), 1u);
  const auto& a = std::get<Conv2dAttrs>(convs[0]->attrs);
  EXPECT_EQ(a.stride, (Pair{2, 2}));
  EXPECT_EQ(a.pad, (Pair{1, 1}));
  EXPECT_EQ(a.dilation, (Pair{1, 1}));
  EXPECT_EQ(a.groups, 1);
  EXPECT_EQ(convs[0]->inputs.size(), 3u);
  EXPECT_EQ(out_shape(*model, *convs[0]), (Shape{kBatch, 3, 3, 3}));
  EXPECT_EQ(output_shape(*model), (Shape{kBatch, 27}));

  const Floats x = testing::random_normal(kBatch * 2 * 5 * 5, 5);
  const Floats expected = direct_conv2d(x, w, b, {kBatch, 2, 5, 3, 3}, 2, 1);
  expect_near_all(expected, forward(m, {{"images", x}}), 1e-5f);
  expect_trains(m);
}

// Conv 3-D, then GlobalAveragePool over the three spatial dimensions.
TEST(OnnxOperators, Conv3dAndGlobalAveragePool3d) {
  OnnxModel m;
  m.input("volume", {1, 4, 4, 4});
  m.weight("conv.weight", {2, 1, 3, 3, 3});
  OnnxModel::attr_ints(m.node("Conv", {"volume", "conv.weight"}, {"c"}), "pads",
                       {1, 1, 1, 1, 1, 1});
  m.node("GlobalAveragePool", {"c"}, {"g"});
  m.node("Flatten", {"g"}, {"y"});
  m.output("y");

  const auto model = imported(m);
  ASSERT_TRUE(model);
  const auto convs = nodes_of(*model, OpKind::conv3d);
  ASSERT_EQ(convs.size(), 1u);
  EXPECT_EQ(std::get<Conv3dAttrs>(convs[0]->attrs).pad, (Triple{1, 1, 1}));
  EXPECT_EQ(convs[0]->inputs.size(), 2u);  // no bias
  EXPECT_EQ(out_shape(*model, *convs[0]), (Shape{kBatch, 2, 4, 4, 4}));
  const auto means = nodes_of(*model, OpKind::reduce_mean);
  ASSERT_EQ(means.size(), 1u);
  EXPECT_EQ(std::get<ReduceAttrs>(means[0]->attrs).axes, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(output_shape(*model), (Shape{kBatch, 2}));
  expect_trains(m);
}

// ConvTranspose with stride 2 (weight (C, O, K, K)), then GlobalAveragePool.
TEST(OnnxOperators, ConvTransposeAndGlobalAveragePool) {
  OnnxModel m;
  m.input("x", {2, 3, 3});
  m.weight("up.weight", {2, 3, 2, 2});
  m.weight("up.bias", {3});
  OnnxModel::attr_ints(m.node("ConvTranspose", {"x", "up.weight", "up.bias"}, {"u"}), "strides",
                       {2, 2});
  m.node("GlobalAveragePool", {"u"}, {"g"});
  m.node("Flatten", {"g"}, {"y"});
  m.output("y");

  const auto model = imported(m);
  ASSERT_TRUE(model);
  const auto ups = nodes_of(*model, OpKind::conv_transpose2d);
  ASSERT_EQ(ups.size(), 1u);
  EXPECT_EQ(std::get<ConvTranspose2dAttrs>(ups[0]->attrs).stride, (Pair{2, 2}));
  EXPECT_EQ(out_shape(*model, *ups[0]), (Shape{kBatch, 3, 6, 6}));
  EXPECT_EQ(nodes_of(*model, OpKind::global_avg_pool).size(), 1u);
  EXPECT_EQ(output_shape(*model), (Shape{kBatch, 3}));
  expect_trains(m);
}

// BatchNormalization: scale and bias are parameters, the running mean and
// variance model state that training updates (ONNX momentum 0.9 is memfit's
// 0.1); evaluation reads them in batch_norm_inference.
OnnxModel batch_norm_model(float epsilon = 1e-3f, float momentum = 0.9f) {
  OnnxModel m;
  m.input("x", {3, 4, 4});
  m.weight("bn.weight", {3}, {1.0f, 1.5f, 0.5f});
  m.weight("bn.bias", {3}, {0.0f, 0.1f, -0.1f});
  m.weight("bn.running_mean", {3}, {0.1f, 0.2f, 0.3f});
  m.weight("bn.running_var", {3}, {1.0f, 2.0f, 3.0f});
  onnx::NodeProto& bn =
      m.node("BatchNormalization",
             {"x", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"}, {"b"});
  OnnxModel::attr_float(bn, "epsilon", epsilon);
  OnnxModel::attr_float(bn, "momentum", momentum);
  m.node("Relu", {"b"}, {"r"});
  m.node("GlobalAveragePool", {"r"}, {"g"});
  m.node("Flatten", {"g"}, {"y"});
  m.output("y");
  return m;
}

TEST(OnnxOperators, BatchNormalization) {
  const OnnxModel m = batch_norm_model();
  const auto model = imported(m);
  ASSERT_TRUE(model);
  const auto bns = nodes_of(*model, OpKind::batch_norm);
  ASSERT_EQ(bns.size(), 1u);
  const auto& a = std::get<BatchNormAttrs>(bns[0]->attrs);
  EXPECT_FLOAT_EQ(a.eps, 1e-3f);
  EXPECT_NEAR(a.momentum, 0.1f, 1e-6f);
  EXPECT_EQ(param_names(*model), (std::vector<std::string>{"bn.bias", "bn.weight"}));
  for (const char* name : {"bn.running_mean", "bn.running_var"}) {
    const ValueId v = model->graph.find_value(name);
    ASSERT_TRUE(v.valid()) << name;
    EXPECT_EQ(model->graph.value(v).role, Role::state) << name;
  }
  EXPECT_EQ(model->graph.updates().size(), 2u);  // the running statistics

  const auto eval = imported(m, evaluation());
  ASSERT_TRUE(eval);
  EXPECT_TRUE(nodes_of(*eval, OpKind::batch_norm).empty());
  EXPECT_EQ(nodes_of(*eval, OpKind::batch_norm_inference).size(), 1u);

  const OneStep step = train_step(m);
  EXPECT_TRUE(std::isfinite(step.loss));
  EXPECT_TRUE(step.unchanged.empty());
  ASSERT_TRUE(step.after.find("bn.running_mean") != nullptr);
  EXPECT_NE(*step.after.find("bn.running_mean"), *step.before.find("bn.running_mean"));
}

// An epsilon that is not positive, a momentum outside [0, 1] and any float
// attribute that is NaN or infinite are refused: they would train to NaN.
TEST(OnnxOperators, BatchNormalizationRefusesBadEpsilonAndMomentum) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (const float epsilon : {-1.0f, 0.0f}) {
    const std::string why = refusal(batch_norm_model(epsilon).bytes());
    EXPECT_TRUE(contains(why, "epsilon must be positive")) << why;
  }
  EXPECT_TRUE(contains(refusal(batch_norm_model(nan).bytes()), "attribute epsilon is NaN"));
  EXPECT_TRUE(
      contains(refusal(batch_norm_model(1e-3f, inf).bytes()), "attribute momentum is infinite"));
  const std::string why = refusal(batch_norm_model(1e-3f, 2.0f).bytes());
  EXPECT_TRUE(contains(why, "momentum must be between 0 and 1")) << why;
}

// MaxPool, then AveragePool with pads and count_include_pad.
TEST(OnnxOperators, MaxPoolAndAveragePool) {
  OnnxModel m;
  m.input("x", {2, 4, 4});
  m.weight("conv.weight", {2, 2, 1, 1});
  m.node("Conv", {"x", "conv.weight"}, {"c"});
  onnx::NodeProto& max = m.node("MaxPool", {"c"}, {"p"});
  OnnxModel::attr_ints(max, "kernel_shape", {2, 2});
  OnnxModel::attr_ints(max, "strides", {2, 2});
  onnx::NodeProto& avg = m.node("AveragePool", {"p"}, {"a"});
  OnnxModel::attr_ints(avg, "kernel_shape", {3, 3});
  OnnxModel::attr_ints(avg, "pads", {1, 1, 1, 1});
  OnnxModel::attr_int(avg, "count_include_pad", 1);
  m.node("Flatten", {"a"}, {"y"});
  m.output("y");

  const auto model = imported(m);
  ASSERT_TRUE(model);
  const auto maxes = nodes_of(*model, OpKind::max_pool2d);
  const auto avgs = nodes_of(*model, OpKind::avg_pool2d);
  ASSERT_EQ(maxes.size(), 1u);
  ASSERT_EQ(avgs.size(), 1u);
  const auto& pm = std::get<Pool2dAttrs>(maxes[0]->attrs);
  EXPECT_EQ(pm.kernel, (Pair{2, 2}));
  EXPECT_EQ(pm.stride, (Pair{2, 2}));
  const auto& pa = std::get<Pool2dAttrs>(avgs[0]->attrs);
  EXPECT_EQ(pa.kernel, (Pair{3, 3}));
  EXPECT_EQ(pa.stride, (Pair{1, 1}));
  EXPECT_EQ(pa.pad, (Pair{1, 1}));
  EXPECT_TRUE(pa.include_pad);
  EXPECT_EQ(output_shape(*model), (Shape{kBatch, 8}));
  expect_trains(m);
}

// LayerNormalization over the last axis, with scale and bias parameters.
TEST(OnnxOperators, LayerNormalization) {
  OnnxModel m;
  m.input("x", {3, 4});
  m.weight("ln.weight", {4});
  m.weight("ln.bias", {4});
  OnnxModel::attr_float(m.node("LayerNormalization", {"x", "ln.weight", "ln.bias"}, {"n"}),
                        "epsilon", 1e-6f);
  m.weight("proj", {4, 5});
  m.node("MatMul", {"n", "proj"}, {"y"});
  m.output("y");

  const auto model = imported(m);
  ASSERT_TRUE(model);
  const auto lns = nodes_of(*model, OpKind::layer_norm);
  ASSERT_EQ(lns.size(), 1u);
  EXPECT_FLOAT_EQ(std::get<LayerNormAttrs>(lns[0]->attrs).eps, 1e-6f);
  EXPECT_EQ(param_names(*model), (std::vector<std::string>{"ln.bias", "ln.weight", "proj"}));
  EXPECT_EQ(output_shape(*model), (Shape{kBatch, 3, 5}));
  expect_trains(m);
}

// LayerNormalization as exporters write it before opset 17: (x - mean) /
// Sqrt(mean((x - mean)^2) + eps), then Mul and Add of the affine weights:
// one live layer_norm op that reads the weights as its scale and shift (the
// ops written out, and the layer_norms before the affine parts, go unused),
// whose values are those of a layer normalization.
TEST(OnnxOperators, LayerNormalizationWrittenOut) {
  OnnxModel m;
  m.input("x", {3, 4});
  onnx::NodeProto& mean = m.node("ReduceMean", {"x"}, {"mean"});
  OnnxModel::attr_ints(mean, "axes", {-1});
  m.node("Sub", {"x", "mean"}, {"centered"});
  m.scalar("two", 2.0f);
  m.node("Pow", {"centered", "two"}, {"squared"});
  OnnxModel::attr_ints(m.node("ReduceMean", {"squared"}, {"var"}), "axes", {-1});
  m.scalar("eps", 1e-5f);
  m.node("Add", {"var", "eps"}, {"var_eps"});
  m.node("Sqrt", {"var_eps"}, {"std"});
  m.node("Div", {"centered", "std"}, {"normalized"});
  const Floats w = m.weight("ln.weight", {4});
  const Floats b = m.weight("ln.bias", {4});
  m.node("Mul", {"normalized", "ln.weight"}, {"scaled"});
  m.node("Add", {"scaled", "ln.bias"}, {"y"});
  m.output("y");

  const auto model = imported(m);
  ASSERT_TRUE(model);
  Model live = *model;
  live.graph = remove_dead_nodes(model->graph);
  for (const OpKind op : {OpKind::reduce_mean, OpKind::sub, OpKind::mul, OpKind::add}) {
    EXPECT_TRUE(nodes_of(live, op).empty()) << op_name(op) << " is still read";
  }
  const auto lns = nodes_of(live, OpKind::layer_norm);
  ASSERT_EQ(lns.size(), 1u);
  EXPECT_FLOAT_EQ(std::get<LayerNormAttrs>(lns[0]->attrs).eps, 1e-5f);
  EXPECT_EQ(live.graph.value(lns[0]->inputs[1]).name, "ln.weight");
  EXPECT_EQ(live.graph.value(lns[0]->inputs[2]).name, "ln.bias");
  EXPECT_EQ(param_names(*model), (std::vector<std::string>{"ln.bias", "ln.weight"}));

  const Floats x = testing::random_normal(kBatch * 3 * 4, 12);
  Floats expected;
  for (size_t row = 0; row < x.size() / 4; ++row) {
    double mu = 0, var = 0;
    for (size_t k = 0; k < 4; ++k) mu += x[row * 4 + k] / 4.0;
    for (size_t k = 0; k < 4; ++k) var += (x[row * 4 + k] - mu) * (x[row * 4 + k] - mu) / 4.0;
    for (size_t k = 0; k < 4; ++k) {
      expected.push_back(
          static_cast<float>((x[row * 4 + k] - mu) / std::sqrt(var + 1e-5) * w[k] + b[k]));
    }
  }
  expect_near_all(expected, forward(m, {{"x", x}}), 1e-4f);
  expect_trains(m);
}

// --- Activations ---------------------------------------------------------------------

struct UnaryCase {
  const char* onnx;
  OpKind op;
};

class OnnxUnary : public ::testing::TestWithParam<UnaryCase> {};

// x -> Gemm -> the activation: one node of its op, reading the linear layer.
TEST_P(OnnxUnary, MapsAndTrains) {
  OnnxModel m;
  m.input("x", {4});
  m.node(GetParam().onnx, {m.linear("fc", "x", 4, 4)}, {"y"});
  m.output("y");
  const auto model = imported(m);
  ASSERT_TRUE(model);
  const auto nodes = nodes_of(*model, GetParam().op);
  ASSERT_EQ(nodes.size(), 1u);
  const Value& in = model->graph.value(nodes[0]->inputs[0]);
  ASSERT_TRUE(in.producer.valid());
  EXPECT_EQ(model->graph.node(in.producer).op, OpKind::linear);
  EXPECT_EQ(output_shape(*model), (Shape{kBatch, 4}));
  expect_trains(m);
}

INSTANTIATE_TEST_SUITE_P(Activations, OnnxUnary,
                         ::testing::Values(UnaryCase{"Relu", OpKind::relu},
                                           UnaryCase{"Sigmoid", OpKind::sigmoid},
                                           UnaryCase{"Tanh", OpKind::tanh},
                                           UnaryCase{"Gelu", OpKind::gelu}),
                         [](const auto& info) { return std::string(info.param.onnx); });

// Softmax and LogSoftmax along the last axis (the attribute's -1 made positive).
TEST(OnnxOperators, SoftmaxAndLogSoftmax) {
  for (const auto& [onnx_op, op] :
       {std::pair{"Softmax", OpKind::softmax}, std::pair{"LogSoftmax", OpKind::log_softmax}}) {
    SCOPED_TRACE(onnx_op);
    OnnxModel m;
    m.input("x", {4});
    OnnxModel::attr_int(m.node(onnx_op, {m.linear("fc", "x", 4, 3)}, {"y"}), "axis", -1);
    m.output("y");
    const auto model = imported(m);
    ASSERT_TRUE(model);
    const auto nodes = nodes_of(*model, op);
    ASSERT_EQ(nodes.size(), 1u);
    EXPECT_EQ(std::get<AxisAttrs>(nodes[0]->attrs).axis, 1);
    expect_trains(m);
  }
}

// GELU as torch exports it, x * 0.5 * (1 + erf(x / sqrt 2)) in either order
// of the multiplications: one gelu op, and the values of gelu.
OnnxModel gelu_model(bool half_first) {
  OnnxModel m;
  m.input("x", {4});
  // An identity layer, so that the pattern reads the input's values.
  m.weight("fc.weight", {4, 4}, {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1});
  m.weight("fc.bias", {4}, {0.0f, 0.0f, 0.0f, 0.1f});
  OnnxModel::attr_int(m.node("Gemm", {"x", "fc.weight", "fc.bias"}, {"h"}), "transB", 1);
  m.scalar("sqrt2", 1.4142135f);
  m.scalar("one", 1.0f);
  m.scalar("half", 0.5f);
  m.node("Div", {"h", "sqrt2"}, {"d"});
  m.node("Erf", {"d"}, {"e"});
  m.node("Add", {"e", "one"}, {"p"});
  if (half_first) {
    m.node("Mul", {"h", "half"}, {"hh"});
    m.node("Mul", {"hh", "p"}, {"y"});
  } else {
    m.node("Mul", {"h", "p"}, {"hp"});
    m.node("Mul", {"hp", "half"}, {"y"});
  }
  m.output("y");
  return m;
}

TEST(OnnxOperators, GeluErfPattern) {
  for (const bool half_first : {false, true}) {
    SCOPED_TRACE(half_first ? "x * 0.5 first" : "x * (1 + erf) first");
    const OnnxModel m = gelu_model(half_first);
    const auto model = imported(m);
    ASSERT_TRUE(model);
    EXPECT_EQ(nodes_of(*model, OpKind::gelu).size(), 1u);
    // Only the gelu is read: x / sqrt 2 is dead, and 2 gelu(x) * 0.5 is gelu(x).
    Model live = *model;
    live.graph = remove_dead_nodes(model->graph);
    EXPECT_TRUE(nodes_of(live, OpKind::scale).empty());
    const Floats x = testing::random_normal(kBatch * 4, 9);
    Floats expected;
    for (size_t k = 0; k < x.size(); ++k) {
      const double h = x[k] + (k % 4 == 3 ? 0.1 : 0.0);
      expected.push_back(static_cast<float>(0.5 * h * (1 + std::erf(h / std::sqrt(2.0)))));
    }
    expect_near_all(expected, forward(m, {{"x", x}}), 1e-5f);
    expect_trains(m);
  }
}

// --- Linear algebra ------------------------------------------------------------------

// Gemm with transB = 1 and a bias is one linear op whose weight and bias are
// the initializers; its values are x W^T + b.
TEST(OnnxOperators, GemmLinear) {
  OnnxModel m = linear_model();
  const auto model = imported(m);
  ASSERT_TRUE(model);
  const auto linears = nodes_of(*model, OpKind::linear);
  ASSERT_EQ(linears.size(), 1u);
  EXPECT_EQ(linears[0]->inputs.size(), 3u);
  EXPECT_EQ(model->graph.value(linears[0]->inputs[1]).name, "fc.weight");
  EXPECT_EQ(model->graph.value(linears[0]->inputs[2]).name, "fc.bias");
  EXPECT_TRUE(nodes_of(*model, OpKind::matmul).empty());

  const Floats& w = m.weights().at("fc.weight");
  const Floats& b = m.weights().at("fc.bias");
  const Floats x = testing::random_normal(kBatch * 4, 3);
  Floats expected;
  for (int64_t n = 0; n < kBatch; ++n) {
    for (int64_t o = 0; o < 3; ++o) {
      double sum = b[o];
      for (int64_t i = 0; i < 4; ++i) sum += x[n * 4 + i] * w[o * 4 + i];
      expected.push_back(static_cast<float>(sum));
    }
  }
  expect_near_all(expected, forward(m, {{"x", x}}), 1e-5f);
  expect_trains(m);
}

// Gemm with B (K, N), alpha and beta: matmul, scaled, plus beta C.
TEST(OnnxOperators, GemmAlphaBeta) {
  OnnxModel m;
  m.input("x", {3});
  const Floats w = m.weight("w", {3, 2});
  const Floats c = m.weight("c", {2});
  onnx::NodeProto& gemm = m.node("Gemm", {"x", "w", "c"}, {"y"});
  OnnxModel::attr_float(gemm, "alpha", 0.5f);
  OnnxModel::attr_float(gemm, "beta", 2.0f);
  m.output("y");

  const auto model = imported(m);
  ASSERT_TRUE(model);
  const auto matmuls = nodes_of(*model, OpKind::matmul);
  ASSERT_EQ(matmuls.size(), 1u);
  EXPECT_FALSE(std::get<MatmulAttrs>(matmuls[0]->attrs).trans_b);
  EXPECT_TRUE(nodes_of(*model, OpKind::linear).empty());
  EXPECT_EQ(nodes_of(*model, OpKind::scale).size(), 2u);

  const Floats x = testing::random_normal(kBatch * 3, 4);
  Floats expected;
  for (int64_t n = 0; n < kBatch; ++n) {
    for (int64_t j = 0; j < 2; ++j) {
      double sum = 0;
      for (int64_t k = 0; k < 3; ++k) sum += x[n * 3 + k] * w[k * 2 + j];
      expected.push_back(static_cast<float>(0.5 * sum + 2.0 * c[j]));
    }
  }
  expect_near_all(expected, forward(m, {{"x", x}}), 1e-5f);
  expect_trains(m);
}

// MatMul of (N, T, K) by a 2-D weight, and of two operands the graph
// computes (batched), the second a transpose of its last two dimensions,
// which the matmul reads transposed instead.
TEST(OnnxOperators, MatMul) {
  OnnxModel m;
  m.input("x", {3, 4});
  m.weight("wq", {4, 4});
  m.node("MatMul", {"x", "wq"}, {"q"});
  OnnxModel::attr_ints(m.node("Transpose", {"x"}, {"xt"}), "perm", {0, 2, 1});
  m.node("MatMul", {"q", "xt"}, {"s"});  // (N, 3, 3)
  m.weight("wo", {3, 5});
  m.node("MatMul", {"s", "wo"}, {"y"});
  m.output("y");

  const auto model = imported(m);
  ASSERT_TRUE(model);
  const auto matmuls = nodes_of(*model, OpKind::matmul);
  ASSERT_EQ(matmuls.size(), 3u);
  EXPECT_EQ(shape_of(*model, matmuls[0]->inputs[1]), (Shape{4, 4}));
  EXPECT_EQ(model->graph.value(matmuls[1]->inputs[1]).name, "x");
  EXPECT_TRUE(std::get<MatmulAttrs>(matmuls[1]->attrs).trans_b);
  EXPECT_FALSE(std::get<MatmulAttrs>(matmuls[1]->attrs).trans_a);
  EXPECT_EQ(out_shape(*model, *matmuls[1]), (Shape{kBatch, 3, 3}));
  EXPECT_EQ(output_shape(*model), (Shape{kBatch, 3, 5}));
  EXPECT_EQ(shape_of(*model, model->labels), (Shape{kBatch, 3}));
  expect_trains(m);
}

// --- Element-wise arithmetic -----------------------------------------------------------

// Add of a bias weight, Sub and Mul of computed tensors, Div and Mul by
// scalar constants (scale) and Add of a scalar (an added fill).
TEST(OnnxOperators, AddSubMulDiv) {
  OnnxModel m;
  m.input("x", {4});
  const std::string h = m.linear("fc", "x", 4, 4);
  m.weight("shift", {4});
  m.scalar("two", 2.0f);
  m.scalar("three", 3.0f);
  m.scalar("one", 1.0f);
  m.node("Add", {h, "shift"}, {"a"});
  m.node("Sub", {"a", "x"}, {"s"});
  m.node("Mul", {"s", h}, {"p"});
  m.node("Div", {"p", "two"}, {"d"});
  m.node("Mul", {"three", "d"}, {"t"});
  m.node("Add", {"t", "one"}, {"y"});
  m.output("y");

  const auto model = imported(m);
  ASSERT_TRUE(model);
  EXPECT_EQ(nodes_of(*model, OpKind::add).size(), 2u);
  EXPECT_EQ(nodes_of(*model, OpKind::sub).size(), 1u);
  EXPECT_EQ(nodes_of(*model, OpKind::mul).size(), 1u);
  const auto scales = nodes_of(*model, OpKind::scale);
  ASSERT_EQ(scales.size(), 2u);
  EXPECT_FLOAT_EQ(std::get<ScaleAttrs>(scales[0]->attrs).alpha, 0.5f);
  EXPECT_FLOAT_EQ(std::get<ScaleAttrs>(scales[1]->attrs).alpha, 3.0f);
  EXPECT_EQ(param_names(*model), (std::vector<std::string>{"fc.bias", "fc.weight", "shift"}));
  expect_trains(m);
}

// Pow by the constant exponents 2 and 3: products of the base.
TEST(OnnxOperators, Pow) {
  OnnxModel m;
  m.input("x", {4});
  const std::string h = m.linear("fc", "x", 4, 4);
  m.scalar("two", 2.0f);
  m.scalar("three", 3.0f);
  m.node("Pow", {h, "two"}, {"p2"});
  m.node("Pow", {h, "three"}, {"p3"});
  m.node("Add", {"p2", "p3"}, {"y"});
  m.output("y");

  const auto model = imported(m);
  ASSERT_TRUE(model);
  EXPECT_EQ(nodes_of(*model, OpKind::mul).size(), 3u);
  EXPECT_EQ(param_names(*model), (std::vector<std::string>{"fc.bias", "fc.weight"}));

  const Floats x = testing::random_normal(kBatch * 4, 8);
  const Floats& w = m.weights().at("fc.weight");
  const Floats& b = m.weights().at("fc.bias");
  Floats expected;
  for (int64_t n = 0; n < kBatch; ++n) {
    for (int64_t o = 0; o < 4; ++o) {
      double v = b[o];
      for (int64_t i = 0; i < 4; ++i) v += x[n * 4 + i] * w[o * 4 + i];
      expected.push_back(static_cast<float>(v * v + v * v * v));
    }
  }
  expect_near_all(expected, forward(m, {{"x", x}}), 1e-5f);
  expect_trains(m);
}

// ReduceMean over axis 1 without keepdims.
TEST(OnnxOperators, ReduceMean) {
  OnnxModel m;
  m.input("x", {3, 4});
  m.weight("w", {4, 4});
  m.node("MatMul", {"x", "w"}, {"h"});
  onnx::NodeProto& mean = m.node("ReduceMean", {"h"}, {"y"});
  OnnxModel::attr_ints(mean, "axes", {1});
  OnnxModel::attr_int(mean, "keepdims", 0);
  m.output("y");

  const auto model = imported(m);
  ASSERT_TRUE(model);
  const auto means = nodes_of(*model, OpKind::reduce_mean);
  ASSERT_EQ(means.size(), 1u);
  EXPECT_EQ(std::get<ReduceAttrs>(means[0]->attrs).axes, (std::vector<int64_t>{1}));
  EXPECT_FALSE(std::get<ReduceAttrs>(means[0]->attrs).keepdims);
  EXPECT_EQ(output_shape(*model), (Shape{kBatch, 4}));
  expect_trains(m);
}

// --- Shapes ---------------------------------------------------------------------------

// The dynamic-batch flatten torch writes, Shape -> Gather -> Unsqueeze ->
// Concat -> Reshape, and a scale by 1 / Sqrt of a constant (attention's
// scaling): folded at import into a reshape to (batch, 36) and a scale,
// with no node of the shape arithmetic left; the batch is the caller's.
OnnxModel shape_chain_model() {
  OnnxModel m;
  m.input("x", {2, 3, 3});
  m.weight("conv.weight", {4, 2, 1, 1});
  m.node("Conv", {"x", "conv.weight"}, {"c"});
  m.node("Shape", {"c"}, {"shape"});
  m.ints("zero", {}, {0});
  OnnxModel::attr_int(m.node("Gather", {"shape", "zero"}, {"n"}), "axis", 0);
  m.ints("axes0", {1}, {0});
  m.node("Unsqueeze", {"n", "axes0"}, {"n1"});
  m.ints("minus_one", {1}, {-1});
  OnnxModel::attr_int(m.node("Concat", {"n1", "minus_one"}, {"spec"}), "axis", 0);
  m.node("Reshape", {"c", "spec"}, {"flat"});
  onnx::NodeProto& sixteen = m.node("Constant", {}, {"sixteen"});
  OnnxModel::attr_tensor(sixteen, "value", float_tensor("", {}, {16.0f}));
  m.node("Sqrt", {"sixteen"}, {"root"});
  m.node("Div", {"flat", "root"}, {"scaled"});
  m.output(m.linear("fc", "scaled", 36, 3));
  return m;
}

TEST(OnnxOperators, ShapeArithmeticFolds) {
  const OnnxModel m = shape_chain_model();
  for (const int64_t batch : {kBatch, int64_t{5}}) {
    const auto model = imported(m, training(batch));
    ASSERT_TRUE(model);
    const auto reshapes = nodes_of(*model, OpKind::reshape);
    ASSERT_GE(reshapes.size(), 1u);
    EXPECT_EQ(std::get<ShapeAttrs>(reshapes[0]->attrs).shape, (Shape{batch, 36}));
    const auto scales = nodes_of(*model, OpKind::scale);
    ASSERT_EQ(scales.size(), 1u);
    EXPECT_FLOAT_EQ(std::get<ScaleAttrs>(scales[0]->attrs).alpha, 0.25f);
    EXPECT_EQ(output_shape(*model), (Shape{batch, 3}));
    // Only the convolution, reshape, scale, linear layer and loss are left.
    for (const Node& n : model->graph.nodes()) {
      EXPECT_TRUE(n.op == OpKind::conv2d || n.op == OpKind::reshape || n.op == OpKind::scale ||
                  n.op == OpKind::linear || n.op == OpKind::softmax_cross_entropy)
          << "unexpected " << op_name(n.op) << " node " << n.name;
    }
  }
  expect_trains(m);
}

// Position ids as GPT-2 exports them, Range(0, Shape(ids)[1], 1) with a
// Cast, fold into known indices: Gather of the position table by them is a
// slice of its first rows, added to the token embeddings.
TEST(OnnxOperators, PositionRangeFolds) {
  OnnxModel m;
  m.input("ids", {4}, kInt64);
  m.weight("wte", {6, 8});
  m.weight("wpe", {6, 8});
  m.node("Gather", {"wte", "ids"}, {"tok"});  // (N, 4, 8)
  m.node("Shape", {"ids"}, {"shape"});
  m.ints("one", {}, {1});
  m.ints("zero", {}, {0});
  m.ints("step", {}, {1});
  OnnxModel::attr_int(m.node("Gather", {"shape", "one"}, {"t"}), "axis", 0);
  OnnxModel::attr_int(m.node("Cast", {"t"}, {"t64"}), "to", kInt64);
  m.node("Range", {"zero", "t64", "step"}, {"positions"});
  m.node("Gather", {"wpe", "positions"}, {"pos"});  // (4, 8)
  m.node("Add", {"tok", "pos"}, {"e"});
  m.weight("head", {8, 6});
  m.node("MatMul", {"e", "head"}, {"y"});
  m.output("y");

  const auto model = imported(m);
  ASSERT_TRUE(model);
  const auto slices = nodes_of(*model, OpKind::slice);
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(model->graph.value(slices[0]->inputs[0]).name, "wpe");
  EXPECT_EQ(std::get<SliceAttrs>(slices[0]->attrs).start, 0);
  EXPECT_EQ(std::get<SliceAttrs>(slices[0]->attrs).end, 4);
  EXPECT_EQ(nodes_of(*model, OpKind::embedding).size(), 1u);
  EXPECT_EQ(output_shape(*model), (Shape{kBatch, 4, 6}));
  expect_trains(m, "", 6);
}

// Transpose, Reshape with a 0 (copy the dimension) and Flatten.
TEST(OnnxOperators, TransposeReshapeFlatten) {
  OnnxModel m;
  m.input("x", {2, 3, 4});
  OnnxModel::attr_ints(m.node("Transpose", {"x"}, {"t"}), "perm", {0, 2, 1, 3});
  m.ints("spec", {3}, {0, 3, 8});
  m.node("Reshape", {"t", "spec"}, {"r"});
  OnnxModel::attr_int(m.node("Flatten", {"r"}, {"f"}), "axis", 1);
  m.output(m.linear("fc", "f", 24, 3));

  const auto model = imported(m);
  ASSERT_TRUE(model);
  const auto transposes = nodes_of(*model, OpKind::transpose);
  ASSERT_EQ(transposes.size(), 1u);
  EXPECT_EQ(std::get<PermAttrs>(transposes[0]->attrs).perm, (std::vector<int64_t>{0, 2, 1, 3}));
  EXPECT_EQ(out_shape(*model, *transposes[0]), (Shape{kBatch, 3, 2, 4}));
  const auto reshapes = nodes_of(*model, OpKind::reshape);
  ASSERT_EQ(reshapes.size(), 2u);
  EXPECT_EQ(std::get<ShapeAttrs>(reshapes[0]->attrs).shape, (Shape{kBatch, 3, 8}));
  EXPECT_EQ(std::get<ShapeAttrs>(reshapes[1]->attrs).shape, (Shape{kBatch, 24}));
  expect_trains(m);
}

// Split by sizes, Slice of one part, Concat, Unsqueeze and Squeeze.
TEST(OnnxOperators, SplitSliceConcatSqueeze) {
  OnnxModel m;
  m.input("x", {6});
  const std::string h = m.linear("fc", "x", 6, 6);
  m.ints("sizes", {2}, {2, 4});
  OnnxModel::attr_int(m.node("Split", {h, "sizes"}, {"a", "b"}), "axis", 1);
  m.ints("starts", {1}, {1});
  m.ints("ends", {1}, {3});
  m.ints("axes", {1}, {1});
  m.node("Slice", {"b", "starts", "ends", "axes"}, {"bs"});
  OnnxModel::attr_int(m.node("Concat", {"a", "bs"}, {"c"}), "axis", 1);
  m.node("Unsqueeze", {"c", "axes"}, {"u"});
  m.node("Squeeze", {"u", "axes"}, {"y"});
  m.output("y");

  const auto model = imported(m);
  ASSERT_TRUE(model);
  const auto splits = nodes_of(*model, OpKind::split);
  ASSERT_EQ(splits.size(), 1u);
  EXPECT_EQ(std::get<SplitAttrs>(splits[0]->attrs).sizes, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(std::get<SplitAttrs>(splits[0]->attrs).axis, 1);
  const auto slices = nodes_of(*model, OpKind::slice);
  ASSERT_EQ(slices.size(), 1u);
  const auto& s = std::get<SliceAttrs>(slices[0]->attrs);
  EXPECT_EQ(s.axis, 1);
  EXPECT_EQ(s.start, 1);
  EXPECT_EQ(s.end, 3);
  const auto concats = nodes_of(*model, OpKind::concat);
  ASSERT_EQ(concats.size(), 1u);
  EXPECT_EQ(std::get<AxisAttrs>(concats[0]->attrs).axis, 1);
  EXPECT_EQ(out_shape(*model, *concats[0]), (Shape{kBatch, 4}));
  EXPECT_EQ(output_shape(*model), (Shape{kBatch, 4}));
  expect_trains(m);
}

// Expand of computed data: a broadcast_to node of the expanded shape.
TEST(OnnxOperators, Expand) {
  OnnxModel m;
  m.input("x", {4});
  const std::string h = m.linear("fc", "x", 4, 4);
  m.ints("axes", {1}, {1});
  m.node("Unsqueeze", {h, "axes"}, {"u"});  // (N, 1, 4)
  m.ints("shape", {3}, {1, 3, 1});
  m.node("Expand", {"u", "shape"}, {"e"});  // (N, 3, 4)
  m.weight("scale", {3, 4});
  m.node("Mul", {"e", "scale"}, {"y"});
  m.output("y");

  const auto model = imported(m);
  ASSERT_TRUE(model);
  const auto broadcasts = nodes_of(*model, OpKind::broadcast_to);
  ASSERT_EQ(broadcasts.size(), 1u);
  EXPECT_EQ(std::get<ShapeAttrs>(broadcasts[0]->attrs).shape, (Shape{kBatch, 3, 4}));
  EXPECT_EQ(output_shape(*model), (Shape{kBatch, 3, 4}));
  expect_trains(m);
}

// --- Tokens, gathers and masks ---------------------------------------------------------

// Gather of a table's rows by INT64 token ids (cast to INT32 first, as a
// no-op): an embedding; the input becomes the i32 `tokens`.
TEST(OnnxOperators, GatherEmbeddingAndCast) {
  OnnxModel m;
  m.input("ids", {5}, kInt64);
  OnnxModel::attr_int(m.node("Cast", {"ids"}, {"ids32"}), "to", onnx::TensorProto::INT32);
  m.weight("wte", {7, 4});
  m.node("Gather", {"wte", "ids32"}, {"e"});
  OnnxModel::attr_int(m.node("Cast", {"e"}, {"ef"}), "to", kFloat);
  m.weight("head", {4, 7});
  m.node("MatMul", {"ef", "head"}, {"y"});
  m.output("y");

  const auto model = imported(m);
  ASSERT_TRUE(model);
  const Value& tokens = model->graph.value(model->inputs[0]);
  EXPECT_EQ(tokens.name, "tokens");
  EXPECT_EQ(tokens.type.dtype, DType::i32);
  EXPECT_EQ(tokens.type.shape, (Shape{kBatch, 5}));
  const auto embeddings = nodes_of(*model, OpKind::embedding);
  ASSERT_EQ(embeddings.size(), 1u);
  EXPECT_EQ(model->graph.value(embeddings[0]->inputs[1]).name, "wte");
  EXPECT_EQ(out_shape(*model, *embeddings[0]), (Shape{kBatch, 5, 4}));
  EXPECT_EQ(shape_of(*model, model->labels), (Shape{kBatch, 5}));
  expect_trains(m, "", 7);
}

// Token logits flattened into rows (N*T, V), as language models export
// them: the labels are still (N, T), one per row.
TEST(OnnxOperators, FlattenedTokenLogits) {
  OnnxModel m;
  m.input("ids", {5}, kInt64);
  m.weight("wte", {7, 4});
  m.node("Gather", {"wte", "ids"}, {"e"});
  m.weight("head", {4, 7});
  m.node("MatMul", {"e", "head"}, {"h"});
  m.ints("rows", {2}, {-1, 7});
  m.node("Reshape", {"h", "rows"}, {"y"});
  m.output("y");

  const auto model = imported(m);
  ASSERT_TRUE(model);
  EXPECT_EQ(shape_of(*model, model->labels), (Shape{kBatch, 5}));
  EXPECT_EQ(shape_of(*model, model->logits), (Shape{kBatch * 5, 7}));
  expect_trains(m, "", 7);
}

// Gather of known indices along a computed tensor: a contiguous range is a
// slice, a scalar index a slice and a reshape that drops the axis.
TEST(OnnxOperators, GatherConstantRangeIsSlice) {
  OnnxModel m;
  m.input("x", {3, 4});
  m.weight("w", {4, 4});
  m.node("MatMul", {"x", "w"}, {"h"});  // (N, 3, 4)
  m.ints("rows", {2}, {1, 2});
  OnnxModel::attr_int(m.node("Gather", {"h", "rows"}, {"g"}), "axis", 1);  // (N, 2, 4)
  m.ints("first", {}, {0});
  OnnxModel::attr_int(m.node("Gather", {"g", "first"}, {"y"}), "axis", 1);  // (N, 4)
  m.output("y");

  const auto model = imported(m);
  ASSERT_TRUE(model);
  const auto slices = nodes_of(*model, OpKind::slice);
  ASSERT_EQ(slices.size(), 2u);
  const auto& a = std::get<SliceAttrs>(slices[0]->attrs);
  EXPECT_EQ(a.axis, 1);
  EXPECT_EQ(a.start, 1);
  EXPECT_EQ(a.end, 3);
  const auto& b = std::get<SliceAttrs>(slices[1]->attrs);
  EXPECT_EQ(b.start, 0);
  EXPECT_EQ(b.end, 1);
  EXPECT_TRUE(nodes_of(*model, OpKind::embedding).empty());
  EXPECT_EQ(output_shape(*model), (Shape{kBatch, 4}));
  expect_trains(m);
}

std::vector<float> lower_triangle(int64_t t) {
  std::vector<float> v;
  for (int64_t i = 0; i < t; ++i) {
    for (int64_t j = 0; j < t; ++j) v.push_back(j <= i ? 1.0f : 0.0f);
  }
  return v;
}

// Where the causal mask's condition comes from.
enum class MaskFrom {
  constant,  // Equal(Constant tril, 0)
  trilu,     // Equal(Trilu(Constant ones), 0)
  boolean,   // a BOOL initializer, as the exporter's folding leaves it
};

// The causal mask GPT-2-style attention writes: Where(tril == 0, -inf,
// scores), single-head attention over token embeddings.
OnnxModel causal_attention_model(const std::vector<float>& tril, MaskFrom from) {
  OnnxModel m;
  m.input("ids", {4}, kInt64);
  m.weight("wte", {6, 8});
  m.node("Gather", {"wte", "ids"}, {"e"});  // (N, 4, 8)
  m.weight("wq", {8, 8});
  m.weight("wk", {8, 8});
  m.node("MatMul", {"e", "wq"}, {"q"});
  m.node("MatMul", {"e", "wk"}, {"k"});
  OnnxModel::attr_ints(m.node("Transpose", {"k"}, {"kt"}), "perm", {0, 2, 1});
  m.node("MatMul", {"q", "kt"}, {"s"});  // (N, 4, 4)
  m.scalar("zero", 0.0f);
  switch (from) {
    case MaskFrom::constant:
      OnnxModel::attr_tensor(m.node("Constant", {}, {"tril"}), "value",
                             float_tensor("", {4, 4}, tril));
      m.node("Equal", {"tril", "zero"}, {"masked"});
      break;
    case MaskFrom::trilu:
      OnnxModel::attr_tensor(m.node("Constant", {}, {"ones"}), "value",
                             float_tensor("", {4, 4}, Floats(16, 1.0f)));
      OnnxModel::attr_int(m.node("Trilu", {"ones"}, {"tril"}), "upper", 0);
      m.node("Equal", {"tril", "zero"}, {"masked"});
      break;
    case MaskFrom::boolean: {
      std::vector<int64_t> masked;
      for (const float keep : tril) masked.push_back(keep == 0.0f);
      *m.graph().add_initializer() = int_tensor("masked", {1, 4, 4}, masked, kBool);
      break;
    }
  }
  m.scalar("neg_inf", -std::numeric_limits<float>::infinity());
  m.node("Where", {"masked", "neg_inf", "s"}, {"sm"});
  OnnxModel::attr_int(m.node("Softmax", {"sm"}, {"p"}), "axis", -1);
  m.node("MatMul", {"p", "e"}, {"a"});  // (N, 4, 8)
  m.weight("head", {8, 6});
  m.node("MatMul", {"a", "head"}, {"y"});
  m.output("y");
  return m;
}

// Each form of the condition: a causal_mask op with offset 0 and memfit's
// finite mask value.
TEST(OnnxOperators, WhereCausalMask) {
  for (const MaskFrom from : {MaskFrom::constant, MaskFrom::trilu, MaskFrom::boolean}) {
    SCOPED_TRACE(static_cast<int>(from));
    const OnnxModel m = causal_attention_model(lower_triangle(4), from);
    const auto model = imported(m);
    ASSERT_TRUE(model);
    const auto masks = nodes_of(*model, OpKind::causal_mask);
    ASSERT_EQ(masks.size(), 1u);
    EXPECT_EQ(std::get<CausalMaskAttrs>(masks[0]->attrs).offset, 0);
    EXPECT_EQ(std::get<CausalMaskAttrs>(masks[0]->attrs).value, kAttentionMaskValue);
    EXPECT_EQ(output_shape(*model), (Shape{kBatch, 4, 6}));
    expect_trains(m, "", 6);
  }
}

// A condition that is no causal pattern is refused, naming the node.
TEST(OnnxRefusals, WhereNotCausal) {
  std::vector<float> tril = lower_triangle(4);
  tril[4] = 0.0f;  // row 1 hides its first key
  const std::string message = refusal(causal_attention_model(tril, MaskFrom::constant).bytes());
  EXPECT_TRUE(contains(message, "node '/sm/Where' (Where)")) << message;
  EXPECT_TRUE(contains(message, "Where is supported only as a causal mask")) << message;
}

// --- Constants, identities and dropout ---------------------------------------------------

// Constant nodes: a non-uniform f32 tensor is model state that no step
// trains, a scalar a scale, and integers a reshape's shape.
TEST(OnnxOperators, Constant) {
  OnnxModel m;
  m.input("x", {4});
  const std::string h = m.linear("fc", "x", 4, 4);
  OnnxModel::attr_tensor(m.node("Constant", {}, {"offsets"}), "value",
                         float_tensor("", {4}, {1, 2, 3, 4}));
  OnnxModel::attr_float(m.node("Constant", {}, {"factor"}), "value_float", 0.25f);
  OnnxModel::attr_ints(m.node("Constant", {}, {"spec"}), "value_ints", {0, 2, 2});
  m.node("Add", {h, "offsets"}, {"a"});
  m.node("Mul", {"a", "factor"}, {"b"});
  m.node("Reshape", {"b", "spec"}, {"y"});
  m.output("y");

  const auto model = imported(m);
  ASSERT_TRUE(model);
  EXPECT_EQ(param_names(*model), (std::vector<std::string>{"fc.bias", "fc.weight"}));
  const ValueId offsets = model->graph.find_value("offsets");
  ASSERT_TRUE(offsets.valid());
  EXPECT_EQ(model->graph.value(offsets).role, Role::state);
  EXPECT_EQ(*model->init.at("offsets").values, (Floats{1, 2, 3, 4}));
  const auto scales = nodes_of(*model, OpKind::scale);
  ASSERT_EQ(scales.size(), 1u);
  EXPECT_FLOAT_EQ(std::get<ScaleAttrs>(scales[0]->attrs).alpha, 0.25f);
  EXPECT_EQ(output_shape(*model), (Shape{kBatch, 2, 2}));
  expect_trains(m);
}

// Identity of computed data adds no node; Identity of a weight initializer
// (as exporters deduplicate equal initializers) is a parameter of its own
// under the output's name, starting from the initializer's values.
OnnxModel shared_weight_model() {
  OnnxModel m;
  m.input("x", {4});
  m.weight("w", {4, 4});
  m.node("Identity", {"w"}, {"w.copy"});
  m.node("Identity", {"x"}, {"x.same"});
  OnnxModel::attr_int(m.node("Gemm", {"x.same", "w"}, {"h"}), "transB", 1);
  m.node("Relu", {"h"}, {"r"});
  OnnxModel::attr_int(m.node("Gemm", {"r", "w.copy"}, {"y"}), "transB", 1);
  m.output("y");
  return m;
}

TEST(OnnxOperators, Identity) {
  const OnnxModel m = shared_weight_model();
  const auto model = imported(m);
  ASSERT_TRUE(model);
  EXPECT_EQ(param_names(*model), (std::vector<std::string>{"w", "w.copy"}));
  const Floats& w = m.weights().at("w");
  EXPECT_EQ(*model->init.at("w").values, w);
  EXPECT_EQ(*model->init.at("w.copy").values, w);
  const auto linears = nodes_of(*model, OpKind::linear);
  ASSERT_EQ(linears.size(), 2u);
  EXPECT_EQ(model->graph.value(linears[0]->inputs[0]).name, "x");
  EXPECT_EQ(model->graph.value(linears[1]->inputs[1]).name, "w.copy");
  // The two train apart: each changes by its own gradient.
  const OneStep step = train_step(m);
  EXPECT_TRUE(std::isfinite(step.loss));
  EXPECT_TRUE(step.unchanged.empty());
  EXPECT_NE(*step.after.find("w"), *step.after.find("w.copy"));
}

// Dropout with a constant ratio: a dropout op in training, none in
// evaluation or with dropout off; the unread mask output is accepted.
TEST(OnnxOperators, Dropout) {
  OnnxModel m;
  m.input("x", {4});
  m.scalar("ratio", 0.25f);
  m.node("Dropout", {m.linear("fc", "x", 4, 3), "ratio"}, {"y", "mask"});
  m.output("y");

  const auto model = imported(m);
  ASSERT_TRUE(model);
  const auto drops = nodes_of(*model, OpKind::dropout);
  ASSERT_EQ(drops.size(), 1u);
  EXPECT_FLOAT_EQ(std::get<DropoutAttrs>(drops[0]->attrs).p, 0.25f);
  const auto eval = imported(m, evaluation());
  ASSERT_TRUE(eval);
  EXPECT_TRUE(nodes_of(*eval, OpKind::dropout).empty());
  OnnxImport off = training();
  off.dropout = false;
  const auto plain = imported(m, off);
  ASSERT_TRUE(plain);
  EXPECT_TRUE(nodes_of(*plain, OpKind::dropout).empty());
  expect_trains(m);
}

// --- Weights and losses ----------------------------------------------------------------

// f32 initializers of more than one element are parameters under their ONNX
// names with the initializer's values (raw_data as well as float_data);
// scalars and integer tensors are constants.
TEST(OnnxWeights, ParametersAndConstants) {
  OnnxModel m;
  m.input("x", {4});
  const Floats w = seeded({3, 4}, 77);
  onnx::TensorProto raw = float_tensor("fc.weight", {3, 4}, {});
  raw.set_raw_data(std::string(reinterpret_cast<const char*>(w.data()), w.size() * sizeof(float)));
  *m.graph().add_initializer() = raw;
  const Floats b = m.weight("fc.bias", {3});
  OnnxModel::attr_int(m.node("Gemm", {"x", "fc.weight", "fc.bias"}, {"h"}), "transB", 1);
  m.scalar("half", 0.5f);
  m.node("Mul", {"h", "half"}, {"y"});
  m.ints("unused_ints", {2}, {1, 2});
  m.output("y");

  const auto model = imported(m);
  ASSERT_TRUE(model);
  EXPECT_EQ(param_names(*model), (std::vector<std::string>{"fc.bias", "fc.weight"}));
  EXPECT_EQ(*model->init.at("fc.weight").values, w);
  EXPECT_EQ(*model->init.at("fc.bias").values, b);
  EXPECT_EQ(model->init.count("half"), 0u);
  EXPECT_FALSE(model->graph.find_value("half").valid());
  EXPECT_FALSE(model->graph.find_value("unused_ints").valid());
  for (const ValueId p : model->params) EXPECT_EQ(model->graph.value(p).role, Role::parameter);
}

// The mse loss: f32 labels of the output's shape.
TEST(OnnxWeights, MseLoss) {
  const OnnxModel m = linear_model();
  OnnxImport mse = training();
  mse.loss = "mse";
  Result<Model> model = import_bytes(m.bytes(), mse);
  ASSERT_TRUE(model.is_ok()) << model.message();
  const Value& labels = model->graph.value(model->labels);
  EXPECT_EQ(labels.type.dtype, DType::f32);
  EXPECT_EQ(labels.type.shape, (Shape{kBatch, 3}));
  expect_trains(m, "mse");
}

// --- Refusals ---------------------------------------------------------------------------

// Files that are no ONNX model: errors that name the file.
TEST(OnnxRefusals, EmptyGarbageAndTruncatedFiles) {
  const std::string empty = refusal("");
  EXPECT_TRUE(contains(empty, "test.onnx is empty")) << empty;
  std::string bytes;
  for (int k = 0; k < 300; ++k) bytes.push_back(static_cast<char>((k * 7919 + 13) % 251));
  const std::string garbage = refusal(bytes);
  EXPECT_TRUE(contains(garbage, "test.onnx")) << garbage;
  const std::string model = linear_model().bytes();
  for (const size_t length : {size_t{1}, size_t{10}, model.size() / 3, model.size() / 2,
                              model.size() - 5, model.size() - 1}) {
    const std::string message = refusal(model.substr(0, length));
    EXPECT_TRUE(contains(message, "test.onnx")) << length << ": " << message;
  }
}

// Opsets outside 13 to 17, naming the opset and the range.
TEST(OnnxRefusals, OpsetOutsideRange) {
  for (const int64_t opset : {12, 18}) {
    OnnxModel m(opset);
    m.input("x", {4});
    m.output(m.linear("fc", "x", 4, 3));
    const std::string message = refusal(m.bytes());
    EXPECT_TRUE(
        contains(message, "uses opset " + std::to_string(opset) + "; memfit reads 13 to 17"))
        << message;
  }
}

// An operator without a mapping, naming the node and the operator.
TEST(OnnxRefusals, UnknownOperator) {
  OnnxModel m = linear_model();
  m.node("NonMaxSuppression", {"fc"}, {"boxes"}, "/nms/NonMaxSuppression");
  const std::string message = refusal(m.bytes());
  EXPECT_TRUE(contains(message, "node '/nms/NonMaxSuppression' (NonMaxSuppression)")) << message;
  EXPECT_TRUE(contains(message, "operator NonMaxSuppression is not supported")) << message;
}

// Attribute values without a mapping: auto_pad SAME_UPPER, asymmetric pads.
TEST(OnnxRefusals, UnsupportedAttribute) {
  OnnxModel m;
  m.input("x", {1, 4, 4});
  m.weight("conv.weight", {2, 1, 3, 3});
  OnnxModel::attr_string(m.node("Conv", {"x", "conv.weight"}, {"y"}, "/conv/Conv"), "auto_pad",
                         "SAME_UPPER");
  m.output("y");
  const std::string message = refusal(m.bytes());
  EXPECT_TRUE(contains(message, "node '/conv/Conv' (Conv)")) << message;
  EXPECT_TRUE(contains(message, "auto_pad SAME_UPPER is not supported")) << message;

  OnnxModel pads;
  pads.input("x", {1, 4, 4});
  pads.weight("conv.weight", {2, 1, 3, 3});
  OnnxModel::attr_ints(pads.node("Conv", {"x", "conv.weight"}, {"y"}, "/conv/Conv"), "pads",
                       {0, 0, 1, 1});
  pads.output("y");
  const std::string asymmetric = refusal(pads.bytes());
  EXPECT_TRUE(contains(asymmetric, "asymmetric pads are not supported")) << asymmetric;

  OnnxModel negative;
  negative.input("x", {1, 4, 4});
  negative.weight("conv.weight", {2, 1, 3, 3});
  OnnxModel::attr_ints(negative.node("Conv", {"x", "conv.weight"}, {"y"}, "/conv/Conv"), "pads",
                       {-1, -1, -1, -1});
  negative.output("y");
  const std::string cropped = refusal(negative.bytes());
  EXPECT_TRUE(contains(cropped, "negative pads are not supported (begin -1, end -1)")) << cropped;
}

// A symbolic dimension other than the first.
TEST(OnnxRefusals, DynamicNonBatchDimension) {
  OnnxModel m = linear_model();
  auto* shape = m.graph().mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  shape->mutable_dim(1)->set_dim_param("features");
  const std::string message = refusal(m.bytes());
  EXPECT_TRUE(contains(message, "input 'x' has a dynamic dimension 1 ('features')")) << message;
  // A fixed size that is not positive is named as such.
  for (const int64_t size : {0, -5}) {
    shape->mutable_dim(1)->set_dim_value(size);
    const std::string bad = refusal(m.bytes());
    EXPECT_TRUE(contains(bad, "input 'x' has dimension 1 of size " + std::to_string(size) +
                                  "; every size must be positive"))
        << bad;
  }
}

// An operator of another domain than the default.
TEST(OnnxRefusals, NonDefaultDomain) {
  OnnxModel m = linear_model();
  m.node("Relu", {"fc"}, {"r"}, "/custom/Relu").set_domain("com.microsoft");
  const std::string message = refusal(m.bytes());
  EXPECT_TRUE(contains(message, "node '/custom/Relu' (Relu)")) << message;
  EXPECT_TRUE(contains(message, "domain 'com.microsoft' is not supported")) << message;
}

// A node input that nothing produces.
TEST(OnnxRefusals, UndefinedTensor) {
  OnnxModel m;
  m.input("x", {4});
  m.node("Add", {"x", "nowhere"}, {"y"}, "/add/Add");
  m.output("y");
  const std::string message = refusal(m.bytes());
  EXPECT_TRUE(contains(message, "node '/add/Add' (Add)")) << message;
  EXPECT_TRUE(contains(message, "input 1 'nowhere' is not produced")) << message;
}

// Names that are not UTF-8 text (ONNX's strings are UTF-8) or hold control
// characters would carry through into the SVG, JSON and text reports; the
// message shows the bytes escaped. UTF-8 beyond ASCII is a name like another.
TEST(OnnxRefusals, NamesThatAreNotText) {
  const std::pair<std::string, std::string> cases[] = {
      {"K\xff\xfe", "the name \"K\\xff\\xfe\" of a node output is not UTF-8"},
      {"x\x01y", "the name \"x\\x01y\" of a node output holds a control character"},
      {"\xe2\x82", "is not UTF-8"},                 // a sequence cut short
      {"\xc0\xaf", "is not UTF-8"},                 // overlong
      {"\xed\xa0\x80", "is not UTF-8"},             // a surrogate
      {"\xf4\x90\x80\x80", "is not UTF-8"},         // past U+10FFFF
      {"a\xef\xbf\xbf", "holds U+FFFE or U+FFFF"},  // not an XML character
  };
  for (const auto& [name, expected] : cases) {
    OnnxModel m;
    m.input("x", {4});
    m.node("Relu", {"x"}, {name}, "/relu/Relu");
    m.output(m.linear("fc", name, 4, 3));
    const std::string message = refusal(m.bytes());
    EXPECT_TRUE(contains(message, expected)) << message;
  }
  OnnxModel m;
  m.input("x", {4});
  m.node("Relu", {"x"}, {"r\xc3\xa9lu \xe2\x82\xac \xf0\x9f\x98\x80"}, "/relu/Relu");
  m.output(m.linear("fc", "r\xc3\xa9lu \xe2\x82\xac \xf0\x9f\x98\x80", 4, 3));
  EXPECT_TRUE(imported(m));
}

// Two initializers of one name: the file is named once.
TEST(OnnxRefusals, DuplicateInitializer) {
  OnnxModel m;
  m.input("x", {4});
  m.output(m.linear("fc", m.linear("fc", "x", 4, 4), 4, 3));
  const std::string message = refusal(m.bytes());
  EXPECT_TRUE(message.starts_with("test.onnx: tensor 'fc.")) << message;
  EXPECT_TRUE(contains(message, "is produced twice")) << message;
}

// Division by a tensor the graph computes (only by constants).
TEST(OnnxRefusals, DivByComputedTensor) {
  OnnxModel m;
  m.input("x", {4});
  m.node("Div", {"x", m.linear("fc", "x", 4, 4)}, {"y"}, "/div/Div");
  m.output("y");
  const std::string message = refusal(m.bytes());
  EXPECT_TRUE(contains(message, "node '/div/Div' (Div)")) << message;
  EXPECT_TRUE(contains(message, "division by a tensor the graph computes is not supported"))
      << message;
}

// Erf of anything but x / sqrt 2 of the GELU pattern.
TEST(OnnxRefusals, ErfOutsideGelu) {
  OnnxModel m;
  m.input("x", {4});
  m.node("Erf", {m.linear("fc", "x", 4, 4)}, {"y"}, "/erf/Erf");
  m.output("y");
  const std::string message = refusal(m.bytes());
  EXPECT_TRUE(contains(message, "node '/erf/Erf' (Erf)")) << message;
  EXPECT_TRUE(contains(message, "Erf is supported only inside GELU")) << message;
}

// A Cast of computed floats to integers.
TEST(OnnxRefusals, CastOfComputedFloatToInteger) {
  OnnxModel m = linear_model();
  OnnxModel::attr_int(m.node("Cast", {"fc"}, {"i"}, "/cast/Cast"), "to", kInt64);
  const std::string message = refusal(m.bytes());
  EXPECT_TRUE(contains(message, "node '/cast/Cast' (Cast)")) << message;
  EXPECT_TRUE(contains(message, "Cast of computed data between float and integer")) << message;
}

// An initializer whose data lies in an external file.
TEST(OnnxRefusals, ExternalData) {
  OnnxModel m = linear_model();
  onnx::TensorProto* w = m.graph().mutable_initializer(0);
  w->clear_float_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  onnx::StringStringEntryProto* location = w->add_external_data();
  location->set_key("location");
  location->set_value("weights.bin");
  const std::string message = refusal(m.bytes());
  EXPECT_TRUE(contains(message, "tensor 'fc.weight' keeps its data in an external file"))
      << message;
}

// An initializer whose float_data count differs from its dims.
TEST(OnnxRefusals, InitializerSizeMismatch) {
  OnnxModel m = linear_model();
  m.graph().mutable_initializer(1)->add_float_data(1.0f);  // fc.bias: 4 values for dims (3)
  const std::string message = refusal(m.bytes());
  EXPECT_TRUE(contains(message, "tensor 'fc.bias' holds 4 elements, but its dims")) << message;
}

// Import options: an unknown loss, a batch under 1.
TEST(OnnxRefusals, UnknownLossAndBadBatch) {
  const std::string bytes = linear_model().bytes();
  OnnxImport loss = training();
  loss.loss = "hinge";
  EXPECT_TRUE(contains(refusal(bytes, loss), "unknown --loss 'hinge'"));
  EXPECT_TRUE(contains(refusal(bytes, training(0)), "the batch must be at least 1"));
}

// --- Malformed graphs: refused (or imported), never a crash or a read out of range ---------

// The model's import refused with a message naming `node`, or imported.
void expect_refused_or_imported(const OnnxModel& m, const std::string& node) {
  Result<Model> model = import_bytes(m.bytes());
  if (!model) {
    EXPECT_TRUE(contains(model.message(), node)) << model.message();
  }
}

// Nodes without outputs inside the GELU pattern (invalid ONNX, as a corrupt
// file may hold): Erf, or the Add of 1 after it.
TEST(OnnxMalformed, GeluNodesWithoutOutputs) {
  for (const std::string without : {"/erf/Erf", "/add/Add"}) {
    SCOPED_TRACE(without);
    OnnxModel m;
    m.input("x", {4});
    m.scalar("sqrt2", 1.4142135f);
    m.scalar("one", 1.0f);
    m.node("Div", {"x", "sqrt2"}, {"d"});
    const bool erf = without == "/erf/Erf";
    m.node("Erf", {"d"}, erf ? std::vector<std::string>{} : std::vector<std::string>{"e"},
           "/erf/Erf");
    if (!erf) m.node("Add", {"e", "one"}, {}, "/add/Add");
    m.node("Relu", {"x"}, {"y"});
    m.output("y");
    expect_refused_or_imported(m, without);
  }
}

// A Sqrt of computed data without outputs.
TEST(OnnxMalformed, SqrtWithoutOutputs) {
  OnnxModel m;
  m.input("x", {4});
  m.node("Relu", {"x"}, {"y"});
  m.node("Sqrt", {"y"}, {}, "/sqrt/Sqrt");
  m.output("y");
  expect_refused_or_imported(m, "/sqrt/Sqrt");
}

// The output of Erf read by anything but the rest of GELU is refused as
// Erf outside GELU (naming the reader), not as a tensor that nothing produces.
TEST(OnnxMalformed, ErfReadOutsideGelu) {
  OnnxModel m;
  m.input("x", {4});
  m.scalar("sqrt2", 1.4142135f);
  m.node("Div", {"x", "sqrt2"}, {"d"});
  m.node("Erf", {"d"}, {"e"});
  m.node("Relu", {"e"}, {"y"}, "/relu/Relu");
  m.output("y");
  const std::string message = refusal(m.bytes());
  EXPECT_TRUE(contains(message, "node '/relu/Relu' (Relu)")) << message;
  EXPECT_TRUE(contains(message, "supported only inside GELU")) << message;
}

// Unsqueeze with a repeated axis, of computed data and of a folded shape.
TEST(OnnxMalformed, UnsqueezeRepeatedAxis) {
  OnnxModel computed;
  computed.input("x", {4});
  computed.ints("axes", {2}, {1, 1});
  computed.node("Unsqueeze", {"x", "axes"}, {"y"}, "/u/Unsqueeze");
  computed.output("y");
  std::string message = refusal(computed.bytes());
  EXPECT_TRUE(contains(message, "node '/u/Unsqueeze'") && contains(message, "ax")) << message;

  OnnxModel folded;
  folded.input("x", {4});
  folded.node("Shape", {"x"}, {"s"});
  folded.ints("axes", {3}, {0, 0, 0});
  folded.node("Unsqueeze", {"s", "axes"}, {"u"}, "/u/Unsqueeze");
  folded.node("Reshape", {"x", "u"}, {"y"});
  folded.output("y");
  message = refusal(folded.bytes());
  EXPECT_TRUE(contains(message, "node '/u/Unsqueeze'") && contains(message, "ax")) << message;
}

// Transpose of a known tensor with a repeated axis in perm.
TEST(OnnxMalformed, TransposeRepeatedPerm) {
  OnnxModel m;
  m.input("x", {3, 3});
  OnnxModel::attr_tensor(m.node("Constant", {}, {"c"}), "value",
                         float_tensor("", {3, 2}, {1, 2, 3, 4, 5, 6}));
  OnnxModel::attr_ints(m.node("Transpose", {"c"}, {"ct"}, "/t/Transpose"), "perm", {0, 0});
  m.node("Add", {"x", "ct"}, {"y"});
  m.output("y");
  const std::string message = refusal(m.bytes());
  EXPECT_TRUE(contains(message, "node '/t/Transpose'") && contains(message, "perm")) << message;
}

// Range with an integer start and a float delta (ONNX wants one type).
TEST(OnnxMalformed, RangeOfMixedTypes) {
  OnnxModel m;
  m.input("x", {4});
  m.ints("start", {}, {0});
  m.ints("limit", {}, {4});
  m.scalar("delta", 1.0f);
  m.node("Range", {"start", "limit", "delta"}, {"r"}, "/r/Range");
  m.ints("zero", {}, {0});
  m.node("Gather", {"r", "zero"}, {"first"});
  m.node("Relu", {"x"}, {"y"});
  m.output("y");
  expect_refused_or_imported(m, "/r/Range");
}

// An initializer whose dims multiply past int64 is refused, not read as empty.
TEST(OnnxMalformed, InitializerDimsOverflow) {
  OnnxModel m;
  m.input("x", {4});
  *m.graph().add_initializer() = int_tensor("big", {int64_t{1} << 34, int64_t{1} << 30}, {});
  m.node("Shape", {"big"}, {"s"});
  m.node("Relu", {"x"}, {"y"});
  m.output("y");
  const std::string message = refusal(m.bytes());
  EXPECT_TRUE(contains(message, "tensor 'big'")) << message;
}

// Folded Slice with a step beyond the dimension takes the first element:
// Shape(x)[0:2:huge] is (batch), so the reshape keeps x (batch, 4).
TEST(OnnxMalformed, FoldedSliceWithHugeStep) {
  OnnxModel m;
  m.input("x", {4});
  m.node("Shape", {"x"}, {"s"});
  m.ints("starts", {1}, {0});
  m.ints("ends", {1}, {2});
  m.ints("axes", {1}, {0});
  m.ints("steps", {1}, {std::numeric_limits<int64_t>::max()});
  m.node("Slice", {"s", "starts", "ends", "axes", "steps"}, {"n"});
  m.ints("rest", {1}, {-1});
  OnnxModel::attr_int(m.node("Concat", {"n", "rest"}, {"spec"}), "axis", 0);
  m.node("Reshape", {"x", "spec"}, {"y"});
  m.output("y");
  const auto model = imported(m);
  ASSERT_TRUE(model);
  EXPECT_EQ(output_shape(*model), (Shape{kBatch, 4}));
}

// ONNX names nodes and tensors apart: names that memfit's graph also uses
// (a node named like a later weight, an input named `labels` as the loss
// names its labels, a weight named like a renamed input) are imported or
// refused, never an internal check failure.
TEST(OnnxMalformed, NodeNamedLikeAWeight) {
  OnnxModel m;
  m.input("x", {4});
  m.node("Relu", {"x"}, {"r"}, "fc.weight");
  m.output(m.linear("fc", "r", 4, 3));
  expect_refused_or_imported(m, "fc.weight");
}

TEST(OnnxMalformed, InputNamedLabels) {
  OnnxModel m;
  m.input("x", {4});
  m.input("labels", {}, kInt64);
  m.output(m.linear("fc", "x", 4, 3));
  expect_refused_or_imported(m, "labels");
}

TEST(OnnxMalformed, WeightNamedLikeARenamedInput) {
  OnnxModel m;
  m.input("x", {1, 2, 2});  // becomes `images`
  m.node("Flatten", {"x"}, {"f"});
  m.weight("images", {3, 4});
  OnnxModel::attr_int(m.node("Gemm", {"f", "images"}, {"y"}), "transB", 1);
  m.output("y");
  expect_refused_or_imported(m, "images");
}

// --- Writing trained weights back ---------------------------------------------------------

// Convolution, batch norm and a linear layer on (N, 1, 4, 4).
OnnxModel conv_bn_model() {
  OnnxModel m;
  m.input("x", {1, 4, 4});
  m.weight("conv.weight", {2, 1, 3, 3});
  m.weight("conv.bias", {2});
  m.node("Conv", {"x", "conv.weight", "conv.bias"}, {"c"});
  m.weight("bn.weight", {2}, {1.0f, 1.0f});
  m.weight("bn.bias", {2}, {0.0f, 0.0f});
  m.weight("bn.running_mean", {2}, {0.0f, 0.0f});
  m.weight("bn.running_var", {2}, {1.0f, 1.0f});
  m.node("BatchNormalization", {"c", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"},
         {"b"});
  m.node("Relu", {"b"}, {"r"});
  m.node("Flatten", {"r"}, {"f"});
  m.output(m.linear("fc", "f", 8, 3));
  return m;
}

std::vector<std::string> node_names(const OnnxFile& file) {
  std::vector<std::string> names;
  for (const onnx::NodeProto& n : file.model.graph().node()) names.push_back(n.name());
  return names;
}

// Parameters and running statistics saved with new values (unknown names
// ignored): the same nodes and initializers, read back with the new values.
TEST(OnnxSave, RoundTrip) {
  ScratchDir dir;
  const OnnxModel m = conv_bn_model();
  auto file = parse_onnx(m.bytes(), "model.onnx");
  ASSERT_TRUE(file.is_ok()) << file.message();
  std::unordered_map<std::string, Floats> state;
  for (const auto& [name, values] : m.weights()) {
    Floats changed = values;
    for (float& v : changed) v = v * 2.0f + 1.0f;
    state[name] = changed;
  }
  state["not.in.the.file"] = {1.0f, 2.0f};  // ignored
  const std::string path = dir.file("trained.onnx");
  const Status saved = save_onnx(**file, state, path);
  ASSERT_TRUE(saved.is_ok()) << saved.message();

  auto back = read_onnx(path);
  ASSERT_TRUE(back.is_ok()) << back.message();
  EXPECT_EQ(node_names(**back), node_names(**file));
  EXPECT_EQ((*back)->model.graph().initializer_size(), (*file)->model.graph().initializer_size());
  Result<Model> model = import_onnx(**back, training());
  ASSERT_TRUE(model.is_ok()) << model.message();
  for (const auto& [name, values] : m.weights()) {
    ASSERT_EQ(model->init.count(name), 1u) << name;
    EXPECT_EQ(*model->init.at(name).values, state.at(name)) << name;
  }
  EXPECT_EQ(param_names(*model), (std::vector<std::string>{"bn.bias", "bn.weight", "conv.bias",
                                                           "conv.weight", "fc.bias", "fc.weight"}));
}

// A tensor of another size than its initializer, and a path that cannot be
// written, are errors.
TEST(OnnxSave, WrongSizeIsRefused) {
  ScratchDir dir;
  auto file = parse_onnx(conv_bn_model().bytes(), "model.onnx");
  ASSERT_TRUE(file.is_ok()) << file.message();
  const Status saved =
      save_onnx(**file, {{"fc.weight", {1.0f, 2.0f, 3.0f}}}, dir.file("trained.onnx"));
  ASSERT_FALSE(saved.is_ok());
  EXPECT_TRUE(
      contains(saved.message(), "initializer 'fc.weight' has 24 elements, the trained tensor 3"))
      << saved.message();
  const Status unwritable = save_onnx(**file, {}, dir.file("missing/trained.onnx"));
  EXPECT_FALSE(unwritable.is_ok());
}

// An Identity copy of a weight is saved as an initializer of its own with
// its trained values; the file reimports with both parameters.
TEST(OnnxSave, IdentityWeightBecomesInitializer) {
  ScratchDir dir;
  const OnnxModel m = shared_weight_model();
  auto file = parse_onnx(m.bytes(), "model.onnx");
  ASSERT_TRUE(file.is_ok()) << file.message();
  const Floats w(16, 0.5f), copy(16, -0.25f);
  const Status saved = save_onnx(**file, {{"w", w}, {"w.copy", copy}}, dir.file("trained.onnx"));
  ASSERT_TRUE(saved.is_ok()) << saved.message();
  auto back = read_onnx(dir.file("trained.onnx"));
  ASSERT_TRUE(back.is_ok()) << back.message();
  Result<Model> model = import_onnx(**back, training());
  ASSERT_TRUE(model.is_ok()) << model.message();
  EXPECT_EQ(param_names(*model), (std::vector<std::string>{"w", "w.copy"}));
  EXPECT_EQ(*model->init.at("w").values, w);
  EXPECT_EQ(*model->init.at("w.copy").values, copy);
}

// A missing file is an error naming it.
TEST(OnnxSave, MissingFile) {
  auto file = read_onnx("/nonexistent/model.onnx");
  ASSERT_FALSE(file.is_ok());
  EXPECT_TRUE(contains(file.message(), "cannot open ONNX file /nonexistent/model.onnx"))
      << file.message();
}

// A directory, a FIFO (whose open would block) and a device (/dev/zero,
// whose reading would never end) are refused before they are opened.
TEST(OnnxSave, OnlyARegularFileIsRead) {
  const std::string fifo = ::testing::TempDir() + "memfit_onnx_fifo";
  std::remove(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {std::string("/tmp"), fifo, std::string("/dev/zero")}) {
    auto file = read_onnx(path);
    ASSERT_FALSE(file.is_ok()) << path;
    EXPECT_EQ(file.message(), "ONNX file " + path +
                                  " is not a regular file (a directory, a FIFO or a device)");
  }
  std::remove(fifo.c_str());
}

}  // namespace
}  // namespace memfit
