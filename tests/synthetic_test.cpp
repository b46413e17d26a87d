// The synthetic data sets: deterministic, shaped for their model, and with
// the structure each one promises (so that a falling loss means learning).
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <set>

#include "memfit/builder.h"
#include "train/data_source.h"

namespace memfit {
namespace {

struct Loaded {
  Model model;
  std::unique_ptr<DataSource> data;
};

Loaded load(const ModelOptions& options, DataKind kind, uint64_t seed = 4) {
  auto model = build_model(options, true);
  EXPECT_TRUE(model.is_ok()) << model.message();
  auto data = synthetic_source(kind, *model, 1000, 100, seed);
  EXPECT_TRUE(data.is_ok()) << data.message();
  return {std::move(*model), std::move(*data)};
}

Batch fill(const Loaded& l, int64_t first, bool test = false) {
  Batch batch = Batch::for_model(l.model);
  std::vector<int64_t> examples(static_cast<size_t>(batch.batch));
  std::iota(examples.begin(), examples.end(), first);
  EXPECT_TRUE(l.data->fill(test, examples, batch).is_ok());
  return batch;
}

// Labels as f32 one-hot targets (a squared-error loss): set_class writes the
// class's row, label_classes reads it back as the largest element's index.
TEST(Labels, OneHotTargetsHoldTheirClasses) {
  Batch batch;
  batch.batch = 3;
  batch.inputs.push_back({"labels", DType::f32, 4, std::vector<float>(12, 0.5f), {}});
  ASSERT_TRUE(batch.set_class(0, 3).is_ok());
  ASSERT_TRUE(batch.set_class(1, 0).is_ok());
  ASSERT_TRUE(batch.set_class(2, 2).is_ok());
  EXPECT_EQ(batch.find("labels")->f32,
            (std::vector<float>{0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1, 0}));
  EXPECT_EQ(batch.label_classes(), (std::vector<int32_t>{3, 0, 2}));
  const Status out_of_range = batch.set_class(0, 4);
  ASSERT_FALSE(out_of_range.is_ok());
  EXPECT_NE(out_of_range.message().find("class 4 has no element"), std::string::npos);
}

const ModelOptions kLm = {.name = "lstm-lm", .batch = 16, .depth = 1, .width = 8, .seq_len = 12,
                          .vocab = 20};
const ModelOptions kPairs = {.name = "seq2seq", .batch = 8, .depth = 1, .width = 8, .seq_len = 7,
                             .vocab = 20};

TEST(Synthetic, ExamplesArePureFunctionsOfSeedAndIndex) {
  const Loaded a = load({.name = "lenet", .batch = 4}, DataKind::images);
  const Loaded b = load({.name = "lenet", .batch = 4}, DataKind::images);
  Batch x = fill(a, 8), y = fill(b, 8);
  EXPECT_EQ(x.find("images")->f32, y.find("images")->f32);
  EXPECT_EQ(x.label_classes(), y.label_classes());
  // Example 9 is the same whether it sits in slot 1 or slot 0.
  Batch shifted = fill(a, 9);
  EXPECT_TRUE(std::equal(shifted.find("images")->f32.begin(),
                         shifted.find("images")->f32.begin() + 784,
                         x.find("images")->f32.begin() + 784));
  // Another seed, and the test set, give other examples.
  const Loaded c = load({.name = "lenet", .batch = 4}, DataKind::images, 5);
  EXPECT_NE(fill(c, 8).find("images")->f32, x.find("images")->f32);
  EXPECT_NE(fill(a, 8, true).find("images")->f32, x.find("images")->f32);
}

// An example is nearer to the mean of its class than to the mean of any
// other class, for almost every example: the classes are separable.
TEST(Synthetic, ImagesClusterByClass) {
  const Loaded l = load({.name = "resnet-cifar", .batch = 100, .image_size = 8, .depth = 11},
                        DataKind::images);
  const Batch batch = fill(l, 0);
  const std::vector<float>& pixels = batch.find("images")->f32;
  const size_t size = 3 * 8 * 8;
  std::map<int32_t, std::vector<double>> sums;
  std::map<int32_t, int> counts;
  for (size_t i = 0; i < 100; ++i) {
    auto& sum = sums[batch.label_classes()[i]];
    sum.resize(size);
    for (size_t j = 0; j < size; ++j) sum[j] += pixels[i * size + j];
    ++counts[batch.label_classes()[i]];
  }
  EXPECT_GE(sums.size(), 8u);  // 10 classes, 100 draws
  int nearest_own = 0;
  for (size_t i = 0; i < 100; ++i) {
    int32_t best = -1;
    double best_distance = 1e300;
    for (const auto& [cls, sum] : sums) {
      double d = 0;
      for (size_t j = 0; j < size; ++j) {
        const double diff = pixels[i * size + j] - sum[j] / counts[cls];
        d += diff * diff;
      }
      if (d < best_distance) best_distance = d, best = cls;
    }
    nearest_own += best == batch.label_classes()[i];
  }
  EXPECT_GE(nearest_own, 95);
}

// Labels are the next tokens, and each token has at most 4 successors.
TEST(Synthetic, TokensFollowAMarkovChain) {
  const Loaded l = load(kLm, DataKind::tokens);
  std::map<int32_t, std::set<int32_t>> successors;
  for (int64_t first : {0, 16, 32}) {
    const Batch batch = fill(l, first);
    const std::vector<int32_t>& tokens = batch.find("tokens")->i32;
    const std::vector<int32_t>& labels = batch.label_classes();
    ASSERT_EQ(tokens.size(), 16u * 12u);
    for (size_t n = 0; n < 16; ++n) {
      for (size_t t = 0; t < 12; ++t) {
        const int32_t token = tokens[n * 12 + t], next = labels[n * 12 + t];
        ASSERT_GE(token, 0);
        ASSERT_LT(token, 20);
        if (t + 1 < 12) {
          EXPECT_EQ(next, tokens[n * 12 + t + 1]);
        }
        successors[token].insert(next);
      }
    }
  }
  for (const auto& [token, next] : successors) EXPECT_LE(next.size(), 4u) << token;
}

TEST(Synthetic, PairTargetsAreTheReversedSource) {
  const Loaded l = load(kPairs, DataKind::pairs);
  const Batch batch = fill(l, 3);
  const std::vector<int32_t>& source = batch.find("source")->i32;
  const std::vector<int32_t>& target_in = batch.find("target_in")->i32;
  const std::vector<int32_t>& labels = batch.label_classes();
  for (size_t n = 0; n < 8; ++n) {
    EXPECT_EQ(target_in[n * 7], 0);
    for (size_t t = 0; t < 7; ++t) {
      EXPECT_GE(source[n * 7 + t], 1);
      EXPECT_EQ(labels[n * 7 + t], source[n * 7 + 6 - t]);
      if (t > 0) {
        EXPECT_EQ(target_in[n * 7 + t], labels[n * 7 + t - 1]);
      }
    }
  }
}

// The mean intensity of the voxels of class c is c, give or take the noise.
TEST(Synthetic, VolumeIntensityFollowsTheMask) {
  const Loaded l = load({.name = "unet3d", .batch = 4, .classes = 3, .width = 2, .volume = 16},
                        DataKind::volumes);
  const Batch batch = fill(l, 0);
  const std::vector<float>& voxels = batch.find("volume")->f32;
  std::map<int32_t, std::pair<double, int>> by_class;
  for (size_t i = 0; i < voxels.size(); ++i) {
    auto& [sum, count] = by_class[batch.label_classes()[i]];
    sum += voxels[i];
    ++count;
  }
  ASSERT_GE(by_class.size(), 2u);
  for (const auto& [cls, sum_count] : by_class) {
    EXPECT_GT(sum_count.second, 50) << cls;
    EXPECT_NEAR(sum_count.first / sum_count.second, cls, 0.15) << cls;
  }
}

TEST(Synthetic, AModelWithoutTheKindsInputsIsRefused) {
  auto model = build_model({.name = "lenet", .batch = 2}, true);
  ASSERT_TRUE(model.is_ok());
  auto data = synthetic_source(DataKind::tokens, *model, 10, 10, 1);
  ASSERT_FALSE(data.is_ok());
  EXPECT_NE(data.message().find("tokens"), std::string::npos) << data.message();
}

// A token model whose embedding table has fewer rows (10) than its logits
// have classes (16), as an ONNX file may: synthetic ids stay below the
// table's rows (an id past them stops the run), and the description says so.
TEST(Synthetic, TokenIdsStayInsideTheSmallestEmbeddingTable) {
  ModelBuilder b("small_table", true);
  const ValueId tokens = b.token_input("tokens", {4, 5});
  const ValueId labels = b.labels(Shape{4, 5});
  const ValueId x = b.embedding("embed", b.reshape(tokens, {20}), 10, 8);
  b.cross_entropy(b.linear("out", x, 16), labels);
  auto model = b.finish();
  ASSERT_TRUE(model.is_ok()) << model.message();
  auto data = synthetic_source(DataKind::tokens, *model, 1000, 100, 4);
  ASSERT_TRUE(data.is_ok()) << data.message();
  EXPECT_EQ((*data)->description(),
            "synthetic tokens (16 classes; ids below 10, the smallest embedding table's rows)");
  const Loaded l{std::move(*model), std::move(*data)};
  std::set<int32_t> seen;
  for (int64_t first = 0; first < 1000; first += 4) {
    const Batch batch = fill(l, first);
    for (const char* name : {"tokens", "labels"}) {
      for (const int32_t id : batch.find(name)->i32) seen.insert(id);
    }
  }
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(*seen.begin(), 0);
  EXPECT_EQ(*seen.rbegin(), 9);
}

}  // namespace
}  // namespace memfit
