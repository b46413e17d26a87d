#include "train/fashion_mnist.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "memfit/train.h"
#include "test_util.h"

namespace memfit {
namespace {

namespace fs = std::filesystem;

std::vector<char> read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const fs::path& path, const std::vector<char>& bytes, size_t length) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(length));
}

void append_be32(std::vector<uint8_t>& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
}

void write_gz(const fs::path& path, const std::vector<uint8_t>& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())),
            static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(file), Z_OK);
}

// Writes a small test split: image k has every pixel equal to `pixel(k)`.
void write_split(const fs::path& dir, uint32_t images, uint32_t rows, uint32_t cols,
                 const std::vector<uint8_t>& labels, uint32_t labels_magic = 2049) {
  std::vector<uint8_t> image_bytes;
  append_be32(image_bytes, 2051);
  append_be32(image_bytes, images);
  append_be32(image_bytes, rows);
  append_be32(image_bytes, cols);
  for (uint32_t k = 0; k < images; ++k) image_bytes.insert(image_bytes.end(), rows * cols, k * 7);
  write_gz(dir / "t10k-images-idx3-ubyte.gz", image_bytes);
  std::vector<uint8_t> label_bytes;
  append_be32(label_bytes, labels_magic);
  append_be32(label_bytes, static_cast<uint32_t>(labels.size()));
  label_bytes.insert(label_bytes.end(), labels.begin(), labels.end());
  write_gz(dir / "t10k-labels-idx1-ubyte.gz", label_bytes);
}

float normalized(int pixel) {
  return (static_cast<float>(pixel) / 255.0f - kFashionMnistMean) / kFashionMnistStd;
}

void expect_real_split(const ImageDataset& data, int64_t count) {
  EXPECT_EQ(data.count, count);
  EXPECT_EQ(data.channels, 1);
  EXPECT_EQ(data.height, 28);
  EXPECT_EQ(data.width, 28);
  EXPECT_EQ(data.classes, 10);
  ASSERT_EQ(data.images.size(), static_cast<size_t>(count * 28 * 28));
  ASSERT_EQ(data.labels.size(), static_cast<size_t>(count));
  std::map<int32_t, int64_t> per_class;
  for (const int32_t label : data.labels) ++per_class[label];
  ASSERT_EQ(per_class.size(), 10u);
  for (const auto& [label, examples] : per_class) {
    EXPECT_GE(label, 0);
    EXPECT_LT(label, 10);
    EXPECT_EQ(examples, count / 10) << "class " << label;
  }
  // The data holds both black (0) and white (255) pixels.
  const auto [lowest, highest] = std::minmax_element(data.images.begin(), data.images.end());
  EXPECT_FLOAT_EQ(*lowest, normalized(0));
  EXPECT_FLOAT_EQ(*highest, normalized(255));
  // The constants are the training set's statistics, so both splits come out
  // close to zero mean and unit variance.
  double sum = 0, sum_squares = 0;
  for (const float v : data.images) {
    sum += v;
    sum_squares += static_cast<double>(v) * v;
  }
  const double mean = sum / static_cast<double>(data.images.size());
  const double variance = sum_squares / static_cast<double>(data.images.size()) - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(std::sqrt(variance), 1.0, 0.02);
}

TEST(FashionMnist, LoadsTheTrainingSet) {
  Result<ImageDataset> data = load_fashion_mnist(kDefaultFashionMnistDir, true);
  ASSERT_TRUE(data.is_ok()) << data.message();
  expect_real_split(*data, 60000);
}

TEST(FashionMnist, LoadsTheTestSet) {
  Result<ImageDataset> data = load_fashion_mnist(kDefaultFashionMnistDir, false);
  ASSERT_TRUE(data.is_ok()) << data.message();
  expect_real_split(*data, 10000);
}

