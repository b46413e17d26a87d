// The 3D U-Net of Cicek et al. 2016: an analysis path of four resolutions,
// each two 3x3x3 convolutions with batch norm and ReLU (channels w, 2w; 2w,
// 4w; 4w, 8w; and 8w, 16w at the bottom), 2x2x2 max pooling between them; a
// synthesis path of 2x2x2 up-convolutions of stride 2 that keep the channel
// count, each followed by the concatenation of the analysis path's features
// at that resolution and two 3x3x3 convolutions; a final 1x1x1 convolution
// gives the classes of every voxel. The paper's convolutions are unpadded
// (132^3 in, 44^3 out); here they are padded, so that the output has the
// input's size, as in most implementations since. Input (N, 1, S, S, S) with
// S a multiple of 8; base width w = 32.
#include "models/zoo.h"

namespace memfit {
namespace {

ValueId conv_bn_relu(ModelBuilder& b, const std::string& name, ValueId x, int64_t channels) {
  return b.relu(b.batch_norm(name + ".bn", b.conv3d(name + ".conv", x, channels, 3, 1, 1, false)));
}

ValueId double_conv(ModelBuilder& b, const std::string& name, ValueId x, int64_t first,
                    int64_t second) {
  return conv_bn_relu(b, name + ".1", conv_bn_relu(b, name + ".0", x, first), second);
}

}  // namespace

Result<Model> build_unet3d(const ModelOptions& o, bool training) {
  if (o.volume % 8 != 0) {
    return Status::error("unet3d: --volume must be a multiple of 8 (three 2x2x2 poolings), got " +
                         std::to_string(o.volume));
  }
  if (o.classes < 2) return Status::error("unet3d: --classes must be at least 2");
  ModelBuilder b(o.name, training);
  const int64_t n = o.batch, s = o.volume, w = o.width;
  ValueId x = b.input("volume", {n, 1, s, s, s});
  const ValueId labels = b.labels(Shape{n, s, s, s});
  std::vector<ValueId> skips;
  for (int64_t level = 0; level < 3; ++level) {
    const int64_t c = w << level;
    x = double_conv(b, "down" + std::to_string(level), x, c, 2 * c);
    skips.push_back(x);
    x = b.max_pool3d(x, 2, 2);
  }
  x = double_conv(b, "bottom", x, 8 * w, 16 * w);
  int64_t channels = 16 * w;
  for (int64_t level = 2; level >= 0; --level) {
    const std::string name = "up" + std::to_string(level);
    x = b.conv_transpose3d(name + ".upconv", x, channels, 2, 2, 0, true);
    x = b.concat({skips[static_cast<size_t>(level)], x}, 1);
    channels = 2 * (w << level);
    x = double_conv(b, name, x, channels, channels);
  }
  x = b.conv3d("head", x, o.classes, 1, 1, 0, true);  // (N, K, S, S, S)
  x = b.reshape(b.transpose(x, {0, 2, 3, 4, 1}), {n * s * s * s, o.classes});
  b.cross_entropy(x, labels);
  return b.finish();
}

}  // namespace memfit
