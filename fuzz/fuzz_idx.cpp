// libFuzzer target: the Fashion-MNIST IDX reader (src/train/fashion_mnist.h,
// after decompression). The first two bytes of the input say where the images
// file ends and the labels file begins; any input gives a data set or an
// error, never a crash, and a data set's sizes agree with each other.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "train/fashion_mnist.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t split = std::min<size_t>((size_t{data[0]} << 8 | data[1]), size - 2);
  const std::vector<uint8_t> images(data + 2, data + 2 + split);
  const std::vector<uint8_t> labels(data + 2 + split, data + size);
  auto dataset = memfit::parse_fashion_mnist("images", images, "labels", labels);
  if (!dataset.is_ok()) return 0;
  const auto count = static_cast<size_t>(dataset->count);
  if (dataset->labels.size() != count ||
      dataset->images.size() != count * static_cast<size_t>(dataset->image_elements())) {
    std::abort();
  }
  return 0;
}
