// Batch buffers and the Fashion-MNIST source.
#include "train/data_source.h"

#include <algorithm>
#include <utility>

#include "core/check.h"

namespace memfit {

Batch Batch::for_model(const Model& model) {
  Batch batch;
  for (const ValueId id : model.inputs) {
    const Value& v = model.graph.value(id);
    Input in;
    in.name = v.name;
    in.dtype = v.type.dtype;
    batch.batch = v.type.shape.at(0);
    in.per_example = num_elements(v.type.shape) / batch.batch;
    const auto elements = static_cast<size_t>(num_elements(v.type.shape));
    if (in.dtype == DType::f32) {
      in.f32.assign(elements, 0.0f);
    } else {
      in.i32.assign(elements, 0);
    }
    batch.inputs.push_back(std::move(in));
  }
  return batch;
}

Feeds Batch::feeds() const {
  Feeds feeds;
  for (const Input& in : inputs) {
    feeds[in.name] = in.dtype == DType::f32 ? static_cast<const void*>(in.f32.data())
                                            : static_cast<const void*>(in.i32.data());
  }
  return feeds;
}

Batch::Input* Batch::find(const std::string& name) {
  return const_cast<Input*>(std::as_const(*this).find(name));
}

const Batch::Input* Batch::find(const std::string& name) const {
  for (const Input& in : inputs) {
    if (in.name == name) return &in;
  }
  return nullptr;
}

const std::vector<int32_t>& Batch::labels() const {
  const auto it = std::find_if(inputs.begin(), inputs.end(),
                               [](const Input& in) { return in.name == "labels"; });
  MEMFIT_CHECK(it != inputs.end());
  return it->i32;
}

namespace {

class FashionMnistSource final : public DataSource {
 public:
  FashionMnistSource(ImageDataset train, ImageDataset test)
      : train_(std::move(train)), test_(std::move(test)) {}

  std::string description() const override { return "Fashion-MNIST"; }
  int64_t train_count() const override { return train_.count; }
  int64_t test_count() const override { return test_.count; }

  Status fill(bool test, std::span<const int64_t> examples, Batch& batch) const override {
    const ImageDataset& data = test ? test_ : train_;
    Batch::Input* images = batch.find("images");
    Batch::Input* labels = batch.find("labels");
    if (images == nullptr || labels == nullptr || images->per_example != data.image_elements() ||
        labels->per_example != 1 || batch.inputs.size() != 2) {
      return Status::error("the model does not read Fashion-MNIST's 1x28x28 images and labels");
    }
    const int64_t elements = data.image_elements();
    for (size_t k = 0; k < examples.size(); ++k) {
      const int64_t e = examples[k];
      std::copy_n(data.images.begin() + e * elements, elements,
                  images->f32.begin() + static_cast<int64_t>(k) * elements);
      labels->i32[k] = data.labels[static_cast<size_t>(e)];
    }
    return Status::ok();
  }

 private:
  ImageDataset train_, test_;
};

}  // namespace

std::unique_ptr<DataSource> fashion_mnist_source(ImageDataset train, ImageDataset test) {
  return std::make_unique<FashionMnistSource>(std::move(train), std::move(test));
}

}  // namespace memfit
