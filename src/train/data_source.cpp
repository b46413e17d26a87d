// Batch buffers and the Fashion-MNIST source.
#include "train/data_source.h"

#include <zlib.h>

#include <algorithm>
#include <utility>

#include "core/check.h"
#include "core/text.h"

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

std::vector<int32_t> Batch::label_classes() const {
  const Input* in = find("labels");
  MEMFIT_CHECK(in != nullptr);
  if (in->dtype == DType::i32) return in->i32;
  std::vector<int32_t> classes(static_cast<size_t>(batch));
  for (size_t n = 0; n < classes.size(); ++n) {
    const auto row = in->f32.begin() + static_cast<int64_t>(n) * in->per_example;
    classes[n] = static_cast<int32_t>(std::max_element(row, row + in->per_example) - row);
  }
  return classes;
}

Status Batch::set_class(int64_t slot, int32_t cls) {
  Input* in = find("labels");
  if (in == nullptr) return Status::error("the model has no labels");
  if (in->dtype == DType::i32) {
    if (in->per_example != 1) return Status::error("the model's labels are not one class per example");
    in->i32[static_cast<size_t>(slot)] = cls;
    return Status::ok();
  }
  if (cls >= in->per_example) {
    return Status::error("class " + std::to_string(cls) + " has no element in f32 targets of " +
                         std::to_string(in->per_example) + " per example");
  }
  const auto row = in->f32.begin() + slot * in->per_example;
  std::fill(row, row + in->per_example, 0.0f);
  row[cls] = 1.0f;
  return Status::ok();
}

namespace {

class FashionMnistSource final : public DataSource {
 public:
  FashionMnistSource(ImageDataset train, ImageDataset test)
      : train_(std::move(train)), test_(std::move(test)) {}

  std::string description() const override { return "Fashion-MNIST"; }
  // The CRC-32 of the training images as loaded (normalized floats) and of
  // their labels: another copy of the files, or other files in their
  // place, give another identity.
  std::string identity() const override {
    uLong crc = crc32_z(0, reinterpret_cast<const Bytef*>(train_.images.data()),
                        train_.images.size() * sizeof(float));
    crc = crc32_z(crc, reinterpret_cast<const Bytef*>(train_.labels.data()),
                  train_.labels.size() * sizeof(int32_t));
    return format("Fashion-MNIST (training set CRC-32 %08lx)", static_cast<unsigned long>(crc));
  }
  int64_t train_count() const override { return train_.count; }
  int64_t test_count() const override { return test_.count; }

  Status fill(bool test, std::span<const int64_t> examples, Batch& batch) const override {
    const ImageDataset& data = test ? test_ : train_;
    Batch::Input* images = batch.find("images");
    Batch::Input* labels = batch.find("labels");
    const bool classes = labels != nullptr && labels->dtype == DType::i32 && labels->per_example == 1;
    const bool one_hot = labels != nullptr && labels->dtype == DType::f32 && labels->per_example == 10;
    if (images == nullptr || images->per_example != data.image_elements() || !(classes || one_hot) ||
        batch.inputs.size() != 2) {
      return Status::error("the model does not read Fashion-MNIST's 1x28x28 images and labels");
    }
    const int64_t elements = data.image_elements();
    for (size_t k = 0; k < examples.size(); ++k) {
      const int64_t e = examples[k];
      std::copy_n(data.images.begin() + e * elements, elements,
                  images->f32.begin() + static_cast<int64_t>(k) * elements);
      MEMFIT_RETURN_IF_ERROR(batch.set_class(static_cast<int64_t>(k), data.labels[static_cast<size_t>(e)]));
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
