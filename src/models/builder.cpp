#include "memfit/builder.h"

#include <cmath>

namespace memfit {
namespace {

// PyTorch's default for weights and biases: uniform(+-1/sqrt(fan_in)).
Init uniform_init(int64_t fan_in) {
  return Init{Init::Kind::uniform,
              static_cast<float>(1.0 / std::sqrt(static_cast<double>(fan_in)))};
}

}  // namespace

ModelBuilder::ModelBuilder(std::string model_name, bool training) : training_(training) {
  model_.name = std::move(model_name);
}

ValueId ModelBuilder::input(const std::string& name, Shape shape) {
  model_.images = model_.graph.add_input(name, TensorType{std::move(shape), DType::f32}, Role::input);
  return model_.images;
}

ValueId ModelBuilder::labels(int64_t batch) {
  model_.labels = model_.graph.add_input("labels", TensorType{{batch}, DType::i32}, Role::label);
  return model_.labels;
}

ValueId ModelBuilder::parameter(const std::string& name, Shape shape, Init init) {
  const ValueId v = model_.graph.add_input(name, TensorType{std::move(shape), DType::f32}, Role::parameter);
  model_.params.push_back(v);
  model_.init[name] = init;
  return v;
}

ValueId ModelBuilder::op(OpKind op, std::vector<ValueId> inputs, Attrs attrs, const std::string& name) {
  if (!status_.is_ok()) return ValueId();
  for (ValueId in : inputs) {
    if (!in.valid()) return ValueId();
  }
  auto node = model_.graph.add_node(op, std::move(inputs), std::move(attrs), name);
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
  const ValueId y = op(OpKind::batch_norm, {x, gamma, beta, mean, var}, BatchNormAttrs{}, name);
  if (y.valid() && training_) {
    const Node& node = g.node(g.value(y).producer);
    g.add_update(mean, node.outputs[3]);
    g.add_update(var, node.outputs[4]);
  }
  return y;
}

ValueId ModelBuilder::relu(ValueId x) { return op(OpKind::relu, {x}, NoAttrs{}, "relu"); }

ValueId ModelBuilder::max_pool2d(ValueId x, int64_t kernel, int64_t stride, int64_t pad) {
  return op(OpKind::max_pool2d, {x},
            Pool2dAttrs{{kernel, kernel}, {stride, stride}, {pad, pad}, false}, "max_pool");
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
  if (!training_ || p == 0.0f) return x;
  return op(OpKind::dropout, {x}, DropoutAttrs{p, key}, "dropout");
}

ValueId ModelBuilder::cross_entropy(ValueId logits, ValueId labels) {
  model_.logits = logits;
  model_.loss = op(OpKind::softmax_cross_entropy, {logits, labels}, NoAttrs{}, "loss");
  return model_.loss;
}

Result<Model> ModelBuilder::finish() {
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
