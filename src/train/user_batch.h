// A caller's arrays as the data inputs of one micro-batch (memfit.Trainer's
// step, evaluate and predict): checked against the model's inputs (names,
// shapes, element types, integer ranges) before anything runs, then
// converted straight into a Batch's buffers (f32 for float inputs, i32 for
// ids and labels).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "memfit/builder.h"
#include "train/data_source.h"

namespace memfit {

// The element types a caller's array may hold; `other` is refused.
enum class ElementKind { f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, other };

// One of a caller's arrays: row-major and contiguous, dimension 0 the batch.
struct HostArray {
  std::string name;  // the model input it is for
  ElementKind kind = ElementKind::f32;
  std::string dtype;  // the caller's name of its type ("float64"), for messages
  Shape shape;
  const void* data = nullptr;
};

// What one data input of a model takes.
struct InputSpec {
  std::string name;
  DType dtype = DType::f32;
  Shape example;      // one example: the input's shape without dimension 0
  int64_t below = 0;  // i32 inputs: values lie in [0, below)
  std::string range;  // i32 inputs: "below " and what `below` is (IntegerInput::bound)
  bool label = false;
};

// The data inputs of `model`, labels included, in its order.
std::vector<InputSpec> input_specs(const Model& model);

// "(N, 1, 28, 28)": an input's shape with the batch as N.
std::string batch_shape_string(const InputSpec& spec);

// The rows (dimension 0, the same in every array) of `arrays` checked
// against `specs`: one array per input, the labels optional where
// `labels_optional` (they are then checked if given, and not read), no
// array for what is not an input, each of shape (rows, example...), floats
// for f32 inputs and integers in range for i32 ones. The errors name the
// input, and the shapes given and taken.
Result<int64_t> check_arrays(const std::vector<InputSpec>& specs,
                             const std::vector<HostArray>& arrays, bool labels_optional);

// Writes `arrays` (checked by check_arrays, their rows `batch`'s) into the
// buffers of `batch` of the same names, converted to f32 or i32.
Status write_arrays(const std::vector<HostArray>& arrays, Batch& batch);

}  // namespace memfit
