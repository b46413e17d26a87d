// The model zoo: the registry of every model with its default sizes, the
// small Fashion-MNIST models lenet and mlp, and build_model, which resolves
// and checks the options before calling a family's builder (resnet.cpp,
// vgg.cpp).
#include "models/zoo.h"

namespace memfit {
namespace {

// LeNet (LeCun et al. 1998) as in Caffe's MNIST example: conv 5x5 (20) ->
// max pool -> conv 5x5 (50) -> max pool -> 500 -> classes, with ReLU. At
// S = 28: (N, 1, 28, 28) -> (N, 20, 12, 12) -> (N, 50, 4, 4).
Result<Model> lenet(const ModelOptions& options, bool training) {
  ModelBuilder b(options.name, training);
  const int64_t batch = options.batch, s = options.image_size;
  ValueId x = b.input("images", {batch, 1, s, s});
  const ValueId labels = b.labels(batch);
  x = b.max_pool2d(b.relu(b.conv2d("conv1", x, 20, 5)), 2, 2);
  x = b.max_pool2d(b.relu(b.conv2d("conv2", x, 50, 5)), 2, 2);
  x = b.relu(b.linear("fc1", b.flatten(x), 500));
  b.cross_entropy(b.linear("fc2", x, options.classes), labels);
  return b.finish();
}

// A multi-layer perceptron: S*S -> 256 -> 128 -> classes with dropout.
Result<Model> mlp(const ModelOptions& options, bool training) {
  ModelBuilder b(options.name, training);
  const int64_t batch = options.batch, s = options.image_size;
  ValueId x = b.flatten(b.input("images", {batch, 1, s, s}));
  const ValueId labels = b.labels(batch);
  x = b.dropout(b.relu(b.linear("fc1", x, 256)), 0.2f);
  x = b.dropout(b.relu(b.linear("fc2", x, 128)), 0.2f);
  b.cross_entropy(b.linear("fc3", x, options.classes), labels);
  return b.finish();
}

struct ZooEntry {
  ModelInfo info;
  int64_t depth = 0;  // the default depth; 0: the model has no depth option
  int64_t width = 0;  // the default width; 0: the model has no width option
  Result<Model> (*build)(const ModelOptions&, bool);
};

const std::vector<ZooEntry>& zoo() {
  static const std::vector<ZooEntry> entries = [] {
    const char* torchvision = "torchvision's, ImageNet";
    std::vector<ZooEntry> e = {
        {{"lenet", "LeNet as in Caffe's MNIST example", {1, 28, 28}, 10}, 0, 0, lenet},
        {{"mlp", "784-256-128-10 perceptron with dropout 0.2", {1, 28, 28}, 10}, 0, 0, mlp},
    };
    const Shape imagenet = {3, 224, 224};
    for (const char* name : {"resnet18", "resnet34", "resnet50", "resnet101", "resnet152"}) {
      const std::string about = std::string("ResNet (He et al. 2015, v1.5), ") + torchvision;
      e.push_back({{name, about, imagenet, 1000}, 0, 64, build_resnet});
    }
    const std::string cifar = "pre-activation bottleneck ResNet (He et al. 2016), depth 9n+2";
    e.push_back({{"resnet-cifar", cifar, {3, 32, 32}, 10}, 164, 16, build_resnet_cifar});
    const std::string vgg = std::string("VGG-16 (Simonyan and Zisserman 2015), ") + torchvision;
    e.push_back({{"vgg16", vgg, imagenet, 1000}, 0, 64, build_vgg16});
    return e;
  }();
  return entries;
}

// Checks that a size option is 0 (the default) or positive, and resolves it.
Status resolve(const std::string& model, const char* option, int64_t fallback, int64_t& value) {
  if (value < 0) {
    return Status::error(model + ": --" + std::string(option) + " must be positive, got " +
                         std::to_string(value));
  }
  if (value != 0 && fallback == 0) {
    return Status::error(model + " has no " + std::string(option) + " option");
  }
  if (value == 0) value = fallback;
  return Status::ok();
}

}  // namespace

std::vector<ModelInfo> model_infos() {
  std::vector<ModelInfo> infos;
  for (const ZooEntry& entry : zoo()) infos.push_back(entry.info);
  return infos;
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const ZooEntry& entry : zoo()) names.push_back(entry.info.name);
  return names;
}

Result<Model> build_model(const ModelOptions& options, bool training) {
  if (options.batch < 1) {
    return Status::error("the batch size must be positive, got " + std::to_string(options.batch));
  }
  for (const ZooEntry& entry : zoo()) {
    if (entry.info.name != options.name) continue;
    ModelOptions resolved = options;
    MEMFIT_RETURN_IF_ERROR(
        resolve(options.name, "image-size", entry.info.input.back(), resolved.image_size));
    MEMFIT_RETURN_IF_ERROR(resolve(options.name, "classes", entry.info.classes, resolved.classes));
    MEMFIT_RETURN_IF_ERROR(resolve(options.name, "depth", entry.depth, resolved.depth));
    MEMFIT_RETURN_IF_ERROR(resolve(options.name, "width", entry.width, resolved.width));
    return entry.build(resolved, training);
  }
  std::string known;
  for (const auto& n : model_names()) known += (known.empty() ? "" : ", ") + n;
  return Status::error("unknown model '" + options.name + "' (known: " + known + ")");
}

}  // namespace memfit
