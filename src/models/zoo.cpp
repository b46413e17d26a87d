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
  ModelBuilder b(options.name, training, options.dropout);
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
  ModelBuilder b(options.name, training, options.dropout);
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
  // The default of every size option; 0: the model has no such option. The
  // name and batch are unused.
  ModelOptions sizes;
  Result<Model> (*build)(const ModelOptions&, bool);
  bool attention = false;  // builds attention, fused or naive as --attention says
};

const std::vector<ZooEntry>& zoo() {
  static const std::vector<ZooEntry> entries = [] {
    using K = DataKind;
    const char* torchvision = "torchvision's, ImageNet";
    const ModelOptions mnist = {.name = {}, .image_size = 28, .classes = 10};
    std::vector<ZooEntry> e = {
        {{"lenet", "LeNet as in Caffe's MNIST example", K::images, {1, 28, 28}, 10}, mnist, lenet},
        {{"mlp", "784-256-128-10 perceptron with dropout 0.2", K::images, {1, 28, 28}, 10}, mnist,
         mlp},
    };
    const Shape imagenet = {3, 224, 224};
    const ModelOptions imagenet_sizes = {.name = {}, .image_size = 224, .classes = 1000, .width = 64};
    for (const char* name : {"resnet18", "resnet34", "resnet50", "resnet101", "resnet152"}) {
      const std::string about = std::string("ResNet (He et al. 2015, v1.5), ") + torchvision;
      e.push_back({{name, about, K::images, imagenet, 1000}, imagenet_sizes, build_resnet});
    }
    const std::string cifar = "pre-activation bottleneck ResNet (He et al. 2016), depth 9n+2";
    e.push_back({{"resnet-cifar", cifar, K::images, {3, 32, 32}, 10},
                 {.name = {}, .image_size = 32, .classes = 10, .depth = 164, .width = 16},
                 build_resnet_cifar});
    const std::string vgg = std::string("VGG-16 (Simonyan and Zisserman 2015), ") + torchvision;
    e.push_back({{"vgg16", vgg, K::images, imagenet, 1000}, imagenet_sizes, build_vgg16});
    e.push_back({{"lstm-lm",
                  "LSTM language model (Zaremba et al. 2014, medium), unrolled in windows of 7 steps",
                  K::tokens, {35}, 10000},
                 {.name = {}, .depth = 2, .width = 650, .seq_len = 35, .vocab = 10000},
                 build_lstm_lm});
    e.push_back({{"seq2seq",
                  "LSTM encoder-decoder with global attention (Luong et al. 2015)", K::pairs,
                  {50}, 50000},
                 {.name = {}, .depth = 4, .width = 1000, .seq_len = 50, .vocab = 50000},
                 build_seq2seq});
    e.back().attention = true;
    e.push_back({{"gpt", "decoder-only Transformer, GPT-2 small (Radford et al. 2019), tied",
                  K::tokens, {1024}, 50257},
                 {.name = {}, .depth = 12, .width = 768, .seq_len = 1024, .vocab = 50257},
                 build_gpt});
    e.back().attention = true;
    e.push_back({{"transformer",
                  "encoder-decoder Transformer, base (Vaswani et al. 2017), shared vocabulary",
                  K::pairs, {128}, 37000},
                 {.name = {}, .depth = 6, .width = 512, .seq_len = 128, .vocab = 37000},
                 build_transformer});
    e.back().attention = true;
    e.push_back({{"unet3d", "3D U-Net (Cicek et al. 2016), padded convolutions", K::volumes,
                  {1, 128, 128, 128}, 3},
                 {.name = {}, .classes = 3, .width = 32, .volume = 128},
                 build_unet3d});
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

// The zoo's models that build attention, for the message above.
std::string attention_models() {
  std::string names;
  for (const ZooEntry& entry : zoo()) {
    if (entry.attention) names += (names.empty() ? "" : ", ") + entry.info.name;
  }
  return names;
}

}  // namespace

std::vector<ModelInfo> model_infos() {
  std::vector<ModelInfo> infos;
  for (const ZooEntry& entry : zoo()) infos.push_back(entry.info);
  return infos;
}

Result<ModelInfo> model_info(std::string_view name) {
  std::string known;
  for (const ZooEntry& entry : zoo()) {
    if (entry.info.name == name) return entry.info;
    known += (known.empty() ? "" : ", ") + entry.info.name;
  }
  return Status::error("unknown model '" + std::string(name) + "'; the zoo has " + known);
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
    const ModelOptions& d = entry.sizes;
    const std::string& name = options.name;
    MEMFIT_RETURN_IF_ERROR(resolve(name, "image-size", d.image_size, resolved.image_size));
    MEMFIT_RETURN_IF_ERROR(resolve(name, "classes", d.classes, resolved.classes));
    MEMFIT_RETURN_IF_ERROR(resolve(name, "depth", d.depth, resolved.depth));
    MEMFIT_RETURN_IF_ERROR(resolve(name, "width", d.width, resolved.width));
    MEMFIT_RETURN_IF_ERROR(resolve(name, "seq-len", d.seq_len, resolved.seq_len));
    MEMFIT_RETURN_IF_ERROR(resolve(name, "volume", d.volume, resolved.volume));
    MEMFIT_RETURN_IF_ERROR(resolve(name, "vocab", d.vocab, resolved.vocab));
    if (options.attention != AttentionForm::fused && !entry.attention) {
      return Status::error(name + " has no attention option (--attention applies to " +
                           attention_models() + ")");
    }
    return entry.build(resolved, training);
  }
  std::string known;
  for (const auto& n : model_names()) known += (known.empty() ? "" : ", ") + n;
  return Status::error("unknown model '" + options.name + "' (known: " + known + ")");
}

Result<int64_t> parameter_count(const ModelOptions& options) {
  MEMFIT_ASSIGN_OR_RETURN(Model model, build_model(options, false));
  int64_t parameters = 0;
  for (ValueId p : model.params) parameters += num_elements(model.graph.value(p).type.shape);
  return parameters;
}

}  // namespace memfit
