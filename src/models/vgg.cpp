// VGG-16 (Simonyan and Zisserman 2015, configuration D) as torchvision's
// vgg16: 13 3x3 convolutions with bias and ReLU in five blocks, each ended by
// a 2x2 max pool, then 25088 -> 4096 -> 4096 -> 1000 with ReLU and dropout.
#include <cmath>

#include "models/zoo.h"

namespace memfit {

Result<Model> build_vgg16(const ModelOptions& options, bool training) {
  const int64_t s = options.image_size;
  // torchvision pools adaptively to 7x7, which is the identity at 224; here
  // the classifier takes the last feature map as it is, (512, S/32, S/32).
  if (s % 32 != 0) {
    return Status::error("vgg16: the image size must be a multiple of 32, got " +
                         std::to_string(s));
  }
  ModelBuilder b(options.name, training, options.dropout);
  ValueId x = b.input("images", {options.batch, 3, s, s});
  const ValueId labels = b.labels(options.batch);
  // Channels of each block's convolutions, in multiples of width (64).
  constexpr int64_t kBlocks[5][2] = {{1, 2}, {2, 2}, {4, 3}, {8, 3}, {8, 3}};  // {times, convs}
  int index = 0;  // torchvision's index in `features`: convs and ReLUs and pools count
  for (const auto& [times, convs] : kBlocks) {
    for (int64_t c = 0; c < convs; ++c, index += 2) {
      x = b.relu(b.conv2d("features." + std::to_string(index), x, times * options.width, 3, 1, 1));
    }
    x = b.max_pool2d(x, 2, 2);
    ++index;
  }
  // (N, 8 width, S/32, S/32) -> (N, classes), hidden layers 64 width wide (4096).
  const int64_t hidden = 64 * options.width;
  x = b.dropout(b.relu(b.linear("classifier.0", b.flatten(x), hidden)), 0.5f);
  x = b.dropout(b.relu(b.linear("classifier.3", x, hidden)), 0.5f);
  b.cross_entropy(b.linear("classifier.6", x, options.classes), labels);
  MEMFIT_ASSIGN_OR_RETURN(Model model, b.finish());
  // torchvision's initialization (without batch norm, the default one lets the
  // signal vanish over 16 layers): convolution weights Kaiming-normal with
  // fan_out and linear weights normal(0, 0.01), here uniform with the same
  // variance; biases zero.
  for (const ValueId p : model.params) {
    const Value& v = model.graph.value(p);
    Init& init = model.init[v.name];
    const Shape& shape = v.type.shape;
    if (shape.size() == 1) {
      init = Init{Init::Kind::zeros, 0};
    } else if (shape.size() == 4) {
      const double fan_out = static_cast<double>(shape[0] * shape[2] * shape[3]);
      init = Init{Init::Kind::uniform, static_cast<float>(std::sqrt(6.0 / fan_out))};
    } else {
      init = Init{Init::Kind::uniform, static_cast<float>(0.01 * std::sqrt(3.0))};
    }
  }
  return model;
}

}  // namespace memfit
