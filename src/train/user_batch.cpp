#include "train/user_batch.h"

#include <algorithm>
#include <cstring>
#include <string_view>
#include <type_traits>

#include "train/input_ranges.h"

namespace memfit {
namespace {

bool is_float(ElementKind kind) { return kind == ElementKind::f32 || kind == ElementKind::f64; }
bool is_integer(ElementKind kind) { return kind != ElementKind::other && !is_float(kind); }

// Calls `work` with the array's data as a pointer to its element type.
template <typename Work>
auto with_elements(const HostArray& a, Work work) {
  switch (a.kind) {
    case ElementKind::f32:
      return work(static_cast<const float*>(a.data));
    case ElementKind::f64:
      return work(static_cast<const double*>(a.data));
    case ElementKind::i8:
      return work(static_cast<const int8_t*>(a.data));
    case ElementKind::i16:
      return work(static_cast<const int16_t*>(a.data));
    case ElementKind::i32:
      return work(static_cast<const int32_t*>(a.data));
    case ElementKind::i64:
      return work(static_cast<const int64_t*>(a.data));
    case ElementKind::u8:
      return work(static_cast<const uint8_t*>(a.data));
    case ElementKind::u16:
      return work(static_cast<const uint16_t*>(a.data));
    case ElementKind::u32:
      return work(static_cast<const uint32_t*>(a.data));
    case ElementKind::u64:
      return work(static_cast<const uint64_t*>(a.data));
    case ElementKind::other:
      break;
  }
  return work(static_cast<const float*>(nullptr));
}

// An error naming the first element of integer array `a` outside [0, below).
Status check_range(const HostArray& a, const InputSpec& spec) {
  const auto count = static_cast<size_t>(num_elements(a.shape));
  return with_elements(a, [&](const auto* data) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(data)>>;
    for (size_t i = 0; i < count; ++i) {
      const T v = data[i];
      bool negative = false;
      if constexpr (std::is_signed_v<T>) negative = v < 0;
      if (!negative && static_cast<uint64_t>(v) < static_cast<uint64_t>(spec.below)) continue;
      return Status::error("input '" + spec.name + "': element " + std::to_string(i) + " is " +
                           std::to_string(v) + ", outside [0, " + std::to_string(spec.below) +
                           ") (" + spec.range + ")");
    }
    return Status::ok();
  });
}

// "(8, 1, 28, 28)", as numpy writes a shape.
std::string tuple_string(const Shape& shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + (shape.size() == 1 ? ",)" : ")");
}

Status check_array(const HostArray& a, const InputSpec& spec) {
  Shape taken = {a.shape.empty() ? 0 : a.shape[0]};
  taken.insert(taken.end(), spec.example.begin(), spec.example.end());
  if (a.shape != taken || a.shape[0] < 1) {
    return Status::error("input '" + spec.name + "' has shape " + tuple_string(a.shape) +
                         "; the model takes " + batch_shape_string(spec) + " (N rows, at least 1)");
  }
  if (spec.dtype == DType::f32) {
    if (is_float(a.kind)) return Status::ok();
    return Status::error("input '" + spec.name + "' holds " + a.dtype +
                         "; the model takes floating-point values (float32; float64 is converted)");
  }
  if (!is_integer(a.kind)) {
    return Status::error("input '" + spec.name + "' holds " + a.dtype +
                         "; the model takes integers (" + spec.range + ")");
  }
  return check_range(a, spec);
}

}  // namespace

std::vector<InputSpec> input_specs(const Model& model) {
  const std::vector<IntegerInput> integers = integer_inputs(model);
  std::vector<InputSpec> specs;
  for (const ValueId id : model.inputs) {
    const Value& v = model.graph.value(id);
    InputSpec spec;
    spec.name = v.name;
    spec.dtype = v.type.dtype;
    spec.example.assign(v.type.shape.begin() + 1, v.type.shape.end());
    spec.label = id == model.labels;
    for (const IntegerInput& in : integers) {
      if (in.name != v.name) continue;
      spec.below = in.below;
      spec.range = "below " + in.bound;
    }
    specs.push_back(std::move(spec));
  }
  return specs;
}

std::string batch_shape_string(const InputSpec& spec) {
  std::string text = "(N";
  for (const int64_t d : spec.example) text += ", " + std::to_string(d);
  return text + (spec.example.empty() ? ",)" : ")");
}

Result<int64_t> check_arrays(const std::vector<InputSpec>& specs,
                             const std::vector<HostArray>& arrays, bool labels_optional) {
  std::string takes;
  for (const InputSpec& s : specs) {
    takes += (takes.empty() ? "" : ", ") + s.name + " " + batch_shape_string(s);
  }
  for (size_t i = 0; i < arrays.size(); ++i) {
    const std::string& name = arrays[i].name;
    const auto known = [&](const InputSpec& s) { return s.name == name; };
    if (std::none_of(specs.begin(), specs.end(), known)) {
      return Status::error("'" + name + "' is not an input of the model, which takes " + takes);
    }
    for (size_t j = 0; j < i; ++j) {
      if (arrays[j].name == name) return Status::error("input '" + name + "' is given twice");
    }
  }
  int64_t rows = -1;
  std::string first;
  for (const InputSpec& spec : specs) {
    const auto it = std::find_if(arrays.begin(), arrays.end(),
                                 [&](const HostArray& a) { return a.name == spec.name; });
    if (it == arrays.end()) {
      if (spec.label && labels_optional) continue;
      return Status::error("input '" + spec.name + "' is missing; the model takes " + takes);
    }
    MEMFIT_RETURN_IF_ERROR(check_array(*it, spec));
    if (rows >= 0 && it->shape[0] != rows) {
      return Status::error("input '" + spec.name + "' has " + std::to_string(it->shape[0]) +
                           " rows (shape " + tuple_string(it->shape) + "), input '" + first + "' " +
                           std::to_string(rows));
    }
    rows = it->shape[0];
    first = spec.name;
  }
  return rows;
}

Status write_arrays(const std::vector<HostArray>& arrays, Batch& batch) {
  for (const HostArray& a : arrays) {
    Batch::Input* in = batch.find(a.name);
    if (in == nullptr) return Status::error("the step has no input '" + a.name + "'");
    const auto count = static_cast<size_t>(num_elements(a.shape));
    const size_t size = in->dtype == DType::f32 ? in->f32.size() : in->i32.size();
    if (count != size) {
      return Status::error("input '" + a.name + "' has " + std::to_string(count) +
                           " elements, the step's buffer " + std::to_string(size));
    }
    if (in->dtype == DType::f32 && a.kind == ElementKind::f32) {
      std::memcpy(in->f32.data(), a.data, count * sizeof(float));
      continue;
    }
    with_elements(a, [&](const auto* data) {
      if (in->dtype == DType::f32) {
        std::transform(data, data + count, in->f32.begin(),
                       [](auto v) { return static_cast<float>(v); });
      } else {
        std::transform(data, data + count, in->i32.begin(),
                       [](auto v) { return static_cast<int32_t>(v); });
      }
      return 0;
    });
  }
  return Status::ok();
}

}  // namespace memfit
