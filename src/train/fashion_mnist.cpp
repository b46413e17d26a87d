#include "train/fashion_mnist.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <utility>

#include "core/check.h"
#include "core/random.h"

namespace memfit {
namespace {

constexpr uint32_t kImagesMagic = 2051;  // 0x00000803: unsigned bytes, 3 dimensions
constexpr uint32_t kLabelsMagic = 2049;  // 0x00000801: unsigned bytes, 1 dimension
constexpr int64_t kSide = 28;
constexpr int64_t kClasses = 10;

// Stream key of the shuffle draws: it keeps them apart from the dropout streams,
// which are keyed by node, even when both use the run's seed.
constexpr uint64_t kShuffleStream = 0x53485546464C45ull;  // "SHUFFLE"

std::string file_error(const std::string& path, const std::string& problem) {
  return "Fashion-MNIST file " + path + ": " + problem;
}

std::string damaged(const std::string& path, const std::string& problem) {
  return file_error(path, problem +
                              "; the file is damaged: replace it (`apt-get install --reinstall "
                              "dataset-fashion-mnist` restores the default copy)");
}

// The whole decompressed content of a .gz file. It grows as data arrives, so a
// corrupt header can never make it allocate more than the file really holds.
Result<std::vector<uint8_t>> read_gz(const std::string& path) {
  std::error_code ignored;
  if (std::filesystem::exists(path, ignored) && !std::filesystem::is_regular_file(path, ignored)) {
    return Status::error(file_error(path, "not a regular file (a directory, a FIFO or a device)"));
  }
  if (!std::filesystem::is_regular_file(path, ignored)) {
    return Status::error(
        "cannot find Fashion-MNIST file " + path +
        "; to get the files, install them with `apt-get install dataset-fashion-mnist` or pass "
        "--data DIR (a directory holding the four *-ubyte.gz files)");
  }
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) {
    return Status::error(file_error(path, std::string("cannot open: ") + std::strerror(errno)));
  }
  constexpr unsigned kChunk = 1u << 20;
  std::vector<uint8_t> bytes;
  int got = 0;
  do {
    const size_t old_size = bytes.size();
    bytes.resize(old_size + kChunk);
    got = gzread(file, bytes.data() + old_size, kChunk);
    bytes.resize(old_size + static_cast<size_t>(std::max(got, 0)));
    // gzread fills the whole chunk unless the stream ended or failed.
  } while (got == static_cast<int>(kChunk));
  int read_error = Z_OK;
  const std::string message = gzerror(file, &read_error);
  const int close_error = gzclose(file);
  // A stream cut short reads as Z_BUF_ERROR ("unexpected end of file"), not as
  // a failed gzread, so the error state is checked after the loop.
  if (read_error == Z_BUF_ERROR || close_error == Z_BUF_ERROR) {
    return Status::error(damaged(path, "truncated: the compressed data ends early"));
  }
  if (got < 0 || read_error != Z_OK) {
    return Status::error(damaged(path, "cannot decompress: " + message));
  }
  if (close_error != Z_OK) {
    return Status::error(file_error(path, "cannot close: error " + std::to_string(close_error)));
  }
  return bytes;
}

// IDX stores its header integers big-endian.
uint32_t read_be32(const uint8_t* p) {
  return (static_cast<uint32_t>(p[0]) << 24) | (static_cast<uint32_t>(p[1]) << 16) |
         (static_cast<uint32_t>(p[2]) << 8) | static_cast<uint32_t>(p[3]);
}

// The dimensions of an IDX file whose magic number must be `magic`: rank 3
// (count, rows, cols) for images, rank 1 (count) for labels.
Result<std::vector<int64_t>> idx_dims(const std::string& path, const std::vector<uint8_t>& bytes,
                                      uint32_t magic, size_t rank, const std::string& what) {
  const size_t header_bytes = 4 * (rank + 1);
  if (bytes.size() < header_bytes) {
    return Status::error(damaged(path, "truncated: " + std::to_string(bytes.size()) +
                                           " bytes, shorter than the " +
                                           std::to_string(header_bytes) + "-byte IDX header"));
  }
  const uint32_t found = read_be32(bytes.data());
  if (found != magic) {
    return Status::error(damaged(path, "magic number " + std::to_string(found) + ", expected " +
                                           std::to_string(magic) + " (an IDX file of " + what +
                                           ")"));
  }
  std::vector<int64_t> dims(rank);
  for (size_t d = 0; d < rank; ++d) dims[d] = read_be32(bytes.data() + 4 * (d + 1));
  return dims;
}

// Checks that exactly `count` items of `item_bytes` follow the header.
Status check_payload(const std::string& path, const std::vector<uint8_t>& bytes,
                     size_t header_bytes, int64_t count, int64_t item_bytes,
                     const std::string& what) {
  // count < 2^32 and item_bytes <= 784: the product cannot overflow.
  const uint64_t expected = static_cast<uint64_t>(count) * static_cast<uint64_t>(item_bytes);
  const uint64_t present = bytes.size() - header_bytes;
  if (present == expected) return Status::ok();
  return Status::error(damaged(path, "the header declares " + std::to_string(count) + " " + what +
                                         " (" + std::to_string(expected) + " bytes) but " +
                                         std::to_string(present) + " bytes follow it" +
                                         (present < expected ? " (truncated)" : "")));
}

Status parse_images(const std::string& path, const std::vector<uint8_t>& bytes, ImageDataset& data) {
  MEMFIT_ASSIGN_OR_RETURN(const std::vector<int64_t> dims,
                          idx_dims(path, bytes, kImagesMagic, 3, "images"));
  if (dims[1] != kSide || dims[2] != kSide) {
    return Status::error(damaged(path, "images are " + std::to_string(dims[1]) + "x" +
                                           std::to_string(dims[2]) + ", expected 28x28"));
  }
  const size_t header_bytes = 16;
  MEMFIT_RETURN_IF_ERROR(
      check_payload(path, bytes, header_bytes, dims[0], kSide * kSide, "images"));
  data.count = dims[0];
  data.channels = 1;
  data.height = kSide;
  data.width = kSide;
  data.images.resize(bytes.size() - header_bytes);
  const uint8_t* pixels = bytes.data() + header_bytes;
  for (size_t i = 0; i < data.images.size(); ++i) {
    data.images[i] =
        (static_cast<float>(pixels[i]) / 255.0f - kFashionMnistMean) / kFashionMnistStd;
  }
  return Status::ok();
}

Status parse_labels(const std::string& path, const std::vector<uint8_t>& bytes, ImageDataset& data) {
  MEMFIT_ASSIGN_OR_RETURN(const std::vector<int64_t> dims,
                          idx_dims(path, bytes, kLabelsMagic, 1, "labels"));
  const int64_t count = dims[0];
  const size_t header_bytes = 8;
  MEMFIT_RETURN_IF_ERROR(check_payload(path, bytes, header_bytes, count, 1, "labels"));
  data.labels.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const uint8_t label = bytes[header_bytes + static_cast<size_t>(i)];
    if (label >= kClasses) {
      return Status::error(damaged(path, "label " + std::to_string(label) + " of example " +
                                             std::to_string(i) + " is outside [0, 10)"));
    }
    data.labels[static_cast<size_t>(i)] = label;
  }
  return Status::ok();
}

