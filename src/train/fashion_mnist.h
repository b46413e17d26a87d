// Fashion-MNIST (Xiao et al. 2017) from the gzipped IDX files of Debian's
// dataset-fashion-mnist package, and a deterministic batch sampler over any
// ImageDataset.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "memfit/status.h"

namespace memfit {

// Where `apt-get install dataset-fashion-mnist` puts the four .gz files.
inline constexpr const char* kDefaultFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// Mean and standard deviation of the training pixels scaled to [0, 1]; the
// loader normalizes with them so that inputs are roughly zero-mean, unit-variance.
inline constexpr float kFashionMnistMean = 0.2860f;
inline constexpr float kFashionMnistStd = 0.3530f;

struct ImageDataset {
  int64_t count = 0;
  int64_t channels = 1;
  int64_t height = 0;
  int64_t width = 0;
  std::vector<float> images;    // (count, channels, height, width), normalized
  std::vector<int32_t> labels;  // (count), each in [0, classes)
  int64_t classes = 10;

  int64_t image_elements() const { return channels * height * width; }
};

// Reads train-{images-idx3,labels-idx1}-ubyte.gz (train) or the t10k-* pair
// (test) from `dir`: 60000 or 10000 images of 1x28x28 in 10 classes. Pixels
// become (x / 255 - kFashionMnistMean) / kFashionMnistStd. Errors name the file
// and the problem: missing, truncated, wrong magic number or dimensions,
// disagreeing counts, or a label out of range.
Result<ImageDataset> load_fashion_mnist(const std::string& dir, bool train);
// The same from the decompressed bytes of an images and a labels IDX file;
// the paths only name them in errors (the fuzzer reads them so).
Result<ImageDataset> parse_fashion_mnist(const std::string& images_path,
                                         const std::vector<uint8_t>& images,
                                         const std::string& labels_path,
                                         const std::vector<uint8_t>& labels);

// Shuffled mini-batches. The order of epoch e is a pure function of (seed, e),
// the same on every machine and standard library, so a run resumed from a
// checkpoint at epoch e sees the batches it would have seen without the stop.
// An epoch has count / batch_size batches: the last partial batch is dropped,
// so every step sees a full batch and shapes stay static (one plan per run);
// the dropped examples differ from epoch to epoch, so none is left out for good.
class BatchSampler {
 public:
  // Errors unless 1 <= batch_size <= count.
  static Result<BatchSampler> create(int64_t count, int64_t batch_size, uint64_t seed);

  int64_t count() const { return count_; }
  int64_t batch_size() const { return batch_size_; }
  int64_t batches_per_epoch() const { return count_ / batch_size_; }

  // A permutation of [0, count): Fisher-Yates driven by memfit::random_bits.
  std::vector<int64_t> permutation(int64_t epoch) const;

  // Copies the examples permutation[batch * B .. batch * B + B) of `data`, with
  // B = batch_size(), into `images` (B, channels, height, width) and `labels` (B).
  void copy_batch(const ImageDataset& data, std::span<const int64_t> permutation, int64_t batch,
                  std::span<float> images, std::span<int32_t> labels) const;

 private:
  BatchSampler(int64_t count, int64_t batch_size, uint64_t seed)
      : count_(count), batch_size_(batch_size), seed_(seed) {}

  int64_t count_;
  int64_t batch_size_;
  uint64_t seed_;
};

}  // namespace memfit
