// The DataSource of the user's numpy arrays (array_file_source in
// data_source.h): one ArrayFile per set, checked against the model's data
// inputs when opened.
#include <zlib.h>

#include <algorithm>
#include <optional>

#include "core/text.h"
#include "train/array_file.h"
#include "train/data_source.h"
#include "train/input_ranges.h"

namespace memfit {
namespace {

// Arrays of more bytes than this (all arrays of a file together) are not
// checksummed for the identity, which then holds the file's size and
// modification time instead: CRC-32 runs at about 1 GB/s, so up to 1 GiB
// adds at most about a second to opening.
constexpr uint64_t kChecksumLimit = uint64_t{1} << 30;

// A data input of the model, as an array must hold it.
struct InputSpec {
  std::string name = {};
  DType dtype = DType::f32;
  Shape example;      // the input's shape less its batch dimension
  int64_t below = 0;  // i32 inputs: values lie in [0, below)
  std::string bound = {};
};

std::string describe(const NpyArray& array) {
  return npy_shape_string(array.header.shape) + " " + std::string(npy_name(array.header.type));
}

// "(N, 1, 28, 28) f32": an input as the model reads it, N the examples.
std::string describe(const InputSpec& in) {
  std::string text = "(N";
  for (const int64_t d : in.example) text += ", " + std::to_string(d);
  return text + ") " + std::string(dtype_name(in.dtype));
}

std::string input_list(const std::vector<InputSpec>& inputs) {
  std::string text;
  for (const InputSpec& in : inputs)
    text += (text.empty() ? "" : ", ") + in.name + " " + describe(in);
  return text;
}

// One file's arrays, in the order of the model's inputs.
struct ArraySet {
  std::string path = {};
  ArrayFile file;
  std::vector<const NpyArray*> arrays;  // parallel to the model's inputs
  int64_t count = 0;
  uint32_t crc = 0;
  bool checksummed = false;  // crc is over the data; else the identity uses size and mtime
};

Result<ArraySet> open_set(const Model& model, const std::vector<InputSpec>& inputs,
                          const std::string& path) {
  ArraySet set;
  set.path = path;
  MEMFIT_ASSIGN_OR_RETURN(set.file, ArrayFile::open(path));
  const std::vector<NpyArray>& arrays = set.file.arrays();
  const std::string file = "array file " + path;
  if (!set.file.is_npz() && inputs.size() != 1) {
    return Status::error(format(
        "%s is a single .npy array, but model %s reads %zu data inputs (%s): save them together "
        "in a .npz archive, one array per input named as the input, e.g. numpy.savez('data.npz', "
        "%s=..., %s=...)",
        file.c_str(), model.name.c_str(), inputs.size(), input_list(inputs).c_str(),
        inputs.at(0).name.c_str(), inputs.at(1).name.c_str()));
  }
  for (const InputSpec& in : inputs) {
    const NpyArray* found = nullptr;
    for (const NpyArray& array : arrays) {
      if (array.name == in.name || !set.file.is_npz()) found = &array;
    }
    if (found == nullptr) {
      return Status::error(file + " holds no array '" + in.name + "', which model " + model.name +
                           " reads; it reads " + input_list(inputs) +
                           ", one array each, named so (numpy.savez(path, " + in.name + "=...))");
    }
    set.arrays.push_back(found);
  }
  for (const NpyArray& array : arrays) {
    const bool used = std::any_of(inputs.begin(), inputs.end(),
                                  [&](const InputSpec& in) { return in.name == array.name; });
    if (!used && set.file.is_npz()) {
      return Status::error(file + " holds array '" + array.name + "' " + describe(array) +
                           ", which model " + model.name + " does not read: it reads " +
                           input_list(inputs) + "; remove the array or name it as an input");
    }
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const InputSpec& in = inputs[i];
    const NpyArray& array = *set.arrays[i];
    const std::string where = file + ", array '" + in.name + "'";
    const Shape& shape = array.header.shape;
    if (shape.empty()) {
      return Status::error(where + " is a scalar " + describe(array) + "; model " + model.name +
                           " reads " + describe(in) + ", N examples along the first dimension");
    }
    if (shape[0] == 0) {
      return Status::error(where + " " + describe(array) +
                           " holds no examples (its first dimension is 0)");
    }
    if (!std::equal(shape.begin() + 1, shape.end(), in.example.begin(), in.example.end())) {
      return Status::error(where + " is " + describe(array) + ", but model " + model.name +
                           " reads " + describe(in) + ": one example must be " +
                           npy_shape_string(in.example) + ", not " +
                           npy_shape_string(Shape(shape.begin() + 1, shape.end())));
    }
    const bool is_float = npy_is_float(array.header.type);
    if (is_float != (in.dtype == DType::f32)) {
      return Status::error(where + " is " + describe(array) + ", but model " + model.name +
                           " reads " + describe(in) + ": " +
                           (is_float ? "save integers, e.g. array.astype('int64')"
                                     : "save floats, e.g. array.astype('float32')"));
    }
    if (i > 0 && shape[0] != set.count) {
      return Status::error(
          format("%s: arrays '%s' %s and '%s' %s hold different numbers of examples "
                 "(%lld and %lld along their first dimension)",
                 file.c_str(), inputs[0].name.c_str(), describe(*set.arrays[0]).c_str(),
                 in.name.c_str(), describe(array).c_str(), static_cast<long long>(set.count),
                 static_cast<long long>(shape[0])));
    }
    set.count = shape[0];
  }
  // The range of every integer array, scanned once here so that a bad label
  // or id fails at once, naming its place, and never in the middle of a run
  // (the scan reads the array once; an epoch reads it all anyway).
  for (size_t i = 0; i < inputs.size(); ++i) {
    const InputSpec& in = inputs[i];
    const NpyArray& array = *set.arrays[i];
    if (in.dtype != DType::i32) continue;
    const int64_t elements = num_elements(array.header.shape);
    const NpyOutlier bad =
        npy_first_outside(array.header.type, array.data.data(), elements, in.below);
    if (bad.index < 0) continue;
    const bool u8_past_int64 = array.header.type == NpyType::u8 && bad.value < 0;
    return Status::error(format(
        "%s, array '%s' %s: value %s at flat position %lld (example %lld) is outside [0, %lld), %s",
        file.c_str(), in.name.c_str(), describe(array).c_str(),
        u8_past_int64 ? std::to_string(static_cast<uint64_t>(bad.value)).c_str()
                      : std::to_string(bad.value).c_str(),
        static_cast<long long>(bad.index),
        static_cast<long long>(bad.index / std::max<int64_t>(1, elements / set.count)),
        static_cast<long long>(in.below), in.bound.c_str()));
  }
  uint64_t bytes = 0;
  for (const NpyArray* array : set.arrays) bytes += array->data.size();
  set.checksummed = bytes <= kChecksumLimit;
  if (set.checksummed) {
    uLong crc = crc32_z(0, nullptr, 0);
    for (const NpyArray* array : set.arrays) {
      crc = crc32_z(crc, reinterpret_cast<const Bytef*>(array->name.data()), array->name.size());
      crc = crc32_z(crc, array->data.data(), array->data.size());
    }
    set.crc = static_cast<uint32_t>(crc);
  }
  return set;
}

class ArraySource final : public DataSource {
 public:
  ArraySource(std::vector<InputSpec> inputs, ArraySet train, std::optional<ArraySet> test)
      : inputs_(std::move(inputs)), train_(std::move(train)), test_(std::move(test)) {}

