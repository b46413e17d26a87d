// The model zoo: parameter counts of the full-size models equal the published
// ones (torchvision's, and He et al. 2016 for resnet-cifar); bad options are
// refused with a clear message. (Tiny configurations train in
// zoo_training_test.cpp.)
#include <gtest/gtest.h>

#include "memfit/builder.h"
#include "models/zoo.h"
#include "test_util.h"

namespace memfit {
namespace {

// Trainable parameters only: batch-norm running statistics are state, not
// parameters, as in torchvision's sum(p.numel() for p in model.parameters()).
int64_t parameter_count(const ModelOptions& options) {
  auto model = build_model(options, false);
  EXPECT_TRUE(model.is_ok()) << model.message();
  if (!model) return -1;
  int64_t count = 0;
  for (ValueId p : model->params) count += num_elements(model->graph.value(p).type.shape);
  return count;
}

TEST(Models, FullSizeParameterCountsEqualTorchvision) {
  const std::pair<const char*, int64_t> expected[] = {
      {"resnet18", 11'689'512},  {"resnet34", 21'797'672},  {"resnet50", 25'557'032},
      {"resnet101", 44'549'160}, {"resnet152", 60'192'808}, {"vgg16", 138'357'544},
  };
  for (const auto& [name, count] : expected) {
    EXPECT_EQ(parameter_count({.name = name, .batch = 1}), count) << name;
  }
}

// The pre-activation bottleneck ResNet for CIFAR counted block by block:
// conv1 3x3 (3 -> 16); per block of input c, bottleneck width w (16, 32, 64
// by stage) and output 4w: BN(c), 1x1 c->w, BN(w), 3x3 w->w, BN(w), 1x1 w->4w,
// and a 1x1 c->4w projection in each stage's first block; final BN(256), fc.
int64_t resnet_cifar_parameters(int64_t depth, int64_t classes) {
  const int64_t n = (depth - 2) / 9;
  int64_t count = 3 * 16 * 9, c = 16;
  for (int64_t w : {16, 32, 64}) {
    for (int64_t i = 0; i < n; ++i) {
      count += 2 * c + c * w + 2 * w + 9 * w * w + 2 * w + 4 * w * w + (i == 0 ? c * 4 * w : 0);
      c = 4 * w;
    }
  }
  return count + 2 * c + c * classes + classes;
}

TEST(Models, ResNetCifar164HasThePapersParameterCount) {
  // 1,703,258: the paper's "1.7M" for ResNet-164 (He et al. 2016, table 2).
  EXPECT_EQ(resnet_cifar_parameters(164, 10), 1'703'258);
  EXPECT_EQ(parameter_count({.name = "resnet-cifar", .batch = 1, .depth = 164}), 1'703'258);
  EXPECT_EQ(parameter_count({.name = "resnet-cifar", .batch = 1}), 1'703'258);  // the default
  EXPECT_EQ(parameter_count({.name = "resnet-cifar", .batch = 1, .classes = 100, .depth = 20}),
            resnet_cifar_parameters(20, 100));
}

TEST(Models, OptionsChangeTheInputAndTheClassifier) {
  auto model = build_model({.name = "resnet50", .batch = 2, .image_size = 64, .classes = 7}, true);
  ASSERT_TRUE(model.is_ok()) << model.message();
  EXPECT_EQ(model->graph.value(model->inputs.at(0)).type.shape, (Shape{2, 3, 64, 64}));
  EXPECT_EQ(model->graph.value(model->logits).type.shape, (Shape{2, 7}));
  // 2048 * 7 + 7 in place of 2048 * 1000 + 1000.
  EXPECT_EQ(parameter_count({.name = "resnet50", .batch = 1, .classes = 7}),
            25'557'032 - 2049 * 1000 + 2049 * 7);
}

// GPT-2 small: the count of Hugging Face's GPT2LMHeadModel with tied
// embeddings (50257 x 768 tokens, 1024 x 768 positions, 12 layers).
TEST(Models, GptHasGpt2SmallsParameterCount) {
  EXPECT_EQ(parameter_count({.name = "gpt", .batch = 1}), 124'439'808);
}

// The sequence models against formulas written from their papers' layers.
TEST(Models, SequenceModelParameterCountsFollowTheirLayers) {
  // An LSTM layer of input In and hidden H: 4H (In + H) weights and 8H biases.
  const auto lstm = [](int64_t in, int64_t h) { return 4 * h * (in + h) + 8 * h; };
  const int64_t v = 10000, w = 650;
  EXPECT_EQ(parameter_count({.name = "lstm-lm", .batch = 1}),
            v * w + 2 * lstm(w, w) + (w * v + v));
  const int64_t sv = 50000, sw = 1000;
  EXPECT_EQ(parameter_count({.name = "seq2seq", .batch = 1}),
            2 * sv * sw + 8 * lstm(sw, sw) + sw * sw + 2 * sw * sw + (sw * sv + sv));
  // Transformer base: attention 4 (d^2 + d), feed-forward 2 d 4d + 5d, layer norms 2d each.
  const int64_t d = 512, tv = 37000, t = 128;
  const int64_t attention = 4 * (d * d + d), ff = 8 * d * d + 5 * d, ln = 2 * d;
  EXPECT_EQ(parameter_count({.name = "transformer", .batch = 1}),
            tv * d + 2 * t * d + 6 * (attention + ff + 2 * ln) + 6 * (2 * attention + ff + 3 * ln));
}

TEST(Models, SequenceOptionsSetTheShapes) {
  auto model = build_model(
      {.name = "gpt", .batch = 3, .depth = 1, .width = 128, .seq_len = 10, .vocab = 50}, true);
  ASSERT_TRUE(model.is_ok()) << model.message();
  EXPECT_EQ(model->graph.value(model->inputs.at(0)).type.shape, (Shape{3, 10}));
  EXPECT_EQ(model->graph.value(model->inputs.at(0)).type.dtype, DType::i32);
  EXPECT_EQ(model->graph.value(model->logits).type.shape, (Shape{30, 50}));
  auto bad = build_model({.name = "gpt", .batch = 1, .width = 100}, true);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("multiple of 64"), std::string::npos) << bad.message();
  auto no_volume = build_model({.name = "gpt", .batch = 1, .volume = 8}, true);
  ASSERT_FALSE(no_volume.is_ok());
  EXPECT_NE(no_volume.message().find("no volume option"), std::string::npos)
      << no_volume.message();
}

TEST(Models, BadOptionsAreRefused) {
  for (int64_t depth : {10, 12, 165, 2}) {
    auto model = build_model({.name = "resnet-cifar", .depth = depth}, false);
    ASSERT_FALSE(model.is_ok()) << depth;
    EXPECT_NE(model.message().find("9n+2"), std::string::npos) << model.message();
  }
  auto model = build_model({.name = "resnet18", .depth = 20}, false);
  ASSERT_FALSE(model.is_ok());
  EXPECT_NE(model.message().find("no depth option"), std::string::npos) << model.message();
  model = build_model({.name = "vgg16", .image_size = 100}, false);
  ASSERT_FALSE(model.is_ok());
  EXPECT_NE(model.message().find("multiple of 32"), std::string::npos) << model.message();
  // A model without attention refuses the naive form rather than ignore it.
  model = build_model({.name = "lenet", .attention = AttentionForm::naive}, false);
  ASSERT_FALSE(model.is_ok());
  EXPECT_NE(model.message().find("lenet has no attention option (--attention applies to "
                                 "seq2seq, gpt, transformer)"),
            std::string::npos)
      << model.message();
  EXPECT_TRUE(build_model({.name = "gpt",
                           .depth = 1,
                           .width = 64,
                           .seq_len = 8,
                           .vocab = 16,
                           .attention = AttentionForm::naive},
                          false)
                  .is_ok());
  model = build_model({.name = "resnet18", .classes = -1}, false);
  ASSERT_FALSE(model.is_ok());
  EXPECT_NE(model.message().find("must be positive"), std::string::npos) << model.message();
}

// A model that would pass kMaxModelValues values is refused as soon as it
// reaches them (a layer loop that went on would run for hours).
TEST(Models, ModelsPastTheValueLimitAreRefused) {
  const int64_t huge = (int64_t{1} << 31) - 1;
  auto model = build_model(
      {.name = "seq2seq", .batch = 1, .depth = 1, .width = 4, .seq_len = huge, .vocab = 8}, true);
  ASSERT_FALSE(model.is_ok());
  EXPECT_NE(model.message().find("reaches " + std::to_string(kMaxModelValues) + " values"),
            std::string::npos)
      << model.message();
}

int64_t dropout_nodes(const Model& model) {
  int64_t count = 0;
  for (const Node& node : model.graph.nodes()) count += node.op == OpKind::dropout ? 1 : 0;
  return count;
}

// dropout = false removes every dropout layer from the training graph and
// nothing else: the same parameters, the same shapes, the same other nodes.
TEST(Models, NoDropoutLeavesOutEveryDropoutLayerAndNothingElse) {
  const ModelOptions cases[] = {
      {.name = "mlp", .batch = 2},
      {.name = "vgg16", .batch = 1, .image_size = 32, .classes = 3, .width = 2},
      {.name = "lstm-lm", .batch = 2, .depth = 2, .width = 8, .seq_len = 3, .vocab = 11},
      {.name = "seq2seq", .batch = 2, .depth = 2, .width = 8, .seq_len = 3, .vocab = 11},
      {.name = "gpt", .batch = 2, .depth = 2, .width = 16, .seq_len = 4, .vocab = 11},
      {.name = "transformer", .batch = 2, .depth = 1, .width = 16, .seq_len = 4, .vocab = 11},
  };
  for (ModelOptions options : cases) {
    auto with = build_model(options, true);
    options.dropout = false;
    auto without = build_model(options, true);
    ASSERT_TRUE(with.is_ok() && without.is_ok()) << options.name;
    EXPECT_GT(dropout_nodes(*with), 0) << options.name;
    EXPECT_EQ(dropout_nodes(*without), 0) << options.name;
    EXPECT_EQ(with->graph.num_nodes() - static_cast<size_t>(dropout_nodes(*with)),
              without->graph.num_nodes())
        << options.name;
    ASSERT_EQ(with->params.size(), without->params.size()) << options.name;
    for (size_t i = 0; i < with->params.size(); ++i) {
      const Value& a = with->graph.value(with->params[i]);
      const Value& b = without->graph.value(without->params[i]);
      EXPECT_EQ(a.name, b.name);
      EXPECT_EQ(a.type.shape, b.type.shape) << a.name;
    }
    EXPECT_EQ(with->graph.value(with->logits).type.shape,
              without->graph.value(without->logits).type.shape)
        << options.name;
  }
}

int64_t nodes_of(const Model& model, OpKind op) {
  int64_t count = 0;
  for (const Node& node : model.graph.nodes()) count += node.op == op ? 1 : 0;
  return count;
}

// lstm-lm runs in windows of kLstmWindow steps: per window, per layer, one
// linear for the input projections of all its steps; per step one linear
// adding h w_hh^T + b_hh into its projection (but at the very first step, with
// no state, whose b_hh is added) and one lstm_cell; per window one decoder
// linear and one cross-entropy. The parameters keep PyTorch's names, shapes
// and order (checkpoints and bench/peer read them).
TEST(Models, LstmStepsAreTwoLinearsAndOneCell) {
  const int64_t layers = 2, steps = 3;
  for (const int64_t seq_len : {steps, kLstmWindow + steps}) {
    const int64_t windows = seq_len > kLstmWindow ? 2 : 1;
    const ModelOptions lm{
        .name = "lstm-lm", .batch = 2, .depth = 2, .width = 8, .seq_len = seq_len, .vocab = 11};
    for (bool training : {true, false}) {
      auto model = build_model(lm, training);
      ASSERT_TRUE(model.is_ok()) << model.message();
      EXPECT_EQ(nodes_of(*model, OpKind::lstm_cell), layers * seq_len);
      EXPECT_EQ(nodes_of(*model, OpKind::sigmoid), 0);
      EXPECT_EQ(nodes_of(*model, OpKind::tanh), 0);
      EXPECT_EQ(nodes_of(*model, OpKind::softmax_cross_entropy), windows);
      EXPECT_EQ(nodes_of(*model, OpKind::embedding), windows);
      // Each layer's first step adds b_hh; then the windows' losses are summed.
      EXPECT_EQ(nodes_of(*model, OpKind::add), layers + windows - 1);
      int64_t adding = 0, projections = 0;
      for (const Node& node : model->graph.nodes()) {
        if (node.op != OpKind::linear) continue;
        if (node.inputs.size() == 4) {
          ++adding;
          EXPECT_TRUE(model->graph.value(node.inputs[1]).name.ends_with(".weight_hh")) << node.name;
        } else {
          ++projections;
        }
      }
      EXPECT_EQ(adding, layers * (seq_len - 1));
      EXPECT_EQ(projections, windows * (layers + 1));
      std::vector<std::string> names;
      for (ValueId p : model->params) names.push_back(model->graph.value(p).name);
      std::vector<std::string> expected = {"embedding.weight"};
      for (const char* layer : {"lstm.l0.", "lstm.l1."}) {
        for (const char* p : {"weight_ih", "weight_hh", "bias_ih", "bias_hh"}) {
          expected.push_back(std::string(layer) + p);
        }
      }
      expected.insert(expected.end(), {"decoder.weight", "decoder.bias"});
      EXPECT_EQ(names, expected);
      EXPECT_EQ(model->graph.value(model->params[1]).type.shape, (Shape{4 * 8, 8}));
      EXPECT_EQ(model->graph.value(model->params[3]).type.shape, (Shape{4 * 8}));
    }
  }
  // seq2seq: an encoder and a decoder of `layers` layers over `steps` steps each.
  const ModelOptions pairs{
      .name = "seq2seq", .batch = 2, .depth = 2, .width = 8, .seq_len = steps, .vocab = 11};
  auto seq2seq = build_model(pairs, true);
  ASSERT_TRUE(seq2seq.is_ok()) << seq2seq.message();
  EXPECT_EQ(nodes_of(*seq2seq, OpKind::lstm_cell), 2 * layers * steps);
  EXPECT_EQ(nodes_of(*seq2seq, OpKind::sigmoid), 0);
  EXPECT_EQ(nodes_of(*seq2seq, OpKind::tanh), 1);  // attention's tanh(W_c [c_t; h_t])
}

TEST(Models, UnknownModelListsTheKnownNames) {
  auto model = build_model({.name = "resnet19"}, false);
  ASSERT_FALSE(model.is_ok());
  for (const std::string& name : model_names()) {
    EXPECT_NE(model.message().find(name), std::string::npos) << model.message();
  }
  EXPECT_EQ(model_names().size(), model_infos().size());
}

}  // namespace
}  // namespace memfit
