#include "memfit/builder.h"

#include <cmath>

#include "ops/typed_graph.h"

namespace memfit {
namespace {

// PyTorch's default for weights and biases: uniform(+-1/sqrt(fan_in)).
Init uniform_init(int64_t fan_in) {
  return Init{Init::Kind::uniform,
              static_cast<float>(1.0 / std::sqrt(static_cast<double>(fan_in)))};
}

}  // namespace

ModelBuilder::ModelBuilder(std::string model_name, bool training, bool dropout)
    : training_(training), dropout_(dropout) {
  model_.name = std::move(model_name);
}

std::string_view data_kind_name(DataKind kind) {
  switch (kind) {
    case DataKind::images:
      return "images";
    case DataKind::tokens:
      return "tokens";
    case DataKind::pairs:
      return "pairs";
    case DataKind::volumes:
      return "volumes";
  }
  return "?";
}

ValueId ModelBuilder::input(const std::string& name, Shape shape) {
  const ValueId v = model_.graph.add_input(name, TensorType{std::move(shape), DType::f32}, Role::input);
  model_.inputs.push_back(v);
  return v;
}

ValueId ModelBuilder::token_input(const std::string& name, Shape shape) {
  const ValueId v = model_.graph.add_input(name, TensorType{std::move(shape), DType::i32}, Role::input);
  model_.inputs.push_back(v);
  return v;
}

ValueId ModelBuilder::labels(int64_t batch) { return labels(Shape{batch}); }

ValueId ModelBuilder::labels(Shape shape) {
  model_.labels = model_.graph.add_input("labels", TensorType{std::move(shape), DType::i32}, Role::label);
  model_.inputs.push_back(model_.labels);
  return model_.labels;
}

void ModelBuilder::check_size() {
  if (!status_.is_ok()) return;
  const Status size = check_model_size(model_.name, model_.graph);
  if (!size.is_ok())
    status_ = Status::error(size.message() + ": give a smaller --depth or --seq-len");
}

ValueId ModelBuilder::parameter(const std::string& name, Shape shape, Init init) {
  check_size();
  const ValueId v = model_.graph.add_input(name, TensorType{std::move(shape), DType::f32}, Role::parameter);
  model_.params.push_back(v);
  model_.init[name] = init;
  return v;
}

ValueId ModelBuilder::op(OpKind op, std::vector<ValueId> inputs, Attrs attrs, const std::string& name) {
  check_size();
  if (!status_.is_ok()) return ValueId();
  for (ValueId in : inputs) {
    if (!in.valid()) return ValueId();
  }
  auto node = add_node(model_.graph, op, std::move(inputs), std::move(attrs), name);
  if (!node) {
    status_ = Status::error("model " + model_.name + ": " + node.message());
    return ValueId();
  }
  return model_.graph.node(*node).outputs[0];
}

ValueId ModelBuilder::conv2d(const std::string& name, ValueId x, int64_t out_channels, int64_t kernel,
                             int64_t stride, int64_t pad, bool bias) {
  if (!x.valid()) return x;
  const int64_t in_channels = shape(x).at(1);
  const auto bound = static_cast<float>(1.0 / std::sqrt(static_cast<double>(in_channels * kernel * kernel)));
  std::vector<ValueId> inputs = {
      x, parameter(name + ".weight", {out_channels, in_channels, kernel, kernel},
                   Init{Init::Kind::uniform, bound})};
  if (bias) inputs.push_back(parameter(name + ".bias", {out_channels}, Init{Init::Kind::uniform, bound}));
  return op(OpKind::conv2d, inputs, Conv2dAttrs{{stride, stride}, {pad, pad}, {1, 1}, 1}, name);
}

ValueId ModelBuilder::conv3d(const std::string& name, ValueId x, int64_t out_channels,
                             int64_t kernel, int64_t stride, int64_t pad, bool bias) {
  if (!x.valid()) return x;
  const int64_t in_channels = shape(x).at(1);
  const Init init = uniform_init(in_channels * kernel * kernel * kernel);
  std::vector<ValueId> inputs = {
      x, parameter(name + ".weight", {out_channels, in_channels, kernel, kernel, kernel}, init)};
  if (bias) inputs.push_back(parameter(name + ".bias", {out_channels}, init));
  const Triple s{stride, stride, stride}, p{pad, pad, pad};
  return op(OpKind::conv3d, inputs, Conv3dAttrs{s, p, {1, 1, 1}, 1}, name);
}

// PyTorch takes fan_in from the weight (C, O/groups, K...) as for any other
// layer: size(1) times the kernel volume, so O K^R here.
ValueId ModelBuilder::conv_transpose2d(const std::string& name, ValueId x, int64_t out_channels,
                                       int64_t kernel, int64_t stride, int64_t pad, bool bias) {
  if (!x.valid()) return x;
  const int64_t in_channels = shape(x).at(1);
  const Init init = uniform_init(out_channels * kernel * kernel);
  std::vector<ValueId> inputs = {
      x, parameter(name + ".weight", {in_channels, out_channels, kernel, kernel}, init)};
  if (bias) inputs.push_back(parameter(name + ".bias", {out_channels}, init));
  const ConvTranspose2dAttrs attrs{{stride, stride}, {pad, pad}, {0, 0}, {1, 1}, 1};
  return op(OpKind::conv_transpose2d, inputs, attrs, name);
}

ValueId ModelBuilder::conv_transpose3d(const std::string& name, ValueId x, int64_t out_channels,
                                       int64_t kernel, int64_t stride, int64_t pad, bool bias) {
  if (!x.valid()) return x;
  const int64_t in_channels = shape(x).at(1);
  const Init init = uniform_init(out_channels * kernel * kernel * kernel);
  std::vector<ValueId> inputs = {
      x, parameter(name + ".weight", {in_channels, out_channels, kernel, kernel, kernel}, init)};
  if (bias) inputs.push_back(parameter(name + ".bias", {out_channels}, init));
  const Triple s{stride, stride, stride}, p{pad, pad, pad};
  return op(OpKind::conv_transpose3d, inputs, ConvTranspose3dAttrs{s, p, {0, 0, 0}, {1, 1, 1}, 1},
            name);
}

ValueId ModelBuilder::linear(const std::string& name, ValueId x, int64_t out_features, bool bias) {
  if (!x.valid()) return x;
  const int64_t in_features = shape(x).back();
  const auto bound = static_cast<float>(1.0 / std::sqrt(static_cast<double>(in_features)));
  std::vector<ValueId> inputs = {
      x, parameter(name + ".weight", {out_features, in_features}, Init{Init::Kind::uniform, bound})};
  if (bias) inputs.push_back(parameter(name + ".bias", {out_features}, Init{Init::Kind::uniform, bound}));
  return op(OpKind::linear, inputs, NoAttrs{}, name);
}

ValueId ModelBuilder::batch_norm(const std::string& name, ValueId x) {
  if (!x.valid()) return x;
  const int64_t channels = shape(x).at(1);
  const ValueId gamma = parameter(name + ".weight", {channels}, Init{Init::Kind::ones, 0});
  const ValueId beta = parameter(name + ".bias", {channels}, Init{Init::Kind::zeros, 0});
  Graph& g = model_.graph;
  const ValueId mean = g.add_input(name + ".running_mean", TensorType{{channels}, DType::f32}, Role::state);
  const ValueId var = g.add_input(name + ".running_var", TensorType{{channels}, DType::f32}, Role::state);
  model_.init[name + ".running_mean"] = Init{Init::Kind::zeros, 0};
  model_.init[name + ".running_var"] = Init{Init::Kind::ones, 0};
  if (!training_) {
    return op(OpKind::batch_norm_inference, {x, gamma, beta, mean, var}, BatchNormAttrs{}, name);
  }
  const ValueId y = op(OpKind::batch_norm, {x, gamma, beta, mean, var}, BatchNormAttrs{}, name);
  if (y.valid()) {
    const Node& node = g.node(g.value(y).producer);
    g.add_update(mean, node.outputs[3]);
    g.add_update(var, node.outputs[4]);
  }
  return y;
}

ValueId ModelBuilder::embedding(const std::string& name, ValueId ids, int64_t vocab, int64_t dim) {
  if (!ids.valid()) return ids;
  const ValueId table = parameter(name + ".weight", {vocab, dim}, Init{Init::Kind::uniform, 1.0f});
  return op(OpKind::embedding, {ids, table}, NoAttrs{}, name);
}

ValueId ModelBuilder::layer_norm(const std::string& name, ValueId x) {
  if (!x.valid()) return x;
  // A scalar x gets a (1) gamma here and is refused by layer_norm's shape inference.
  const int64_t dim = shape(x).empty() ? 1 : shape(x).back();
  const ValueId gamma = parameter(name + ".weight", {dim}, Init{Init::Kind::ones, 0});
  const ValueId beta = parameter(name + ".bias", {dim}, Init{Init::Kind::zeros, 0});
  return op(OpKind::layer_norm, {x, gamma, beta}, LayerNormAttrs{}, name);
}

ValueId ModelBuilder::relu(ValueId x) { return op(OpKind::relu, {x}, NoAttrs{}, "relu"); }

ValueId ModelBuilder::max_pool2d(ValueId x, int64_t kernel, int64_t stride, int64_t pad) {
  return op(OpKind::max_pool2d, {x},
            Pool2dAttrs{{kernel, kernel}, {stride, stride}, {pad, pad}, false}, "max_pool");
}

ValueId ModelBuilder::max_pool3d(ValueId x, int64_t kernel, int64_t stride, int64_t pad) {
  return op(OpKind::max_pool3d, {x},
            Pool3dAttrs{{kernel, kernel, kernel}, {stride, stride, stride}, {pad, pad, pad}, false},
            "max_pool3d");
}

// Padding is excluded from the divisor (PyTorch's count_include_pad=False).
ValueId ModelBuilder::avg_pool3d(ValueId x, int64_t kernel, int64_t stride, int64_t pad) {
  return op(OpKind::avg_pool3d, {x},
            Pool3dAttrs{{kernel, kernel, kernel}, {stride, stride, stride}, {pad, pad, pad}, false},
            "avg_pool3d");
}

ValueId ModelBuilder::upsample(ValueId x, int64_t factor, bool linear) {
  if (!x.valid()) return x;
  // One factor per spatial dimension; shape inference rejects ranks other than 3 to 5.
  const size_t spatial = shape(x).size() > 2 ? shape(x).size() - 2 : 0;
  return op(OpKind::upsample, {x}, UpsampleAttrs{std::vector<int64_t>(spatial, factor), linear, {}},
            "upsample");
}

ValueId ModelBuilder::add(ValueId a, ValueId b) {
  return op(OpKind::add, {a, b}, NoAttrs{}, "add");
}

ValueId ModelBuilder::global_avg_pool(ValueId x) {
  return op(OpKind::global_avg_pool, {x}, NoAttrs{}, "global_avg_pool");
}

ValueId ModelBuilder::flatten(ValueId x) {
  if (!x.valid()) return x;
  const Shape& s = shape(x);
  return op(OpKind::reshape, {x}, ShapeAttrs{{s[0], num_elements(s) / s[0]}}, "flatten");
}

ValueId ModelBuilder::dropout(ValueId x, float p) {
  // Keys are fixed when the model is built, so every graph built from the
  // same model code draws the same masks.
  const uint64_t key = next_dropout_key_++;
  if (!training_ || !dropout_ || p == 0.0f) return x;
  return op(OpKind::dropout, {x}, DropoutAttrs{p, key}, "dropout");
}

ValueId ModelBuilder::attention(ValueId q, ValueId k, ValueId v, float scale, bool causal, float p,
                                AttentionForm form) {
  const uint64_t key = next_dropout_key_++;
  if (!training_ || !dropout_) p = 0.0f;
  if (form == AttentionForm::fused) {
    return op(OpKind::attention, {q, k, v}, AttentionAttrs{scale, causal, 0, p, key}, "attention");
  }
  ValueId scores = this->scale(matmul(q, k, false, true), scale);  // (N, H, Tq, Tk)
  if (causal) scores = op(OpKind::causal_mask, {scores}, CausalMaskAttrs{}, "causal_mask");
  ValueId weights = softmax(scores, 3);
  if (p != 0.0f) weights = op(OpKind::dropout, {weights}, DropoutAttrs{p, key}, "dropout");
  return matmul(weights, v);
}

ValueId ModelBuilder::cross_entropy(ValueId logits, ValueId labels) {
  model_.logits = logits;
  if (logits.valid() && labels.valid() && shape(labels).size() != 1) {
    labels = reshape(labels, {num_elements(shape(labels))});
  }
  model_.loss = op(OpKind::softmax_cross_entropy, {logits, labels}, NoAttrs{}, "loss");
  return model_.loss;
}

void ModelBuilder::set_loss(ValueId logits, ValueId loss) {
  model_.logits = logits;
  model_.loss = loss;
}

ValueId ModelBuilder::reshape(ValueId x, Shape shape) {
  return op(OpKind::reshape, {x}, ShapeAttrs{std::move(shape)}, "reshape");
}

ValueId ModelBuilder::transpose(ValueId x, std::vector<int64_t> perm) {
  return op(OpKind::transpose, {x}, PermAttrs{std::move(perm)}, "transpose");
}

ValueId ModelBuilder::matmul(ValueId a, ValueId b, bool trans_a, bool trans_b) {
  return op(OpKind::matmul, {a, b}, MatmulAttrs{trans_a, trans_b}, "matmul");
}

ValueId ModelBuilder::slice(ValueId x, int64_t axis, int64_t start, int64_t end) {
  return op(OpKind::slice, {x}, SliceAttrs{axis, start, end, {}}, "slice");
}

ValueId ModelBuilder::concat(std::vector<ValueId> xs, int64_t axis) {
  return op(OpKind::concat, std::move(xs), AxisAttrs{axis}, "concat");
}

ValueId ModelBuilder::mul(ValueId a, ValueId b) { return op(OpKind::mul, {a, b}, NoAttrs{}, "mul"); }

ValueId ModelBuilder::scale(ValueId x, float alpha) {
  return op(OpKind::scale, {x}, ScaleAttrs{alpha}, "scale");
}

ValueId ModelBuilder::sigmoid(ValueId x) { return op(OpKind::sigmoid, {x}, NoAttrs{}, "sigmoid"); }
ValueId ModelBuilder::tanh(ValueId x) { return op(OpKind::tanh, {x}, NoAttrs{}, "tanh"); }
ValueId ModelBuilder::gelu(ValueId x) { return op(OpKind::gelu, {x}, NoAttrs{}, "gelu"); }

ValueId ModelBuilder::softmax(ValueId x, int64_t axis) {
  return op(OpKind::softmax, {x}, AxisAttrs{axis}, "softmax");
}

ModelBuilder::LstmState ModelBuilder::lstm_cell(const std::string& name, ValueId gates,
                                                ValueId c_prev) {
  std::vector<ValueId> inputs = {gates};
  if (c_prev.valid()) inputs.push_back(c_prev);
  const ValueId h = op(OpKind::lstm_cell, std::move(inputs), NoAttrs{}, name);
  if (!h.valid()) return {};
  const Graph& g = model_.graph;
  return {h, g.node(g.value(h).producer).outputs[1]};
}

Result<Model> ModelBuilder::finish() {
  check_size();
  if (!status_.is_ok()) return status_;
  if (!model_.logits.valid()) return Status::error("model " + model_.name + " has no loss");
  if (training_) {
    model_.graph.mark_output(model_.loss);
  } else {
    model_.graph.mark_output(model_.logits);
  }
  return std::move(model_);
}

}  // namespace memfit