// A uniform integer in [0, bound), unbiased (Lemire 2019, "Fast random integer
// generation in an interval"): a draw that would favour small values is
// rejected and replaced by the next attempt of the same slot.
uint32_t uniform_below(uint64_t seed, uint64_t epoch, uint32_t slot, uint32_t bound) {
  const uint32_t threshold = (0u - bound) % bound;  // 2^32 mod bound
  for (uint64_t attempt = 0;; ++attempt) {
    const uint64_t draw = random_bits(seed, epoch, kShuffleStream, (attempt << 32) | slot);
    const uint64_t scaled = draw * bound;
    if (static_cast<uint32_t>(scaled) >= threshold) return static_cast<uint32_t>(scaled >> 32);
  }
}

}  // namespace

Result<ImageDataset> load_fashion_mnist(const std::string& dir, bool train) {
  const std::string prefix = (std::filesystem::path(dir) / (train ? "train" : "t10k")).string();
  const std::string images_path = prefix + "-images-idx3-ubyte.gz";
  const std::string labels_path = prefix + "-labels-idx1-ubyte.gz";
  MEMFIT_ASSIGN_OR_RETURN(const std::vector<uint8_t> images, read_gz(images_path));
  MEMFIT_ASSIGN_OR_RETURN(const std::vector<uint8_t> labels, read_gz(labels_path));
  return parse_fashion_mnist(images_path, images, labels_path, labels);
}