TEST(FashionMnist, MissingDirectorySaysWhatToInstall) {
  testing::ScratchDir dir;
  Result<ImageDataset> data = load_fashion_mnist((dir.path() / "absent").string(), true);
  ASSERT_FALSE(data.is_ok());
  EXPECT_NE(data.message().find("train-images-idx3-ubyte.gz"), std::string::npos);
  EXPECT_NE(data.message().find("apt-get install dataset-fashion-mnist"), std::string::npos);
  EXPECT_NE(data.message().find("--data DIR"), std::string::npos);
}

TEST(FashionMnist, MissingLabelsFileIsNamed) {
  testing::ScratchDir dir;
  fs::copy_file(fs::path(kDefaultFashionMnistDir) / "t10k-images-idx3-ubyte.gz",
                dir.path() / "t10k-images-idx3-ubyte.gz");
  Result<ImageDataset> data = load_fashion_mnist(dir.path().string(), false);
  ASSERT_FALSE(data.is_ok());
  EXPECT_NE(data.message().find("t10k-labels-idx1-ubyte.gz"), std::string::npos);
  EXPECT_NE(data.message().find("dataset-fashion-mnist"), std::string::npos);
}

// A file that is there but is no regular file (here a directory) is named
// as such, not as missing.
TEST(FashionMnist, WhatIsNotARegularFileIsNamed) {
  testing::ScratchDir dir;
  fs::create_directory(dir.path() / "t10k-images-idx3-ubyte.gz");
  Result<ImageDataset> data = load_fashion_mnist(dir.path().string(), false);
  ASSERT_FALSE(data.is_ok());
  EXPECT_NE(data.message().find("t10k-images-idx3-ubyte.gz: not a regular file"), std::string::npos)
      << data.message();
}

TEST(FashionMnist, TruncatedGzipIsAnError) {
  testing::ScratchDir dir;
  const fs::path source(kDefaultFashionMnistDir);
  const std::vector<char> labels = read_bytes(source / "t10k-labels-idx1-ubyte.gz");
  ASSERT_GT(labels.size(), 100u);
  fs::copy_file(source / "t10k-images-idx3-ubyte.gz", dir.path() / "t10k-images-idx3-ubyte.gz");
  const fs::path labels_path = dir.path() / "t10k-labels-idx1-ubyte.gz";
  // Cuts inside the gzip header, inside the deflate data, and inside the
  // 8-byte trailer (CRC and length) that follows complete deflate data.
  for (const size_t length : {size_t{0}, size_t{5}, size_t{30}, labels.size() / 2,
                              labels.size() - 8, labels.size() - 1}) {
    write_bytes(labels_path, labels, length);
    Result<ImageDataset> data = load_fashion_mnist(dir.path().string(), false);
    ASSERT_FALSE(data.is_ok()) << "length " << length;
    EXPECT_NE(data.message().find(labels_path.string()), std::string::npos) << data.message();
    EXPECT_NE(data.message().find("truncated"), std::string::npos) << data.message();
  }
  write_bytes(labels_path, labels, labels.size());
  const std::vector<char> images = read_bytes(source / "t10k-images-idx3-ubyte.gz");
  write_bytes(dir.path() / "t10k-images-idx3-ubyte.gz", images, images.size() / 2);
  Result<ImageDataset> data = load_fashion_mnist(dir.path().string(), false);
  ASSERT_FALSE(data.is_ok());
  EXPECT_NE(data.message().find("t10k-images-idx3-ubyte.gz"), std::string::npos);
  EXPECT_NE(data.message().find("truncated"), std::string::npos) << data.message();
}

TEST(FashionMnist, ReadsASmallSplitExactly) {
  testing::ScratchDir dir;
  write_split(dir.path(), 3, 28, 28, {9, 0, 4});
  Result<ImageDataset> data = load_fashion_mnist(dir.path().string(), false);
  ASSERT_TRUE(data.is_ok()) << data.message();
  ASSERT_EQ(data->count, 3);
  EXPECT_EQ(data->labels, (std::vector<int32_t>{9, 0, 4}));
  for (int64_t k = 0; k < 3; ++k) {
    EXPECT_EQ(data->images[k * 784], normalized(static_cast<int>(k * 7)));
    EXPECT_EQ(data->images[k * 784 + 783], normalized(static_cast<int>(k * 7)));
  }
}