  std::string description() const override {
    return format("arrays of %s (%lld examples)", train_.path.c_str(),
                  static_cast<long long>(train_.count)) +
           (test_ ? format(", validation %s (%lld)", test_->path.c_str(),
                           static_cast<long long>(test_->count))
                  : std::string(", no validation set"));
  }
  // The description and a CRC-32 of each set's arrays (their names and
  // bytes, in the order of the model's inputs), or, for a file whose arrays
  // pass kChecksumLimit, its size and modification time.
  std::string identity() const override {
    return description() + " (training " + checksum(train_) +
           (test_ ? "; validation " + checksum(*test_) : std::string()) + ")";
  }
  int64_t train_count() const override { return train_.count; }
  int64_t test_count() const override { return test_ ? test_->count : 0; }

  Status fill(bool test, std::span<const int64_t> examples, Batch& batch) const override {
    if (test && !test_)
      return Status::error(description() + ": there is no validation set to read");
    const ArraySet& set = test ? *test_ : train_;
    for (Batch::Input& in : batch.inputs) {
      const auto spec = std::find_if(inputs_.begin(), inputs_.end(),
                                     [&](const InputSpec& s) { return s.name == in.name; });
      if (spec == inputs_.end() || in.dtype != spec->dtype ||
          in.per_example != num_elements(spec->example)) {
        return Status::error("the batch's input '" + in.name + "' is not one of the arrays of " +
                             set.path + ": " + input_list(inputs_));
      }
      const NpyArray& array = *set.arrays[static_cast<size_t>(spec - inputs_.begin())];
      const auto size = static_cast<int64_t>(npy_size(array.header.type));
      for (size_t k = 0; k < examples.size(); ++k) {
        const int64_t e = examples[k];
        if (e < 0 || e >= set.count) {
          return Status::error(format("example %lld is not among the %lld of %s",
                                      static_cast<long long>(e), static_cast<long long>(set.count),
                                      set.path.c_str()));
        }
        const uint8_t* src = array.data.data() + e * in.per_example * size;
        const int64_t slot = static_cast<int64_t>(k) * in.per_example;
        if (in.dtype == DType::f32) {
          npy_to_f32(array.header.type, src, in.per_example, in.f32.data() + slot);
        } else {
          npy_to_i32(array.header.type, src, in.per_example, in.i32.data() + slot);
        }
      }
    }
    return Status::ok();
  }

