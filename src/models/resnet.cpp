// Residual networks: torchvision's ImageNet ResNets (He et al. 2015, with the
// stride on the 3x3 convolution of a bottleneck, "ResNet v1.5") and the
// pre-activation bottleneck ResNet for CIFAR (He et al. 2016, "Identity
// Mappings in Deep Residual Networks").
#include <array>

#include "models/zoo.h"

namespace memfit {
namespace {

struct ResNetConfig {
  const char* name;
  bool bottleneck;
  std::array<int64_t, 4> blocks;  // per stage
};

constexpr ResNetConfig kResNets[] = {
    {"resnet18", false, {2, 2, 2, 2}},  {"resnet34", false, {3, 4, 6, 3}},
    {"resnet50", true, {3, 4, 6, 3}},   {"resnet101", true, {3, 4, 23, 3}},
    {"resnet152", true, {3, 8, 36, 3}},
};

// conv (no bias, as batch norm follows) -> batch norm, named as torchvision's
// `<prefix>conv<i>` and `<prefix>bn<i>`.
ValueId conv_bn(ModelBuilder& b, const std::string& prefix, int i, ValueId x, int64_t channels,
                int64_t kernel, int64_t stride) {
  const std::string n = std::to_string(i);
  x = b.conv2d(prefix + "conv" + n, x, channels, kernel, stride, kernel / 2, false);
  return b.batch_norm(prefix + "bn" + n, x);
}

// One block of stage output `planes * expansion` channels: x (N, C, H, W) ->
// (N, planes * expansion, H / stride, W / stride). BasicBlock: 3x3, 3x3;
// Bottleneck: 1x1 (planes), 3x3 (planes, strided), 1x1 (4 planes). The
// shortcut is a strided 1x1 conv + batch norm when the shape changes.
ValueId block(ModelBuilder& b, const std::string& prefix, ValueId x, int64_t planes, int64_t stride,
              bool bottleneck) {
  if (!x.valid()) return x;
  const int64_t out_channels = bottleneck ? 4 * planes : planes;
  ValueId shortcut = x;
  if (stride != 1 || b.shape(x).at(1) != out_channels) {
    shortcut = b.conv2d(prefix + "downsample.0", x, out_channels, 1, stride, 0, false);
    shortcut = b.batch_norm(prefix + "downsample.1", shortcut);
  }
  ValueId y;
  if (bottleneck) {
    y = b.relu(conv_bn(b, prefix, 1, x, planes, 1, 1));
    y = b.relu(conv_bn(b, prefix, 2, y, planes, 3, stride));
    y = conv_bn(b, prefix, 3, y, out_channels, 1, 1);
  } else {
    y = b.relu(conv_bn(b, prefix, 1, x, planes, 3, stride));
    y = conv_bn(b, prefix, 2, y, planes, 3, 1);
  }
  return b.relu(b.add(y, shortcut));
}

// Global average pool and the classifier: (N, C, H, W) -> (N, classes).
ValueId head(ModelBuilder& b, ValueId x, int64_t classes) {
  return b.linear("fc", b.flatten(b.global_avg_pool(x)), classes);
}

}  // namespace

Result<Model> build_resnet(const ModelOptions& options, bool training) {
  const ResNetConfig* config = nullptr;
  for (const ResNetConfig& c : kResNets) {
    if (options.name == c.name) config = &c;
  }
  if (!config) return Status::error("not a torchvision resnet: '" + options.name + "'");
  ModelBuilder b(options.name, training);
  const int64_t n = options.batch, s = options.image_size;
  ValueId x = b.input("images", {n, 3, s, s});
  const ValueId labels = b.labels(n);
  // Stem: (N, 3, S, S) -> (N, width, S/4, S/4) at S = 224: 56x56.
  x = b.relu(b.batch_norm("bn1", b.conv2d("conv1", x, options.width, 7, 2, 3, false)));
  x = b.max_pool2d(x, 3, 2, 1);
  // Stages of width, 2, 4, 8 times width planes; each after the first halves
  // the resolution (at 224: 56, 28, 14, 7).
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t planes = options.width << stage;
    for (int64_t i = 0; i < config->blocks[static_cast<size_t>(stage)]; ++i) {
      const std::string prefix =
          "layer" + std::to_string(stage + 1) + "." + std::to_string(i) + ".";
      x = block(b, prefix, x, planes, stage > 0 && i == 0 ? 2 : 1, config->bottleneck);
    }
  }
  b.cross_entropy(head(b, x, options.classes), labels);
  return b.finish();
}

Result<Model> build_resnet_cifar(const ModelOptions& options, bool training) {
  if (options.depth < 11 || (options.depth - 2) % 9 != 0) {
    return Status::error("resnet-cifar: the depth must be 9n+2 with n >= 1 (11, 20, ..., 164, " +
                         std::string("1001), got ") + std::to_string(options.depth));
  }
  const int64_t blocks = (options.depth - 2) / 9;  // per stage; each block has 3 convs
  ModelBuilder b(options.name, training);
  const int64_t n = options.batch, s = options.image_size;
  ValueId x = b.input("images", {n, 3, s, s});
  const ValueId labels = b.labels(n);
  x = b.conv2d("conv1", x, options.width, 3, 1, 1, false);  // (N, 16, S, S)
  // Three stages of bottleneck width 16, 32, 64 (output 64, 128, 256) at S,
  // S/2, S/4. A pre-activation block: BN-ReLU-conv1x1, BN-ReLU-conv3x3
  // (strided), BN-ReLU-conv1x1, added to the shortcut: the input itself, or
  // a strided 1x1 conv of the pre-activated input when the shape changes.
  for (int stage = 0; stage < 3; ++stage) {
    const int64_t planes = options.width << stage;
    for (int64_t i = 0; i < blocks; ++i) {
      if (!x.valid()) break;
      const std::string p = "stage" + std::to_string(stage + 1) + "." + std::to_string(i) + ".";
      const int64_t stride = stage > 0 && i == 0 ? 2 : 1;
      const ValueId pre = b.relu(b.batch_norm(p + "bn1", x));
      const ValueId shortcut =
          i == 0 ? b.conv2d(p + "shortcut", pre, 4 * planes, 1, stride, 0, false) : x;
      ValueId y = b.conv2d(p + "conv1", pre, planes, 1, 1, 0, false);
      y = b.conv2d(p + "conv2", b.relu(b.batch_norm(p + "bn2", y)), planes, 3, stride, 1, false);
      y = b.conv2d(p + "conv3", b.relu(b.batch_norm(p + "bn3", y)), 4 * planes, 1, 1, 0, false);
      x = b.add(y, shortcut);
    }
  }
  x = b.relu(b.batch_norm("bn", x));  // the last block's output is not yet activated
  b.cross_entropy(head(b, x, options.classes), labels);
  return b.finish();
}

}  // namespace memfit