Result<ImageDataset> parse_fashion_mnist(const std::string& images_path,
                                         const std::vector<uint8_t>& images,
                                         const std::string& labels_path,
                                         const std::vector<uint8_t>& labels) {
  ImageDataset data;
  data.classes = kClasses;
  MEMFIT_RETURN_IF_ERROR(parse_images(images_path, images, data));
  MEMFIT_RETURN_IF_ERROR(parse_labels(labels_path, labels, data));
  if (static_cast<int64_t>(data.labels.size()) != data.count) {
    return Status::error("Fashion-MNIST files " + images_path + " and " + labels_path +
                         " disagree: " + std::to_string(data.count) + " images but " +
                         std::to_string(data.labels.size()) +
                         " labels; use the images and labels of the same split and release");
  }
  return data;
}

Result<BatchSampler> BatchSampler::create(int64_t count, int64_t batch_size, uint64_t seed) {
  // Slots of the shuffle are 32-bit counters of the random stream.
  if (count < 1 || count > INT64_C(0xFFFFFFFF)) {
    return Status::error("cannot sample batches from " + std::to_string(count) +
                         " examples: a data set needs between 1 and 2^32 - 1 examples");
  }
  if (batch_size < 1 || batch_size > count) {
    return Status::error("batch size " + std::to_string(batch_size) +
                         " does not fit a data set of " + std::to_string(count) +
                         " examples: choose a batch size between 1 and " + std::to_string(count));
  }
  return BatchSampler(count, batch_size, seed);
}

std::vector<int64_t> BatchSampler::permutation(int64_t epoch) const {
  std::vector<int64_t> order(static_cast<size_t>(count_));
  std::iota(order.begin(), order.end(), int64_t{0});
  // Fisher-Yates from the back: slot i swaps with a uniform j in [0, i].
  for (int64_t i = count_ - 1; i > 0; --i) {
    const uint32_t j = uniform_below(seed_, static_cast<uint64_t>(epoch), static_cast<uint32_t>(i),
                                     static_cast<uint32_t>(i + 1));
    std::swap(order[static_cast<size_t>(i)], order[j]);
  }
  return order;
}

void BatchSampler::copy_batch(const ImageDataset& data, std::span<const int64_t> permutation,
                              int64_t batch, std::span<float> images,
                              std::span<int32_t> labels) const {
  const int64_t elements = data.image_elements();
  MEMFIT_CHECK(data.count == count_);
  MEMFIT_CHECK(static_cast<int64_t>(permutation.size()) == count_);
  MEMFIT_CHECK(batch >= 0 && batch < batches_per_epoch());
  MEMFIT_CHECK(static_cast<int64_t>(images.size()) == batch_size_ * elements);
  MEMFIT_CHECK(static_cast<int64_t>(labels.size()) == batch_size_);
  for (int64_t k = 0; k < batch_size_; ++k) {
    const int64_t example = permutation[static_cast<size_t>(batch * batch_size_ + k)];
    MEMFIT_CHECK(example >= 0 && example < count_);
    std::copy_n(data.images.begin() + example * elements, elements, images.begin() + k * elements);
    labels[static_cast<size_t>(k)] = data.labels[static_cast<size_t>(example)];
  }
}

}  // namespace memfit