 private:
  static std::string checksum(const ArraySet& set) {
    if (set.checksummed) return format("CRC-32 %08x", set.crc);
    return format("%llu bytes, modified at %lld ns",
                  static_cast<unsigned long long>(set.file.size()),
                  static_cast<long long>(set.file.mtime_ns()));
  }

  std::vector<InputSpec> inputs_;
  ArraySet train_;
  std::optional<ArraySet> test_;
};

}  // namespace

Result<std::unique_ptr<DataSource>> array_file_source(const Model& model,
                                                      const std::string& train_path,
                                                      const std::string& test_path) {
  std::vector<InputSpec> inputs;
  const std::vector<IntegerInput> ranges = integer_inputs(model);
  for (const ValueId id : model.inputs) {
    const Value& v = model.graph.value(id);
    InputSpec in;
    in.name = v.name;
    in.dtype = v.type.dtype;
    in.example = Shape(v.type.shape.begin() + 1, v.type.shape.end());
    for (const IntegerInput& r : ranges) {
      if (r.name == v.name) {
        in.below = r.below;
        in.bound = r.bound;
      }
    }
    inputs.push_back(std::move(in));
  }
  if (inputs.empty()) return Status::error("model " + model.name + " reads no data");
  MEMFIT_ASSIGN_OR_RETURN(ArraySet train, open_set(model, inputs, train_path));
  std::optional<ArraySet> test;
  if (!test_path.empty()) {
    MEMFIT_ASSIGN_OR_RETURN(ArraySet validation, open_set(model, inputs, test_path));
    test = std::move(validation);
  }
  return std::unique_ptr<DataSource>(
      std::make_unique<ArraySource>(std::move(inputs), std::move(train), std::move(test)));
}

}  // namespace memfit