// Evaluation reads the test set in whole batches (up to 1000): a test set
// they would not cover is refused before training, rather than reported as
// an accuracy of 0/0 or of part of it.
TEST(FashionMnist, TrainingRefusesATestSetEvaluationWouldNotCover) {
  testing::ScratchDir dir;
  auto train_with_test_set = [&](uint32_t tests, int64_t limit) {
    // The training split (4 examples): a test split's files under the training names.
    write_split(dir.path(), 4, 28, 28, {1, 2, 3, 4});
    fs::copy_file(dir.path() / "t10k-images-idx3-ubyte.gz",
                  dir.path() / "train-images-idx3-ubyte.gz", fs::copy_options::overwrite_existing);
    fs::copy_file(dir.path() / "t10k-labels-idx1-ubyte.gz",
                  dir.path() / "train-labels-idx1-ubyte.gz", fs::copy_options::overwrite_existing);
    write_split(dir.path(), tests, 28, 28, std::vector<uint8_t>(tests, 1));
    TrainOptions options;
    options.data_path = dir.path().string();
    options.step.model = {.name = "lenet", .batch = 1};
    options.epochs = 1;
    options.limit = limit;
    return train(options, [](const std::string&) {});
  };
  auto none = train_with_test_set(0, 0);
  ASSERT_FALSE(none.is_ok());
  EXPECT_EQ(none.message(),
            "the test set (Fashion-MNIST) holds no examples: memfit evaluates on it after every "
            "epoch");
  auto three = train_with_test_set(3, 0);
  ASSERT_FALSE(three.is_ok());
  EXPECT_EQ(three.message(),
            "the test set (Fashion-MNIST) holds 3 examples, but evaluation reads whole batches of "
            "1000 and would leave 3 out; give --limit 3");
  auto limited = train_with_test_set(3, 3);
  EXPECT_TRUE(limited.is_ok()) << limited.message();
  // A limit of whole batches beyond the test set is refused as well, with the same advice.
  auto beyond = train_with_test_set(3, 200);
  ASSERT_FALSE(beyond.is_ok());
  EXPECT_NE(beyond.message().find("batches of 200 and would leave 3 out; give --limit 3"),
            std::string::npos)
      << beyond.message();
}

TEST(FashionMnist, RejectsMalformedFiles) {
  struct Case {
    const char* what;
    uint32_t images, rows, cols;
    std::vector<uint8_t> labels;
    uint32_t labels_magic;
    const char* message;
  };
  const Case cases[] = {
      {"counts differ", 3, 28, 28, {1, 2}, 2049, "3 images but 2 labels"},
      {"label out of range", 2, 28, 28, {1, 10}, 2049, "label 10 of example 1"},
      {"wrong image size", 2, 27, 28, {1, 2}, 2049, "27x28, expected 28x28"},
      {"wrong magic", 2, 28, 28, {1, 2}, 2051, "magic number 2051, expected 2049"},
  };
  for (const Case& c : cases) {
    testing::ScratchDir dir;
    write_split(dir.path(), c.images, c.rows, c.cols, c.labels, c.labels_magic);
    Result<ImageDataset> data = load_fashion_mnist(dir.path().string(), false);
    ASSERT_FALSE(data.is_ok()) << c.what;
    EXPECT_NE(data.message().find(c.message), std::string::npos) << data.message();
  }
}

TEST(FashionMnist, RejectsPayloadOfTheWrongLength) {
  testing::ScratchDir dir;
  std::vector<uint8_t> labels;
  append_be32(labels, 2049);
  append_be32(labels, 1000);  // declares 1000 labels, holds 3
  labels.insert(labels.end(), {1, 2, 3});
  write_split(dir.path(), 2, 28, 28, {1, 2});
  write_gz(dir.path() / "t10k-labels-idx1-ubyte.gz", labels);
  Result<ImageDataset> data = load_fashion_mnist(dir.path().string(), false);
  ASSERT_FALSE(data.is_ok());
  EXPECT_NE(data.message().find("declares 1000 labels"), std::string::npos) << data.message();
}

