// The model builder: layers on top of the graph IR. Each call appends nodes
// and returns the value it produced; the first error is kept and reported by
// finish(), so model code reads as a list of layers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "memfit/ir.h"

namespace memfit {

// How a persistent value starts: zeros, ones, uniform(-bound, bound), or
// given values (an imported model's weights: its elements, row-major).
struct Init {
  enum class Kind { zeros, ones, uniform, values } kind = Kind::zeros;
  float bound = 0.0f;
  std::shared_ptr<const std::vector<float>> values;  // Kind::values

  Init() = default;
  Init(Kind kind_, float bound_) : kind(kind_), bound(bound_) {}
  static Init of(std::vector<float> given) {
    Init init(Kind::values, 0.0f);
    init.values = std::make_shared<const std::vector<float>>(std::move(given));
    return init;
  }
};

// What a model reads, and so which synthetic data set can train it. The
// inputs are named as below; `labels` holds the class of every row of the
// logits, in row order.
enum class DataKind {
  images,   // images (N, C, H, W) f32; labels (N)
  tokens,   // tokens (N, T) i32; labels (N, T): the token after each position
  pairs,    // source (N, S) i32, target_in (N, T) i32: the target shifted right
            // after a start token 0; labels (N, T): the target
  volumes,  // volume (N, C, D, H, W) f32; labels (N, D, H, W): a class per voxel
};
std::string_view data_kind_name(DataKind kind);

// A forward graph with its loss and what it takes to train it.
struct Model {
  std::string name;
  Graph graph;
  std::vector<ValueId> inputs;  // the data a step reads, labels included, in order
  ValueId labels;               // i32, one class per row of logits
  ValueId logits;               // (M, classes)
  ValueId loss;                 // f32 scalar; invalid in evaluation graphs
  std::vector<ValueId> params;
  // Initial values of every parameter and state value, by name.
  std::unordered_map<std::string, Init> init;
};

// How the zoo's transformers build attention: the fused op, or composed
// from matmuls and softmax (for comparison: the same math and parameters).
enum class AttentionForm { fused, naive };

// The most values (outputs of operations, inputs and parameters) a model may
// have. Planning takes about 4 KiB of host memory and 40 us per node of the
// training step, which has about three per forward value: 2^20 values plan
// in about 12 GiB and two minutes on one core.
inline constexpr size_t kMaxModelValues = size_t{1} << 20;
// An error once `graph` has kMaxModelValues values. (Inline: the ONNX
// importer's fuzz target links it without the builder.)
inline Status check_model_size(const std::string& model, const Graph& graph) {
  if (graph.num_values() < kMaxModelValues) return Status::ok();
  return Status::error("model " + model + " reaches " + std::to_string(kMaxModelValues) +
                       " values (outputs of operations, inputs and parameters); memfit plans "
                       "models of fewer");
}

class ModelBuilder {
 public:
  // training: dropout is active and batch norm uses batch statistics.
  // dropout = false leaves every dropout layer out, in training too (for
  // comparisons whose two sides must compute the same numbers).
  ModelBuilder(std::string model_name, bool training, bool dropout = true);

  // Data inputs: f32 (images, volumes), i32 token ids, and i32 labels.
  ValueId input(const std::string& name, Shape shape);
  ValueId token_input(const std::string& name, Shape shape);
  ValueId labels(int64_t batch);
  ValueId labels(Shape shape);

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
  // Training: batch statistics, and the running statistics are updated.
  // Evaluation: batch_norm_inference with the running statistics, read from
  // the same state values `<name>.running_mean` and `<name>.running_var`.
  ValueId batch_norm(const std::string& name, ValueId x);
  // ids i32 (...) -> (..., dim): rows of the parameter `<name>.weight` (vocab, dim),
  // which starts uniform(-1, 1).
  ValueId embedding(const std::string& name, ValueId ids, int64_t vocab, int64_t dim);
  // x (..., D) normalized over D; `<name>.weight` starts as ones, `<name>.bias` as zeros.
  ValueId layer_norm(const std::string& name, ValueId x);
  ValueId relu(ValueId x);
  ValueId max_pool2d(ValueId x, int64_t kernel, int64_t stride, int64_t pad = 0);
  // x (N, C, D, H, W); the same kernel, stride and pad along D, H and W. Average
  // pooling divides by the window elements inside the input (padding excluded).
  ValueId max_pool3d(ValueId x, int64_t kernel, int64_t stride, int64_t pad = 0);
  ValueId avg_pool3d(ValueId x, int64_t kernel, int64_t stride, int64_t pad = 0);
  // x (N, C, spatial...) with 1 to 3 spatial dimensions, each multiplied by
  // `factor`: nearest neighbour, or (bi/tri)linear (align_corners=false) when `linear`.
  ValueId upsample(ValueId x, int64_t factor, bool linear);
  ValueId add(ValueId a, ValueId b);
  ValueId global_avg_pool(ValueId x);  // (N, C, H, W) -> (N, C, 1, 1)
  ValueId flatten(ValueId x);  // (N, ...) -> (N, rest)
  ValueId dropout(ValueId x, float p);
  // The mean cross-entropy of logits (M, classes) against labels of M
  // elements in any shape: sets logits and loss.
  ValueId cross_entropy(ValueId logits, ValueId labels);
  // For a loss built from parts (an unrolled sequence's per-step
  // cross-entropies): `logits` (M, classes) and the f32 scalar `loss`.
  void set_loss(ValueId logits, ValueId loss);

