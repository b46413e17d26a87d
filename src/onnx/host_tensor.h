// Tensors the ONNX importer knows at import time: initializers, Constant
// nodes, and the shape arithmetic folded from them (static shapes make
// Shape, Gather, Concat, ... of shapes constants). Floats in `f`; int64 and
// bool (0 or 1) in `i`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "memfit/ir.h"

namespace onnx {
class TensorProto;
}

namespace memfit {

struct HostTensor {
  enum class Type { f32, i64, boolean } type = Type::f32;
  Shape shape;
  std::vector<float> f;    // type f32
  std::vector<int64_t> i;  // type i64 and boolean

  int64_t elements() const { return num_elements(shape); }
  bool is_float() const { return type == Type::f32; }
  // Element k as a double, and as an int64 (floats truncated).
  double number(size_t k) const { return is_float() ? f[k] : static_cast<double>(i[k]); }
  // Floats outside the int64 range (and NaN) saturate, so that no cast is undefined.
  int64_t integer(size_t k) const {
    if (!is_float()) return i[k];
    const double v = f[k];
    if (!(v > -9.2e18)) return v != v ? 0 : INT64_MIN;
    if (!(v < 9.2e18)) return INT64_MAX;
    return static_cast<int64_t>(v);
  }
  // All elements as integers (shapes, axes, indices).
  std::vector<int64_t> integers() const;

  static HostTensor floats(Shape shape, std::vector<float> values);
  static HostTensor ints(Shape shape, std::vector<int64_t> values, Type type = Type::i64);
};

// The tensor a TensorProto holds. FLOAT and DOUBLE become f32; INT64, INT32,
// INT16, INT8 and UINT8 become i64; BOOL boolean. Other element types, data
// in external files, and data whose size does not match the dims are errors
// that name the tensor.
Result<HostTensor> tensor_from_proto(const onnx::TensorProto& proto);

// `values` written into the data of an f32 TensorProto of the same element
// count (raw little-endian bytes, replacing whatever form held them).
void set_proto_floats(onnx::TensorProto& proto, const std::vector<float>& values);

}  // namespace memfit