TEST(BatchSampler, RejectsBatchSizesThatDoNotFit) {
  EXPECT_FALSE(BatchSampler::create(100, 0, 1).is_ok());
  EXPECT_FALSE(BatchSampler::create(100, 101, 1).is_ok());
  EXPECT_FALSE(BatchSampler::create(0, 1, 1).is_ok());
  Result<BatchSampler> sampler = BatchSampler::create(100, 100, 1);
  ASSERT_TRUE(sampler.is_ok()) << sampler.message();
  EXPECT_EQ(sampler->batches_per_epoch(), 1);
}

TEST(BatchSampler, GivesAPermutationThatDependsOnlyOnSeedAndEpoch) {
  Result<BatchSampler> sampler = BatchSampler::create(1000, 64, 42);
  ASSERT_TRUE(sampler.is_ok()) << sampler.message();
  EXPECT_EQ(sampler->batches_per_epoch(), 15);  // 1000 / 64, the last 40 dropped
  const std::vector<int64_t> first = sampler->permutation(0);
  std::vector<int64_t> sorted = first;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> identity(1000);
  std::iota(identity.begin(), identity.end(), int64_t{0});
  EXPECT_EQ(sorted, identity);
  EXPECT_NE(first, identity);
  EXPECT_EQ(sampler->permutation(0), first);
  EXPECT_EQ(BatchSampler::create(1000, 64, 42)->permutation(0), first);
  EXPECT_NE(sampler->permutation(1), first);
  EXPECT_NE(BatchSampler::create(1000, 64, 43)->permutation(0), first);
}

TEST(BatchSampler, OrderIsTheSameOnEveryPlatform) {
  // The expected order was computed by an independent Python implementation
  // of Philox4x32-10, Lemire's bounded draw and Fisher-Yates. A change here
  // changes the batches of every run, so resumed runs would diverge.
  const std::vector<int64_t> order = BatchSampler::create(10, 1, 7)->permutation(3);
  EXPECT_EQ(order, (std::vector<int64_t>{1, 5, 2, 3, 8, 6, 4, 0, 9, 7}));
}

TEST(BatchSampler, EveryOrderIsEquallyLikely) {
  // 3 elements: 6 orders over 6000 epochs, about 1000 each; a biased shuffle
  // (such as swapping with j in [0, n) instead of [0, i]) misses by hundreds.
  Result<BatchSampler> sampler = BatchSampler::create(3, 1, 5);
  ASSERT_TRUE(sampler.is_ok());
  std::map<std::vector<int64_t>, int> seen;
  for (int64_t epoch = 0; epoch < 6000; ++epoch) ++seen[sampler->permutation(epoch)];
  ASSERT_EQ(seen.size(), 6u);
  for (const auto& [order, times] : seen) {
    EXPECT_GT(times, 870);
    EXPECT_LT(times, 1130);
  }
}

TEST(BatchSampler, CopiesTheExamplesOfABatch) {
  ImageDataset data;
  data.count = 10;
  data.height = 2;
  data.width = 3;
  for (int64_t k = 0; k < data.count; ++k) {
    for (int i = 0; i < 6; ++i) data.images.push_back(static_cast<float>(k * 100 + i));
    data.labels.push_back(static_cast<int32_t>(k % 10));
  }
  Result<BatchSampler> sampler = BatchSampler::create(10, 4, 9);
  ASSERT_TRUE(sampler.is_ok());
  ASSERT_EQ(sampler->batches_per_epoch(), 2);
  const std::vector<int64_t> order = sampler->permutation(2);
  std::vector<float> images(4 * 6);
  std::vector<int32_t> labels(4);
  sampler->copy_batch(data, order, 1, images, labels);
  for (int k = 0; k < 4; ++k) {
    const int64_t example = order[static_cast<size_t>(4 + k)];
    EXPECT_EQ(labels[k], example % 10);
    for (int i = 0; i < 6; ++i) EXPECT_EQ(images[k * 6 + i], static_cast<float>(example * 100 + i));
  }
}

}  // namespace
}  // namespace memfit