  // Single ops, for models built from primitives (LSTM cells, attention).
  ValueId reshape(ValueId x, Shape shape);
  ValueId transpose(ValueId x, std::vector<int64_t> perm);
  ValueId matmul(ValueId a, ValueId b, bool trans_a = false, bool trans_b = false);
  ValueId slice(ValueId x, int64_t axis, int64_t start, int64_t end);
  ValueId concat(std::vector<ValueId> xs, int64_t axis);
  ValueId mul(ValueId a, ValueId b);
  ValueId scale(ValueId x, float alpha);
  ValueId sigmoid(ValueId x);
  ValueId tanh(ValueId x);
  ValueId gelu(ValueId x);
  ValueId softmax(ValueId x, int64_t axis);
  // Scaled dot-product attention of q (N, H, Tq, D) over k (N, H, Tk, D) and
  // v (N, H, Tk, Dv), causal or not, with dropout p on the probabilities:
  // one attention op (fused), or matmul, scale, causal_mask, softmax, dropout
  // and matmul (naive), which keep the (N, H, Tq, Tk) scores and
  // probabilities. Both forms draw one dropout key, so they drop the same
  // probabilities. -> (N, H, Tq, Dv)
  ValueId attention(ValueId q, ValueId k, ValueId v, float scale, bool causal, float p,
                    AttentionForm form);
  // The pointwise part of an LSTM step (the op lstm_cell, a node named
  // `name`): gates (N, 4H) in PyTorch's order i, f, g, o and c_prev (N, H),
  // invalid for zeros -> the step's h and c (N, H).
  struct LstmState {
    ValueId h, c;
  };
  LstmState lstm_cell(const std::string& name, ValueId gates, ValueId c_prev);

  // Appends any op; for layers this builder lacks.
  ValueId op(OpKind op, std::vector<ValueId> inputs, Attrs attrs, const std::string& name);
  // A parameter is made even after an error (its shape may be read), so a
  // loop that makes them must stop when ok() turns false.
  ValueId parameter(const std::string& name, Shape shape, Init init);
  const Shape& shape(ValueId v) const { return model_.graph.value(v).type.shape; }

  // False after the first error: a layer loop can stop early.
  bool ok() const { return status_.is_ok(); }

  Result<Model> finish();

 private:
  // Records an error once the model has kMaxModelValues values.
  void check_size();

  Model model_;
  bool training_;
  bool dropout_;
  Status status_;
  uint64_t next_dropout_key_ = 1;
};

// Which model to build and at what size. A 0 leaves the size at the model's
// default; a size a model does not have (depth of a fixed-depth model) is
// refused when it is not 0.
struct ModelOptions {
  std::string name;
  // An ONNX file to take the model from instead of the zoo (src/onnx/), with
  // the loss `loss` over its first output; name then names the model in
  // messages, and the zoo's size options must stay 0.
  std::string onnx = {};
  std::string loss = {};  // cross-entropy or mse; empty: cross-entropy (ONNX models only)
  int64_t batch = 64;
  int64_t image_size = 0;  // side of the square input image
  int64_t classes = 0;     // outputs of the classifier
  int64_t depth = 0;       // layers: resnet-cifar (9n+2), LSTM and Transformer layers
  int64_t width = 0;       // channels of the first stage, or the hidden / model width
  int64_t seq_len = 0;     // sequence models: positions per example
  int64_t volume = 0;      // unet3d: side of the cubic input volume
  int64_t vocab = 0;       // sequence models: tokens in the vocabulary
  bool dropout = true;     // false: no dropout layers, in training too (--no-dropout)
  AttentionForm attention = AttentionForm::fused;  // gpt, transformer, seq2seq
};

// A model of the zoo at its default size.
struct ModelInfo {
  std::string name;
  std::string description;  // the architecture and where it comes from
  DataKind data = DataKind::images;
  Shape input;              // one example, e.g. (3, 224, 224), or (T) tokens
  int64_t classes = 0;      // classes of each prediction (the vocabulary for tokens)
};

// The models this build knows, for `memfit train --model` and `memfit models`.
std::vector<ModelInfo> model_infos();
// The zoo's entry for `name`; an unknown name is an error that lists the zoo.
Result<ModelInfo> model_info(std::string_view name);
std::vector<std::string> model_names();
Result<Model> build_model(const ModelOptions& options, bool training);
// The trainable parameters (elements) of the model `options` name, from its
// forward graph (built, never run).
Result<int64_t> parameter_count(const ModelOptions& options);

}  // namespace memfit
