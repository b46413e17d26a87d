// The model builder: layers on top of the graph IR. Each call appends nodes
// and returns the value it produced; the first error is kept and reported by
// finish(), so model code reads as a list of layers.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "memfit/ir.h"

namespace memfit {

// How a persistent value starts: zeros, ones, or uniform(-bound, bound).
struct Init {
  enum class Kind { zeros, ones, uniform } kind = Kind::zeros;
  float bound = 0.0f;
};

// A forward graph with its loss and what it takes to train it.
struct Model {
  std::string name;
  Graph graph;
  ValueId images;  // input (N, ...)
  ValueId labels;  // i32 (N)
  ValueId logits;  // (N, classes)
  ValueId loss;    // f32 scalar; invalid in evaluation graphs
  std::vector<ValueId> params;
  // Initial values of every parameter and state value, by name.
  std::unordered_map<std::string, Init> init;
};

class ModelBuilder {
 public:
  // training: dropout is active and batch norm uses batch statistics.
  ModelBuilder(std::string model_name, bool training);

  ValueId input(const std::string& name, Shape shape);  // the images
  ValueId labels(int64_t batch);

  // Layers; parameters are named `<name>.weight` and `<name>.bias` and start
  // as PyTorch's defaults do: uniform(+-1/sqrt(fan_in)).
  ValueId conv2d(const std::string& name, ValueId x, int64_t out_channels, int64_t kernel,
                 int64_t stride = 1, int64_t pad = 0, bool bias = true);
  // x (N, C, D, H, W), a cubic kernel.
  ValueId conv3d(const std::string& name, ValueId x, int64_t out_channels, int64_t kernel,
                 int64_t stride = 1, int64_t pad = 0, bool bias = true);
  // Transposed convolutions (PyTorch's ConvTranspose2d/3d, no output padding):
  // weight (C, O, K...), so the output side is stride * (S - 1) - 2 pad + kernel.
  ValueId conv_transpose2d(const std::string& name, ValueId x, int64_t out_channels, int64_t kernel,
                           int64_t stride = 1, int64_t pad = 0, bool bias = true);
  ValueId conv_transpose3d(const std::string& name, ValueId x, int64_t out_channels, int64_t kernel,
                           int64_t stride = 1, int64_t pad = 0, bool bias = true);
  ValueId linear(const std::string& name, ValueId x, int64_t out_features, bool bias = true);
  ValueId batch_norm(const std::string& name, ValueId x);
  ValueId relu(ValueId x);
  ValueId max_pool2d(ValueId x, int64_t kernel, int64_t stride, int64_t pad = 0);
  ValueId add(ValueId a, ValueId b);
  ValueId global_avg_pool(ValueId x);  // (N, C, H, W) -> (N, C, 1, 1)
  ValueId flatten(ValueId x);  // (N, ...) -> (N, rest)
  ValueId dropout(ValueId x, float p);
  // The mean cross-entropy of logits against the labels: sets logits and loss.
  ValueId cross_entropy(ValueId logits, ValueId labels);

  // Appends any op; for layers this builder lacks.
  ValueId op(OpKind op, std::vector<ValueId> inputs, Attrs attrs, const std::string& name);
  ValueId parameter(const std::string& name, Shape shape, Init init);
  const Shape& shape(ValueId v) const { return model_.graph.value(v).type.shape; }

  Result<Model> finish();

 private:
  Model model_;
  bool training_;
  Status status_;
  uint64_t next_dropout_key_ = 1;
};

// Which model to build and at what size. A 0 leaves the size at the model's
// default; a size a model does not have (depth of a fixed-depth model) is
// refused when it is not 0.
struct ModelOptions {
  std::string name;
  int64_t batch = 64;
  int64_t image_size = 0;  // side of the square input image
  int64_t classes = 0;     // outputs of the classifier
  int64_t depth = 0;       // layers: resnet-cifar only (9n+2)
  int64_t width = 0;       // resnet-cifar: multiplies every stage's channel counts
};

// A model of the zoo at its default size.
struct ModelInfo {
  std::string name;
  std::string description;  // the architecture and where it comes from
  Shape input;              // one example, e.g. (3, 224, 224)
  int64_t classes = 0;
};

// The models this build knows, for `memfit train --model` and `memfit models`.
std::vector<ModelInfo> model_infos();
std::vector<std::string> model_names();
Result<Model> build_model(const ModelOptions& options, bool training);

}  // namespace memfit
