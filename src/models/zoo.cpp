// The model zoo: every model as a function of its batch size, built with the
// public ModelBuilder.
#include "memfit/builder.h"

namespace memfit {
namespace {

constexpr int64_t kClasses = 10;

// LeNet (LeCun et al. 1998) as in Caffe's MNIST example: conv 5x5 (20) ->
// max pool -> conv 5x5 (50) -> max pool -> 500 -> 10, with ReLU.
Result<Model> lenet(int64_t batch, bool training) {
  ModelBuilder b("lenet", training);
  ValueId x = b.input("images", {batch, 1, 28, 28});
  const ValueId labels = b.labels(batch);
  x = b.max_pool2d(b.relu(b.conv2d("conv1", x, 20, 5)), 2, 2);  // (N, 20, 12, 12)
  x = b.max_pool2d(b.relu(b.conv2d("conv2", x, 50, 5)), 2, 2);  // (N, 50, 4, 4)
  x = b.relu(b.linear("fc1", b.flatten(x), 500));
  b.cross_entropy(b.linear("fc2", x, kClasses), labels);
  return b.finish();
}

// A multi-layer perceptron: 784 -> 256 -> 128 -> 10 with dropout.
Result<Model> mlp(int64_t batch, bool training) {
  ModelBuilder b("mlp", training);
  ValueId x = b.flatten(b.input("images", {batch, 1, 28, 28}));
  const ValueId labels = b.labels(batch);
  x = b.dropout(b.relu(b.linear("fc1", x, 256)), 0.2f);
  x = b.dropout(b.relu(b.linear("fc2", x, 128)), 0.2f);
  b.cross_entropy(b.linear("fc3", x, kClasses), labels);
  return b.finish();
}

}  // namespace

std::vector<std::string> model_names() { return {"lenet", "mlp"}; }

Result<Model> build_model(const std::string& name, int64_t batch, bool training) {
  if (batch < 1) return Status::error("the batch size must be positive, got " + std::to_string(batch));
  if (name == "lenet") return lenet(batch, training);
  if (name == "mlp") return mlp(batch, training);
  std::string known;
  for (const auto& n : model_names()) known += (known.empty() ? "" : ", ") + n;
  return Status::error("unknown model '" + name + "' (known: " + known + ")");
}

}  // namespace memfit
